package main

import (
	"context"
	"crypto"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/distribution/reference"
	"github.com/sirupsen/logrus"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploydocker"
	"github.com/deployplane/deployplane/deployk8s"
	"github.com/deployplane/deployplane/registry"
)

// registryFlags configure the built-in OCI registry that langgraph deploy
// pushes internal_docker images to (wire contract section 10).
type registryFlags struct {
	addr    string // listen address; "auto" or "off" (see register)
	host    string // host:port clients and the Docker daemon reach it at
	storage string // a directory, or s3://bucket/root?region=&endpoint=

	// The built-in registry's load limits: its port's connection cap and
	// the bytes of image blobs each deployment may keep (0: no cap, no
	// quota). given names those set on the command line.
	maxConns int
	quota    int64
	given    []string

	// The collector of what no deployment keeps: its period (0: none)
	// and the grace of what was pushed lately.
	gcEvery, gcGrace time.Duration

	// An external registry instead (Docker Registry v2 token auth against
	// this server's realm): its URL, the key that signs the realm's
	// tokens (PEM; default derived from the secret key) and the registry's
	// service name (default its host).
	external, tokenKey, tokenService string
}

// defaultRegistryMaxConns is -registry-max-conns' default: the registry's
// connections apart from the API's (-max-conns), so that clients of one
// cannot take the descriptors the other needs.
const defaultRegistryMaxConns = 256

func (f *registryFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.addr, "registry-addr", "auto", "listen address of the built-in OCI registry; auto: "+defaultRegistryAddr+" with -deployer docker, none otherwise; off: none")
	fs.StringVar(&f.host, "registry-host", "", "host:port clients reach the registry at (default: its listen address)")
	fs.StringVar(&f.storage, "registry-storage", "", "where the registry keeps images: a directory, or s3://bucket[/root]?region=&endpoint= (built with -tags s3) (default: deployplane-registry beside -db)")
	f.maxConns, f.quota = defaultRegistryMaxConns, registry.DefaultQuota
	fs.Func("registry-max-conns", "open connections to the registry at most (0: no cap)", func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return errors.New("want 0 (no cap) or a positive number")
		}
		f.maxConns, f.given = n, append(f.given, "-registry-max-conns")
		return nil
	})
	fs.Func("registry-quota", "bytes of image blobs each deployment's repositories may hold, e.g. 10GiB (0: no quota)", func(s string) error {
		n, err := parseBytes(s)
		if err != nil {
			return err
		}
		f.quota, f.given = n, append(f.given, "-registry-quota")
		return nil
	})
	f.gcEvery, f.gcGrace = registry.DefaultCollectEvery, registry.DefaultCollectGrace
	fs.Func("registry-gc-every", "how often the registry removes the images no deployment keeps (0: never)", func(s string) error {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return errors.New("want a duration: 15m, 1h (0: never)")
		}
		f.gcEvery, f.given = d, append(f.given, "-registry-gc-every")
		return nil
	})
	fs.Func("registry-gc-grace", "what was pushed within it is never removed", func(s string) error {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return errors.New("want a positive duration: 1h, 30m")
		}
		f.gcGrace, f.given = d, append(f.given, "-registry-gc-grace")
		return nil
	})
	fs.StringVar(&f.external, "registry-external-url", "", "an external registry (auth: token, realm <public URL>"+registry.TokenPath+") instead of the built-in one: https://HOST[:PORT], or http:// for plain HTTP")
	fs.StringVar(&f.tokenKey, "registry-token-key", "", "PEM private key (Ed25519, ECDSA or RSA) that signs the realm's tokens (default: derived from the secret key)")
	fs.StringVar(&f.tokenService, "registry-token-service", "", "the external registry's auth.token.service (default: its host)")
}

// check reports a contradiction of the registry flags, or "".
func (f *registryFlags) check() string {
	switch {
	case f.external == "" && (f.tokenKey != "" || f.tokenService != ""):
		return "-registry-token-key and -registry-token-service need -registry-external-url"
	case f.external != "" && f.addr != "auto" && f.addr != "off":
		return "give -registry-addr (the built-in registry) or -registry-external-url, not both"
	case f.external != "" && (f.host != "" || f.storage != ""):
		return "-registry-host and -registry-storage are the built-in registry's: not with -registry-external-url"
	case f.external != "" && len(f.given) > 0:
		return strings.Join(f.given, " and ") + ": the built-in registry's, not with -registry-external-url"
	case strings.HasPrefix(f.storage, "s3://") && !registry.S3Built:
		u, err := url.Parse(f.storage)
		if err != nil {
			return "-registry-storage: " + registry.ErrS3NotBuilt.Error()
		}
		return "-registry-storage " + redactedURL(u) + ": " + registry.ErrS3NotBuilt.Error()
	}
	if f.external != "" {
		if _, _, err := parseExternalURL(f.external); err != nil {
			return err.Error()
		}
	}
	return ""
}

// parseBytes reads a size: a number of bytes, or a whole number with a
// unit, binary (KiB, MiB, GiB, TiB) or decimal (KB, MB, GB, TB), in any
// case: 10GiB, 500MB.
func parseBytes(s string) (int64, error) {
	digits := strings.TrimRightFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	unit := strings.ToLower(s[len(digits):])
	units := map[string]int64{"": 1, "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
		"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}
	n, err := strconv.ParseInt(digits, 10, 64)
	m, ok := units[unit]
	if err != nil || !ok || n < 0 || n > math.MaxInt64/m {
		return 0, fmt.Errorf("%q: want a number of bytes, or one with a unit: 500MiB, 10GiB, 20GB", s)
	}
	return n * m, nil
}

// parseExternalURL reads -registry-external-url: https://host[:port]
// (a bare host[:port] means https), or http://host[:port].
func parseExternalURL(s string) (host string, insecure bool, err error) {
	if !strings.Contains(s, "://") {
		s = "https://" + s
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.User != nil {
		return "", false, fmt.Errorf("-registry-external-url %q: want https://HOST[:PORT] or http://HOST[:PORT]", s)
	}
	return u.Host, u.Scheme == "http", nil
}

// builtinRegistry is the running registry: the controlplane.ImageResolver,
// the httphandler.Registry and the Docker deployer's pull credentials.
type builtinRegistry struct {
	*registry.Registry
	tokens *lateTokens
	srv    *http.Server
	ln     net.Listener
	limits httpLimits
	tmp    string // a directory to remove at close (-db :memory:)

	gcEvery time.Duration // -registry-gc-every
	stopGC  context.CancelFunc
	gcDone  chan struct{}
}

// registryLimits are the registry port's: the API port's (portLimits),
// with a cap of its own, and its bodies and answers streamed (an image
// layer may take longer than the API's 60 s to push or pull).
func registryLimits(maxConns int) httpLimits {
	l := portLimits(maxConns)
	l.minRate = streamMinRate
	return l
}

// lateTokens lets the registry be built before the ControlPlane whose
// store keeps its tokens (the ControlPlane takes the registry as its
// ImageResolver); the TokenStore is set (setTokens) before the registry
// serves.
type lateTokens struct{ *registry.TokenStore }

// setTokens makes the registry tokens those of cp's store.
func (l *lateTokens) setTokens(cp *controlplane.ControlPlane) {
	l.TokenStore = registry.NewTokenStore(cp, nil)
}

// PushToken implements httphandler.Registry's push tokens.
func (l *lateTokens) PushToken(ctx context.Context, tenant, deploymentID string) (string, error) {
	tok, err := l.IssuePushToken(ctx, tenant, deploymentID)
	if err != nil {
		return "", err
	}
	return tok.Token, nil
}

// defaultRegistryAddr is where -registry-addr auto listens with -deployer
// docker: a loopback port, which docker accepts plain HTTP pushes to.
const defaultRegistryAddr = "127.0.0.1:8126"

// openRegistry listens on -registry-addr and builds the registry; nil
// without one. serve starts it once the ControlPlane exists.
func openRegistry(ctx context.Context, f *registryFlags, deployer, db string, secret []byte, log *slog.Logger) (*builtinRegistry, error) {
	addr := f.addr
	switch {
	case addr == "off", addr == "", addr == "auto" && (deployer != "docker" || f.external != ""):
		return nil, nil
	case addr == "auto":
		addr = defaultRegistryAddr
	}
	// The distribution library logs every request through logrus, at
	// Info; the server keeps only its warnings.
	logrus.SetLevel(logrus.WarnLevel)
	logrus.SetOutput(slog.NewLogLogger(log.Handler(), slog.LevelWarn).Writer())
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-registry-addr: %w", err)
	}
	host := f.host
	if host == "" {
		host = ln.Addr().String()
	}
	r := &builtinRegistry{tokens: &lateTokens{}, ln: ln, limits: registryLimits(f.maxConns), gcEvery: f.gcEvery}
	hostname, _ := os.Hostname()
	opts := &registry.Options{Host: host, Aliases: registry.ListenAliases(ln.Addr().String(), hostname),
		Secret: string(secret), Logger: log, Quota: f.quota, CollectGrace: f.gcGrace, Ledger: r.tokens}
	if f.quota == 0 {
		opts.Quota = -1 // none
	}
	switch {
	case strings.HasPrefix(f.storage, "s3://"):
		if opts.S3, err = registry.ParseS3URL(f.storage); err != nil {
			ln.Close()
			return nil, fmt.Errorf("-registry-storage: %w", err)
		}
	case f.storage != "":
		opts.Dir = f.storage
	case db == ":memory:":
		if r.tmp, err = os.MkdirTemp("", "deployplane-registry-"); err != nil {
			ln.Close()
			return nil, err
		}
		opts.Dir = r.tmp
	case strings.Contains(db, "://") || strings.Contains(db, "="):
		opts.Dir = "deployplane-registry" // a PostgreSQL DSN: beside the working directory
	default:
		opts.Dir = filepath.Join(filepath.Dir(db), "deployplane-registry")
	}
	if r.Registry, err = registry.New(ctx, r.tokens, opts); err != nil {
		ln.Close()
		if r.tmp != "" {
			os.RemoveAll(r.tmp)
		}
		return nil, fmt.Errorf("registry: %w", err)
	}
	return r, nil
}

// serve starts serving the registry with the tokens of cp's store, and
// its collector every -registry-gc-every.
func (r *builtinRegistry) serve(cp *controlplane.ControlPlane, log *slog.Logger) {
	r.tokens.setTokens(cp)
	r.srv = r.limits.server(r.Registry, log)
	go func() {
		if err := r.srv.Serve(r.limits.listener(r.ln)); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("the registry stopped", "err", err)
		}
	}()
	if r.gcEvery > 0 {
		ctx, cancel := context.WithCancel(context.Background())
		r.stopGC, r.gcDone = cancel, make(chan struct{})
		go func() {
			defer close(r.gcDone)
			r.RunCollector(ctx, r.tokens.TokenStore, r.gcEvery)
		}()
	}
}

// close stops serving and collecting, and releases the registry.
func (r *builtinRegistry) close() {
	if r.stopGC != nil {
		r.stopGC()
		<-r.gcDone
	}
	if r.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if r.srv.Shutdown(ctx) != nil {
			r.srv.Close()
		}
	} else {
		r.ln.Close()
	}
	_ = r.Registry.Close()
	if r.tmp != "" {
		os.RemoveAll(r.tmp)
	}
}

// PushToken implements httphandler.Registry: a push token of the
// deployment, for the built-in registry.
func (r *builtinRegistry) PushToken(ctx context.Context, tenant, deploymentID string) (string, error) {
	return r.tokens.PushToken(ctx, tenant, deploymentID)
}

// pullTokenFunc answers a pull credential of the deployment for an image
// of the server's registry; nil for other images.
type pullTokenFunc func(ctx context.Context, tenant, deploymentID, image string) (*deployk8s.PullCredential, error)

// pullTokens mints the deployers' pull credentials for images of the
// registry at host (built-in or external): a pull-only token of the
// deployment, the password of basic auth (an external registry's clients
// exchange it at the realm).
func pullTokens(names *registry.Names, tokens *registry.TokenStore) pullTokenFunc {
	return func(ctx context.Context, tenant, deploymentID, image string) (*deployk8s.PullCredential, error) {
		named, err := reference.ParseNormalizedNamed(image)
		if err != nil || !names.Match(reference.Domain(named)) {
			return nil, nil
		}
		host := reference.Domain(named) // the name the engine pulls by
		tok, err := tokens.IssuePullToken(ctx, tenant, deploymentID)
		if err != nil {
			return nil, err
		}
		return &deployk8s.PullCredential{Server: host, Username: "deployplane", Password: tok.Token, ExpiresAt: tok.ExpiresAt}, nil
	}
}

// dockerCredentials is p as deploydocker.Options.Credentials.
func dockerCredentials(p pullTokenFunc) registryCredentials {
	return func(ctx context.Context, w *controlplane.Work, image string) (*deploydocker.Credentials, error) {
		c, err := p(ctx, w.Tenant, w.Deployment.ID, image)
		if c == nil || err != nil {
			return nil, err
		}
		return &deploydocker.Credentials{Username: c.Username, Password: c.Password}, nil
	}
}

// registryCredentials is deploydocker.Options.Credentials.
type registryCredentials = func(context.Context, *controlplane.Work, string) (*deploydocker.Credentials, error)

// registrySecret is the registry's upload-state secret, derived from the
// server's secret key so that replicas sharing the key share it.
func registrySecret(key []byte) []byte {
	sum := sha256.Sum256(append([]byte("deployplane registry http secret\x00"), key...))
	return []byte(hex.EncodeToString(sum[:]))
}

// externalRegistry is -registry-external-url: the registry_url of
// push-token and the image resolver (registry.External), and the realm
// the registry trusts (registry.TokenServer, served by httphandler).
type externalRegistry struct {
	*registry.External
	realm  *registry.TokenServer
	tokens *lateTokens
}

// PushToken implements httphandler.Registry: a push token of the
// deployment, which the realm exchanges for the external registry's.
func (x *externalRegistry) PushToken(ctx context.Context, tenant, deploymentID string) (string, error) {
	return x.tokens.PushToken(ctx, tenant, deploymentID)
}

// openExternalRegistry builds the realm and the External of
// -registry-external-url (nil without it) and publishes the realm's key
// for the registry's configuration beside -db: <dir>/deployplane-registry-token.crt
// (auth.token.rootcertbundle) and .jwks.json (auth.token.jwks).
func openExternalRegistry(f *registryFlags, secretKey []byte, db, publicURL string, log *slog.Logger) (*externalRegistry, error) {
	if f.external == "" {
		return nil, nil
	}
	host, insecure, err := parseExternalURL(f.external)
	if err != nil {
		return nil, err
	}
	var key crypto.Signer = registry.SigningKey(secretKey)
	if f.tokenKey != "" {
		b, err := os.ReadFile(f.tokenKey)
		if err != nil {
			return nil, fmt.Errorf("-registry-token-key: %w", err)
		}
		if key, err = registry.ParseSigningKey(b); err != nil {
			return nil, fmt.Errorf("-registry-token-key %s: %w", f.tokenKey, err)
		}
	}
	service := f.tokenService
	if service == "" {
		service = host
	}
	x := &externalRegistry{tokens: &lateTokens{}}
	if x.realm, err = registry.NewTokenServer(x.tokens, &registry.TokenOptions{Key: key, Service: service, Logger: log}); err != nil {
		return nil, err
	}
	if x.External, err = registry.NewExternal(&registry.ExternalOptions{Host: host, Tokens: x.realm, Insecure: insecure}); err != nil {
		return nil, err
	}
	files, err := x.publish(db)
	if err != nil {
		return nil, err
	}
	log.Info("external registry: configure it with auth: token", "registry", host, "realm", strings.TrimRight(publicURL, "/")+registry.TokenPath,
		"service", service, "issuer", x.realm.Issuer(), "jwks_url", strings.TrimRight(publicURL, "/")+registry.JWKSPath, "key_files", files)
	return x, nil
}

// publish writes the realm's certificate and JWKS beside -db (not for
// -db :memory:; the JWKS is served at registry.JWKSPath anyway).
func (x *externalRegistry) publish(db string) ([]string, error) {
	var dir string
	switch {
	case db == ":memory:":
		return nil, nil
	case isPostgres(db):
		dir = "."
	default:
		dir = filepath.Dir(db)
	}
	cert, err := x.realm.CertificatePEM()
	if err != nil {
		return nil, err
	}
	crt, jwks := filepath.Join(dir, "deployplane-registry-token.crt"), filepath.Join(dir, "deployplane-registry-token.jwks.json")
	if err := os.WriteFile(crt, cert, 0o644); err != nil {
		return nil, fmt.Errorf("publishing the registry token certificate: %w", err)
	}
	if err := os.WriteFile(jwks, x.realm.JWKS(), 0o644); err != nil {
		return nil, fmt.Errorf("publishing the registry token JWKS: %w", err)
	}
	return []string{crt, jwks}, nil
}
