package httphandler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/internal/benchcmp"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storebolt"
	"github.com/deployplane/deployplane/storemem"
)

func benchStores() []struct {
	name string
	open func(b *testing.B) store.Store
} {
	return []struct {
		name string
		open func(b *testing.B) store.Store
	}{
		{"storemem", func(*testing.B) store.Store { return storemem.New() }},
		{"storebolt", func(b *testing.B) store.Store {
			st, err := storebolt.Open(filepath.Join(b.TempDir(), "bench.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			return st
		}},
	}
}

func benchServer(b *testing.B, h http.Handler) (*httptest.Server, *http.Client) {
	srv := httptest.NewServer(h)
	b.Cleanup(srv.Close)
	tr := &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}
	b.Cleanup(tr.CloseIdleConnections)
	return srv, &http.Client{Transport: tr}
}

// get sends one GET with key A and reads the whole answer.
func get(b *testing.B, c *http.Client, url string) {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("X-Api-Key", keyA)
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		b.Fatalf("status %d", resp.StatusCode)
	}
}

// BenchmarkGetDeployment: GET /v2/deployments/{id} through the handler
// (authentication, routing, a store read, decoding the record, encoding the
// answer) against a bare net/http handler that writes a JSON body of the same
// size, over the same kind of connection. Goals: 0.8x over storemem, 0.6x
// over storebolt.
func BenchmarkGetDeployment(b *testing.B) {
	for _, sb := range benchStores() {
		b.Run(sb.name, func(b *testing.B) {
			st := sb.open(b)
			b.Cleanup(func() { _ = st.Close() })
			cp := controlplane.New(st, nil)
			d, err := cp.CreateDeployment(context.Background(), tenantA, &controlplane.CreateDeploymentRequest{
				Name: new("agent"), Source: new(controlplane.SourceExternalDocker),
				SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("registry.example/agent:1")},
				Secrets:              []controlplane.Secret{{Name: "A", Value: "b"}},
			})
			if err != nil {
				b.Fatal(err)
			}
			api, client := benchServer(b, httphandler.New(cp, &httphandler.Options{Authenticator: keyTable(b)}))
			url := api.URL + "/v2/deployments/" + d.ID
			// The bare handler writes the very body the API answers.
			req, _ := http.NewRequest("GET", url, nil)
			req.Header.Set("X-Api-Key", keyA)
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			bare, bareClient := benchServer(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Content-Length", strconv.Itoa(len(body)))
				_, _ = w.Write(body)
			}))
			b.ReportMetric(float64(len(body)), "body-bytes")
			benchcmp.CompareNamed(b,
				"bare", func(b *testing.B) {
					for b.Loop() {
						get(b, bareClient, bare.URL+"/v2/deployments/"+d.ID)
					}
				},
				"httphandler", func(b *testing.B) {
					for b.Loop() {
						get(b, client, url)
					}
				})
		})
	}
}

// BenchmarkCreateParallel: POST /v2/deployments from 64 concurrent clients,
// over storebolt (durable, group commit) against the same over storemem.
// Goal: 0.4x.
func BenchmarkCreateParallel(b *testing.B) {
	run := func(open func(b *testing.B) store.Store) func(b *testing.B) {
		return func(b *testing.B) {
			st := open(b)
			b.Cleanup(func() { _ = st.Close() })
			srv, client := benchServer(b, httphandler.New(controlplane.New(st, nil), &httphandler.Options{Authenticator: keyTable(b)}))
			var n atomic.Int64
			b.SetParallelism((64 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					body := dockerBody(fmt.Sprintf("agent-%d", n.Add(1)))
					req, _ := http.NewRequest("POST", srv.URL+"/v2/deployments", strings.NewReader(body))
					req.Header.Set("X-Api-Key", keyA)
					resp, err := client.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 201 {
						b.Errorf("status %d", resp.StatusCode)
						return
					}
				}
			})
		}
	}
	stores := benchStores()
	benchcmp.CompareNamed(b, stores[0].name, run(stores[0].open), stores[1].name, run(stores[1].open))
}

// BenchmarkGetDeploymentInProcess: the handler's own cost, without a
// network. Baseline: the ControlPlane call and encoding/json of its result,
// the work no HTTP layer can avoid; candidate: ServeHTTP on a recorder
// (authentication, routing, path parsing, the same call and encoding).
func BenchmarkGetDeploymentInProcess(b *testing.B) {
	cp := controlplane.New(storemem.New(), nil)
	ctx := context.Background()
	d, err := cp.CreateDeployment(ctx, tenantA, &controlplane.CreateDeploymentRequest{
		Name: new("agent"), Source: new(controlplane.SourceExternalDocker),
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("registry.example/agent:1")},
	})
	if err != nil {
		b.Fatal(err)
	}
	h := httphandler.New(cp, &httphandler.Options{Authenticator: keyTable(b)})
	req := httptest.NewRequest("GET", "/v2/deployments/"+d.ID, nil)
	req.Header.Set("X-Api-Key", keyA)
	benchcmp.CompareNamed(b,
		"controlplane+json", func(b *testing.B) {
			for b.Loop() {
				got, err := cp.GetDeployment(ctx, tenantA, d.ID)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := json.Marshal(got); err != nil {
					b.Fatal(err)
				}
			}
		},
		"httphandler", func(b *testing.B) {
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != 200 {
					b.Fatal(w.Code)
				}
			}
		})
}
