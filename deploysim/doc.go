// Package deploysim is deployplane's built-in simulated Deployer: it moves
// revisions through the statuses of the wire contract with a delay per step
// and changes nothing outside the control plane's store, so that a client
// polling for DEPLOYED finishes on a laptop.
//
//	sim := deploysim.New(&deploysim.Options{Step: 200 * time.Millisecond})
//	go cp.Run(ctx, sim)
//
// A github revision goes CREATING, QUEUED, AWAITING_BUILD, BUILDING,
// AWAITING_DEPLOY, DEPLOYING, DEPLOYED; an external_docker one skips the two
// build states. Each status is reported after Options.Step (default
// DefaultStep, 500ms: about 2 seconds to DEPLOYED for external_docker, 3
// for github). Entering BUILDING, a github revision without a commit gets
// FakeCommitSHA (derived from repo_url and repo_ref; a push's revision keeps
// the pushed commit); DEPLOYED reports ImageVersion. Options.FailAt makes
// revisions fail at a chosen status with the failure of its phase
// (BUILDING -> BUILD_FAILED, DEPLOYING -> DEPLOY_FAILED, ...), for tests
// and demos. Nothing answers for a simulated revision, so DEPLOYED reports
// no url unless Options.URL names one. Teardown waits one step and
// succeeds.
//
// Each step also writes plausible log lines (StepLog, every message
// starting "[simulated]") through Reporter.Log before it is reported: the
// clone and image steps in the build log of a github revision, the
// deployer's steps and the server's start in the deploy log, and on a
// failure a line at ERROR with its message in the log of its phase, so
// that the quick start shows logs (GET .../revisions/{id}/logs,
// langgraph deploy logs).
//
// The Deployer keeps no state: it starts from the status in the Work it is
// given, so a revision resumed after a restart, or taken over from another
// replica, carries on where it was. The control plane checks every report
// against its transition table; this package only follows the happy path
// of controlplane.HappyPath.
package deploysim
