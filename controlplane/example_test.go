package controlplane_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/deployplane/deployplane/apierr"
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
		Secrets: []controlplane.SecretInput{{Name: "OPENAI_API_KEY", Value: new("sk-...")}},
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
	var ve *apierr.ValidationError
	if errors.As(err, &ve) {
		for _, p := range ve.Problems {
			fmt.Println(p.Loc, p.Type)
		}
	}
	// Output:
	// [body name] immutable_field
	// [body source_revision_config repo_ref] not_applicable_to_source
}

func ExampleNew() {
	ctx := context.Background()
	// A cloud control plane offers github deployments only.
	cp := controlplane.New(storemem.New(), &controlplane.Options{
		Sources: []controlplane.Source{controlplane.SourceGitHub},
	})
	_, err := cp.CreateDeployment(ctx, exampleTenant, &controlplane.CreateDeploymentRequest{
		Name:                 new("agent"),
		Source:               new(controlplane.SourceExternalDocker),
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("registry.example.com/agent:1")},
	})
	fmt.Println(err)
	// Output:
	// validation failed: body.source: Source 'external_docker' is not offered by this control plane
}

func ExampleControlPlane_ListDeployments() {
	ctx := context.Background()
	cp := controlplane.New(storemem.New(), nil)
	for _, name := range []string{"billing-agent", "support-agent", "Support-Bot"} {
		_, err := cp.CreateDeployment(ctx, exampleTenant, &controlplane.CreateDeploymentRequest{
			Name:                 new(name),
			Source:               new(controlplane.SourceExternalDocker),
			SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("registry.example.com/" + name + ":1")},
		})
		if err != nil {
			panic(err)
		}
	}
	page, err := cp.ListDeployments(ctx, exampleTenant, &controlplane.ListDeploymentsQuery{NameContains: "support", Limit: new(10)})
	if err != nil {
		panic(err)
	}
	for _, d := range page.Resources {
		fmt.Println(d.Name)
	}
	fmt.Println("next offset:", page.Offset)
	// Output:
	// Support-Bot
	// support-agent
	// next offset: 2
}

func ExampleControlPlane_RedeployRevision() {
	ctx := context.Background()
	cp := controlplane.New(storemem.New(), nil)
	d := exampleDeployment(ctx, cp)
	first := *d.LatestRevisionID
	if _, err := cp.UpdateDeployment(ctx, exampleTenant, d.ID, &controlplane.UpdateDeploymentRequest{
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("registry.example.com/support-agent:2.0.0")},
	}); err != nil {
		panic(err)
	}
	// Roll back: a new revision with the first one's snapshot.
	back, err := cp.RedeployRevision(ctx, exampleTenant, d.ID, first)
	if err != nil {
		panic(err)
	}
	fmt.Println(*back.SourceRevisionConfig.ImageURI, *back.LatestRevisionID != first)
	// Output:
	// registry.example.com/support-agent:1.0.0 true
}

func ExampleControlPlane_CreateListener() {
	ctx := context.Background()
	cp := controlplane.New(storemem.New(), nil)
	l, err := cp.CreateListener(ctx, exampleTenant, &controlplane.CreateListenerRequest{
		ComputeType:   new("k8s"),
		ComputeID:     new("prod-cluster"),
		ComputeConfig: &controlplane.ComputeConfig{K8sNamespaces: []string{"agents"}},
	})
	if err != nil {
		panic(err)
	}
	// Self-hosted deployments name the listener and one of its namespaces.
	d, err := cp.CreateDeployment(ctx, exampleTenant, &controlplane.CreateDeploymentRequest{
		Name:   new("agent"),
		Source: new(controlplane.SourceExternalDocker),
		SourceConfig: &controlplane.SourceConfig{ListenerID: &l.ID,
			ListenerConfig: &controlplane.ListenerConfig{K8sNamespace: new("agents")}},
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("registry.example.com/agent:1")},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(l.ComputeID, *d.SourceConfig.ListenerConfig.K8sNamespace)
	// Output:
	// prod-cluster agents
}

func ExampleFieldRules() {
	for _, r := range controlplane.FieldRules() {
		if r.Loc[0] == "source_revision_config" {
			fmt.Print(r.Loc)
			for _, s := range controlplane.Sources() {
				fmt.Print(" ", r.Patch[s] == controlplane.PatchRevision)
			}
			fmt.Println()
		}
	}
	// Output:
	// [source_revision_config repo_ref] true false false false
	// [source_revision_config graph_config_path] true false true false
	// [source_revision_config image_uri] false true false true
	// [source_revision_config source_tarball_path] false false true false
	// [source_revision_config repo_commit_sha] false false false false
}

func ExampleResourceSpec_WithDefaults() {
	spec := controlplane.ResourceSpec{CPU: new(1.5), MemoryMB: new(int64(1024))}
	d := spec.WithDefaults()
	fmt.Println(*d.CPULimit, *d.MemoryLimitMB, *d.QueueCPU, *d.QueueMemoryLimitMB)
	// Output:
	// 3 2048 1.5 2048
}

// Options.SecretKey seals deployment and revision secrets at rest; the
// ControlPlane still answers them in plain text, and a ControlPlane without
// the key cannot read them.
func ExampleOptions_secretKey() {
	ctx := context.Background()
	st := storemem.New()
	key := []byte("an example key of 32 bytes......") // in production: 32 random bytes, kept apart from the store
	cp := controlplane.New(st, &controlplane.Options{SecretKey: key})

	d := exampleDeployment(ctx, cp)
	got, err := cp.GetDeployment(ctx, exampleTenant, d.ID)
	if err != nil {
		panic(err)
	}
	fmt.Println(got.Secrets[0].Name, got.Secrets[0].Value)

	_, err = controlplane.New(st, nil).GetDeployment(ctx, exampleTenant, d.ID)
	fmt.Println(errors.Is(err, controlplane.ErrSecretKey))
	// Output:
	// OPENAI_API_KEY sk-...
	// true
}
