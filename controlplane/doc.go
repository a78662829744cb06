// Package controlplane is deployplane's deployment domain: the wire types of
// the API, every rule of the specification (spec/seed-spec.md made exact by
// spec/wire-contract.md), and ControlPlane, which applies them over a
// store.Store, scoped per tenant. It does no I/O of its own and imports no
// store implementation and no net/http.
//
// # Entry points
//
// New(st, opts) builds a ControlPlane; nil options mean defaults (Options
// injects the clock, the id generator, the sources offered, the custom URL
// template of github deployments, the logger, the tracing-project hook, the
// GitHub App that verifies installations and the store of its installation
// states, the caps of Limits, the lifecycle's poll interval, lease duration and
// worker count, and which listeners this server drives itself). Its methods
// mirror the API and take ctx, then the tenant (the workspace id), then
// values:
//
//	deployments  CreateDeployment, GetDeployment, ListDeployments,
//	             UpdateDeployment (PATCH), DeleteDeployment,
//	             DeleteDeploymentWith (force, delete_tracing_project),
//	             CountFreeDeployments
//	revisions    GetRevision, ListRevisions, CreateRevision, RedeployRevision,
//	             Rollback
//	listeners    CreateListener, GetListener, ListListeners, UpdateListener,
//	             DeleteListener, DeleteListenerWith (force)
//	integrations StartGitHubInstall, CompleteGitHubInstall (verified),
//	             CreateIntegration (unverified), ListIntegrations
//	lifecycle    Run, Process, HandleGitHubPush, ReportDeploymentStatus
//	agents       ClaimAgentWork, WaitAgentWork (long poll), RenewAgentLease,
//	             ReportAgent, LogAgent, FailAgentWork, ReleaseAgentWork,
//	             FinishAgentTeardown, FailAgentTeardown; AgentDeployment,
//	             AgentRevision, ListAgentDeployments; AgentHeartbeat;
//	             AgentReportDeploymentStatus
//	tokens       CreateListenerToken, ListListenerTokens, DeleteListenerToken,
//	             AuthenticateListenerToken
//	logs         ListLogs, ListDeploymentLogs (every revision's, from a
//	             cursor), AppendLogs (and Reporter.Log during the work)
//	events       FollowEvents (EventStream.Next), WaitRevision
//	for HTTP     GetDeploymentJSON, AppendDeploymentJSON (the wire JSON in
//	             one call), Limits
//
// A deployment starts AWAITING_DATABASE with a first revision in status
// CREATING (a deployment of internal_source or internal_docker, the
// sources of langgraph deploy, only once what its revisions come from
// arrives: see "The sources of langgraph deploy" in docs/design-notes.md); PATCHes, redeploys and build_on_push pushes add revisions
// (immutable snapshots of source_revision_config, secrets and
// resource_spec, wire contract section 7). The deployment's source_revision_config
// is always its latest revision's, repo_commit_sha included: nil for a
// revision created by a create or a PATCH (it builds its ref's head) until
// the Deployer reports the commit it built, the pushed commit for a push,
// and the named revision's commit for a redeploy (so a redeploy rebuilds
// that commit, not the branch's head). DeleteDeployment removes at once a
// deployment none of whose revisions ever reached an engine, and marks
// any other AWAITING_DELETE, after which changes answer
// apierr.ErrInvalidState and its name stays taken until the lifecycle
// removes it, once the Deployer's Teardown works (retried with backoff,
// the deployment's status_message saying why it waits) or a forced delete
// removes it without the engine.
//
// A redeploy changes only what a revision is: the new revision copies the
// named one's source_revision_config (repo_commit_sha included), secrets
// and resource_spec, while the fields a PATCH changes in place
// (install_command, build_command, custom_url, build_on_push: the
// PatchInPlace rows of FieldRules) keep their current values; which fields
// come from the revision is read from the rules table (its PatchRevision
// rows), not from a second list. A revision also records the install and
// build commands the deployment had when it was created, which Work hands
// the Deployer (so a build resumed after a restart uses the commands it
// started with), but they are not part of its snapshot: the contract makes
// them in-place fields, which create no revision when changed, so
// restoring them on a redeploy would undo a PATCH the client made without
// creating any revision.
//
// The deployments of a listener this server does not drive
// (Options.Drives) are served by agents: programs beside the listener's
// cluster or engine that dial out with a listener token, claim the work
// of that listener with the same leases as Run (the agents methods, each
// scoped to the tenant and listener the token names), drive a Deployer
// there, and report back. Such a deployment answers remote_reconciled
// true, its revisions wait QUEUED for the agent, and its listener answers
// CONNECTED while the agent is heard from.
//
// The design notes of this package (why its mechanisms are built as they
// are) are in docs/design-notes.md of the repository.
package controlplane
