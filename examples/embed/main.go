// Command embed shows deployplane inside an existing Go service: the API of
// package httphandler mounted under /api-host/ on the service's own mux, next
// to the service's other routes.
//
//	go run ./examples/embed
//
// It listens on 127.0.0.1:8125 (-addr) over an in-memory store and prints a
// curl command to try; stop it with Ctrl-C.
//
// Revisions move only while something runs the control plane's reconcile
// loop with a Deployer. This example runs the built-in simulated one,
// deploysim; a real service passes its own controlplane.Deployer (one that
// builds images and applies them to its clusters) to cp.Run instead.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploysim"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/storemem"
)

// tenant is the one workspace of this service.
const tenant = "0194c0de-0000-7000-8000-000000000001"

// newMux is the service's mux: its own routes, and deployplane under
// /api-host/. StripPrefix removes the prefix before the handler routes, so
// the API answers at /api-host/v2/deployments, /api-host/openapi.json, ...
// and its JSON 404 covers everything below /api-host/. Options.BasePath
// tells the handler the prefix, which it cannot see: the OpenAPI document
// names it as its server (generated clients then call /api-host/v2/...)
// and /api-host/docs loads its assets and the document from under it.
func newMux(cp *controlplane.ControlPlane, apiKey string) (*http.ServeMux, *httphandler.Handler, error) {
	keys, err := httphandler.NewKeyTable([]httphandler.Key{{SHA256: httphandler.HashKey(apiKey), Tenants: []string{tenant}}})
	if err != nil {
		return nil, nil, err
	}
	api := httphandler.New(cp, &httphandler.Options{Authenticator: keys, BasePath: "/api-host"})

	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "the service's home page")
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("/api-host/", http.StripPrefix("/api-host", api))
	return mux, api, nil
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8125", "listen address")
	flag.Parse()

	var b [16]byte
	_, _ = rand.Read(b[:])
	key := hex.EncodeToString(b[:])
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	fmt.Printf("listening on http://%s; try:\n  curl -H 'X-Api-Key: %s' http://%s/api-host/v2/deployments\n", ln.Addr(), key, ln.Addr())
	if err := serve(ctx, ln, key, 0); err != nil {
		log.Fatal(err)
	}
}

// serve runs the service on ln until ctx is done: the mux of newMux over an
// in-memory store, and the control plane's reconcile loop with the
// simulated deployer (step 0 means deploysim's default delay per status).
// It returns once the server has shut down and the loop has handed back its
// work.
func serve(ctx context.Context, ln net.Listener, key string, step time.Duration) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st := storemem.New()
	defer st.Close()
	cp := controlplane.New(st, nil)
	mux, api, err := newMux(cp, key)
	if err != nil {
		return err
	}

	// The reconcile loop: it claims new revisions and deletions and drives
	// them through the Deployer until ctx is cancelled.
	loopDone := make(chan error, 1)
	go func() { loopDone <- cp.Run(ctx, deploysim.New(&deploysim.Options{Step: step})) }()

	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	shutDown := make(chan struct{})
	go func() {
		defer close(shutDown)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	serveErr := srv.Serve(ln) // returns as soon as Shutdown starts
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	cancel() // a listener error stops the loop and the server too
	<-shutDown
	// Every request is answered; the handler's request log may still hold
	// their records: Close hands them to the logger.
	return errors.Join(serveErr, <-loopDone, api.Close())
}
