package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/distribution/reference"
	"github.com/sirupsen/logrus"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploydocker"
	"github.com/deployplane/deployplane/registry"
)

// registryFlags configure the built-in OCI registry that langgraph deploy
// pushes internal_docker images to (wire contract section 10).
type registryFlags struct {
	addr    string // listen address; "auto" or "off" (see register)
	host    string // host:port clients and the Docker daemon reach it at
	storage string // a directory, or s3://bucket/root?region=&endpoint=
}

func (f *registryFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.addr, "registry-addr", "auto", "listen address of the built-in OCI registry; auto: "+defaultRegistryAddr+" with -deployer docker, none otherwise; off: none")
	fs.StringVar(&f.host, "registry-host", "", "host:port clients reach the registry at (default: its listen address)")
	fs.StringVar(&f.storage, "registry-storage", "", "where the registry keeps images: a directory, or s3://bucket[/root]?region=&endpoint= (default: deployplane-registry beside -db)")
}

// builtinRegistry is the running registry: the controlplane.ImageResolver,
// the httphandler.RegistryURLs and the Docker deployer's pull credentials.
type builtinRegistry struct {
	*registry.Registry
	tokens *lateTokens
	srv    *http.Server
	ln     net.Listener
	tmp    string // a directory to remove at close (-db :memory:)
}

// lateTokens lets the registry be built before the ControlPlane that
// checks its tokens (the ControlPlane takes the registry as its
// ImageResolver); cp is set before the registry serves.
type lateTokens struct{ cp *controlplane.ControlPlane }

func (l *lateTokens) CheckRegistryToken(ctx context.Context, token string) (*controlplane.RegistryGrant, error) {
	return l.cp.CheckRegistryToken(ctx, token)
}

// defaultRegistryAddr is where -registry-addr auto listens with -deployer
// docker: a loopback port, which docker accepts plain HTTP pushes to.
const defaultRegistryAddr = "127.0.0.1:8126"

// openRegistry listens on -registry-addr and builds the registry; nil
// without one. serve starts it once the ControlPlane exists.
func openRegistry(ctx context.Context, f *registryFlags, deployer, db string, secret []byte, log *slog.Logger) (*builtinRegistry, error) {
	addr := f.addr
	switch {
	case addr == "off", addr == "", addr == "auto" && deployer != "docker":
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
	r := &builtinRegistry{tokens: &lateTokens{}, ln: ln}
	opts := &registry.Options{Host: host, Secret: string(secret), Logger: log}
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

// serve starts serving the registry with cp checking its tokens.
func (r *builtinRegistry) serve(cp *controlplane.ControlPlane, log *slog.Logger) {
	r.tokens.cp = cp
	r.srv = &http.Server{Handler: r.Registry, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	go func() {
		if err := r.srv.Serve(r.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("the registry stopped", "err", err)
		}
	}()
}

// close stops serving and releases the registry.
func (r *builtinRegistry) close() {
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

// credentials gives the Docker deployer a pull token of the deployment
// for an image of the built-in registry; other images pull anonymously.
func (r *builtinRegistry) credentials(cp *controlplane.ControlPlane) registryCredentials {
	return func(ctx context.Context, w *controlplane.Work, image string) (*deploydocker.Credentials, error) {
		named, err := reference.ParseNormalizedNamed(image)
		if err != nil || reference.Domain(named) != r.Host() {
			return nil, nil
		}
		tok, err := cp.IssuePullToken(ctx, w.Tenant, w.Deployment.ID)
		if err != nil {
			return nil, err
		}
		return &deploydocker.Credentials{Username: "deployplane", Password: tok.Token}, nil
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
