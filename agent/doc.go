// Package agent is the reconcile loop of a listener run beside its
// compute: a program in the listener's cluster (or on its Docker host)
// that dials out to the control plane, claims the listener's work over the
// agent routes (/v2/listeners/{listener_id}/agent/...) and drives it with
// the same deployer packages the control plane runs itself (deployk8s,
// deploydocker; deploysim for a simulation). The control plane never dials
// the agent and never holds the cluster's credentials: a deployment whose
// listener the server does not drive (controlplane.Options.Drives) waits
// QUEUED until an agent of that listener claims its work.
//
// Run it as `deployplane agent` (see `deployplane agent -h`), with a
// listener token in DEPLOYPLANE_AGENT_TOKEN:
//
//	curl -H "X-Api-Key: $KEY" -X POST $CP/v2/listeners/$LISTENER/tokens   # {"token": "dpl_lt_..."}
//	DEPLOYPLANE_AGENT_TOKEN=dpl_lt_... deployplane agent -control-plane $CP -listener-id $LISTENER
//
// or embed it:
//
//	o := &agent.Options{ControlPlane: url, ListenerID: id, Token: token}
//	c, _ := agent.NewClient(o) // the deployer's State over the agent routes
//	d, _ := deployk8s.New(&deployk8s.Options{Client: kube, Cluster: "prod", State: c})
//	o.Client, o.Deployer = c, d
//	a, _ := agent.New(o)
//	go func() { // reconcile the cluster now and then, asking only for what changed
//		for range time.Tick(time.Minute) {
//			d.Reconcile(c.Reconciling(ctx))
//		}
//	}()
//	err := a.Run(ctx) // until ctx ends, or the token is refused
//
// Run heartbeats (the listener is CONNECTED while it does), claims with a
// long poll, and drives each claimed unit in its own goroutine, as the
// control plane's own loop does: a revision through Deployer.Deploy, its
// reports and logs sent through the unit's lease (a 409 answer is
// controlplane.ErrLeaseLost, a 400 apierr.ErrInvalidState, so the
// deployers' controlplane.IsRefusal works unchanged), the lease renewed
// every third of its length and the Deployer's context cancelled with
// cause controlplane.ErrLeaseLost once the control plane says it is lost
// (with a cause matching controlplane.ErrRevisionEnded too, and refused
// reports matching it, when the control plane answers that the revision
// ended without the agent: interrupted, superseded or deleted, so that
// the deployer removes what it made for it);
// a deployment being deleted through Deployer.Teardown, whose failure is
// recorded on the deployment (teardown-failed: its status_message says
// why) and tried again after the control plane's backoff. Calls that fail
// for a reason that may pass (the control plane unreachable, 5xx, 429)
// are tried again with capped exponential backoff and jitter, logged once
// per distinct failure. When Run stops it gives back the work it holds, so
// that another agent of the listener (or this one restarted) takes it at
// once; work of an agent that died is taken over once its lease expires.
// A refused credential (401, 403: the token was revoked) stops Run with an
// error that says so. The Client keeps the deployments and terminal
// revisions the deployers read; a reconciliation run under
// Client.Reconciling reads the listener's list of deployments, with each
// one's record digest, and asks only for those that changed: an idle
// agent's reconciliations cost that list, not a request per deployment.
// Client.ReportDeploymentStatus sets a deployment's status outside a
// lease: a Docker agent's deployer reports through it the deployments it
// scaled to zero (UNUSED) and woke (READY).
package agent
