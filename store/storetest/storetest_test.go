package storetest_test

import (
	"errors"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"testing"

	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/store/storetest"
)

// TestReference runs the suite against the correct reference store: it must
// pass.
func TestReference(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		Open: func(testing.TB) store.Store { return newRefStore(noBug) },
	})
}

// TestReferenceReopen runs the suite with a Reopen that hands the same data
// to a new store value, so that the Durability checks run too.
func TestReferenceReopen(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		Open: func(testing.TB) store.Store { return newRefStore(noBug) },
		Reopen: func(t testing.TB, closed store.Store) store.Store {
			old := closed.(*refStore)
			s := newRefStore(noBug)
			s.data = old.data
			return s
		},
	})
}

// bugEnv names the environment variable that makes TestHelperBroken run
// the suite against a broken store.
const bugEnv = "STORETEST_BUG"

// TestHelperBroken is not a test on its own: TestBroken re-executes the
// test binary to run it with bugEnv set, and expects it to fail.
func TestHelperBroken(t *testing.T) {
	b := bug(os.Getenv(bugEnv))
	if b == noBug {
		t.Skip("helper for TestBroken; runs only when re-executed with " + bugEnv + " set")
	}
	var reopen func(testing.TB, store.Store) store.Store
	if b == bugNoRollback {
		// Durability/RolledBack must catch it too.
		reopen = func(_ testing.TB, closed store.Store) store.Store {
			s := newRefStore(b)
			s.data = closed.(*refStore).data
			return s
		}
	}
	storetest.Run(t, storetest.Harness{
		Open:   func(testing.TB) store.Store { return newRefStore(b) },
		Reopen: reopen,
	})
}

// TestBroken runs the suite against each broken store in a child process
// and checks that it fails, naming the checks that must catch the bug.
func TestBroken(t *testing.T) {
	for _, c := range []struct {
		bug  bug
		want []string // subtests of TestHelperBroken that must fail
	}{
		{bugNoRollback, []string{"Rollback/Error", "Rollback/Panic", "Scan/CallbackError", "Durability/RolledBack", "Model"}},
		{bugAliasing, []string{"Aliasing/PutArgument", "Aliasing/CreateArgument", "Aliasing/ArgumentReadInTransaction", "Aliasing/GetResult", "Aliasing/ScanResult"}},
		{bugSignedOrder, []string{"Scan/ByteOrder", "Scan/Prefix", "Scan/Start", "Scan/StartReverse", "Model"}},
		{bugLostUpdate, []string{"Concurrency/Increment", "Concurrency/CreateRace", "Close/WaitsForRunning"}},
		{bugPanicCommit, []string{"Rollback/Panic", "Model"}},
		{bugIgnoreCtx, []string{"Context/Canceled", "Context/DeadlineExceeded"}},
		{bugDirtyRead, []string{"Isolation"}},
		{bugScanStart, []string{"Scan/StartReverse", "Model"}},
		{bugNoClose, []string{"Close/UseAfterClose", "Close/Idempotent"}},
		{bugCloseNoWait, []string{"Close/WaitsForRunning", "Close/WaitsForRunningView"}},
	} {
		t.Run(string(c.bug), func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperBroken$", "-test.count=1",
				"-test.timeout=5m", "-rapid.nofailfile", "-rapid.shrinktime=2s") // a hang fails; no testdata/ litter; quick shrinking
			cmd.Env = append(os.Environ(), bugEnv+"="+string(c.bug))
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("the suite passed (or did not run: %v) on a store with bug %q; output:\n%s", err, c.bug, out)
			}
			failed := failedSubtests(out)
			for _, name := range c.want {
				if !slices.Contains(failed, "TestHelperBroken/"+name) {
					t.Errorf("bug %q: subtest %s did not fail; failed: %q", c.bug, name, failed)
				}
			}
			if t.Failed() {
				t.Logf("output:\n%s", out)
			}
		})
	}
}

var failLine = regexp.MustCompile(`(?m)^\s*--- FAIL: (\S+)`)

// failedSubtests returns the names in the "--- FAIL: name" lines of go
// test output.
func failedSubtests(out []byte) []string {
	var names []string
	for _, m := range failLine.FindAllSubmatch(out, -1) {
		names = append(names, string(m[1]))
	}
	return names
}
