package controlplane_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/storemem"
)

const exampleTenant = "0b7f3c52-5d8e-4e33-9c1a-6f0e8a1d2c3b"

// exampleDeployment creates the self-hosted deployment the examples share.
func exampleDeployment(ctx context.Context, cp *controlplane.ControlPlane) *controlplane.Deployment {
	d, err := cp.CreateDeployment(ctx, exampleTenant, &controlplane.CreateDeploymentRequest{
		Name:   new("support-agent"),
		Source: new(controlplane.SourceExternalDocker),
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{
			ImageURI: new("registry.example.com/support-agent:1.0.0"),
		},
		Secrets: []controlplane.Secret{{Name: "OPENAI_API_KEY", Value: "sk-..."}},
	})
	if err != nil {
		panic(err)
	}
	return d
}

func ExampleControlPlane_CreateDeployment() {
	ctx := context.Background()
	cp := controlplane.New(storemem.New(), nil)

	d := exampleDeployment(ctx, cp)
	fmt.Println(d.Name, d.Source, d.Status)
	rev, err := cp.GetRevision(ctx, exampleTenant, d.ID, *d.LatestRevisionID)
	if err != nil {
		panic(err)
	}
	fmt.Println("first revision:", rev.Status, *rev.SourceRevisionConfig.ImageURI)
	// Output:
	// support-agent external_docker AWAITING_DATABASE
	// first revision: CREATING registry.example.com/support-agent:1.0.0
}

func ExampleControlPlane_UpdateDeployment() {
	ctx := context.Background()
	cp := controlplane.New(storemem.New(), nil)
	d := exampleDeployment(ctx, cp)

	// A new image is a revision-triggering change.
	patched, err := cp.UpdateDeployment(ctx, exampleTenant, d.ID, &controlplane.UpdateDeploymentRequest{
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("registry.example.com/support-agent:1.1.0")},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("new revision:", *patched.LatestRevisionID != *d.LatestRevisionID)
	fmt.Println("image:", *patched.SourceRevisionConfig.ImageURI)
	page, err := cp.ListRevisions(ctx, exampleTenant, d.ID, nil)
	if err != nil {
		panic(err)
	}
	for _, r := range page.Resources {
		fmt.Println(*r.SourceRevisionConfig.ImageURI)
	}
	// Output:
	// new revision: true
	// image: registry.example.com/support-agent:1.1.0
	// registry.example.com/support-agent:1.1.0
	// registry.example.com/support-agent:1.0.0
}

func ExampleValidationError() {
	ctx := context.Background()
	cp := controlplane.New(storemem.New(), nil)
	d := exampleDeployment(ctx, cp)

	// name cannot change, and repo_ref does not apply to external_docker.
	_, err := cp.UpdateDeployment(ctx, exampleTenant, d.ID, &controlplane.UpdateDeploymentRequest{
		Name:                 new("renamed"),
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{RepoRef: new("main")},
	})
	var ve *controlplane.ValidationError
	if errors.As(err, &ve) {
		for _, p := range ve.Problems {
			fmt.Println(p.Loc, p.Type)
		}
	}
	// Output:
	// [body name] immutable_field
	// [body source_revision_config repo_ref] not_applicable_to_source
}
