package controlplane_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"testing"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/controlplane/controlplanetest"
)

// mutationEnv names the environment variable that makes
// TestHelperMutation run the state machine against a ControlPlane with a
// deliberate defect.
const mutationEnv = "CONTROLPLANE_MUTATION"

// TestHelperMutation is not a test on its own: TestMutationsCaught
// re-executes the test binary to run it with mutationEnv set, and expects
// it to fail.
func TestHelperMutation(t *testing.T) {
	m := controlplane.Mutation(os.Getenv(mutationEnv))
	if m == "" {
		t.Skip("helper for TestMutationsCaught; runs only when re-executed with " + mutationEnv + " set")
	}
	controlplanetest.RunWith(t, controlplane.WithMutation(nil, m), openMem)
}

// TestMutationsCaught proves that the state machine (package
// controlplanetest) catches a wrong rule, the way storetest proves itself
// against broken stores: for each deliberate defect, the machine runs in a
// child process against ControlPlanes with that defect and must fail, with
// the model's complaint in its output (not a crash).
func TestMutationsCaught(t *testing.T) {
	for _, c := range []struct {
		mutation controlplane.Mutation
		want     string // a regexp the failure output must match
		checks   int    // the machine's runs at most; 0: 2000
	}{
		// Caught by a PATCH of resource_spec alone: no new revision.
		{controlplane.MutationSpecInPlace, `made no new revision`, 0},
		// Caught by build_on_push with refs/tags/release-1 (no v): accepted.
		{controlplane.MutationTagNeedsV, `outcome (ok|conflict|invalid state) .*model says validation`, 0},
		{controlplane.MutationBuildOnPushTag, `outcome (ok|conflict|invalid state) .*model says validation`, 0},
		// Caught by a PATCH of deployment_type: accepted (or refused later,
		// for a pin that names no active revision: 400, not 422).
		{controlplane.MutationTypeMutable, `outcome (ok|conflict|invalid state) .*model says validation`, 0},
		// Caught by a github create with custom_url: accepted.
		{controlplane.MutationCustomURLSettable, `outcome (ok|conflict|invalid state) .*model says validation`, 0},
		// Caught by a PATCH with another source's revision_source: accepted.
		{controlplane.MutationRevisionSourceAny, `outcome (ok|conflict|invalid state) .*model says validation`, 0},
		// Caught by a create of internal_docker without an image: it has a
		// latest_revision_id.
		{controlplane.MutationSourcelessRevision, `created deployment differs from the model`, 0},
		// Caught by a report of DEPLOYING for a revision of a pinned
		// deployment: accepted. It takes a chain (a revision made active,
		// a pin, a newer revision, its deployer's report before an
		// unpin): caught after 425 runs on average (55 to 974 over six
		// seeds), so 2000 would miss it about once in a hundred.
		{controlplane.MutationPinIgnored, `of a pinned deployment: ok, model says held`, 10000},
	} {
		t.Run(string(c.mutation), func(t *testing.T) {
			t.Parallel()
			// Many checks, since rapid stops at the first failure; little
			// shrinking; no fail files left in testdata/.
			checks := c.checks
			if checks == 0 {
				checks = 2000
			}
			// The timeout allows every run under -race on a loaded machine
			// (about 0.1 s each); a caught defect stops at its first failure.
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperMutation$", "-test.count=1",
				fmt.Sprintf("-test.timeout=%ds", 300*checks/2000),
				fmt.Sprintf("-rapid.checks=%d", checks), "-rapid.nofailfile", "-rapid.shrinktime=1s")
			cmd.Env = append(os.Environ(), mutationEnv+"="+string(c.mutation))
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("the state machine passed (or did not run: %v) on a control plane with defect %q; output:\n%s", err, c.mutation, out)
			}
			if !regexp.MustCompile(`\[rapid\] failed after`).Match(out) || !regexp.MustCompile(c.want).Match(out) {
				t.Errorf("defect %q: the machine failed, but not with the model's complaint %q; output:\n%s", c.mutation, c.want, out)
			}
		})
	}
}
