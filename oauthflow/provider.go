package oauthflow

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/egress"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/wiretime"
)

// Provider is an OAuth provider configured for a tenant, as shown to
// clients. The client secret is write-only: no Provider carries it.
type Provider struct {
	// ID is the record's UUID.
	ID string `json:"id"`
	// OrganizationID is the tenant the provider belongs to.
	OrganizationID string `json:"organization_id"`
	// ProviderID is the tenant-unique name clients use (e.g. "github").
	ProviderID string `json:"provider_id"`
	// Name is a display name.
	Name string `json:"name"`
	// ClientID is this server's client id at the provider.
	ClientID string `json:"client_id"`
	// AuthURL is the provider's authorization endpoint.
	AuthURL string `json:"auth_url"`
	// TokenURL is the provider's token endpoint.
	TokenURL string `json:"token_url"`
	// UsesPKCE says whether flows send a PKCE challenge.
	UsesPKCE bool `json:"uses_pkce"`
	// CodeChallengeMethod is "S256" when UsesPKCE, else nil.
	CodeChallengeMethod *string `json:"code_challenge_method"`
	// CreatedAt is when the provider was created.
	CreatedAt wiretime.Time `json:"created_at"`
	// UpdatedAt is when the provider last changed.
	UpdatedAt wiretime.Time `json:"updated_at"`
	// ProviderType is a free-form label (e.g. "github"), or nil.
	ProviderType *string `json:"provider_type"`
}

// NewProvider is the body of a provider creation. ProviderID, Name,
// ClientID, AuthURL and TokenURL are required ("" counts as missing);
// ClientSecret may be empty for a public client.
type NewProvider struct {
	ProviderID   string `json:"provider_id"`
	Name         string `json:"name"`
	ClientID     string `json:"client_id"`
	ClientSecret Secret `json:"client_secret"`
	AuthURL      string `json:"auth_url"`
	TokenURL     string `json:"token_url"`
	UsesPKCE     bool   `json:"uses_pkce"`
	// CodeChallengeMethod may be nil or "S256", and "S256" only when
	// UsesPKCE; the stored value is "S256" exactly when UsesPKCE.
	CodeChallengeMethod *string `json:"code_challenge_method"`
	ProviderType        *string `json:"provider_type"`
}

// LogValue keeps the client secret out of logs, whatever the handler.
func (p NewProvider) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("provider_id", p.ProviderID),
		slog.String("name", p.Name),
		slog.String("client_id", p.ClientID),
		slog.Bool("client_secret_set", p.ClientSecret != ""),
		slog.String("auth_url", p.AuthURL),
		slog.String("token_url", p.TokenURL),
		slog.Bool("uses_pkce", p.UsesPKCE),
	)
}

// ProviderPatch is the body of a provider update: nil fields are left as
// they are. ProviderID may be given only with the current value (it is
// immutable). An empty ClientSecret removes the secret.
type ProviderPatch struct {
	ProviderID          *string `json:"provider_id"`
	Name                *string `json:"name"`
	ClientID            *string `json:"client_id"`
	ClientSecret        *Secret `json:"client_secret"`
	AuthURL             *string `json:"auth_url"`
	TokenURL            *string `json:"token_url"`
	UsesPKCE            *bool   `json:"uses_pkce"`
	CodeChallengeMethod *string `json:"code_challenge_method"`
	ProviderType        *string `json:"provider_type"`
}

// LogValue keeps the client secret out of logs, whatever the handler.
func (p ProviderPatch) LogValue() slog.Value {
	attrs := []slog.Attr{slog.Bool("client_secret_set", p.ClientSecret != nil)}
	add := func(k string, v *string) {
		if v != nil {
			attrs = append(attrs, slog.String(k, *v))
		}
	}
	add("provider_id", p.ProviderID)
	add("name", p.Name)
	add("client_id", p.ClientID)
	add("auth_url", p.AuthURL)
	add("token_url", p.TokenURL)
	return slog.GroupValue(attrs...)
}

// MethodS256 is the only PKCE code challenge method offered.
const MethodS256 = "S256"

var providerIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// Length limits on provider fields, in characters.
const (
	maxNameLen   = 255
	maxClientLen = 1024
	maxURLLen    = 2048
	maxSecretLen = 4096
)

// validateProvider checks a whole provider description. create says
// whether "" means an absent field (creation) or a field set to ""
// (a patch; stored fields are valid, so only patched ones can be empty).
func validateProvider(in NewProvider, create bool, pol *egress.Policy) error {
	var ps problems
	required := func(field, v string, max int) bool {
		switch {
		case v == "" && create:
			ps.add(apierr.TypeMissing, apierr.MsgFieldRequired, "body", field)
		case v == "":
			ps.add(apierr.TypeStringTooShort, "String should have at least 1 character", "body", field)
		case utf8.RuneCountInString(v) > max:
			ps.add(apierr.TypeStringTooLong, "String should have at most "+strconv.Itoa(max)+" characters", "body", field)
		default:
			return true
		}
		return false
	}
	if required("provider_id", in.ProviderID, 63) && !providerIDPattern.MatchString(in.ProviderID) {
		ps.add(apierr.TypeStringPatternMismatch, "provider_id must be 1 to 63 characters of letters, digits, '.', '_' or '-', starting with a letter or digit", "body", "provider_id")
	}
	required("name", in.Name, maxNameLen)
	required("client_id", in.ClientID, maxClientLen)
	if utf8.RuneCountInString(string(in.ClientSecret)) > maxSecretLen {
		ps.add(apierr.TypeStringTooLong, "String should have at most "+strconv.Itoa(maxSecretLen)+" characters", "body", "client_secret")
	}
	if required("auth_url", in.AuthURL, maxURLLen) {
		checkEndpointURL(&ps, pol, "auth_url", in.AuthURL)
	}
	if required("token_url", in.TokenURL, maxURLLen) {
		checkEndpointURL(&ps, pol, "token_url", in.TokenURL)
	}
	if m := in.CodeChallengeMethod; m != nil {
		switch {
		case *m != MethodS256:
			ps.add(apierr.TypeLiteralError, "Input should be 'S256'", "body", "code_challenge_method")
		case !in.UsesPKCE:
			ps.add(apierr.TypeNotApplicable, "code_challenge_method applies only when uses_pkce is true", "body", "code_challenge_method")
		}
	}
	if t := in.ProviderType; t != nil && utf8.RuneCountInString(*t) > maxNameLen {
		ps.add(apierr.TypeStringTooLong, "String should have at most "+strconv.Itoa(maxNameLen)+" characters", "body", "provider_type")
	}
	return ps.err()
}

// checkEndpointURL requires an absolute URL without credentials or
// fragment that the egress policy accepts: https, to a host that is not a
// non-public IP literal nor a localhost name, unless the operator allows
// the host (then http too).
func checkEndpointURL(ps *problems, pol *egress.Policy, field, raw string) {
	u, err := url.Parse(raw)
	switch {
	case strings.ContainsFunc(raw, func(r rune) bool { return r <= ' ' || r > '~' }):
		ps.add(apierr.TypeURLParsing, "URL must be printable ASCII without spaces (percent-encode the rest, punycode for hosts)", "body", field)
	case err != nil || !u.IsAbs() || u.Host == "" || u.Hostname() == "":
		ps.add(apierr.TypeURLParsing, "Input should be a valid absolute URL", "body", field)
	case u.User != nil:
		ps.add(apierr.TypeURLParsing, "URL must not contain credentials", "body", field)
	case u.Fragment != "" || strings.Contains(raw, "#"):
		ps.add(apierr.TypeURLParsing, "URL must not contain a fragment", "body", field)
	default:
		var re *egress.RefusedError
		switch err := pol.CheckURL(u); {
		case err == nil:
		case errors.As(err, &re) && re.Scheme != "":
			ps.add(apierr.TypeURLScheme, "URL scheme should be 'https' ('http' only for hosts the server's operator allows)", "body", field)
		case errors.As(err, &re) && re.Addr.IsValid():
			ps.add(apierr.TypeURLHost, "URL host "+re.Addr.String()+" is not a public address ("+re.Reason+"); this server reaches such hosts only when its operator allows them", "body", field)
		default:
			ps.add(apierr.TypeURLHost, "URL host "+u.Hostname()+" is this server itself; this server reaches such hosts only when its operator allows them", "body", field)
		}
	}
}

func (in NewProvider) toProvider() Provider {
	p := Provider{
		ProviderID:   in.ProviderID,
		Name:         in.Name,
		ClientID:     in.ClientID,
		AuthURL:      in.AuthURL,
		TokenURL:     in.TokenURL,
		UsesPKCE:     in.UsesPKCE,
		ProviderType: in.ProviderType,
	}
	if p.UsesPKCE {
		m := MethodS256
		p.CodeChallengeMethod = &m
	}
	return p
}

// CreateProvider adds a provider to tenant. It returns a *apierr.ValidationError
// listing every invalid field, or apierr.ErrConflict when the tenant already has a
// provider with that ProviderID.
func (s *Service) CreateProvider(ctx context.Context, tenant string, in NewProvider) (Provider, error) {
	if err := apierr.CheckTenant(tenant); err != nil {
		return Provider{}, err
	}
	if err := validateProvider(in, true, s.egress); err != nil {
		return Provider{}, err
	}
	now := s.clock()
	rec := providerRecord{Provider: in.toProvider()}
	rec.ID = s.newID()
	rec.OrganizationID = tenant
	rec.CreatedAt, rec.UpdatedAt = wiretime.New(now), wiretime.New(now)
	if in.ClientSecret != "" {
		rec.SealedSecret = s.seal.seal([]byte(in.ClientSecret), secretAAD(tenant, in.ProviderID))
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return Provider{}, err
	}
	err = s.st.Update(ctx, func(tx store.Tx) error {
		return tx.Create(collProviders, providerKey(tenant, in.ProviderID), b)
	})
	if errors.Is(err, store.ErrAlreadyExists) {
		return Provider{}, apierr.Conflictf("An OAuth provider with provider_id '%s' already exists.", in.ProviderID)
	}
	if err != nil {
		return Provider{}, err
	}
	s.log.InfoContext(ctx, "oauth provider created", "tenant", tenant, "provider_id", in.ProviderID)
	return rec.Provider, nil
}

// ListProviders returns tenant's providers ordered by ProviderID.
func (s *Service) ListProviders(ctx context.Context, tenant string) ([]Provider, error) {
	if err := apierr.CheckTenant(tenant); err != nil {
		return nil, err
	}
	var out []Provider
	err := s.st.View(ctx, func(r store.Reader) error {
		out = []Provider{}
		return r.Scan(collProviders, tenant+"\x00", nil, func(key string, value []byte) (bool, error) {
			var rec providerRecord
			if err := json.Unmarshal(value, &rec); err != nil {
				return false, err
			}
			out = append(out, rec.Provider)
			return true, nil
		})
	})
	return out, err
}

// GetProvider returns tenant's provider providerID, or apierr.ErrNotFound.
func (s *Service) GetProvider(ctx context.Context, tenant, providerID string) (Provider, error) {
	if err := apierr.CheckTenant(tenant); err != nil {
		return Provider{}, err
	}
	var rec providerRecord
	err := s.st.View(ctx, func(r store.Reader) error {
		return getProvider(r, tenant, providerID, &rec)
	})
	return rec.Provider, err
}

// getProvider reads a provider record, turning a missing one into a
// *apierr.NotFoundError.
func getProvider(r store.Reader, tenant, providerID string, rec *providerRecord) error {
	*rec = providerRecord{}
	if providerID == "" {
		return providerNotFound(providerID)
	}
	err := getJSON(r, collProviders, providerKey(tenant, providerID), rec)
	if errors.Is(err, store.ErrNotFound) {
		return providerNotFound(providerID)
	}
	return err
}

// UpdateProvider applies patch to tenant's provider providerID. It returns
// apierr.ErrNotFound, or a *apierr.ValidationError listing every invalid field (a
// ProviderID different from the current one is "immutable_field").
func (s *Service) UpdateProvider(ctx context.Context, tenant, providerID string, patch ProviderPatch) (Provider, error) {
	if err := apierr.CheckTenant(tenant); err != nil {
		return Provider{}, err
	}
	var sealed []byte
	if patch.ClientSecret != nil && *patch.ClientSecret != "" {
		sealed = s.seal.seal([]byte(*patch.ClientSecret), secretAAD(tenant, providerID))
	}
	now := s.clock()
	var out Provider
	err := s.st.Update(ctx, func(tx store.Tx) error {
		var rec providerRecord
		if err := getProvider(tx, tenant, providerID, &rec); err != nil {
			return err
		}
		in := NewProvider{
			ProviderID:          rec.ProviderID,
			Name:                deref(patch.Name, rec.Name),
			ClientID:            deref(patch.ClientID, rec.ClientID),
			AuthURL:             deref(patch.AuthURL, rec.AuthURL),
			TokenURL:            deref(patch.TokenURL, rec.TokenURL),
			UsesPKCE:            deref(patch.UsesPKCE, rec.UsesPKCE),
			CodeChallengeMethod: patch.CodeChallengeMethod,
			ProviderType:        rec.ProviderType,
		}
		if patch.ProviderType != nil {
			in.ProviderType = patch.ProviderType
		}
		if patch.ClientSecret != nil {
			in.ClientSecret = *patch.ClientSecret
		}
		err := validateProvider(in, false, s.egress)
		if patch.ProviderID != nil && *patch.ProviderID != rec.ProviderID {
			var ps problems
			var ve *apierr.ValidationError
			if errors.As(err, &ve) {
				ps = ve.Problems
			}
			ps.add(apierr.TypeImmutableField, "provider_id cannot be changed", "body", "provider_id")
			err = ps.err()
		}
		if err != nil {
			return err
		}
		next := providerRecord{Provider: in.toProvider(), SealedSecret: rec.SealedSecret}
		next.ID, next.OrganizationID, next.CreatedAt, next.UpdatedAt = rec.ID, rec.OrganizationID, rec.CreatedAt, wiretime.New(now)
		if patch.ClientSecret != nil {
			next.SealedSecret = sealed
		}
		out = next.Provider
		return putJSON(tx, collProviders, providerKey(tenant, providerID), next)
	})
	if err != nil {
		return Provider{}, err
	}
	s.log.InfoContext(ctx, "oauth provider updated", "tenant", tenant, "provider_id", providerID, "patch", patch)
	return out, nil
}

func deref[T any](p *T, def T) T {
	if p != nil {
		return *p
	}
	return def
}

// DeleteProvider removes tenant's provider providerID together with every
// token obtained through it. Flows still open for it fail at their
// callback. It returns apierr.ErrNotFound when there is no such provider.
func (s *Service) DeleteProvider(ctx context.Context, tenant, providerID string) error {
	if err := apierr.CheckTenant(tenant); err != nil {
		return err
	}
	err := s.st.Update(ctx, func(tx store.Tx) error {
		var rec providerRecord
		if err := getProvider(tx, tenant, providerID, &rec); err != nil {
			return err
		}
		if err := tx.Delete(collProviders, providerKey(tenant, providerID)); err != nil {
			return err
		}
		var keys []string
		err := tx.Scan(collTokens, tokenPrefix(tenant, providerID), nil, func(key string, _ []byte) (bool, error) {
			keys = append(keys, key)
			return true, nil
		})
		if err != nil {
			return err
		}
		for _, k := range keys {
			if err := tx.Delete(collTokens, k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.log.InfoContext(ctx, "oauth provider deleted", "tenant", tenant, "provider_id", providerID)
	return nil
}
