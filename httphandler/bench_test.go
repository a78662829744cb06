package httphandler_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/internal/benchcmp"
	"github.com/deployplane/deployplane/internal/pgtest"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storebolt"
	"github.com/deployplane/deployplane/storemem"
)

// benchStore is a store a benchmark runs over.
type benchStore struct {
	name string
	open func(b *testing.B) store.Store
}

func benchStores() []benchStore {
	sbs := []benchStore{
		{"storemem", func(*testing.B) store.Store { return storemem.New() }},
		{"storebolt", func(b *testing.B) store.Store {
			st, err := storebolt.Open(filepath.Join(b.TempDir(), "bench.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			return st
		}},
	}
	if os.Getenv(pgtest.DSNVar) != "" {
		sbs = append(sbs, benchStore{"storepg", openPGBench}) // pg_bench_test.go
	}
	return sbs
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

// benchDeployment opens sb's store (closed when b ends) and creates the one
// deployment the GET benchmarks read.
func benchDeployment(b *testing.B, sb benchStore) (*controlplane.ControlPlane, *controlplane.Deployment) {
	b.Helper()
	st := sb.open(b)
	b.Cleanup(func() { _ = st.Close() })
	cp := controlplane.New(st, nil)
	d, err := cp.CreateDeployment(context.Background(), tenantA, &controlplane.CreateDeploymentRequest{
		Name: new("agent"), Source: new(controlplane.SourceExternalDocker),
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("registry.example/agent:1")},
		Secrets:              []controlplane.SecretInput{{Name: "A", Value: new("b")}},
	})
	if err != nil {
		b.Fatal(err)
	}
	return cp, d
}

// BenchmarkGetDeployment: GET /v2/deployments/{id} through the handler
// (authentication, routing, a store read of the stored wire JSON, the
// answer) against a bare net/http handler that writes the same body with
// the same Content-Type and Content-Length, over the same kind of
// connection, in alternating rounds (benchcmp.Interleave). Goals: 0.8x over
// storemem, 0.6x over storebolt.
func BenchmarkGetDeployment(b *testing.B) {
	for _, sb := range benchStores() {
		b.Run(sb.name, func(b *testing.B) {
			cp, d := benchDeployment(b, sb)
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
			bareURL := bare.URL + "/v2/deployments/" + d.ID
			get(b, bareClient, bareURL) // open the connection
			b.ReportMetric(float64(len(body)), "body-bytes")
			benchcmp.Interleave(b,
				func(n int) {
					for range n {
						get(b, bareClient, bareURL)
					}
				},
				func(n int) {
					for range n {
						get(b, client, url)
					}
				})
		})
	}
}

// createClients is the number of concurrent clients of
// BenchmarkCreateParallel.
const createClients = 64

// creator returns a function that sends n POST /v2/deployments, spread over
// createClients concurrent clients, to a handler over a store of open.
func creator(b *testing.B, open func(b *testing.B) store.Store) func(n int) {
	st := open(b)
	b.Cleanup(func() { _ = st.Close() })
	srv, client := benchServer(b, httphandler.New(controlplane.New(st, nil), &httphandler.Options{Authenticator: keyTable(b)}))
	var names atomic.Int64
	return func(n int) {
		var left atomic.Int64
		left.Store(int64(n))
		var wg sync.WaitGroup
		for range createClients {
			wg.Go(func() {
				for left.Add(-1) >= 0 {
					body := dockerBody(fmt.Sprintf("agent-%d", names.Add(1)))
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
		wg.Wait()
	}
}

// BenchmarkCreateParallel: POST /v2/deployments from 64 concurrent clients,
// over storebolt (durable, group commit) against the same over storemem,
// in alternating rounds (benchcmp.Interleave). Goal: 0.4x.
func BenchmarkCreateParallel(b *testing.B) {
	stores := benchStores()
	mem, bolt := creator(b, stores[0].open), creator(b, stores[1].open)
	mem(createClients) // open the connections
	bolt(createClients)
	benchcmp.Interleave(b, mem, bolt)
}

// BenchmarkGetDeploymentInProcess: the handler's own cost, without a
// network. Baseline: ControlPlane.GetDeploymentJSON, the work no HTTP layer
// can avoid (a store read of the wire JSON); candidate: ServeHTTP on a
// recorder (authentication, routing, path parsing, the same call, headers,
// the write).
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
		"GetDeploymentJSON", func(b *testing.B) {
			for b.Loop() {
				if _, err := cp.GetDeploymentJSON(ctx, tenantA, d.ID); err != nil {
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

// getClients is the number of concurrent keep-alive connections of
// BenchmarkGetDeploymentParallel.
const getClients = 64

// getter returns a function that sends n GETs of url with key A, spread
// over getClients goroutines, each with a keep-alive connection of its own.
func getter(b *testing.B, url string) func(n int) {
	return spread(b, getClients, func(_ int, c *http.Client) { get(b, c, url) })
}

// spread returns a function that makes n calls of do, spread over clients
// goroutines, goroutine i passing do its index and an http.Client with a
// keep-alive connection of its own.
func spread(b *testing.B, clients int, do func(i int, c *http.Client)) func(n int) {
	cs := make([]*http.Client, clients)
	for i := range cs {
		tr := &http.Transport{MaxIdleConnsPerHost: 1}
		b.Cleanup(tr.CloseIdleConnections)
		cs[i] = &http.Client{Transport: tr}
	}
	return func(n int) {
		var left atomic.Int64
		left.Store(int64(n))
		var wg sync.WaitGroup
		for i, c := range cs {
			wg.Go(func() {
				for left.Add(-1) >= 0 {
					do(i, c)
				}
			})
		}
		wg.Wait()
	}
}

// BenchmarkGetDeploymentParallel: GET /v2/deployments/{id} from 64
// concurrent keep-alive connections, with the request log on as
// cmd/deployplane has it (NewLogHandler's JSON lines into io.Discard: every
// record is formatted), in alternating rounds (benchcmp.Interleave)
// against:
//
//   - vs-bare: a bare net/http handler writing the same body, the same
//     headers. Client and servers share this process (its scheduler,
//     heap and collector), which flatters the ratio: TestGetLoad measures
//     the same from a generator in another process, the figure the goals
//     (0.85x over storemem, 0.8x over storebolt) are of.
//   - log-cost: the same server with the request log off (no Logger).
//     Goal: 0.95x, the log costs at most 5% of a GET.
//   - slog-log-cost: the server off against one whose Logger is an
//     embedder's slog.NewJSONHandler (each record handed to it as a
//     slog.Record). No goal: what an embedder's own handler costs.
//
// BenchmarkGetDeployment sends one request at a time, which hides what
// contends under concurrency.
func BenchmarkGetDeploymentParallel(b *testing.B) {
	for _, sb := range benchStores() {
		b.Run(sb.name, func(b *testing.B) {
			cp, d := benchDeployment(b, sb)
			path := "/v2/deployments/" + d.ID
			logged := httphandler.New(cp, &httphandler.Options{Authenticator: keyTable(b),
				Logger: slog.New(httphandler.NewLogHandler(io.Discard, httphandler.LogJSON))})
			b.Cleanup(func() { _ = logged.Close() })
			api, client := benchServer(b, logged)
			quiet, _ := benchServer(b, httphandler.New(cp, &httphandler.Options{Authenticator: keyTable(b)}))
			slogged := httphandler.New(cp, &httphandler.Options{Authenticator: keyTable(b),
				Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
			b.Cleanup(func() { _ = slogged.Close() })
			withSlog, _ := benchServer(b, slogged)
			// The bare handler writes the very body the API answers.
			req, _ := http.NewRequest("GET", api.URL+path, nil)
			req.Header.Set("X-Api-Key", keyA)
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			bare, _ := benchServer(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Content-Length", strconv.Itoa(len(body)))
				_, _ = w.Write(body)
			}))
			getBare, getLogged, getQuiet := getter(b, bare.URL+path), getter(b, api.URL+path), getter(b, quiet.URL+path)
			getSlog := getter(b, withSlog.URL+path)
			b.Run("vs-bare", func(b *testing.B) {
				getBare(getClients) // open the connections
				getLogged(getClients)
				b.ReportMetric(float64(len(body)), "body-bytes")
				benchcmp.Interleave(b, getBare, getLogged)
			})
			b.Run("log-cost", func(b *testing.B) {
				getQuiet(getClients)
				getLogged(getClients)
				benchcmp.Interleave(b, getQuiet, getLogged)
			})
			b.Run("slog-log-cost", func(b *testing.B) {
				getQuiet(getClients)
				getSlog(getClients)
				benchcmp.Interleave(b, getQuiet, getSlog)
			})
		})
	}
}
