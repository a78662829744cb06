package deploydocker_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploydocker"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storebolt"
	"github.com/deployplane/deployplane/storemem"
)

func TestLevelOf(t *testing.T) {
	for _, tc := range []struct {
		line string
		def  controlplane.LogLevel
		want controlplane.LogLevel
	}{
		{"plain output", controlplane.LevelInfo, controlplane.LevelInfo},
		{"plain output on stderr", controlplane.LevelError, controlplane.LevelError},
		{"INFO:     Uvicorn running on http://0.0.0.0:8000", controlplane.LevelError, controlplane.LevelInfo},
		{"2026-01-02 03:04:05,123 WARNING langgraph_api: slow", controlplane.LevelInfo, controlplane.LevelWarning},
		{"[ERROR] it broke", controlplane.LevelInfo, controlplane.LevelError},
		{"WARN disk almost full", controlplane.LevelInfo, controlplane.LevelWarning},
		{"FATAL cannot start", controlplane.LevelInfo, controlplane.LevelCritical},
		{"DEBUG details", controlplane.LevelInfo, controlplane.LevelDebug},
		{"an error in lower case is no level", controlplane.LevelInfo, controlplane.LevelInfo},
		{"one two three four five six seven eight ERROR too far", controlplane.LevelInfo, controlplane.LevelInfo},
		{`{"level": "warning", "event": "slow"}`, controlplane.LevelInfo, controlplane.LevelWarning},
		{`{"levelname":"ERROR","message":"x"}`, controlplane.LevelInfo, controlplane.LevelError},
		{`{"severity":"debug"}`, controlplane.LevelError, controlplane.LevelDebug},
		{`{"message": "ERROR inside a JSON message"}`, controlplane.LevelInfo, controlplane.LevelInfo},
		{`{"level": "verbose"}`, controlplane.LevelError, controlplane.LevelError},
	} {
		if got := deploydocker.LevelOf(tc.line, tc.def); got != tc.want {
			t.Errorf("LevelOf(%q, %s) = %s, want %s", tc.line, tc.def, got, tc.want)
		}
	}
}

// logWrites counts the store writes that write log lines.
type logWrites struct {
	store.Store
	n atomic.Int64
}

type logTx struct {
	store.Tx
	wrote *bool
}

func (tx logTx) Put(col, key string, val []byte) error {
	if col == "cp_revision_logs" {
		*tx.wrote = true
	}
	return tx.Tx.Put(col, key, val)
}

func (s *logWrites) Update(ctx context.Context, fn func(store.Tx) error) error {
	var wrote bool
	err := s.Store.Update(ctx, func(tx store.Tx) error {
		wrote = false
		return fn(logTx{tx, &wrote})
	})
	if err == nil && wrote {
		s.n.Add(1)
	}
	return err
}

// chattyBuilder writes n lines of output, then fails with err.
type chattyBuilder struct {
	n   int
	err error
}

func (b chattyBuilder) Build(ctx context.Context, w *controlplane.Work, log func(string)) (string, string, error) {
	for i := range b.n {
		log(fmt.Sprintf("output line %d", i))
	}
	return "", "", b.err
}

// A build's output reaches the build log in batches (a few store writes,
// not one per line), in order, every line of it although the build
// fails, and the builder's error ends the log at ERROR and is the
// status_message as it is. No Docker daemon is needed: a failed build
// runs nothing.
func TestBuildLogBatchedAndComplete(t *testing.T) {
	st := &logWrites{Store: storemem.New()}
	cp := controlplane.New(st, &controlplane.Options{PollInterval: 50 * time.Millisecond, Logger: quiet()})
	buildErr := errors.New("build failed: step 3/5 exploded")
	const n = 250
	d, err := deploydocker.New(&deploydocker.Options{Host: "unix://" + filepath.Join(t.TempDir(), "no-daemon.sock"),
		ProxyURL: "http://127.0.0.1:1", State: cp, Builder: chattyBuilder{n: n, err: buildErr}, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); cp.Run(ctx, d) }()
	defer func() { cancel(); <-done }()

	in, err := cp.CreateIntegration(ctx, tenant, &controlplane.CreateIntegrationRequest{InstallationID: new(int64(7)), Name: new("acme")})
	if err != nil {
		t.Fatal(err)
	}
	src := controlplane.SourceGitHub
	dep, err := cp.CreateDeployment(ctx, tenant, &controlplane.CreateDeploymentRequest{Name: new("chatty"), Source: &src,
		SourceConfig:         &controlplane.SourceConfig{IntegrationID: &in.ID, RepoURL: new("https://github.com/acme/agent")},
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{RepoRef: new("main"), GraphConfigPath: new("langgraph.json")}})
	if err != nil {
		t.Fatal(err)
	}
	rev := waitTerminal(t, cp, dep.ID, *dep.LatestRevisionID)
	if rev.Status != controlplane.RevisionBuildFailed || deref(rev.StatusMessage) != buildErr.Error() {
		t.Fatalf("revision %s %q, want BUILD_FAILED %q", rev.Status, deref(rev.StatusMessage), buildErr)
	}
	logs := logMessages(t, cp, dep.ID, rev.ID, controlplane.LogBuild)
	if len(logs) != n+1 {
		t.Fatalf("%d build log lines, want the %d of the output and the error:\n%s", len(logs), n, dump(logs))
	}
	for i, l := range logs[:n] {
		if want := fmt.Sprintf("output line %d", i); l.Message != want || l.Level != controlplane.LevelInfo {
			t.Fatalf("line %d = [%s] %q, want [INFO] %q", i, l.Level, l.Message, want)
		}
	}
	if last := logs[n]; last.Level != controlplane.LevelError || last.Message != buildErr.Error() {
		t.Errorf("last line [%s] %q", last.Level, last.Message)
	}
	// 250 lines in batches of 100, the error, and the deployer's steps
	// (none before the build); a tick of the flush timer may add one.
	if w := st.n.Load(); w > 8 {
		t.Errorf("%d store writes of log lines for %d lines, want a few batches", w, n)
	}
	if deploy := logMessages(t, cp, dep.ID, rev.ID, controlplane.LogDeploy); len(deploy) != 0 {
		t.Errorf("the deploy log of a failed build holds:\n%s", dump(deploy))
	}
}

// Ready pings the daemon: nil when it answers, an error when it does not,
// which the control plane's Ready (GET /readyz) reports as the deployer's.
func TestReady(t *testing.T) {
	dead, err := deploydocker.New(&deploydocker.Options{Host: "unix://" + filepath.Join(t.TempDir(), "no-daemon.sock")})
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	var _ controlplane.ReadinessChecker = dead
	cp := controlplane.New(storemem.New(), &controlplane.Options{Logger: quiet()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); cp.Run(ctx, dead) }()
	defer func() { cancel(); <-done }()
	var nr *controlplane.NotReadyError
	eventually(t, "Ready names the deployer only", func() bool {
		rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer rcancel()
		err := cp.Ready(rctx)
		return errors.As(err, &nr) && len(nr.Problems) == 1 && nr.Problems[0].Component == controlplane.ComponentDeployer
	})
	if msg := nr.Problems[0].Err.Error(); !strings.Contains(msg, "docker daemon") {
		t.Errorf("the deployer's problem: %s", msg)
	}

	needDocker(t)
	live, err := deploydocker.New(&deploydocker.Options{Host: dockerHost})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if err := live.Ready(context.Background()); err != nil {
		t.Errorf("Ready with the test daemon: %v", err)
	}
}

// LevelOf answers one of the five levels, or the default, for any line.
func FuzzLevelOf(f *testing.F) {
	for _, s := range []string{"INFO x", `{"level":"warning"}`, "", "{", `{"level":`, "ERROR", "plain"} {
		f.Add(s)
	}
	valid := map[controlplane.LogLevel]bool{controlplane.LevelDebug: true, controlplane.LevelInfo: true,
		controlplane.LevelWarning: true, controlplane.LevelError: true, controlplane.LevelCritical: true}
	f.Fuzz(func(t *testing.T, line string) {
		got := deploydocker.LevelOf(line, "DEFAULT")
		if got != "DEFAULT" && !valid[got] {
			t.Fatalf("LevelOf(%q) = %q", line, got)
		}
		// A level found is named in the line (as WARN or WARNING, and
		// CRITICAL as FATAL too).
		named := map[controlplane.LogLevel][]string{controlplane.LevelDebug: {"DEBUG"}, controlplane.LevelInfo: {"INFO"},
			controlplane.LevelWarning: {"WARN"}, controlplane.LevelError: {"ERROR"}, controlplane.LevelCritical: {"CRITICAL", "FATAL"}}
		if got == "DEFAULT" {
			return
		}
		for _, n := range named[got] {
			if strings.Contains(strings.ToUpper(line), n) {
				return
			}
		}
		t.Fatalf("LevelOf(%q) = %s, a level the line does not name", line, got)
	})
}

// flakyLogs is a State whose AppendLogs fails, as when the control plane
// cannot be reached, while failing is set, counting the failed writes.
type flakyLogs struct {
	deploydocker.State
	failing atomic.Bool
	failed  atomic.Int64
}

func (s *flakyLogs) AppendLogs(ctx context.Context, tenant, deploymentID, revisionID string, lines ...controlplane.LogLine) error {
	if s.failing.Load() {
		s.failed.Add(1)
		return errors.New("the control plane could not be reached")
	}
	return s.State.AppendLogs(ctx, tenant, deploymentID, revisionID, lines...)
}

// lockedBuffer is a bytes.Buffer for a Logger that several goroutines
// write.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A running container's output that cannot be written (the control plane
// away) is warned about once, not once per write, and once when writes
// work again, after which a new failure is warned about again; the lines
// written once it works are in the deploy log.
func TestLogWriteFailuresWarnedOncePerSeries(t *testing.T) {
	needDocker(t)
	ctx := context.Background()
	cli, err := client.New(client.WithHost(dockerHost))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	instance := uniq("flaky")
	t.Cleanup(func() { removeInstance(t, cli, instance) })
	st, err := storebolt.Open(filepath.Join(t.TempDir(), "db.bolt"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cp := controlplane.New(st, &controlplane.Options{PollInterval: 100 * time.Millisecond, Logger: quiet()})
	state := &flakyLogs{State: cp}
	var logged lockedBuffer
	d, url := newDeployer(t, state, instance, nil, func(o *deploydocker.Options) { o.Logger = slog.New(slog.NewTextHandler(&logged, nil)) })
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); cp.Run(rctx, d) }()
	t.Cleanup(func() { cancel(); <-done })

	dep := createIn(t, cp, uniq("flaky"), image("server:v1"), nil)
	rev := *dep.LatestRevisionID
	if r := waitTerminal(t, cp, dep.ID, rev); r.Status != controlplane.RevisionDeployed {
		t.Fatalf("revision %s: %s", r.Status, deref(r.StatusMessage))
	}
	say := func(line string) {
		t.Helper()
		resp, err := http.Post(url+"/"+dep.ID+"/say?line="+line, "text/plain", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	// sayLost says line while writes fail, and waits until its write
	// failed.
	sayLost := func(line string) {
		t.Helper()
		n := state.failed.Load()
		say(line)
		eventually(t, "the write of "+line+" failing", func() bool { return state.failed.Load() > n })
	}
	count := func(msg string) int { return strings.Count(logged.String(), `msg="deploydocker: `+msg+`"`) }
	const failed, works = "writing the revision's log lines", "writing the revision's log lines works again"

	state.failing.Store(true)
	sayLost(uniq("lost"))
	sayLost(uniq("lost"))
	if n := count(failed); n != 1 {
		t.Errorf("%d warnings for two failed writes, want one:\n%s", n, logged.String())
	}
	state.failing.Store(false)
	kept := uniq("kept")
	say(kept)
	eventually(t, "the line said once writes work in the deploy log", func() bool {
		return hasLine(logMessages(t, cp, dep.ID, rev, controlplane.LogDeploy), controlplane.LevelInfo, kept)
	})
	if n := count(works); n != 1 {
		t.Errorf("%d lines saying the writes work again, want one:\n%s", n, logged.String())
	}
	state.failing.Store(true)
	sayLost(uniq("lost"))
	if n := count(failed); n != 2 {
		t.Errorf("%d warnings for two series of failed writes, want two:\n%s", n, logged.String())
	}
}
