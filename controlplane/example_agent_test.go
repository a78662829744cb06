package controlplane_test

import (
	"context"
	"fmt"
	"time"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/storemem"
)

// An agent serves the deployments of a listener the server does not
// drive: it authenticates with the listener's token, heartbeats, claims
// their work with a long poll and reports each step with its lease.
func ExampleControlPlane_WaitAgentWork() {
	ctx := context.Background()
	cp := controlplane.New(storemem.New(), &controlplane.Options{
		// This server's own Deployer drives only the cluster it names.
		Drives: func(l *controlplane.Listener) bool { return l.ComputeID == "in-house" },
	})
	l, err := cp.CreateListener(ctx, exampleTenant, &controlplane.CreateListenerRequest{
		ComputeType: new(controlplane.ComputeTypeK8s), ComputeID: new("customer-eu")})
	if err != nil {
		panic(err)
	}
	token, err := cp.CreateListenerToken(ctx, exampleTenant, l.ID)
	if err != nil {
		panic(err)
	}

	// The agent starts in the customer's cluster with its token.
	tenant, listener, err := cp.AuthenticateListenerToken(ctx, token.Token)
	if err != nil {
		panic(err)
	}
	if err := cp.AgentHeartbeat(ctx, tenant, listener, "1.0.0"); err != nil {
		panic(err)
	}
	l, _ = cp.GetListener(ctx, exampleTenant, l.ID)
	fmt.Println("listener:", l.Status, l.Version)

	// A deployment on that listener waits for the agent.
	d, err := cp.CreateDeployment(ctx, exampleTenant, &controlplane.CreateDeploymentRequest{
		Name:                 new("support-agent"),
		Source:               new(controlplane.SourceExternalDocker),
		SourceConfig:         &controlplane.SourceConfig{ListenerID: new(l.ID)},
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("registry.example.com/support-agent:1.0.0")},
	})
	if err != nil {
		panic(err)
	}
	rev, _ := cp.GetRevision(ctx, exampleTenant, d.ID, *d.LatestRevisionID)
	fmt.Println("remote_reconciled:", d.RemoteReconciled, "revision:", rev.Status)

	// The agent claims it, drives its own Deployer, and reports.
	w, err := cp.WaitAgentWork(ctx, tenant, listener, 30*time.Second)
	if err != nil {
		panic(err)
	}
	fmt.Println("claimed:", w.Kind, w.Work.Deployment.Name, w.Work.Revision.Status)
	for _, s := range []controlplane.Step{
		{Status: controlplane.RevisionAwaitingDeploy},
		{Status: controlplane.RevisionDeploying},
		{Status: controlplane.RevisionDeployed, URL: new("http://support-agent.default.svc.cluster.local:8000")},
	} {
		if err := cp.ReportAgent(ctx, tenant, listener, w.Lease, s); err != nil {
			panic(err)
		}
	}
	d, _ = cp.GetDeployment(ctx, exampleTenant, d.ID)
	fmt.Println("deployment:", d.Status, *d.URL)
	// Output:
	// listener: CONNECTED 1.0.0
	// remote_reconciled: true revision: QUEUED
	// claimed: deploy support-agent QUEUED
	// deployment: READY http://support-agent.default.svc.cluster.local:8000
}
