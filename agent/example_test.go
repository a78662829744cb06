package agent_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"time"

	"github.com/deployplane/deployplane/agent"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploysim"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/storemem"
)

// A control plane that drives no cluster itself, and the agent of one of
// its listeners with a listener token: the deployment on that listener
// waits for the agent, which claims it over HTTP and drives it (here with
// the simulated deployer; in a cluster with deployk8s) to DEPLOYED.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const tenant = "0194c0de-0000-7000-8000-000000000001"
	cp := controlplane.New(storemem.New(), &controlplane.Options{
		Drives: func(*controlplane.Listener) bool { return false }, // every listener has agents
	})
	keys, _ := httphandler.NewKeyTable([]httphandler.Key{{SHA256: httphandler.HashKey("key"), Tenants: []string{tenant}}})
	api := httphandler.New(cp, &httphandler.Options{Authenticator: keys, Logger: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(api)
	defer srv.Close()

	l, _ := cp.CreateListener(ctx, tenant, &controlplane.CreateListenerRequest{ComputeType: new("k8s"), ComputeID: new("prod-eu")})
	tok, _ := cp.CreateListenerToken(ctx, tenant, l.ID) // POST /v2/listeners/{id}/tokens
	d, _ := cp.CreateDeployment(ctx, tenant, &controlplane.CreateDeploymentRequest{Name: new("bot"),
		Source: new(controlplane.SourceExternalDocker), SourceConfig: &controlplane.SourceConfig{ListenerID: &l.ID},
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("registry.example.com/bot:1")}})
	rev, _ := cp.GetRevision(ctx, tenant, d.ID, *d.LatestRevisionID)
	fmt.Println("before the agent:", rev.Status)

	// The agent, as `deployplane agent` runs it beside the cluster.
	a, err := agent.New(&agent.Options{ControlPlane: srv.URL, ListenerID: l.ID, Token: tok.Token,
		Deployer: deploysim.New(&deploysim.Options{Step: time.Millisecond}), Version: "example",
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	done := make(chan error)
	go func() { done <- a.Run(ctx) }()
	for !controlplane.IsTerminal(rev.Status) { // a client polls like this
		time.Sleep(5 * time.Millisecond)
		rev, _ = cp.GetRevision(ctx, tenant, d.ID, rev.ID)
	}
	l, _ = cp.GetListener(ctx, tenant, l.ID)
	fmt.Println("revision:", rev.Status)
	fmt.Println("listener:", l.Status, l.Version)
	cancel()
	fmt.Println("run:", <-done)
	// Output:
	// before the agent: QUEUED
	// revision: DEPLOYED
	// listener: CONNECTED example
	// run: <nil>
}
