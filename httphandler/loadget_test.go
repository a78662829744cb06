package httphandler_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storebolt"
	"github.com/deployplane/deployplane/storemem"
)

// TestGetLoad measures GET /v2/deployments/{id} over real TCP from a load
// generator in a separate process, against a bare net/http handler
// writing the same bytes and headers, in interleaved slices. It runs only
// with DEPLOYPLANE_BENCH_LOAD=1 (BENCHMARKS.md, "GET latency over HTTP").
//
// This process serves, for each store, the API and the bare handler, each
// on its own loopback listener and http.Server with the same settings.
// The API runs over a ControlPlane with getLoadDeployments deployments,
// authenticates an API key of a KeyTable, writes the request log as
// cmd/deployplane has it (NewLogHandler's JSON lines, formatted, into
// io.Discard), takes a token of a rate limit with every request (one that
// refuses none) and a place of the in-flight cap (its default, the whole
// of it open to the one tenant, so that the generator's connections fit).
// The bare handler answers each path with the very body and headers the
// API answered it (Date aside, which net/http writes for both).
//
// It then starts this test binary again as the generator
// (getLoadTargetEnv set), which opens getLoadConns keep-alive connections
// to each server, each a loop of one request and its whole answer (no
// pipelining; the paths in turn, each connection from its own), every
// answer checked to be a 200 with a body. The generator loads one server
// at a time, in slices: a round is getLoadSlices slices of each server,
// alternating, the bare handler first in odd rounds and the API first in
// even ones, after a warm-up of each. The ratio of a round is the API's
// requests a second over the bare handler's. Between slices, while no
// request is open, this process reads its CPU time (user and system), so
// that each round also gives the server's CPU time a request on each
// side, which the load of other processes on the machine moves less than
// the rate.
//
// The generator and the server share the machine's processors; each runs
// with the GOMAXPROCS the Go runtime picks (the number of processors),
// unless DEPLOYPLANE_BENCH_LOAD_CLIENT_PROCS sets the generator's.
//
// Settings: DEPLOYPLANE_BENCH_LOAD_ROUNDS (default 5),
// DEPLOYPLANE_BENCH_LOAD_SLICE (a slice's duration, default 300ms),
// DEPLOYPLANE_BENCH_LOAD_STORES (default "storemem,storebolt"),
// DEPLOYPLANE_BENCH_LOAD_CPUPROFILE (a directory: a CPU profile of this
// process for each store, <store>.pprof, whose samples are labelled
// side=api or side=bare: go tool pprof -tagfocus side=api).
func TestGetLoad(t *testing.T) {
	if os.Getenv(getLoadTargetEnv) != "" {
		generateGetLoad(t)
		return
	}
	if os.Getenv("DEPLOYPLANE_BENCH_LOAD") != "1" {
		t.Skip("set DEPLOYPLANE_BENCH_LOAD=1 to run the GET load measurement")
	}
	rounds := envInt(t, "DEPLOYPLANE_BENCH_LOAD_ROUNDS", 5)
	slice := 300 * time.Millisecond
	if v := os.Getenv("DEPLOYPLANE_BENCH_LOAD_SLICE"); v != "" {
		var err error
		if slice, err = time.ParseDuration(v); err != nil || slice <= 0 {
			t.Fatalf("DEPLOYPLANE_BENCH_LOAD_SLICE=%q: not a duration", v)
		}
	}
	profDir := os.Getenv("DEPLOYPLANE_BENCH_LOAD_CPUPROFILE")
	stores := strings.Split(cmpOr(os.Getenv("DEPLOYPLANE_BENCH_LOAD_STORES"), "storemem,storebolt"), ",")
	for _, name := range stores {
		t.Run(name, func(t *testing.T) {
			var addrs [2]string
			var paths []string
			addrs[getLoadAPI], addrs[getLoadBare], paths = getLoadServers(t, openLoadStore(t, name))
			if profDir != "" {
				if err := os.MkdirAll(profDir, 0o755); err != nil {
					t.Fatal(err)
				}
				stop := startCPUProfile(t, filepath.Join(profDir, name+".pprof"))
				defer stop()
			}
			res := runGetLoad(t, addrs, paths, rounds, slice)
			t.Logf("%-5s %10s %10s %6s %12s %12s %6s", "round", "bare r/s", "api r/s", "x-bare",
				"bare cpu/req", "api cpu/req", "x-bare")
			var ratios, cpuRatios []float64
			for r, sides := range res {
				b, a := sides[getLoadBare], sides[getLoadAPI]
				ratio := a.rate() / b.rate()
				cpuRatio := b.cpuPerReq().Seconds() / a.cpuPerReq().Seconds()
				ratios, cpuRatios = append(ratios, ratio), append(cpuRatios, cpuRatio)
				t.Logf("%-5d %10.0f %10.0f %6.3f %12s %12s %6.3f", r+1, b.rate(), a.rate(), ratio,
					b.cpuPerReq().Round(10*time.Nanosecond), a.cpuPerReq().Round(10*time.Nanosecond), cpuRatio)
			}
			slices.Sort(ratios)
			slices.Sort(cpuRatios)
			t.Logf("%s: x-bare (requests/s) %.3f – %.3f, median %.3f; server CPU a request, bare over api: %.3f – %.3f, median %.3f",
				name, ratios[0], ratios[len(ratios)-1], median(ratios),
				cpuRatios[0], cpuRatios[len(cpuRatios)-1], median(cpuRatios))
		})
	}
}

// The generator's connections to each server, the deployments they read,
// and the slices of each server in a round.
const (
	getLoadConns       = 64
	getLoadDeployments = 100
	getLoadSlices      = 10
)

// The sides of the comparison, as the generator numbers them.
const (
	getLoadAPI  = 0
	getLoadBare = 1
)

var getLoadSideNames = [2]string{"api", "bare"}

// getLoadTargetEnv, set, makes TestGetLoad the generator: the addresses
// of the API and the bare handler, comma-separated. getLoadPathsEnv lists
// the paths, getLoadPlanEnv the rounds and the slice's duration.
const (
	getLoadTargetEnv = "DEPLOYPLANE_BENCH_LOAD_TARGET"
	getLoadPathsEnv  = "DEPLOYPLANE_BENCH_LOAD_PATHS"
	getLoadPlanEnv   = "DEPLOYPLANE_BENCH_LOAD_PLAN"
)

// openLoadStore opens the store named (closed when t ends).
func openLoadStore(t *testing.T, name string) store.Store {
	var st store.Store
	switch name {
	case "storemem":
		st = storemem.New()
	case "storebolt":
		var err error
		st, err = storebolt.Open(filepath.Join(t.TempDir(), "load.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("no store %q (storemem, storebolt)", name)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// getLoadServers starts the API over st and the bare handler, returning
// their addresses and the paths of the deployments.
func getLoadServers(t *testing.T, st store.Store) (real, bare string, paths []string) {
	cp := controlplane.New(st, nil)
	ctx := context.Background()
	for i := range getLoadDeployments {
		d, err := cp.CreateDeployment(ctx, tenantA, &controlplane.CreateDeploymentRequest{
			Name: new(fmt.Sprintf("agent-%03d", i)), Source: new(controlplane.SourceExternalDocker),
			SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("registry.example/agent:1")},
			Secrets:              []controlplane.SecretInput{{Name: "A", Value: new("b")}},
		})
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, "/v2/deployments/"+d.ID)
	}
	api := httphandler.New(cp, &httphandler.Options{
		Authenticator: keyTable(t),
		Logger:        slog.New(httphandler.NewLogHandler(io.Discard, httphandler.LogJSON)),
		Load: &httphandler.LoadLimits{
			// The default cap, every place of it open to the one tenant.
			MaxInFlightPerTenant: getLoadConns,
			// Every request takes a token; none is refused.
			RateLimit: &httphandler.RateLimit{PerSecond: 1e6, Burst: 1e6},
		},
	})
	t.Cleanup(func() { _ = api.Close() })
	real = serveLoopback(t, api, "api")

	// The bare handler answers each path with the API's body and headers.
	type answer struct {
		body   []byte
		header http.Header
	}
	answers := map[string]answer{}
	for _, p := range paths {
		body, h := getOnce(t, real, p)
		h.Del("Date") // net/http writes its own
		answers[p] = answer{body, h}
	}
	bare = serveLoopback(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, ok := answers[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		hd := w.Header()
		for k, v := range a.header {
			hd.Set(k, v[0])
		}
		_, _ = w.Write(a.body)
	}), "bare")
	for _, p := range paths {
		body, h := getOnce(t, bare, p)
		want := answers[p]
		if !bytes.Equal(body, want.body) || len(h) != len(want.header)+1 {
			t.Fatalf("the bare handler answers %v %s, the API %v %s", h, body, want.header, want.body)
		}
		for k := range want.header {
			if h.Get(k) == "" {
				t.Fatalf("the bare handler's answer has no %s", k)
			}
		}
	}
	return real, bare, paths
}

// serveLoopback serves h on a loopback TCP port until t ends, with the
// timeouts and header limit of cmd/deployplane's API port, and returns its
// address. Its goroutines, and those they start, carry the profiler label
// side=side.
func serveLoopback(t *testing.T, h http.Handler, side string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 60 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 120 * time.Second, MaxHeaderBytes: 1 << 20}
	go pprof.Do(context.Background(), pprof.Labels("side", side), func(context.Context) { _ = srv.Serve(ln) })
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// getOnce GETs path from addr with key A; the answer must be a 200.
func getOnce(t *testing.T, addr, path string) ([]byte, http.Header) {
	req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
	req.Header.Set("X-Api-Key", keyA)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s %v", path, resp.StatusCode, body, err)
	}
	return body, resp.Header
}

// getLoadResult is what the generator counted on one side over a round,
// and the server's CPU time meanwhile.
type getLoadResult struct {
	requests int64
	elapsed  time.Duration
	cpu      time.Duration // this process's, user and system
}

func (r getLoadResult) rate() float64 { return float64(r.requests) / r.elapsed.Seconds() }

func (r getLoadResult) cpuPerReq() time.Duration {
	return time.Duration(float64(r.cpu) / float64(r.requests))
}

// runGetLoad runs the generator against the servers at addrs and returns
// what it counted in each round on each side. The generator says "begin"
// before each slice and "end <side> <round> <answers> <seconds>
// <failures>" after it, and waits for a line on its standard input after
// each: this process reads its CPU time while no request is open.
func runGetLoad(t *testing.T, addrs [2]string, paths []string, rounds int, slice time.Duration) [][2]getLoadResult {
	cmd := exec.Command(os.Args[0], "-test.run=^TestGetLoad$", "-test.count=1")
	cmd.Env = append(os.Environ(), getLoadTargetEnv+"="+addrs[0]+","+addrs[1],
		getLoadPathsEnv+"="+strings.Join(paths, ","), fmt.Sprintf("%s=%d,%s", getLoadPlanEnv, rounds, slice))
	if procs := os.Getenv("DEPLOYPLANE_BENCH_LOAD_CLIENT_PROCS"); procs != "" {
		cmd.Env = append(cmd.Env, "GOMAXPROCS="+procs)
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	res := make([][2]getLoadResult, rounds)
	var cpu0 time.Duration
	sc := bufio.NewScanner(out)
	ack := func() {
		if _, err := io.WriteString(in, "\n"); err != nil {
			t.Fatal(err)
		}
	}
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "loadgen begin":
			cpu0 = processCPU(t)
			ack()
		case strings.HasPrefix(line, "loadgen end "):
			cpu := processCPU(t) - cpu0
			var side, round int
			var n, failed int64
			var secs float64
			if _, err := fmt.Sscanf(line, "loadgen end %d %d %d %g %d", &side, &round, &n, &secs, &failed); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			if failed > 0 {
				t.Errorf("%s: %d requests failed", getLoadSideNames[side], failed)
			}
			if round >= 0 { // -1: the warm-up
				r := &res[round][side]
				r.requests += n
				r.elapsed += time.Duration(secs * float64(time.Second))
				r.cpu += cpu
			}
			ack()
		case strings.HasPrefix(line, "loadgen") || strings.HasPrefix(line, "---") || strings.HasPrefix(line, "FAIL"):
			t.Log(line)
		}
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the generator: %v", err)
	}
	for r := range res {
		for side := range 2 {
			if res[r][side].requests == 0 {
				t.Fatalf("round %d: no answer from %s", r+1, getLoadSideNames[side])
			}
		}
	}
	return res
}

// startCPUProfile writes a CPU profile of this process to path until the
// function it returns is called.
func startCPUProfile(t *testing.T, path string) func() {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}
}

// processCPU is this process's CPU time, user and system.
func processCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// generateGetLoad is the generator process (runGetLoad).
func generateGetLoad(t *testing.T) {
	addrs := strings.Split(os.Getenv(getLoadTargetEnv), ",")
	paths := strings.Split(os.Getenv(getLoadPathsEnv), ",")
	var rounds int
	var sliceText string
	if _, err := fmt.Sscanf(strings.Replace(os.Getenv(getLoadPlanEnv), ",", " ", 1), "%d %s", &rounds, &sliceText); err != nil {
		t.Fatal(err)
	}
	slice, err := time.ParseDuration(sliceText)
	if err != nil {
		t.Fatal(err)
	}
	var sides [2]*loadSide
	for i, addr := range addrs {
		sides[i] = dialLoadSide(t, addr, paths)
		defer sides[i].close()
	}
	stdin := bufio.NewReader(os.Stdin)
	run := func(side, round int, d time.Duration) {
		fmt.Println("loadgen begin")
		if _, err := stdin.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		n, elapsed, failed := sides[side].run(d)
		fmt.Printf("loadgen end %d %d %d %g %d\n", side, round, n, elapsed.Seconds(), failed)
		if _, err := stdin.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	run(getLoadBare, -1, getLoadWarmup)
	run(getLoadAPI, -1, getLoadWarmup)
	for r := range rounds {
		for k := range 2 * getLoadSlices {
			side := (r + k + 1) % 2 // the bare handler (1) first in even-numbered (0-based) rounds
			run(side, r, slice)
		}
	}
}

// getLoadWarmup is how long the generator loads each server before it
// counts.
const getLoadWarmup = time.Second

// loadSide is the generator's connections to one server.
type loadSide struct {
	reqs  [][]byte
	conns []*loadConn
}

type loadConn struct {
	c    net.Conn
	br   *bufio.Reader
	next int // the index of the next path
}

func dialLoadSide(t *testing.T, addr string, paths []string) *loadSide {
	s := &loadSide{}
	for _, p := range paths {
		s.reqs = append(s.reqs, []byte("GET "+p+" HTTP/1.1\r\nHost: "+addr+"\r\nUser-Agent: loadgen\r\nX-Api-Key: "+
			keyA+"\r\n\r\n"))
	}
	for i := range getLoadConns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		s.conns = append(s.conns, &loadConn{c: c, br: bufio.NewReaderSize(c, 16<<10), next: i})
	}
	return s
}

func (s *loadSide) close() {
	for _, c := range s.conns {
		_ = c.c.Close()
	}
}

// run sends requests on every connection for d, then waits for the
// answers of those sent, and returns the answers, the time from the
// first request to the last answer, and the requests that failed (a
// failed connection sends no more).
func (s *loadSide) run(d time.Duration) (answers int64, elapsed time.Duration, failed int64) {
	var n, bad atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	start := time.Now()
	for _, c := range s.conns {
		wg.Go(func() {
			for !stop.Load() {
				if _, err := c.c.Write(s.reqs[c.next%len(s.reqs)]); err != nil {
					bad.Add(1)
					fmt.Printf("loadgen error: %v\n", err)
					return
				}
				c.next++
				if err := readAnswer(c.br); err != nil {
					bad.Add(1)
					fmt.Printf("loadgen error: %v\n", err)
					return
				}
				n.Add(1)
			}
		})
	}
	time.Sleep(d)
	stop.Store(true)
	wg.Wait()
	return n.Load(), time.Since(start), bad.Load()
}

// readAnswer reads one HTTP/1.1 answer from br: a 200 with a
// Content-Length, and its body.
func readAnswer(br *bufio.Reader) error {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(line, []byte("HTTP/1.1 200 ")) {
		return fmt.Errorf("answer %q", bytes.TrimSpace(line))
	}
	n := -1
	for {
		line, err = br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(line) <= 2 {
			break
		}
		if v, ok := bytes.CutPrefix(line, []byte("Content-Length: ")); ok {
			n, err = strconv.Atoi(string(bytes.TrimSpace(v)))
			if err != nil {
				return err
			}
		}
	}
	if n <= 0 {
		return errors.New("an answer without a body")
	}
	_, err = br.Discard(n)
	return err
}

// envInt is the integer of the environment variable name, def when unset.
func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: not a positive integer", name, v)
	}
	return n
}

// median of sorted xs.
func median(xs []float64) float64 {
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}
