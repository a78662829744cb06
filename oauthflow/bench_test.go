package oauthflow_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/deployplane/deployplane/internal/benchcmp"
	"github.com/deployplane/deployplane/oauthflow"
	"github.com/deployplane/deployplane/store"
)

// The benchmarks compare the Service with a baseline in the same run: the
// bare store operations a call cannot avoid (reading the provider and token
// records; or reading the provider and writing a flow, its state and its
// expiry entry). The candidate reports benchcmp's "x-baseline": baseline
// ns/op over Service ns/op, so 0.5 means the domain doubles the cost of the
// storage it needs (the rest is JSON, AES-GCM and, for a new flow, key
// generation).

// Authenticate answered from a stored token: the hot path of an agent that
// asks for its token on every call.
func BenchmarkAuthenticateStoredToken(b *testing.B) {
	e := newEnv(b, func(o *oauthflow.Options) { o.Logger = nil })
	ctx := context.Background()
	e.addProvider(b, tenantA, "fake", true)
	e.login(b, tenantA, "fake", "alice", "repo")
	req := oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: []string{"repo"}}
	benchcmp.Compare(b, func(b *testing.B) {
		for b.Loop() {
			err := e.st.View(ctx, func(r store.Reader) error {
				if _, err := r.Get("oauthflow.providers", tenantA+"\x00fake"); err != nil {
					return err
				}
				_, err := r.Get("oauthflow.tokens", tenantA+"\x00fake\x00alice")
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	}, func(b *testing.B) {
		for b.Loop() {
			res, err := e.svc.Authenticate(ctx, tenantA, req)
			if err != nil || res.Status != oauthflow.StatusCompleted {
				b.Fatal(res.Status, err)
			}
		}
	})
}

// Authenticate starting a flow (PKCE, sealed verifier, three records).
func BenchmarkAuthenticateNewFlow(b *testing.B) {
	e := newEnv(b, func(o *oauthflow.Options) { o.Logger = nil })
	ctx := context.Background()
	e.addProvider(b, tenantA, "fake", true)
	record := make([]byte, 400) // about a flow record's size
	i := 0
	benchcmp.Compare(b, func(b *testing.B) {
		for b.Loop() {
			i++
			id := fmt.Sprint("base", i)
			err := e.st.View(ctx, func(r store.Reader) error {
				_, err := r.Get("oauthflow.providers", tenantA+"\x00fake")
				return err
			})
			if err == nil {
				err = e.st.Update(ctx, func(tx store.Tx) error {
					if _, err := tx.Get("oauthflow.providers", tenantA+"\x00fake"); err != nil {
						return err
					}
					if err := tx.Create("bench.flows", id, record); err != nil {
						return err
					}
					if err := tx.Create("bench.states", id, []byte(id)); err != nil {
						return err
					}
					return tx.Put("bench.expiry", id, nil)
				})
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	}, func(b *testing.B) {
		for b.Loop() {
			i++
			res, err := e.svc.Authenticate(ctx, tenantA, oauthflow.AuthRequest{UserID: fmt.Sprint("user", i), Provider: "fake", Scopes: []string{"repo"}})
			if err != nil || res.Status != oauthflow.StatusPending {
				b.Fatal(res.Status, err)
			}
		}
	})
}
