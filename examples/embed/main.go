// Command embed shows deployplane inside an existing Go service: the API of
// package httphandler mounted under /api-host/ on the service's own mux, next
// to the service's other routes.
//
//	go run ./examples/embed
//
// It listens on 127.0.0.1:8125 (-addr) over an in-memory store and prints a
// curl command to try; stop it with Ctrl-C.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/storemem"
)

// tenant is the one workspace of this service.
const tenant = "0194c0de-0000-7000-8000-000000000001"

// newMux is the service's mux: its own routes, and deployplane under
// /api-host/. StripPrefix removes the prefix before the handler routes, so
// the API answers at /api-host/v2/deployments, /api-host/openapi.json, ...
// and its JSON 404 covers everything below /api-host/.
func newMux(cp *controlplane.ControlPlane, apiKey string) (*http.ServeMux, error) {
	keys, err := httphandler.NewKeyTable([]httphandler.Key{{SHA256: httphandler.HashKey(apiKey), Tenants: []string{tenant}}})
	if err != nil {
		return nil, err
	}
	api := httphandler.New(cp, &httphandler.Options{Authenticator: keys})

	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "the service's home page")
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("/api-host/", http.StripPrefix("/api-host", api))
	return mux, nil
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8125", "listen address")
	flag.Parse()

	st := storemem.New()
	defer st.Close()
	var b [16]byte
	_, _ = rand.Read(b[:])
	key := hex.EncodeToString(b[:])
	mux, err := newMux(controlplane.New(st, nil), key)
	if err != nil {
		log.Fatal(err)
	}

	srv := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	fmt.Printf("listening on http://%s; try:\n  curl -H 'X-Api-Key: %s' http://%s/api-host/v2/deployments\n", *addr, key, *addr)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}
