package deploysim_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploysim"
	"github.com/deployplane/deployplane/storemem"
)

func errorsIsNotFound(err error) bool { return errors.Is(err, apierr.ErrNotFound) }

// A control plane running the simulation: a new external_docker deployment
// reaches DEPLOYED and READY by itself.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cp := controlplane.New(storemem.New(), nil)
	d, err := cp.CreateDeployment(ctx, "acme", &controlplane.CreateDeploymentRequest{Name: new("agent"),
		Source:               new(controlplane.SourceExternalDocker),
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("registry.example.com/agent:1.0.0")}})
	if err != nil {
		fmt.Println(err)
		return
	}
	rev, _ := cp.GetRevision(ctx, "acme", d.ID, *d.LatestRevisionID)
	fmt.Println("created:", rev.Status)

	done := make(chan error)
	go func() { done <- cp.Run(ctx, deploysim.New(&deploysim.Options{Step: time.Millisecond})) }()
	for !controlplane.IsTerminal(rev.Status) { // a client polls like this
		time.Sleep(5 * time.Millisecond)
		rev, _ = cp.GetRevision(ctx, "acme", d.ID, rev.ID)
	}
	d, _ = cp.GetDeployment(ctx, "acme", d.ID)
	fmt.Println("revision:", rev.Status)
	fmt.Println("deployment:", d.Status, *d.ImageVersion, *d.ActiveRevisionID == rev.ID)
	cancel()
	fmt.Println("run:", <-done)
	// Output:
	// created: CREATING
	// revision: DEPLOYED
	// deployment: READY 1.0.0 true
	// run: <nil>
}

// FailAt makes a chosen step fail, for tests and demos.
func ExampleOptions_failAt() {
	ctx := context.Background()
	cp := controlplane.New(storemem.New(), nil)
	sim := deploysim.New(&deploysim.Options{Step: time.Millisecond, FailAt: controlplane.RevisionDeploying, FailMessage: "image pull failed"})
	d, _ := cp.CreateDeployment(ctx, "acme", &controlplane.CreateDeploymentRequest{Name: new("agent"),
		Source:               new(controlplane.SourceExternalDocker),
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("registry.example.com/agent:1.0.0")}})
	for { // Process drives the work in this goroutine, one unit at a time
		if ok, err := cp.Process(ctx, sim); err != nil || !ok {
			break
		}
	}
	rev, _ := cp.GetRevision(ctx, "acme", d.ID, *d.LatestRevisionID)
	fmt.Println(rev.Status, *rev.StatusMessage)
	// Output:
	// DEPLOY_FAILED image pull failed
}
