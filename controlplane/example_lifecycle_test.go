package controlplane_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/storemem"
)

// printer is a Deployer that walks the happy path and prints each step.
type printer struct{}

func (printer) Deploy(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
	path := controlplane.HappyPath(w.Revision.Source)
	for _, s := range path[1:] {
		step := controlplane.Step{Status: s}
		if s == controlplane.RevisionDeployed {
			step.ImageVersion = new("1.0.0")
		}
		if err := r.Report(ctx, step); err != nil {
			return err
		}
		fmt.Println(" ", s)
	}
	return nil
}

func (printer) Teardown(ctx context.Context, tenant string, d *controlplane.Deployment) error {
	fmt.Println("  tearing down", d.Name)
	return nil
}

func ExampleControlPlane_Process() {
	ctx := context.Background()
	cp := controlplane.New(storemem.New(), nil)
	d := exampleDeployment(ctx, cp)

	fmt.Println("deploy:")
	if _, err := cp.Process(ctx, printer{}); err != nil {
		panic(err)
	}
	d, _ = cp.GetDeployment(ctx, exampleTenant, d.ID)
	fmt.Println(d.Status, *d.ImageVersion, *d.ActiveRevisionID == *d.LatestRevisionID)

	fmt.Println("delete:")
	if err := cp.DeleteDeployment(ctx, exampleTenant, d.ID); err != nil {
		panic(err)
	}
	if _, err := cp.Process(ctx, printer{}); err != nil {
		panic(err)
	}
	_, err := cp.GetDeployment(ctx, exampleTenant, d.ID)
	fmt.Println(errors.Is(err, apierr.ErrNotFound))
	more, _ := cp.Process(ctx, printer{})
	fmt.Println("more work:", more)
	// Output:
	// deploy:
	//   QUEUED
	//   AWAITING_DEPLOY
	//   DEPLOYING
	//   DEPLOYED
	// READY 1.0.0 true
	// delete:
	//   tearing down support-agent
	// true
	// more work: false
}

// quiet is printer without the printing.
type quiet struct{ printer }

func (quiet) Deploy(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
	path := controlplane.HappyPath(w.Revision.Source)
	for _, s := range path[1:] {
		if err := r.Report(ctx, controlplane.Step{Status: s}); err != nil {
			return err
		}
	}
	return nil
}

// announcer is quiet, and says on a channel which revision it deployed.
type announcer struct {
	quiet
	deployed chan string
}

func (a announcer) Deploy(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
	if err := a.quiet.Deploy(ctx, w, r); err != nil {
		return err
	}
	a.deployed <- w.Revision.ID
	return nil
}

func ExampleControlPlane_Run() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cp := controlplane.New(storemem.New(), nil)
	deployer := announcer{deployed: make(chan string)}
	done := make(chan error)
	go func() { done <- cp.Run(ctx, deployer) }()

	d := exampleDeployment(ctx, cp) // wakes Run at once
	<-deployer.deployed             // its last Report recorded DEPLOYED
	d, _ = cp.GetDeployment(ctx, exampleTenant, d.ID)
	fmt.Println(d.Status)
	cancel()
	fmt.Println(<-done)
	// Output:
	// READY
	// <nil>
}

func ExampleControlPlane_HandleGitHubPush() {
	ctx := context.Background()
	cp := controlplane.New(storemem.New(), nil)
	in, _ := cp.CreateIntegration(ctx, exampleTenant, &controlplane.CreateIntegrationRequest{InstallationID: new(int64(77)), Name: new("acme")})
	d, err := cp.CreateDeployment(ctx, exampleTenant, &controlplane.CreateDeploymentRequest{
		Name: new("docs-agent"), Source: new(controlplane.SourceGitHub),
		SourceConfig: &controlplane.SourceConfig{IntegrationID: &in.ID, RepoURL: new("https://github.com/acme/docs-agent"),
			BuildOnPush: new(true)},
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{RepoRef: new("main"), GraphConfigPath: new("langgraph.json")},
	})
	if err != nil {
		panic(err)
	}
	for _, ref := range []string{"refs/heads/main", "refs/heads/feature", "refs/tags/v1.0.0"} {
		pushed, err := cp.HandleGitHubPush(ctx, &controlplane.PushEvent{InstallationID: 77,
			RepoURL: "git@github.com:acme/docs-agent.git", Ref: ref, After: "9fceb02d0ae598e95dc970b74767f19372d61af8"})
		if err != nil {
			panic(err)
		}
		fmt.Println(ref, "->", len(pushed), "revision(s)")
		for _, p := range pushed {
			fmt.Println("  ", p.DeploymentID == d.ID, p.Revision.Status, *p.Revision.SourceRevisionConfig.RepoCommitSHA)
		}
	}
	first, _ := cp.GetRevision(ctx, exampleTenant, d.ID, *d.LatestRevisionID)
	fmt.Println("first revision:", first.Status)
	// Output:
	// refs/heads/main -> 1 revision(s)
	//    true CREATING 9fceb02d0ae598e95dc970b74767f19372d61af8
	// refs/heads/feature -> 0 revision(s)
	// refs/tags/v1.0.0 -> 0 revision(s)
	// first revision: SKIPPED
}

func ExampleControlPlane_GetDeploymentJSON() {
	ctx := context.Background()
	cp := controlplane.New(storemem.New(), nil)
	d := exampleDeployment(ctx, cp)
	b, err := cp.GetDeploymentJSON(ctx, exampleTenant, d.ID)
	if err != nil {
		panic(err)
	}
	// The very bytes json.Marshal gives of GetDeployment's result.
	got, _ := cp.GetDeployment(ctx, exampleTenant, d.ID)
	want, _ := json.Marshal(got)
	fmt.Println(bytes.Equal(b, want))
	var wire struct {
		Name    string                `json:"name"`
		Secrets []controlplane.Secret `json:"secrets"`
	}
	_ = json.Unmarshal(b, &wire)
	fmt.Println(wire.Name, wire.Secrets[0].Name)
	// Output:
	// true
	// support-agent OPENAI_API_KEY
}

func ExampleTransitions() {
	for _, s := range controlplane.HappyPath(controlplane.SourceExternalDocker) {
		fmt.Println(s, controlplane.Transitions(controlplane.SourceExternalDocker)[s])
	}
	// Output:
	// CREATING [QUEUED CREATE_FAILED SKIPPED INTERRUPTED UNKNOWN]
	// QUEUED [AWAITING_DEPLOY CREATE_FAILED SKIPPED INTERRUPTED UNKNOWN]
	// AWAITING_DEPLOY [DEPLOYING DEPLOY_FAILED SKIPPED INTERRUPTED UNKNOWN]
	// DEPLOYING [DEPLOYED DEPLOY_FAILED INTERRUPTED UNKNOWN]
	// DEPLOYED []
}

func ExampleControlPlane_ReportDeploymentStatus() {
	ctx := context.Background()
	cp := controlplane.New(storemem.New(), nil)
	d := exampleDeployment(ctx, cp)
	// READY needs an active revision; a deployer reports UNUSED after
	// scaling an idle deployment to zero.
	err := cp.ReportDeploymentStatus(ctx, exampleTenant, d.ID, controlplane.StatusReady)
	fmt.Println(errors.Is(err, apierr.ErrInvalidState))
	if _, err := cp.Process(ctx, quiet{}); err != nil {
		panic(err)
	}
	if err := cp.ReportDeploymentStatus(ctx, exampleTenant, d.ID, controlplane.StatusUnused); err != nil {
		panic(err)
	}
	d, _ = cp.GetDeployment(ctx, exampleTenant, d.ID)
	fmt.Println(d.Status)
	// Output:
	// true
	// UNUSED
}

// careful is a Deployer that stops driving a revision once the control
// plane refuses its reports: here a client deletes the deployment while
// it deploys.
type careful struct{ cp *controlplane.ControlPlane }

func (c careful) Deploy(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
	_, err := controlplane.Advance(ctx, r, w.Revision.Source, w.Revision.Status, controlplane.RevisionDeploying, controlplane.Step{})
	if err != nil {
		return err
	}
	if err := c.cp.DeleteDeployment(ctx, w.Tenant, w.Deployment.ID); err != nil {
		return err
	}
	err = r.Report(ctx, controlplane.Step{Status: controlplane.RevisionDeployed})
	if controlplane.IsRefusal(err) {
		// Not this deployer's revision any more: report nothing more,
		// remove what was started for it alone, and return.
		fmt.Println("refused:", errors.Is(err, controlplane.ErrRevisionEnded))
		return nil
	}
	return err
}

func (careful) Teardown(ctx context.Context, tenant string, d *controlplane.Deployment) error {
	return nil
}

func ExampleIsRefusal() {
	ctx := context.Background()
	cp := controlplane.New(storemem.New(), nil)
	d := exampleDeployment(ctx, cp)
	if _, err := cp.Process(ctx, careful{cp}); err != nil {
		panic(err)
	}
	rev, _ := cp.GetRevision(ctx, exampleTenant, d.ID, *d.LatestRevisionID)
	fmt.Println(rev.Status)
	fmt.Println(controlplane.IsRefusal(context.Canceled))
	// Output:
	// refused: true
	// INTERRUPTED
	// false
}

func ExampleControlPlane_InterruptRevision() {
	ctx := context.Background()
	cp := controlplane.New(storemem.New(), nil)
	d := exampleDeployment(ctx, cp)
	if _, err := cp.Process(ctx, quiet{}); err != nil { // the first revision is DEPLOYED
		panic(err)
	}
	next, err := cp.CreateRevision(ctx, exampleTenant, d.ID, nil)
	if err != nil {
		panic(err)
	}

	rev, err := cp.InterruptRevision(ctx, exampleTenant, d.ID, next.ID)
	if err != nil {
		panic(err)
	}
	fmt.Println(rev.Status, *rev.StatusMessage)
	more, _ := cp.Process(ctx, quiet{})
	fmt.Println("more work:", more)
	d, _ = cp.GetDeployment(ctx, exampleTenant, d.ID)
	fmt.Println(d.Status, *d.ActiveRevisionID != next.ID)
	_, err = cp.InterruptRevision(ctx, exampleTenant, d.ID, *d.ActiveRevisionID)
	fmt.Println(errors.Is(err, apierr.ErrInvalidState))
	// Output:
	// INTERRUPTED The revision was interrupted.
	// more work: false
	// READY true
	// true
}

func ExampleControlPlane_DeleteDeployments() {
	ctx := context.Background()
	cp := controlplane.New(storemem.New(), nil)
	d := exampleDeployment(ctx, cp)

	res, err := cp.DeleteDeployments(ctx, exampleTenant, []string{d.ID, "00000000-0000-4000-8000-00000000abcd", "nope"}, nil)
	if err != nil {
		panic(err)
	}
	for _, r := range res {
		fmt.Println(r.ID == d.ID, r.Err)
	}
	_, err = cp.DeleteDeployments(ctx, exampleTenant, nil, nil)
	fmt.Println(err)
	// Output:
	// true <nil>
	// false Deployment ID 00000000-0000-4000-8000-00000000abcd not found.
	// false validation failed: query.deployment_ids.2: Input should be a valid UUID
	// validation failed: query.deployment_ids: Field required
}
