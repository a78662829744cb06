package storebolt_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/storebolt"
)

// crashChildEnv names the database file a crash child writes to; when it is
// set, the test binary runs as a crash child instead of running tests.
const crashChildEnv = "STOREBOLT_CRASH_CHILD"

func TestMain(m *testing.M) {
	if path := os.Getenv(crashChildEnv); path != "" {
		crashChild(path)
		os.Exit(2) // crashChild runs until it is killed
	}
	os.Exit(m.Run())
}

const (
	crashTenant  = "7d1f0c2a-8e4b-4c55-9a3e-2b6f1d0e9c11"
	crashWriters = 8
	crashRuns    = 20
)

// crashChild drives a ControlPlane over the store at path from several
// goroutines: each creates a deployment, PATCHes its image three times (a
// new revision each), redeploys the first revision, and starts over. After
// each call returns nil it prints one line:
//
//	<op> <deployment id> <latest revision id> <image>
func crashChild(path string) {
	st, err := storebolt.Open(path, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(3)
	}
	cp := controlplane.New(st, nil)
	ctx := context.Background()
	var out sync.Mutex
	ack := func(op string, d *controlplane.Deployment) {
		line := fmt.Sprintf("%s %s %s %s\n", op, d.ID, *d.LatestRevisionID, *d.SourceRevisionConfig.ImageURI)
		out.Lock()
		defer out.Unlock()
		// One write per line: a pipe write this small is atomic, so the
		// parent sees whole lines only.
		if _, err := os.Stdout.WriteString(line); err != nil {
			os.Exit(4)
		}
	}
	fail := func(what string, err error) {
		fmt.Fprintf(os.Stderr, "crash child: %s: %v\n", what, err)
		os.Exit(5)
	}
	prefix := fmt.Sprintf("crash-%d", os.Getpid())
	for g := range crashWriters {
		go func() {
			for n := 0; ; n++ {
				image := func(v int) *string { return new(fmt.Sprintf("registry.example.com/agent-%d:%d.%d.0", g, n, v)) }
				d, err := cp.CreateDeployment(ctx, crashTenant, &controlplane.CreateDeploymentRequest{
					Name:                 new(fmt.Sprintf("%s-%d-%d", prefix, g, n)),
					Source:               new(controlplane.SourceExternalDocker),
					SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: image(0)},
					Secrets:              []controlplane.SecretInput{{Name: "OPENAI_API_KEY", Value: new("sk-0123456789")}},
				})
				if err != nil {
					fail("create", err)
				}
				ack("create", d)
				first := *d.LatestRevisionID
				for v := 1; v <= 3; v++ {
					if d, err = cp.UpdateDeployment(ctx, crashTenant, d.ID, &controlplane.UpdateDeploymentRequest{
						SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: image(v)},
					}); err != nil {
						fail("patch", err)
					}
					ack("patch", d)
				}
				if d, err = cp.RedeployRevision(ctx, crashTenant, d.ID, first); err != nil {
					fail("redeploy", err)
				}
				ack("redeploy", d)
			}
		}()
	}
	select {}
}

// crashAck is one acknowledged write.
type crashAck struct {
	op, deployment, revision, image string
}

// runCrashChild starts a crash child on path, lets it write for a random
// while after its first acknowledgement, kills it with SIGKILL, and returns
// the writes it acknowledged.
func runCrashChild(t *testing.T, path string, rng *rand.Rand) []crashAck {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	readDone := make(chan error, 1)
	go func() {
		defer close(lines)
		r := bufio.NewReader(stdout)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				// A last line without its newline was cut by the kill:
				// it was never acknowledged.
				if err != io.EOF {
					readDone <- err
				}
				close(readDone)
				return
			}
			lines <- strings.TrimSuffix(line, "\n")
		}
	}()

	var acks []crashAck
	add := func(line string) {
		f := strings.Fields(line)
		if len(f) != 4 {
			t.Fatalf("crash child printed %q", line)
		}
		acks = append(acks, crashAck{f[0], f[1], f[2], f[3]})
	}
	var kill <-chan time.Time
	for kill == nil {
		line, ok := <-lines
		if !ok {
			_ = cmd.Wait()
			t.Fatalf("crash child ended before acknowledging a write: %s", stderr.String())
		}
		add(line)
		kill = time.After(time.Duration(rng.Int64N(int64(300 * time.Millisecond))))
	}
	for killed := false; !killed; {
		select {
		case line, ok := <-lines:
			if !ok {
				_ = cmd.Wait()
				t.Fatalf("crash child ended on its own: %s", stderr.String())
			}
			add(line)
		case <-kill:
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	for line := range lines {
		add(line) // acknowledged before the kill landed
	}
	if err := <-readDone; err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("crash child ended with %v, not by SIGKILL: %s", err, stderr.String())
	}
	return acks
}

// checkAcks asserts that every acknowledged write is in the store: every
// deployment and every revision an acknowledgement named, with its image,
// and for each deployment, its newest acknowledged revision is its latest or
// was followed by one write that committed without being acknowledged.
func checkAcks(t *testing.T, cp *controlplane.ControlPlane, acks []crashAck) {
	t.Helper()
	ctx := context.Background()
	last := map[string]crashAck{}
	for _, a := range acks {
		rev, err := cp.GetRevision(ctx, crashTenant, a.deployment, a.revision)
		if err != nil {
			t.Errorf("acknowledged %s: revision %s of %s: %v", a.op, a.revision, a.deployment, err)
			continue
		}
		if got := *rev.SourceRevisionConfig.ImageURI; got != a.image {
			t.Errorf("acknowledged %s: revision %s has image %s, want %s", a.op, a.revision, got, a.image)
		}
		last[a.deployment] = a
	}
	for id, a := range last {
		d, err := cp.GetDeployment(ctx, crashTenant, id)
		if err != nil {
			t.Errorf("acknowledged deployment %s: %v", id, err)
			continue
		}
		page, err := cp.ListRevisions(ctx, crashTenant, id, nil)
		if err != nil {
			t.Fatal(err)
		}
		pos := -1
		for i, r := range page.Resources {
			if r.ID == a.revision {
				pos = i
			}
		}
		switch {
		case pos < 0 || pos > 1:
			t.Errorf("deployment %s: last acknowledged revision %s is at position %d of the newest-first list, want 0 or 1", id, a.revision, pos)
		case pos == 0 && (*d.LatestRevisionID != a.revision || *d.SourceRevisionConfig.ImageURI != a.image):
			t.Errorf("deployment %s: latest revision %s image %s, want %s %s as last acknowledged", id, *d.LatestRevisionID, *d.SourceRevisionConfig.ImageURI, a.revision, a.image)
		}
	}
}

// TestCrash kills a writer process with SIGKILL at random moments and
// checks, after each kill, that the file is consistent and holds every
// write the process acknowledged.
func TestCrash(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	path := filepath.Join(t.TempDir(), "crash.db")
	var all []crashAck
	for run := range crashRuns {
		acks := runCrashChild(t, path, rng)
		all = append(all, acks...)
		st, err := storebolt.Open(path, nil)
		if err != nil {
			t.Fatalf("run %d: reopening after SIGKILL: %v", run, err)
		}
		if err := st.Check(); err != nil {
			t.Errorf("run %d: bbolt consistency check: %v", run, err)
		}
		cp := controlplane.New(st, nil)
		// This run's acknowledgements after every kill; all of them,
		// from every run, after the last.
		if run == crashRuns-1 {
			acks = all
		}
		checkAcks(t, cp, acks)
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		if t.Failed() {
			t.Fatalf("run %d failed (seed %d)", run, seed)
		}
	}
	t.Logf("%d acknowledged writes over %d kills", len(all), crashRuns)
}
