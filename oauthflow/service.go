package oauthflow

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/deployplane/deployplane/egress"
	"github.com/deployplane/deployplane/store"
)

// Defaults and limits.
const (
	// DefaultFlowTTL is how long an authorization flow stays open.
	DefaultFlowTTL = 10 * time.Minute
	// DefaultWaitTimeout is the long-poll timeout to use when the client
	// names none (the HTTP layer applies it).
	DefaultWaitTimeout = 30 * time.Second
	// MaxWaitTimeout is the longest timeout Wait accepts.
	MaxWaitTimeout = 300 * time.Second
	// DefaultPollInterval is how often Wait re-reads the store, to notice
	// flows completed by another replica.
	DefaultPollInterval = time.Second
	// CallbackPath is the path, below Options.PublicURL, of the OAuth
	// redirect target; the provider_id follows it.
	CallbackPath = "/v2/auth/callback/"
)

// Options configure a Service. SecretKey and PublicURL are required; the
// other fields have defaults.
type Options struct {
	// SecretKey is the 32-byte AES-256 key that encrypts client secrets,
	// tokens and PKCE verifiers at rest. Required. Losing it makes the
	// stored secrets unreadable.
	SecretKey []byte
	// PublicURL is the base URL clients' browsers reach this server at,
	// e.g. "https://deploy.example.com". The redirect URI sent to
	// providers is PublicURL + "/v2/auth/callback/{provider_id}". Required.
	PublicURL string
	// Egress is the policy for the requests made on a tenant's behalf (the
	// code exchange and token refresh at the token_url a tenant
	// registered): https only, and only public addresses, checked when each
	// connection is dialled, but for the hosts the operator allows. It also
	// decides which auth_url and token_url CreateProvider and
	// UpdateProvider accept (see package egress, Policy.CheckURL). Default:
	// the strict policy, egress.New(nil).
	Egress *egress.Policy
	// HTTPClient talks to the providers' token endpoints. Default:
	// Egress.Client() (30-second timeout). A client given here replaces
	// the dial-time checks: give one that applies a policy of its own.
	HTTPClient *http.Client
	// Clock returns the current time; default time.Now. It decides flow and
	// token expiry; Wait's timeout runs on real timers.
	Clock func() time.Time
	// NewID returns the id of a new provider record. Default: UUIDv7.
	NewID func() string
	// FlowTTL is how long a started flow may take to complete. Default
	// DefaultFlowTTL.
	FlowTTL time.Duration
	// PollInterval is how often Wait re-reads the store while no
	// completion is signalled in-process. Default DefaultPollInterval.
	PollInterval time.Duration
	// Logger receives operational messages; it never sees a secret.
	// Default: discard.
	Logger *slog.Logger
}

// Service is the OAuth helper domain: providers, authorization flows and
// the tokens they yield, all scoped by tenant and kept in a store.Store.
// It is safe for concurrent use; several Services (one per replica) may
// share one store.
type Service struct {
	st        store.Store
	seal      *sealer
	publicURL string
	egress    *egress.Policy
	client    *http.Client
	now       func() time.Time
	newID     func() string
	flowTTL   time.Duration
	poll      time.Duration
	log       *slog.Logger
	notes     notifier
}

// New returns a Service over st. opts must carry SecretKey and PublicURL.
func New(st store.Store, opts *Options) (*Service, error) {
	if st == nil {
		return nil, errors.New("oauthflow: nil store")
	}
	if opts == nil {
		return nil, errors.New("oauthflow: Options with SecretKey and PublicURL are required")
	}
	seal, err := newSealer(opts.SecretKey)
	if err != nil {
		return nil, err
	}
	pub, err := url.Parse(opts.PublicURL)
	if err != nil || (pub.Scheme != "https" && pub.Scheme != "http") || pub.Host == "" || pub.RawQuery != "" || pub.Fragment != "" {
		return nil, fmt.Errorf("oauthflow: Options.PublicURL must be an absolute http(s) URL without query, got %q", opts.PublicURL)
	}
	s := &Service{
		st:        st,
		seal:      seal,
		publicURL: strings.TrimRight(opts.PublicURL, "/"),
		egress:    opts.Egress,
		client:    opts.HTTPClient,
		now:       opts.Clock,
		newID:     opts.NewID,
		flowTTL:   opts.FlowTTL,
		poll:      opts.PollInterval,
		log:       opts.Logger,
	}
	if s.egress == nil {
		if s.egress, err = egress.New(nil); err != nil {
			return nil, err
		}
	}
	if s.client == nil {
		s.client = s.egress.Client()
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.newID == nil {
		s.newID = func() string { return uuid.Must(uuid.NewV7()).String() }
	}
	if s.flowTTL <= 0 {
		s.flowTTL = DefaultFlowTTL
	}
	if s.poll <= 0 {
		s.poll = DefaultPollInterval
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s, nil
}

// clock returns the current time in UTC at microsecond precision, the
// precision of the wire format.
func (s *Service) clock() time.Time {
	return s.now().UTC().Truncate(time.Microsecond)
}

// redirectURI is where the provider sends the browser back to.
func (s *Service) redirectURI(providerID string) string {
	return s.publicURL + CallbackPath + url.PathEscape(providerID)
}
