package registry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/distribution/distribution/v3"
	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry/auth"
	"github.com/distribution/distribution/v3/registry/handlers"
	"github.com/distribution/distribution/v3/registry/storage"
	storagedriver "github.com/distribution/distribution/v3/registry/storage/driver"
	"github.com/distribution/distribution/v3/registry/storage/driver/factory"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem" // the default storage; S3's is in s3.go
	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"

	"github.com/deployplane/deployplane/controlplane"
)

// Tokens checks the password of a request (*TokenStore implements it).
type Tokens interface {
	CheckRegistryToken(ctx context.Context, token string) (*Grant, error)
}

// Options configure a Registry. Dir or S3 says where images are kept.
type Options struct {
	// Host is the host:port clients reach the registry at, the host of
	// the registry_url that push-token answers and of the image_uri
	// values ResolveImage resolves. Required.
	Host string
	// Aliases are the other host:port names the registry is reached by
	// (ListenAliases of its listener gives the local ones). An image
	// reference naming any of them, or Host, is of this registry, and
	// ResolveImage holds it to the deployment's repository and answers
	// it under Host (see Names).
	Aliases []string
	// Dir is the filesystem directory that holds the images (the default
	// storage; created if missing).
	Dir string
	// S3, when set, keeps the images in an S3 bucket instead of Dir
	// (several replicas behind one Host share it). Only in a program
	// built with the s3 build tag (S3Built); without it New answers
	// ErrS3NotBuilt.
	S3 *S3
	// Secret signs the registry's upload state; replicas behind one Host
	// need the same one. Default: a random one per process.
	Secret string
	// Logger receives one line per refused credential and per upload
	// refused over Quota. Default: discard.
	Logger *slog.Logger
	// Quota is how many bytes of image blobs (layers and configs; not
	// manifests) the repositories of one deployment may hold, unfinished
	// uploads included; an upload beyond it is refused with DENIED (403).
	// Default (0): DefaultQuota; negative: no quota.
	Quota int64
	// UploadMaxAge is how long an unfinished upload's data is kept (it
	// counts against Quota until it is removed). Default (0):
	// DefaultUploadMaxAge.
	UploadMaxAge time.Duration
	// Ledger counts the unfinished uploads' bytes against Quota where
	// every replica sharing the storage sees them (a *TokenStore keeps
	// them in the control plane's store). Default (nil): this process's
	// uploads only.
	Ledger UploadLedger
	// CollectGrace is how long Collect leaves what was pushed, whatever
	// keeps it: a push in progress has its blobs before the manifest that
	// references them. Default (0): DefaultCollectGrace.
	CollectGrace time.Duration
	// Clock tells Collect the time that the grace is measured from.
	// Default: time.Now.
	Clock func() time.Time
}

const (
	// DefaultQuota is Options.Quota's default: 10 GiB per deployment.
	DefaultQuota int64 = 10 << 30
	// DefaultUploadMaxAge is Options.UploadMaxAge's default.
	DefaultUploadMaxAge = 24 * time.Hour
)

// S3 is an S3 bucket (or an S3-compatible store at Endpoint). Credentials
// come from the AWS environment (AWS_ACCESS_KEY_ID, ..., or the instance's
// role) unless AccessKey and SecretKey are set.
type S3 struct {
	Bucket, Region, Endpoint, RootDirectory string
	AccessKey, SecretKey                    string
}

// ErrS3NotBuilt is matched (errors.Is) by New's error for Options.S3 in a
// program built without the s3 build tag, which leaves the S3 storage
// driver (and the AWS SDK under it) out of the binary.
var ErrS3NotBuilt = errors.New("built without s3 support; build with -tags s3")

// ParseS3URL reads s3://bucket/root?region=R&endpoint=URL into an S3.
func ParseS3URL(s string) (*S3, error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "s3" || u.Host == "" {
		return nil, fmt.Errorf("registry: %q is not an s3://bucket[/root][?region=&endpoint=] URL", s)
	}
	q := u.Query()
	return &S3{Bucket: u.Host, RootDirectory: strings.TrimSuffix(u.Path, "/"), Region: q.Get("region"), Endpoint: q.Get("endpoint")}, nil
}

// Registry is an OCI distribution registry (github.com/distribution/
// distribution/v3) whose only credentials are the control plane's registry
// tokens. It is an http.Handler for its own listener: the OCI API owns the
// /v2/ path.
type Registry struct {
	app   *handlers.App
	ns    distribution.Namespace
	host  string
	names *Names
	log   *slog.Logger
	quota *quota // nil: none

	driver storagedriver.StorageDriver
	dir    string // Options.Dir, for the filesystem storage
	clock  func() time.Time
	grace  time.Duration
}

// The distribution library finds access controllers by name in a table of
// its own; this package registers one, once, which takes the Registry's
// controller from its options.
const accessControllerName = "deployplane"

var registerOnce sync.Once

// New builds a Registry over opts' storage, accepting the tokens tokens
// checks. Close releases it.
func New(ctx context.Context, tokens Tokens, opts *Options) (r *Registry, err error) {
	if opts == nil || opts.Host == "" {
		return nil, errors.New("registry: Options.Host is required")
	}
	if opts.S3 == nil && opts.Dir == "" {
		return nil, errors.New("registry: Options.Dir or Options.S3 is required")
	}
	if opts.S3 != nil && !S3Built {
		return nil, fmt.Errorf("registry: Options.S3: %w", ErrS3NotBuilt)
	}
	if opts.UploadMaxAge < 0 || opts.CollectGrace < 0 {
		return nil, errors.New("registry: Options.UploadMaxAge and Options.CollectGrace must not be negative")
	}
	registerOnce.Do(func() {
		err = auth.Register(accessControllerName, func(o map[string]any) (auth.AccessController, error) {
			ac, ok := o["controller"].(*accessController)
			if !ok {
				return nil, errors.New("registry: no access controller in the options")
			}
			return ac, nil
		})
	})
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg := &configuration.Configuration{}
	cfg.Storage = storageConfig(opts)
	cfg.Storage["maintenance"] = configuration.Parameters{"uploadpurging": uploadPurging(opts.UploadMaxAge)}
	cfg.Auth = configuration.Auth{accessControllerName: configuration.Parameters{"controller": &accessController{tokens: tokens, log: log}}}
	cfg.HTTP.Secret = opts.Secret
	defer func() {
		// NewApp panics on a configuration it cannot use.
		if p := recover(); p != nil {
			r, err = nil, fmt.Errorf("registry: %v", p)
		}
	}()
	app := handlers.NewApp(ctx, cfg)
	driver, err := factory.Create(ctx, cfg.Storage.Type(), cfg.Storage.Parameters())
	if err != nil {
		_ = app.Shutdown()
		return nil, fmt.Errorf("registry: storage: %w", err)
	}
	ns, err := storage.NewRegistry(ctx, driver)
	if err != nil {
		_ = app.Shutdown()
		return nil, fmt.Errorf("registry: storage: %w", err)
	}
	r = &Registry{app: app, ns: ns, host: opts.Host, names: NewNames(opts.Host, opts.Aliases...), log: log,
		driver: driver, clock: opts.Clock, grace: cmp.Or(opts.CollectGrace, DefaultCollectGrace)}
	if r.clock == nil {
		r.clock = time.Now
	}
	if opts.S3 == nil {
		r.dir = opts.Dir
	}
	if limit := cmp.Or(opts.Quota, DefaultQuota); limit > 0 {
		r.quota = &quota{limit: limit, every: max(min(maxCheckBytes, limit/checksPerQuota), 1),
			maxAge: cmp.Or(opts.UploadMaxAge, DefaultUploadMaxAge), ledger: opts.Ledger,
			driver: driver, blobs: ns.BlobStatter(), log: log, active: map[string]*streamed{}, sizes: map[digest.Digest]int64{}}
		if r.quota.ledger == nil {
			r.quota.ledger = &memLedger{}
		}
	}
	return r, nil
}

// uploadPurging is the configuration of Distribution's removal of
// unfinished uploads older than age (default DefaultUploadMaxAge), which
// runs every hour, or every age if that is shorter.
func uploadPurging(age time.Duration) map[any]any {
	age = cmp.Or(age, DefaultUploadMaxAge)
	return map[any]any{"enabled": true, "age": age.String(), "interval": min(age, time.Hour).String(), "dryrun": false}
}

func storageConfig(opts *Options) configuration.Storage {
	if s := opts.S3; s != nil {
		p := configuration.Parameters{"bucket": s.Bucket, "region": s.Region}
		if p["region"] == "" {
			p["region"] = "us-east-1"
		}
		if s.Endpoint != "" {
			p["regionendpoint"], p["forcepathstyle"] = s.Endpoint, true
		}
		if s.RootDirectory != "" {
			p["rootdirectory"] = s.RootDirectory
		}
		if s.AccessKey != "" {
			p["accesskey"], p["secretkey"] = s.AccessKey, s.SecretKey
		}
		// Blobs are served through the registry, not redirected to the
		// bucket, which clients may not reach.
		return configuration.Storage{"s3": p, "redirect": configuration.Parameters{"disable": true}}
	}
	return configuration.Storage{"filesystem": configuration.Parameters{"rootdirectory": opts.Dir}}
}

// ServeHTTP serves the OCI distribution API. The requests that send a
// blob's data (PATCH and PUT of an upload) count it against the quota,
// and those that finish an upload (PUT, DELETE) end its count.
func (r *Registry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if r.quota == nil || (req.Method != http.MethodPatch && req.Method != http.MethodPut && req.Method != http.MethodDelete) {
		r.app.ServeHTTP(w, req)
		return
	}
	m := uploadPath.FindStringSubmatch(req.URL.Path)
	if m == nil {
		r.app.ServeHTTP(w, req)
		return
	}
	u := &upload{q: r.quota, repo: m[1], id: m[2], body: req.Body, length: req.ContentLength}
	u.ctx = context.WithValue(req.Context(), uploadKey{}, u)
	req = req.WithContext(u.ctx)
	if req.Body != nil && req.Body != http.NoBody {
		req.Body = u
	}
	rw := &refusingWriter{ResponseWriter: w, u: u}
	defer func() { u.finish(r.ns, req.Method, rw.code) }()
	r.app.ServeHTTP(rw, req)
}

// Host is Options.Host.
func (r *Registry) Host() string { return r.host }

// Names is the set of names the registry answers to: Options.Host and
// Options.Aliases.
func (r *Registry) Names() *Names { return r.names }

// URL is the registry_url of a deployment: Host and its repository prefix
// (Repository).
func (r *Registry) URL(deploymentID string) string {
	return r.host + "/" + Repository(deploymentID)
}

// Close stops the registry's background work.
func (r *Registry) Close() error { return r.app.Shutdown() }

// ResolveImage implements controlplane.ImageResolver: an image of this
// registry (its host is Host) must be in the deployment's repository
// prefix and exist; one named by tag (or by nothing: latest) is answered
// by digest, host/repository@sha256:... Images of other registries are
// returned unchanged.
func (r *Registry) ResolveImage(ctx context.Context, tenant, deploymentID, image string) (string, error) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil || !r.names.Match(reference.Domain(named)) {
		return image, nil // not a reference to this registry: the deployer's business
	}
	path := reference.Path(named)
	prefix := Repository(deploymentID)
	if path != prefix && !strings.HasPrefix(path, prefix+"/") {
		return "", fmt.Errorf("%w: %s is not in this deployment's repository %s/%s", controlplane.ErrImageNotFound, image, r.host, prefix)
	}
	repoName, err := reference.WithName(path)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v", controlplane.ErrImageNotFound, image, err)
	}
	repo, err := r.ns.Repository(ctx, repoName)
	if err != nil {
		return "", fmt.Errorf("registry: %s: %w", image, err)
	}
	if d, ok := named.(reference.Digested); ok {
		ms, err := repo.Manifests(ctx)
		if err != nil {
			return "", fmt.Errorf("registry: %s: %w", image, err)
		}
		exists, err := ms.Exists(ctx, d.Digest())
		if err != nil {
			return "", fmt.Errorf("registry: %s: %w", image, err)
		}
		if !exists {
			return "", fmt.Errorf("%w: %s has not been pushed", controlplane.ErrImageNotFound, image)
		}
		return r.host + "/" + path + "@" + d.Digest().String(), nil
	}
	tag := "latest"
	if t, ok := named.(reference.Tagged); ok {
		tag = t.Tag()
	}
	desc, err := repo.Tags(ctx).Get(ctx, tag)
	if err != nil {
		var unknown distribution.ErrTagUnknown
		if errors.As(err, &unknown) {
			return "", fmt.Errorf("%w: %s has not been pushed", controlplane.ErrImageNotFound, image)
		}
		return "", fmt.Errorf("registry: %s: %w", image, err)
	}
	return r.host + "/" + path + "@" + desc.Digest.String(), nil
}

var _ controlplane.ImageResolver = (*Registry)(nil)

// accessController accepts a registry token as the basic-auth password
// (any user name) and grants what the token's grant Allows.
type accessController struct {
	tokens Tokens
	log    *slog.Logger
}

func (ac *accessController) Authorized(req *http.Request, access ...auth.Access) (*auth.Grant, error) {
	user, password, ok := req.BasicAuth()
	if !ok {
		return nil, challenge{err: auth.ErrInvalidCredential}
	}
	g, err := ac.tokens.CheckRegistryToken(req.Context(), password)
	if errors.Is(err, ErrTokenInvalid) {
		ac.log.Info("registry: refused credential", "user", user, "remote", req.RemoteAddr)
		return nil, challenge{err: auth.ErrAuthenticationFailure}
	}
	if err != nil {
		return nil, err
	}
	var resources []auth.Resource
	for _, a := range access {
		if a.Type != "repository" || !g.Allows(a.Name, a.Action) {
			ac.log.Info("registry: refused access", "deployment", g.DeploymentID, "repository", a.Name, "action", a.Action)
			return nil, challenge{err: fmt.Errorf("%w: %s %s is outside %s", auth.ErrAuthenticationFailure, a.Action, a.Name, g.Repository)}
		}
		resources = append(resources, a.Resource)
	}
	if u, ok := req.Context().Value(uploadKey{}).(*upload); ok {
		u.authorize(g)
	}
	return &auth.Grant{User: auth.UserInfo{Name: user}, Resources: resources}, nil
}

// challenge is a 401 asking for basic auth.
type challenge struct{ err error }

func (c challenge) SetHeaders(_ *http.Request, w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Basic realm="deployplane"`)
}

func (c challenge) Error() string { return "registry: " + c.err.Error() }
