package controlplane_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/storemem"
)

// validateSeeds add listener bodies and references to the create and
// patch seeds.
var validateSeeds = append([]string{
	`{"compute_type": "k8s", "compute_id": "c", "compute_config": {"k8s_namespaces": ["a", "A", "a"]}, "version": "1"}`,
	`{"compute_type": "ecs", "compute_id": "", "version": "` + strings.Repeat("v", 300) + `"}`,
	`{"name": "x", "source": "external_docker", "source_revision_config": {"image_uri": "i"},
	  "source_config": {"listener_id": "00000000-0000-7000-8000-0000000000ff", "listener_config": {"k8s_namespace": "n"}}}`,
	`{"name": "x", "source": "github", "source_config": {"integration_id": "00000000-0000-7000-8000-0000000000ff"}}`,
}, fuzzSeeds...)

// FuzzValidateOnly: each Validate method reports exactly the problems of
// the method that writes, and writes nothing; when it finds none, the
// writing method does not fail validation either.
func FuzzValidateOnly(f *testing.F) {
	for _, s := range validateSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		fx := newFixture(t, nil)
		body = strings.ReplaceAll(body, "{{int}}", "00000000-0000-7000-8000-000000000001")
		fx.integration(tenantA)
		docker := fx.create(tenantA, dockerBody("docker-base"))
		github := fx.create(tenantA, githubBody("github-base", "00000000-0000-7000-8000-000000000001"))
		lid := fx.listener(tenantA, "ns")

		same := func(op string, vErr, err error) {
			t.Helper()
			var ve *apierr.ValidationError
			switch {
			case vErr == nil:
				if errors.As(err, &ve) {
					t.Fatalf("%s: Validate found nothing, the call found %+v", op, ve.Problems)
				}
			case errors.As(vErr, &ve):
				diff(t, op+": problems", ve.Problems, problems(t, err))
			default:
				t.Fatalf("%s: Validate: %v", op, vErr)
			}
		}
		// unchanged checks that fn writes nothing.
		unchanged := func(op string, fn func() error) error {
			t.Helper()
			before := dump(t, fx.st)
			err := fn()
			diff(t, op+" wrote", before, dump(t, fx.st))
			return err
		}

		var create controlplane.CreateDeploymentRequest
		if json.Unmarshal([]byte(body), &create) == nil {
			vErr := unchanged("ValidateCreateDeployment", func() error { return fx.cp.ValidateCreateDeployment(fx.ctx, tenantA, &create) })
			_, err := fx.cp.CreateDeployment(fx.ctx, tenantA, &create)
			same("create", vErr, err)
		}
		var patch controlplane.UpdateDeploymentRequest
		if json.Unmarshal([]byte(body), &patch) == nil {
			for _, d := range []*controlplane.Deployment{docker, github} {
				vErr := unchanged("ValidateUpdateDeployment", func() error { return fx.cp.ValidateUpdateDeployment(fx.ctx, tenantA, d.ID, &patch) })
				_, err := fx.cp.UpdateDeployment(fx.ctx, tenantA, d.ID, &patch)
				same("patch "+string(d.Source), vErr, err)
			}
		}
		var cl controlplane.CreateListenerRequest
		if json.Unmarshal([]byte(body), &cl) == nil {
			vErr := unchanged("ValidateCreateListener", func() error { return fx.cp.ValidateCreateListener(fx.ctx, tenantA, &cl) })
			_, err := fx.cp.CreateListener(fx.ctx, tenantA, &cl)
			same("create listener", vErr, err)
		}
		var ul controlplane.UpdateListenerRequest
		if json.Unmarshal([]byte(body), &ul) == nil {
			vErr := unchanged("ValidateUpdateListener", func() error { return fx.cp.ValidateUpdateListener(fx.ctx, tenantA, lid, &ul) })
			_, err := fx.cp.UpdateListener(fx.ctx, tenantA, lid, &ul)
			same("patch listener", vErr, err)
		}
	})
}

// TestValidateOnlyErrors: the Validate methods of an update answer as the
// update would when there is nothing to update.
func TestValidateOnlyErrors(t *testing.T) {
	fx := newFixture(t, nil)
	unknown := "00000000-0000-7000-8000-0000000000ff"
	if err := fx.cp.ValidateUpdateDeployment(fx.ctx, tenantA, unknown, nil); !errors.Is(err, apierr.ErrNotFound) {
		t.Errorf("ValidateUpdateDeployment of an unknown id: %v", err)
	}
	if err := fx.cp.ValidateUpdateListener(fx.ctx, tenantA, "nope", nil); !errors.Is(err, apierr.ErrNotFound) {
		t.Errorf("ValidateUpdateListener of a malformed id: %v", err)
	}
	d := fx.create(tenantA, dockerBody("d"))
	fx.reachEngine() // else the delete removes it at once
	if err := fx.cp.DeleteDeployment(fx.ctx, tenantA, d.ID); err != nil {
		t.Fatal(err)
	}
	if err := fx.cp.ValidateUpdateDeployment(fx.ctx, tenantA, d.ID, nil); !errors.Is(err, apierr.ErrInvalidState) {
		t.Errorf("ValidateUpdateDeployment while deleting: %v", err)
	}
	if err := fx.cp.ValidateCreateDeployment(fx.ctx, tenantA, nil); err == nil {
		t.Error("ValidateCreateDeployment of an empty request: nil")
	}
	if err := fx.cp.ValidateCreateListener(fx.ctx, "", nil); !errors.Is(err, apierr.ErrInvalidTenant) {
		t.Errorf("ValidateCreateListener without tenant: %v", err)
	}
}

// A front end that could decode only part of a request (name was not a
// string) lists the rule problems of the rest without creating anything.
func ExampleControlPlane_ValidateCreateDeployment() {
	ctx := context.Background()
	cp := controlplane.New(storemem.New(), nil)

	err := cp.ValidateCreateDeployment(ctx, exampleTenant, &controlplane.CreateDeploymentRequest{
		Source:  new(controlplane.SourceExternalDocker),
		Secrets: []controlplane.SecretInput{{Name: "1BAD", Value: new("x")}},
	})
	var ve *apierr.ValidationError
	if errors.As(err, &ve) {
		for _, p := range ve.Problems {
			fmt.Println(p.Loc, p.Type)
		}
	}
	page, _ := cp.ListDeployments(ctx, exampleTenant, nil)
	fmt.Println(len(page.Resources), "deployments")
	// Output:
	// [body name] missing
	// [body source_revision_config image_uri] missing
	// [body secrets 0 name] string_pattern_mismatch
	// 0 deployments
}
