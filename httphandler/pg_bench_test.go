package httphandler_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/internal/benchcmp"
	"github.com/deployplane/deployplane/internal/pgtest"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storepg"
)

// pgBenchSchema returns the DSN and a new schema name, dropped when the
// benchmark ends (after the stores, whose Close cleanups run first).
func pgBenchSchema(b *testing.B) (dsn, schema string) {
	b.Helper()
	dsn = pgtest.DSN(b)
	return dsn, pgtest.Schema(b, dsn, "httphandler_bench_")
}

// pgConns is the pool size of each storepg Store of the GET benchmarks.
const pgConns = 16

// defaultPGConns is the size of pgxpool's default pool, which the create
// benchmark's Stores have: the larger of 4 and the number of CPUs.
func defaultPGConns() int { return max(4, runtime.NumCPU()) }

// openPGBench opens a storepg Store over a new schema (benchStores).
func openPGBench(b *testing.B) store.Store {
	dsn, schema := pgBenchSchema(b)
	st, err := storepg.Open(context.Background(), dsn, &storepg.Options{Schema: schema, MaxConns: pgConns})
	if err != nil {
		b.Fatal(err)
	}
	return st
}

// post sends one POST of body with key A and reads the whole answer,
// which must be a 201.
func post(c *http.Client, url, body string) error {
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("X-Api-Key", keyA)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 201 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// posters returns a function that sends n POSTs, spread over createClients
// goroutines, client i to urls[i%len(urls)] over a keep-alive connection
// of its own, with the body of next(); it counts the failures.
func posters(b *testing.B, urls []string, next func() string, failed *atomic.Int64) func(n int) {
	return spread(b, createClients, func(i int, c *http.Client) {
		if err := post(c, urls[i%len(urls)]+"/v2/deployments", next()); err != nil {
			if failed.Add(1) == 1 {
				b.Errorf("POST: %v", err)
			}
		}
	})
}

// BenchmarkPGCreateReplicasHTTP: POST /v2/deployments into one tenant from
// 64 concurrent clients (each a keep-alive connection of its own), half to
// each of two httphandler servers, each over its own ControlPlane and
// storepg Store (pgxpool's default pool, defaultPGConns) on one schema: two replicas over one
// database. Baseline, in alternating rounds (benchcmp.Interleave): a bare
// net/http handler that reads the body and INSERTs as many bytes as a
// create stores, in one autocommitted statement through a pgxpool of as
// many connections as both replicas have, and answers 201 with a body as
// long as the create's answer. It reports creates/s and fails if any
// create fails.
func BenchmarkPGCreateReplicasHTTP(b *testing.B) {
	dsn, schema := pgBenchSchema(b)
	var urls []string
	for range 2 {
		st, err := storepg.Open(context.Background(), dsn, &storepg.Options{Schema: schema})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		srv, _ := benchServer(b, httphandler.New(controlplane.New(st, nil), &httphandler.Options{Authenticator: keyTable(b)}))
		urls = append(urls, srv.URL)
	}
	var names atomic.Int64
	body := func() string { return dockerBody(fmt.Sprintf("agent-%d", names.Add(1))) }
	var failed atomic.Int64
	create := posters(b, urls, body, &failed)
	// Warm up (the connections, the tenant's prefix), then measure what a
	// create stores and answers.
	const warm = 256
	create(warm)
	if failed.Load() > 0 {
		b.Fatalf("%d of %d warm-up creates failed", failed.Load(), warm)
	}
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	var stored int64
	if err := pool.QueryRow(context.Background(), `SELECT sum(length(key) + length(value)) FROM `+
		pgx.Identifier{schema, "records"}.Sanitize()+` WHERE collection <> 'cp_tenants'`).Scan(&stored); err != nil {
		b.Fatal(err)
	}
	size := int(stored / warm)
	answer := strings.Repeat("x", 1500)
	bare := pgBareInsert(b, dsn, size, answer)
	var bareFailed atomic.Int64
	insert := posters(b, []string{bare}, body, &bareFailed)
	insert(createClients)
	var spent time.Duration
	benchcmp.Interleave(b, insert, func(n int) {
		start := time.Now()
		create(n)
		spent += time.Since(start)
	})
	if f := failed.Load() + bareFailed.Load(); f > 0 {
		b.Fatalf("%d requests failed", f)
	}
	b.ReportMetric(float64(size), "bytes/create")
	b.ReportMetric(float64(b.N)/spent.Seconds(), "creates/s")
}

// pgBareInsert serves the baseline of BenchmarkPGCreateReplicasHTTP: a
// handler that INSERTs size bytes per request into a table of its own and
// answers 201 with answer.
func pgBareInsert(b *testing.B, dsn string, size int, answer string) string {
	b.Helper()
	ins := pgtest.NewInserts(b, dsn, 2*defaultPGConns(), size)
	srv, _ := benchServer(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if err := ins.Insert(r.Context()); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(201)
		_, _ = io.WriteString(w, answer)
	}))
	return srv.URL
}
