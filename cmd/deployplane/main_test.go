package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storebolt"
)

// listeningRE finds the server's address in its "listening" record, in
// the text format or (-log-format json) the JSON one.
var listeningRE = regexp.MustCompile(`(?:msg=listening addr=|"msg":"listening","addr":")(http://[^\s"]+)`)

// watcher is an io.Writer that keeps everything written and reports the
// address of the "listening" record.
type watcher struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	addr  chan string
	sent  bool
	wrote chan struct{} // closed (and replaced) at each Write
}

func newWatcher() *watcher { return &watcher{addr: make(chan string, 1), wrote: make(chan struct{})} }

func (w *watcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.sent { // not after: a long-running process writes much
		if m := listeningRE.FindSubmatch(w.buf.Bytes()); m != nil {
			w.sent = true
			w.addr <- string(m[1])
		}
	}
	close(w.wrote)
	w.wrote = make(chan struct{})
	return len(p), nil
}

// await waits until what was written matches re and returns the match and
// its submatches; it fails the test shortly before the test's deadline.
func (w *watcher) await(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	for {
		w.mu.Lock()
		m, wrote := re.FindStringSubmatch(w.buf.String()), w.wrote
		w.mu.Unlock()
		if m != nil {
			return m
		}
		select {
		case <-wrote:
		case <-nearDeadline(t):
			t.Fatalf("nothing matched %s:\n%s", re, w.String())
		}
	}
}

// nearDeadline is ready shortly before the test binary's -timeout, so that
// a wait that would never end fails with what the server said rather than
// with the timeout's panic; without a deadline it is never ready. Waits in
// these tests are bounded by this only: never by a guess at how long a step
// takes on a loaded machine.
func nearDeadline(t *testing.T) <-chan time.Time {
	d, ok := t.Deadline()
	if !ok {
		return nil
	}
	return time.After(time.Until(d) * 9 / 10)
}

func (w *watcher) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func (w *watcher) wait(t *testing.T) string {
	t.Helper()
	select {
	case a := <-w.addr:
		return a
	case <-nearDeadline(t):
		t.Fatalf("the server did not start:\n%s", w.String())
		return ""
	}
}

// call sends a request with a key and decodes the JSON answer.
func call(t *testing.T, method, url, key, body string, headers ...string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("X-Api-Key", key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v map[string]any
	b, _ := io.ReadAll(resp.Body)
	if len(b) > 0 {
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s %s: %v: %s", method, url, err, b)
		}
	}
	return resp.StatusCode, v
}

const dockerBody = `{"name": "agent", "source": "external_docker", "source_revision_config": {"image_uri": "registry.example/agent:1"},
	"secrets": [{"name": "TOKEN", "value": "secret-value-in-a-body"}]}`

var keyRE = regexp.MustCompile(`(?m)^    (dp_[A-Za-z0-9_-]{43})$`)

// The command is built once per test process: go test -count=N runs the
// tests that need it N times, and linking it is most of their time on a
// loaded machine. TestMain removes it.
var (
	binDir   string // made by TestMain
	buildBin = sync.OnceValues(func() (string, error) {
		bin := filepath.Join(binDir, "deployplane")
		if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build: %w\n%s", err, out)
		}
		return bin, nil
	})
)

// binary returns the built command.
func binary(t *testing.T) string {
	t.Helper()
	bin, err := buildBin()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "deployplane-cmd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// TestBinaryRestart builds the command, starts it on a free port over a
// fresh database, creates a deployment with the key it generates, stops it
// with SIGTERM, starts it again and reads the deployment back with the same
// key (which is not printed a second time).
func TestBinaryRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}
	bin := binary(t)
	db := filepath.Join(t.TempDir(), "deployplane.db")
	start := func() (*exec.Cmd, *watcher, *watcher, string) {
		cmd := exec.Command(bin, "-addr", "127.0.0.1:0", "-db", db)
		cmd.Env = append(os.Environ(), "DEPLOYPLANE_API_KEY=") // no key configured
		stderr, stdout := newWatcher(), newWatcher()
		cmd.Stderr, cmd.Stdout = stderr, stdout
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		return cmd, stderr, stdout, stderr.wait(t)
	}
	stop := func(cmd *exec.Cmd, stderr *watcher) {
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr.String())
			}
		case <-nearDeadline(t):
			t.Fatalf("no exit after SIGTERM:\n%s", stderr.String())
		}
		if !strings.Contains(stderr.String(), "msg=stopped") {
			t.Errorf("no clean stop in the log:\n%s", stderr.String())
		}
	}

	cmd, stderr, stdout, url := start()
	key := stdout.await(t, keyRE)[1] // stdout is copied by another goroutine than stderr
	status, d := call(t, "POST", url+"/v2/deployments", key, dockerBody)
	if status != 201 {
		t.Fatalf("create: %d %v", status, d)
	}
	// The simulated deployer runs by default, at its default pace: the
	// quick start's polling reaches DEPLOYED, and the deployment is READY.
	waitStatus(t, url, key, d["id"].(string), d["latest_revision_id"].(string), "DEPLOYED")
	status, d = call(t, "GET", url+"/v2/deployments/"+d["id"].(string), key, "")
	if status != 200 || d["status"] != "READY" || d["active_revision_id"] != d["latest_revision_id"] {
		t.Fatalf("the deployment once its revision is DEPLOYED: %d %v", status, d)
	}
	// A second one is in flight at SIGTERM; the next start resumes it.
	status, inFlight := call(t, "POST", url+"/v2/deployments", key, strings.Replace(dockerBody, `"agent"`, `"agent-2"`, 1))
	if status != 201 {
		t.Fatalf("create: %d %v", status, inFlight)
	}
	if status, _ := call(t, "GET", url+"/v2/deployments", "wrong", ""); status != 401 {
		t.Errorf("a wrong key: %d", status)
	}
	if status, _ := call(t, "GET", url+"/openapi.json", "", ""); status != 200 {
		t.Errorf("openapi.json: %d", status)
	}
	stop(cmd, stderr)
	logs := stderr.String()
	for _, secret := range []string{key, "secret-value-in-a-body"} {
		if strings.Contains(logs, secret) {
			t.Errorf("the log holds %q:\n%s", secret, logs)
		}
	}
	if !strings.Contains(logs, "msg=request method=POST path=/v2/deployments status=201") {
		t.Errorf("no request record for the create:\n%s", logs)
	}

	cmd, stderr, stdout, url = start()
	status, got := call(t, "GET", url+"/v2/deployments/"+d["id"].(string), key, "")
	if status != 200 {
		t.Fatalf("GET after restart: %d %v", status, got)
	}
	if diff := cmp.Diff(d, got); diff != "" {
		t.Errorf("deployment after restart (-before +after):\n%s", diff)
	}
	waitStatus(t, url, key, inFlight["id"].(string), inFlight["latest_revision_id"].(string), "DEPLOYED")
	stop(cmd, stderr) // Wait has copied all of stdout
	if s := stdout.String(); keyRE.MatchString(s) || strings.Contains(s, key) {
		t.Errorf("a key was printed again at the second start:\n%s", s)
	}
}

// waitStatus polls a revision, as the quick start does, until it is
// terminal, and checks that it ended in want.
func waitStatus(t *testing.T, url, key, deploymentID, revisionID, want string) {
	t.Helper()
	terminal := map[string]bool{"DEPLOYED": true, "SKIPPED": true, "INTERRUPTED": true,
		"CREATE_FAILED": true, "BUILD_FAILED": true, "DEPLOY_FAILED": true}
	var rev map[string]any
	deadline := nearDeadline(t)
	for {
		var status int
		status, rev = call(t, "GET", url+"/v2/deployments/"+deploymentID+"/revisions/"+revisionID, key, "")
		if status != 200 {
			t.Fatalf("GET revision: %d %v", status, rev)
		}
		if s, _ := rev["status"].(string); terminal[s] {
			if s != want {
				t.Fatalf("revision %s ended %s, want %s: %v", revisionID, s, want, rev)
			}
			return
		}
		select {
		case <-time.After(50 * time.Millisecond): // a client's polling interval
		case <-deadline:
			t.Fatalf("revision %s not terminal at the test's deadline: %v", revisionID, rev)
		}
	}
}

// TestNewKey: -new-key replaces the generated key; the old one stops
// working and the default tenant stays.
func TestNewKey(t *testing.T) {
	db := filepath.Join(t.TempDir(), "db")
	first := func(args ...string) (string, string, string) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		stdout, stderr := newWatcher(), newWatcher()
		done := make(chan error, 1)
		go func() {
			done <- run(ctx, append([]string{"-addr", "127.0.0.1:0", "-db", db}, args...), func(string) string { return "" }, stdout, stderr)
		}()
		url := stderr.wait(t)
		m := keyRE.FindStringSubmatch(stdout.String())
		tenant := regexp.MustCompile(`default_tenant=(\S+)`).FindStringSubmatch(stderr.String())
		if m == nil || tenant == nil {
			t.Fatalf("no key or tenant:\n%s\n%s", stdout, stderr)
		}
		if status, _ := call(t, "GET", url+"/v2/deployments", m[1], ""); status != 200 {
			t.Errorf("the printed key: %d", status)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		return m[1], tenant[1], url
	}
	oldKey, oldTenant, _ := first()
	newKey, newTenant, _ := first("-new-key")
	if newKey == oldKey || newTenant != oldTenant {
		t.Errorf("-new-key: key %s -> %s, tenant %s -> %s", oldKey, newKey, oldTenant, newTenant)
	}
	url, _, _ := server(t, []string{"-db", db}, nil)
	if status, _ := call(t, "GET", url+"/v2/deployments", oldKey, ""); status != 401 {
		t.Errorf("the replaced key: %d", status)
	}
	if status, _ := call(t, "GET", url+"/v2/deployments", newKey, ""); status != 200 {
		t.Errorf("the new key after a restart: %d", status)
	}
	err := run(context.Background(), []string{"-db", ":memory:", "-new-key"}, func(string) string { return "k" }, io.Discard, io.Discard)
	if err == nil {
		t.Error("-new-key with DEPLOYPLANE_API_KEY set was accepted")
	}
}

// server runs the command in-process until the test ends.
func server(t *testing.T, args []string, env map[string]string) (url string, stdout *bytes.Buffer, stderr *watcher) {
	t.Helper()
	url, stdout, stderr, _ = startServer(t, args, env)
	return url, stdout, stderr
}

// startServer runs the command in-process until stop is called or the
// test ends; stop returns once run has.
func startServer(t *testing.T, args []string, env map[string]string) (url string, stdout *bytes.Buffer, stderr *watcher, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr = &bytes.Buffer{}, newWatcher()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"-addr", "127.0.0.1:0"}, args...), func(k string) string { return env[k] }, stdout, stderr)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	select {
	case url = <-stderr.addr:
	case err := <-done:
		once.Do(func() { cancel() }) // run has returned: stop has nothing to wait for
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	return url, stdout, stderr, stop
}

func TestEnvKeyUsesTheDefaultTenant(t *testing.T) {
	db := filepath.Join(t.TempDir(), "db")
	url, stdout, stderr := server(t, []string{"-db", db}, map[string]string{"DEPLOYPLANE_API_KEY": "env-key"})
	if stdout.Len() != 0 {
		t.Errorf("a key was generated although DEPLOYPLANE_API_KEY is set:\n%s", stdout)
	}
	status, d := call(t, "POST", url+"/v2/deployments", "env-key", dockerBody)
	if status != 201 {
		t.Fatalf("create with the env key: %d %v", status, d)
	}
	tenant := regexp.MustCompile(`default_tenant=(\S+)`).FindStringSubmatch(stderr.String())
	if tenant == nil {
		t.Fatalf("no default tenant in the log:\n%s", stderr.String())
	}
	status, _ = call(t, "GET", url+"/v2/deployments/"+d["id"].(string), "env-key", "", "X-Tenant-Id", tenant[1])
	if status != 200 {
		t.Errorf("the env key with its default tenant named: %d", status)
	}
}

func TestKeysFile(t *testing.T) {
	dir := t.TempDir()
	t1, t2 := "0194c0de-0000-7000-8000-000000000001", "0194c0de-0000-7000-8000-000000000002"
	sum := sha256.Sum256([]byte("hashed-key"))
	keys := `[{"key": "plain-key", "tenant_ids": ["` + t1 + `"]},
		{"key_sha256": "` + hex.EncodeToString(sum[:]) + `", "tenant_ids": ["` + t1 + `", "` + t2 + `"]}]`
	path := filepath.Join(dir, "keys.json")
	if err := os.WriteFile(path, []byte(keys), 0o600); err != nil {
		t.Fatal(err)
	}
	url, stdout, _ := server(t, []string{"-db", ":memory:", "-keys", path}, nil)
	if stdout.Len() != 0 {
		t.Errorf("a key was generated although -keys is set:\n%s", stdout)
	}
	if status, _ := call(t, "POST", url+"/v2/deployments", "plain-key", dockerBody); status != 201 {
		t.Errorf("plain key: %d", status)
	}
	status, body := call(t, "GET", url+"/v2/deployments", "hashed-key", "")
	if status != 403 || !strings.Contains(body["detail"].(string), "requires workspace specification") {
		t.Errorf("a key of two tenants without X-Tenant-Id: %d %v", status, body)
	}
	status, body = call(t, "GET", url+"/v2/deployments", "hashed-key", "", "X-Tenant-Id", t1)
	if status != 200 || len(body["resources"].([]any)) != 1 {
		t.Errorf("a key of two tenants naming one: %d %v", status, body)
	}
	status, body = call(t, "GET", url+"/v2/deployments", "hashed-key", "", "X-Tenant-Id", t2)
	if status != 200 || len(body["resources"].([]any)) != 0 {
		t.Errorf("the other tenant: %d %v", status, body)
	}
}

func TestParseKeysRejects(t *testing.T) {
	tenant := `"0194c0de-0000-7000-8000-000000000001"`
	for name, in := range map[string]string{
		"not JSON":           `{`,
		"empty":              `[]`,
		"unknown member":     `[{"key": "k", "tenant_id": [` + tenant + `]}]`,
		"both forms":         `[{"key": "k", "key_sha256": "00", "tenant_ids": [` + tenant + `]}]`,
		"neither form":       `[{"tenant_ids": [` + tenant + `]}]`,
		"empty key":          `[{"key": "", "tenant_ids": [` + tenant + `]}]`,
		"short digest":       `[{"key_sha256": "abcd", "tenant_ids": [` + tenant + `]}]`,
		"no tenants":         `[{"key": "k"}]`,
		"tenant not a UUID":  `[{"key": "k", "tenant_ids": ["acme"]}]`,
		"the same key twice": `[{"key": "k", "tenant_ids": [` + tenant + `]}, {"key": "k", "tenant_ids": [` + tenant + `]}]`,
		"duplicate member":   `[{"key": "k", "key": "j", "tenant_ids": [` + tenant + `]}]`,
	} {
		if _, err := parseKeys([]byte(in)); err == nil {
			t.Errorf("%s: accepted %s", name, in)
		}
	}
}

// TestHelp: -h documents every flag, the environment, the keys file and
// the default tenant, and exits cleanly.
func TestHelp(t *testing.T) {
	var stderr bytes.Buffer
	err := run(context.Background(), []string{"-h"}, func(string) string { return "" }, io.Discard, &stderr)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("run -h: %v", err)
	}
	for _, want := range []string{"-addr", "127.0.0.1:8124", "-db", "./deployplane.db", ":memory:", "-keys", "key_sha256", "tenant_ids",
		"-max-body-bytes", "-shutdown-timeout", "-new-key", "DEPLOYPLANE_API_KEY", "default tenant", "SIGTERM", "X-Tenant-Id",
		"-public-url", "/v2/auth/callback/{provider_id}", "-secret-key-file", "DEPLOYPLANE_SECRET_KEY", "64 hex digits", "base64",
		"<db>.secret-key", "0600", "ephemeral", "query strings",
		"-sim-step", "500ms", "DEPLOYED", "-sim-fail-at", "-github-webhook-secret", "DEPLOYPLANE_GITHUB_WEBHOOK_SECRET",
		"/v1/integrations/github/webhook", "X-Hub-Signature-256", "build_on_push", "503",
		"postgres://", "postgresql://", "-pg-schema", "replicas", "lease",
		"-docker-data-dir", "-docker-postgres-data-path", "-docker-database-timeout", "-shared-postgres-dsn", "-shared-redis-url",
		"DEPLOYPLANE_SHARED_POSTGRES_DSN", "DELETE removes the deployment's data"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("-h does not mention %q", want)
		}
	}
	for _, c := range []struct {
		args []string
		env  map[string]string
	}{
		{[]string{"-nope"}, nil},
		{[]string{"-sim-step", "0s"}, nil},
		{[]string{"-sim-step", "-1s"}, nil},
		{[]string{"-sim-fail-at", "DEPLOYED"}, nil},
		{[]string{"-sim-fail-at", "building"}, nil},
		{[]string{"-pg-schema", ""}, nil},
		{[]string{"-github-webhook-secret", "a"}, map[string]string{"DEPLOYPLANE_GITHUB_WEBHOOK_SECRET": "b"}},
		{[]string{"-shared-redis-url", "redis://127.0.0.1:6379"}, nil},
		{[]string{"-docker-data-dir", "relative/dir"}, nil},
		{[]string{"-docker-database-timeout", "0s"}, nil},
		{[]string{"-deployer", "kubernetes"}, nil},
		{[]string{"-k8s-default-cluster", "kube-a"}, nil},
	} {
		err := run(context.Background(), c.args, func(k string) string { return c.env[k] }, io.Discard, io.Discard)
		if !errors.Is(err, errUsage) {
			t.Errorf("%v %v: %v, want a usage error", c.args, c.env, err)
		}
	}
}

// TestStoreFailsToOpen: a database that cannot be opened is an error, not a
// server.
func TestStoreFailsToOpen(t *testing.T) {
	err := run(context.Background(), []string{"-db", filepath.Join(t.TempDir(), "missing", "dir", "db")},
		func(string) string { return "" }, io.Discard, io.Discard)
	if err == nil {
		t.Fatal("started over a database in a missing directory")
	}
}

// TestOldLayoutStoreRefused: a database that holds deployments under
// text keys (another storage layout) stops the start with an error that wraps
// controlplane.ErrOldLayout; the server never listens.
func TestOldLayoutStoreRefused(t *testing.T) {
	db := filepath.Join(t.TempDir(), "db")
	st, err := storebolt.Open(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = st.Update(context.Background(), func(tx store.Tx) error {
		return tx.Put("cp_deployments", "t1/0190a000-0000-7000-8000-000000000001", []byte(`{"id":"0190a000-0000-7000-8000-000000000001","name":"old"}`))
	})
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := newWatcher()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-db", db}, func(string) string { return "" }, io.Discard, stderr)
	}()
	select {
	case err := <-done:
		if !errors.Is(err, controlplane.ErrOldLayout) {
			t.Fatalf("run over a store of an earlier layout = %v, want ErrOldLayout", err)
		}
	case addr := <-stderr.addr:
		cancel()
		<-done
		t.Fatalf("the server started at %s over a store of an earlier layout", addr)
	}
}

// TestGracefulShutdown: a request in flight when the server is told to stop
// finishes (and its deployment is committed, and its request record
// written) before run returns.
func TestGracefulShutdown(t *testing.T) {
	db := filepath.Join(t.TempDir(), "db")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := newWatcher()
	done := make(chan error, 1)
	env := map[string]string{"DEPLOYPLANE_API_KEY": "k"}
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-db", db}, func(k string) string { return env[k] }, io.Discard, stderr)
	}()
	url := stderr.wait(t)

	// The client asks for 100 Continue, which the server sends once the
	// handler reads the body: then the request is in flight.
	pr, pw := io.Pipe()
	reading := make(chan struct{})
	trace := &httptrace.ClientTrace{Got100Continue: func() { close(reading) }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "POST", url+"/v2/deployments", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Api-Key", "k")
	req.Header.Set("Expect", "100-continue")
	type result struct {
		status int
		err    error
	}
	got := make(chan result, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- result{err: err}
			return
		}
		resp.Body.Close()
		got <- result{status: resp.StatusCode}
	}()
	<-reading
	half := len(dockerBody) / 2
	if _, err := pw.Write([]byte(dockerBody[:half])); err != nil {
		t.Fatal(err)
	}
	cancel()
	shuttingDown(t, url, stderr)
	if _, err := pw.Write([]byte(dockerBody[half:])); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	r := <-got
	if r.err != nil || r.status != 201 {
		t.Fatalf("the request in flight: %d %v\n%s", r.status, r.err, stderr.String())
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr.String(), "msg=\"shutting down\"") {
		t.Errorf("no shutdown in the log:\n%s", stderr.String())
	}
	// The request's record is written before run returns (the request log
	// is asynchronous; run closes it after the server's shutdown).
	if !strings.Contains(stderr.String(), "msg=request method=POST path=/v2/deployments status=201") {
		t.Errorf("the request in flight at shutdown is not in the log:\n%s", stderr.String())
	}

	// The store was closed cleanly: it opens again and holds the deployment.
	url, _, _ = server(t, []string{"-db", db}, env)
	status, page := call(t, "GET", url+"/v2/deployments", "k", "")
	if status != 200 || len(page["resources"].([]any)) != 1 {
		t.Errorf("after the restart: %d %v", status, page)
	}
}

// shuttingDown waits until the server at url has begun its shutdown: it
// said so, and its listener is closed.
func shuttingDown(t *testing.T, url string, stderr *watcher) {
	t.Helper()
	stderr.await(t, regexp.MustCompile(`msg="shutting down"`))
	addr := strings.TrimPrefix(url, "http://")
	deadline := nearDeadline(t)
	for {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return
		}
		c.Close()
		select {
		case <-time.After(time.Millisecond): // a probe every millisecond
		case <-deadline:
			t.Fatalf("the server at %s still accepts connections after shutting down:\n%s", addr, stderr.String())
		}
	}
}

// TestPortTaken: a start that cannot listen fails without generating a key,
// so the next start still prints one.
func TestPortTaken(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	db := filepath.Join(t.TempDir(), "db")
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-addr", busy.Addr().String(), "-db", db}, func(string) string { return "" }, &out, io.Discard); err == nil {
		t.Fatal("started on a taken port")
	}
	if out.Len() != 0 {
		t.Errorf("printed %q", out.String())
	}
	_, stdout, _ := server(t, []string{"-db", db}, nil)
	if !keyRE.MatchString(stdout.String()) {
		t.Errorf("no key at the first successful start:\n%s", stdout)
	}
}

// TestWrongSecretKeyRefused: a server started with another secret key than
// the one that sealed its store refuses to start, naming where it read the
// key; the right key starts it again.
func TestWrongSecretKeyRefused(t *testing.T) {
	db := filepath.Join(t.TempDir(), "db")
	k1, k2 := strings.Repeat("1", 64), strings.Repeat("2", 64)
	env := map[string]string{"DEPLOYPLANE_API_KEY": "env-key", "DEPLOYPLANE_SECRET_KEY": k1}
	url, _, _, stop := startServer(t, []string{"-db", db}, env)
	status, d := call(t, "POST", url+"/v2/deployments", "env-key",
		`{"name": "sealed", "source": "external_docker", "source_revision_config": {"image_uri": "docker.io/acme/agent:1"},
		  "secrets": [{"name": "TOKEN", "value": "s3cret"}]}`)
	if status != 201 {
		t.Fatalf("create: %d %v", status, d)
	}
	stop()

	for _, tt := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"another key", map[string]string{"DEPLOYPLANE_SECRET_KEY": k2}, nil, "DEPLOYPLANE_SECRET_KEY"},
		{"the key file beside the database", nil, nil, db + ".secret-key"},
	} {
		ctx, cancel := context.WithCancel(t.Context())
		stderr := newWatcher()
		done := make(chan error, 1)
		go func() {
			done <- run(ctx, append([]string{"-addr", "127.0.0.1:0", "-db", db}, tt.args...),
				func(k string) string { return tt.env[k] }, io.Discard, stderr)
		}()
		var err error
		select {
		case err = <-done:
		case addr := <-stderr.addr:
			cancel()
			<-done
			t.Errorf("%s: the server started (at %s)", tt.name, addr)
			continue
		}
		cancel()
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "not the one that sealed") {
			t.Errorf("%s: run = %v; want a refusal naming %s", tt.name, err, tt.want)
		}
	}

	url, _, _, _ = startServer(t, []string{"-db", db}, env)
	if status, body := call(t, "GET", url+"/v2/deployments", "env-key", ""); status != 200 {
		t.Fatalf("list with the right key: %d %v", status, body)
	}
}
