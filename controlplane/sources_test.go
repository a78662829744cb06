package controlplane_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/store"
)

// The sources of langgraph deploy (wire contract section 10), as the
// hosted service's CLI sends them.

// TestInternalSourcesCreateWithoutRevision: a create without what a
// revision comes from makes none (latest_revision_id null, no revision,
// AWAITING_DATABASE); the source's defaults apply; the PATCH that brings
// it makes the first revision, which answers tracked_packages.
func TestInternalSourcesCreateWithoutRevision(t *testing.T) {
	for _, tt := range []struct {
		source, body, patch string
		wantGraph           any
	}{
		{"internal_docker", `{}`, `{"revision_source": "internal_docker", "source_revision_config": {"image_uri": "127.0.0.1:5000/t/d/agent@sha256:` + strings.Repeat("0f", 32) + `"}, "tracked_packages": ["langgraph", "langchain-core"]}`, nil},
		{"internal_source", `{}`, `{"revision_source": "internal_source", "source_revision_config": {"source_tarball_path": "uploads/x.tar.gz", "langgraph_config_path": "langgraph.json"}, "tracked_packages": ["langgraph", "langchain-core"], "source_config": {"install_command": "pip install ."}}`, "langgraph.json"},
		{"internal_source", `{"langgraph_config_path": "apps/a/langgraph.json"}`, `{"source_revision_config": {"source_tarball_path": "uploads/x.tar.gz"}, "tracked_packages": ["langgraph", "langchain-core"]}`, "apps/a/langgraph.json"},
	} {
		t.Run(tt.source, func(t *testing.T) {
			f := newFixture(t, &controlplane.Options{Uploads: controlplane.AnyUpload{}}) // paths of no upload
			d := f.create(tenantA, fmt.Sprintf(`{"name": "agent", "source": %q, "source_config": {}, "source_revision_config": %s, "secrets": []}`, tt.source, tt.body))
			if d.LatestRevisionID != nil || d.Status != controlplane.StatusAwaitingDatabase {
				t.Fatalf("created: latest_revision_id %v, status %s; want null, AWAITING_DATABASE", d.LatestRevisionID, d.Status)
			}
			diff(t, "deployment_type", controlplane.DeploymentTypeDev, *d.SourceConfig.DeploymentType)
			var graph any
			if g := d.SourceRevisionConfig.LanggraphConfigPath; g != nil {
				graph = *g
			}
			diff(t, "langgraph_config_path", tt.wantGraph, graph)
			page, err := f.cp.ListRevisions(f.ctx, tenantA, d.ID, nil)
			if err != nil || len(page.Resources) != 0 {
				t.Fatalf("revisions before a source: %v, %v", page, err)
			}
			// A PATCH of secrets alone has nothing to make a revision of:
			// it changes the deployment in place.
			d2, err := f.cp.UpdateDeployment(f.ctx, tenantA, d.ID, decode[controlplane.UpdateDeploymentRequest](t, `{"secrets": [{"name": "K", "value": "v"}]}`))
			if err != nil || d2.LatestRevisionID != nil || len(d2.Secrets) != 1 {
				t.Fatalf("PATCH of secrets before a source: %+v, %v", d2, err)
			}
			// POST .../revisions without one is refused at the field it needs.
			_, err = f.cp.CreateRevision(f.ctx, tenantA, d.ID, decode[controlplane.UpdateDeploymentRequest](t, `{}`))
			want := map[string]string{"internal_docker": "body.source_revision_config.image_uri: missing",
				"internal_source": "body.source_revision_config.source_tarball_path: missing"}[tt.source]
			diff(t, "problems", []string{want}, locTypes(problems(t, err)))

			d3, err := f.cp.UpdateDeployment(f.ctx, tenantA, d.ID, decode[controlplane.UpdateDeploymentRequest](t, tt.patch))
			if err != nil {
				t.Fatal(err)
			}
			if d3.LatestRevisionID == nil {
				t.Fatal("the PATCH with a source made no revision")
			}
			rev, err := f.cp.GetRevision(f.ctx, tenantA, d.ID, *d3.LatestRevisionID)
			if err != nil {
				t.Fatal(err)
			}
			diff(t, "tracked_packages", []string{"langgraph", "langchain-core"}, rev.TrackedPackages)
			diff(t, "revision config", d3.SourceRevisionConfig, rev.SourceRevisionConfig)
			// A redeploy copies them; a PATCH without them records none.
			if _, err := f.cp.UpdateDeployment(f.ctx, tenantA, d.ID, decode[controlplane.UpdateDeploymentRequest](t, `{"secrets": [{"name": "K", "value": "w"}]}`)); err != nil {
				t.Fatal(err)
			}
			d4, err := f.cp.RedeployRevision(f.ctx, tenantA, d.ID, rev.ID)
			if err != nil {
				t.Fatal(err)
			}
			page, err = f.cp.ListRevisions(f.ctx, tenantA, d.ID, nil)
			if err != nil {
				t.Fatal(err)
			}
			var got [][]string
			for _, r := range page.Resources {
				got = append(got, r.TrackedPackages)
			}
			diff(t, "tracked_packages, newest first", [][]string{{"langgraph", "langchain-core"}, nil, {"langgraph", "langchain-core"}}, got)
			diff(t, "the redeployed revision is latest", *d4.LatestRevisionID, page.Resources[0].ID)
		})
	}
}

// TestInternalSourcesRefusals: each field that does not apply, a bad
// revision_source, bad tracked_packages, and a source_tarball_path for
// another source, answer 422 at their loc.
func TestInternalSourcesRefusals(t *testing.T) {
	f := newFixture(t, nil)
	for _, tt := range []struct {
		name, body string
		want       []string
	}{
		{"docker: not applicable", `{"name": "a", "source": "internal_docker", "source_config": {"repo_url": "https://github.com/a/b", "build_on_push": true, "custom_url": "https://x", "install_command": "npm ci"},
			"source_revision_config": {"repo_ref": "main", "source_tarball_path": "u/x.tar.gz", "langgraph_config_path": "langgraph.json"}}`,
			[]string{"body.source_config.repo_url: not_applicable_to_source", "body.source_config.build_on_push: not_applicable_to_source",
				"body.source_config.custom_url: not_applicable_to_source", "body.source_config.install_command: not_applicable_to_source",
				"body.source_revision_config.repo_ref: not_applicable_to_source", "body.source_revision_config.langgraph_config_path: not_applicable_to_source",
				"body.source_revision_config.source_tarball_path: not_applicable_to_source"}},
		{"source: not applicable", `{"name": "a", "source": "internal_source", "source_config": {"integration_id": "00000000-0000-4000-8000-000000000001", "listener_id": "00000000-0000-4000-8000-000000000002", "listener_config": {"k8s_namespace": "x"}},
			"source_revision_config": {"image_uri": "r/a:1"}}`,
			[]string{"body.source_config.integration_id: not_applicable_to_source", "body.source_config.listener_id: not_applicable_to_source",
				"body.source_config.listener_config: not_applicable_to_source", "body.source_revision_config.image_uri: not_applicable_to_source"}},
		{"a bad deployment type", `{"name": "a", "source": "internal_docker", "source_config": {"deployment_type": "huge"}}`,
			[]string{"body.source_config.deployment_type: literal_error"}},
		{"an unknown source", `{"name": "a", "source": "internal"}`, []string{"body.source: literal_error"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.cp.CreateDeployment(f.ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t, tt.body))
			diff(t, "problems", tt.want, locTypes(problems(t, err)))
		})
	}
	ps := problems(t, func() error {
		_, err := f.cp.CreateDeployment(f.ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t, `{"name": "a", "source": "github", "source_config": {"integration_id": "00000000-0000-4000-8000-000000000001", "repo_url": "u"},
			"source_revision_config": {"repo_ref": "main", "graph_config_path": "g", "image_uri": "i"}}`))
		return err
	}())
	var msgs []string
	for _, p := range ps {
		if p.Loc[len(p.Loc)-1] == "image_uri" {
			msgs = append(msgs, p.Msg)
		}
	}
	diff(t, "message of a field of two sources", []string{"Field applies only to sources 'external_docker' and 'internal_docker' and must be null for source 'github'"}, msgs)

	d := f.create(tenantA, `{"name": "docker", "source": "internal_docker"}`)
	gh := f.create(tenantA, dockerBody("ext"))
	for _, tt := range []struct {
		name, id, body string
		want           []string
	}{
		{"revision_source of another source", d.ID, `{"revision_source": "internal_source", "source_revision_config": {"image_uri": "r/a:1"}}`,
			[]string{"body.revision_source: literal_error"}},
		{"revision_source of no source", d.ID, `{"revision_source": "gitlab", "source_revision_config": {"image_uri": "r/a:1"}}`,
			[]string{"body.revision_source: literal_error"}},
		{"revision_source on external_docker", gh.ID, `{"revision_source": "internal_docker"}`, []string{"body.revision_source: literal_error"}},
		{"tracked_packages", d.ID, fmt.Sprintf(`{"source_revision_config": {"image_uri": "r/a:1"}, "tracked_packages": ["ok", "", %q, "%s"]}`,
			strings.Repeat("é", 214), strings.Repeat("p", 215)),
			[]string{"body.tracked_packages.1: string_too_short", "body.tracked_packages.3: string_too_long"}},
		{"too many tracked_packages", d.ID, `{"source_revision_config": {"image_uri": "r/a:1"}, "tracked_packages": [` + strings.Repeat(`"p",`, 100) + `"p"]}`,
			[]string{"body.tracked_packages: too_long"}},
		{"deployment_type is immutable", d.ID, `{"source_config": {"deployment_type": "prod"}}`, []string{"body.source_config.deployment_type: immutable_field"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.cp.UpdateDeployment(f.ctx, tenantA, tt.id, decode[controlplane.UpdateDeploymentRequest](t, tt.body))
			diff(t, "problems", tt.want, locTypes(problems(t, err)))
			err = f.cp.ValidateUpdateDeployment(f.ctx, tenantA, tt.id, decode[controlplane.UpdateDeploymentRequest](t, tt.body))
			diff(t, "ValidateUpdateDeployment's problems", tt.want, locTypes(problems(t, err)))
		})
	}
}

// TestInternalSourcesOffered: the sources of langgraph deploy are offered
// wherever external_docker is, and not by a cloud install.
func TestInternalSourcesOffered(t *testing.T) {
	for _, tt := range []struct {
		offered []controlplane.Source
		want    bool
	}{
		{nil, true},
		{[]controlplane.Source{controlplane.SourceExternalDocker}, true},
		{[]controlplane.Source{controlplane.SourceGitHub}, false},
		{[]controlplane.Source{controlplane.SourceInternalDocker}, true},
	} {
		f := newFixture(t, &controlplane.Options{Sources: tt.offered})
		_, err := f.cp.CreateDeployment(f.ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t, `{"name": "a", "source": "internal_docker"}`))
		if (err == nil) != tt.want {
			t.Errorf("sources %v: create internal_docker: %v, want offered %v", tt.offered, err, tt.want)
		}
	}
}

// uploads is an UploadChecker over a record the test writes in the same
// store ("hook" collection): a path is good when that record exists.
type uploads struct{ calls int }

func (u *uploads) CheckUpload(r store.Reader, tenant, deploymentID, objectPath string) error {
	u.calls++
	if _, err := r.Get("hook", tenant+"/"+deploymentID+"/"+objectPath); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("%w: %s was not uploaded for this deployment", controlplane.ErrUploadNotFound, objectPath)
		}
		return err
	}
	return nil
}

// TestUploadCheckerHook: Options.Uploads decides whether a
// source_tarball_path makes a revision, inside the transaction; a refusal
// is 422 unknown_reference at its loc and changes nothing.
func TestUploadCheckerHook(t *testing.T) {
	u := &uploads{}
	f := newFixture(t, &controlplane.Options{Uploads: u})
	d := f.create(tenantA, `{"name": "src", "source": "internal_source"}`)
	body := `{"source_revision_config": {"source_tarball_path": "uploads/a.tar.gz"}}`
	_, err := f.cp.UpdateDeployment(f.ctx, tenantA, d.ID, decode[controlplane.UpdateDeploymentRequest](t, body))
	diff(t, "problems", []string{"body.source_revision_config.source_tarball_path: unknown_reference"}, locTypes(problems(t, err)))
	if err := f.st.Update(f.ctx, func(tx store.Tx) error { return tx.Put("hook", tenantA+"/"+d.ID+"/uploads/a.tar.gz", nil) }); err != nil {
		t.Fatal(err)
	}
	d2, err := f.cp.UpdateDeployment(f.ctx, tenantA, d.ID, decode[controlplane.UpdateDeploymentRequest](t, body))
	if err != nil || d2.LatestRevisionID == nil {
		t.Fatalf("PATCH with an uploaded tarball: %v, %v", d2, err)
	}
	if u.calls < 2 {
		t.Errorf("the checker was called %d times, want 2 or more", u.calls)
	}
	// Other sources never reach it.
	calls := u.calls
	f.create(tenantA, dockerBody("ext"))
	diff(t, "calls for another source", calls, u.calls)
}

// TestNoUploadsWithoutChecker: without Options.Uploads, uploads are not
// offered: every source_tarball_path is refused, at create, PATCH and
// POST .../revisions, saying so; AnyUpload takes it as given.
func TestNoUploadsWithoutChecker(t *testing.T) {
	f := newFixture(t, nil)
	const path = `"uploads/0190f0a0-0000-7000-8000-000000000001/0190f0a0-0000-7000-8000-000000000002.tar.gz"`
	_, err := f.cp.CreateDeployment(f.ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t,
		`{"name": "c", "source": "internal_source", "source_revision_config": {"source_tarball_path": `+path+`}}`))
	diff(t, "create: problems", []string{"body.source_revision_config.source_tarball_path: unknown_reference"}, locTypes(problems(t, err)))
	d := f.create(tenantA, `{"name": "src", "source": "internal_source"}`)
	body := `{"source_revision_config": {"source_tarball_path": ` + path + `}}`
	_, err = f.cp.UpdateDeployment(f.ctx, tenantA, d.ID, decode[controlplane.UpdateDeploymentRequest](t, body))
	ps := problems(t, err)
	diff(t, "PATCH: problems", []string{"body.source_revision_config.source_tarball_path: unknown_reference"}, locTypes(ps))
	if !strings.Contains(ps[0].Msg, "does not accept uploads") {
		t.Errorf("PATCH: message %q, want it to say uploads are not accepted", ps[0].Msg)
	}
	_, err = f.cp.CreateRevision(f.ctx, tenantA, d.ID, decode[controlplane.UpdateDeploymentRequest](t, body))
	diff(t, "revisions: problems", []string{"body.source_revision_config.source_tarball_path: unknown_reference"}, locTypes(problems(t, err)))
	fa := newFixture(t, &controlplane.Options{Uploads: controlplane.AnyUpload{}})
	d = fa.create(tenantA, `{"name": "src", "source": "internal_source"}`)
	d2, err := fa.cp.UpdateDeployment(fa.ctx, tenantA, d.ID, decode[controlplane.UpdateDeploymentRequest](t, `{"source_revision_config": {"source_tarball_path": "uploads/a.tar.gz"}}`))
	if err != nil || d2.LatestRevisionID == nil {
		t.Fatalf("AnyUpload: PATCH: %v, %v", d2, err)
	}
	// A revision named under another checker is not redeployed by a
	// control plane without uploads.
	none := controlplane.New(fa.st, nil)
	_, err = none.RedeployRevision(fa.ctx, tenantA, d.ID, *d2.LatestRevisionID)
	if !errors.Is(err, apierr.ErrInvalidState) || !strings.Contains(err.Error(), "does not accept uploads") {
		t.Errorf("redeploy without uploads: %v, want ErrInvalidState saying uploads are not accepted", err)
	}
}

// images is an ImageResolver: a tag in "reg.test/" resolves to a digest,
// "reg.test/missing:*" is not there, anything else is kept.
type images struct{ seen []string }

func (im *images) ResolveImage(_ context.Context, tenant, deploymentID, image string) (string, error) {
	im.seen = append(im.seen, deploymentID+" "+image)
	name, _, _ := strings.Cut(image, ":")
	switch {
	case strings.HasPrefix(image, "reg.test/missing"):
		return "", fmt.Errorf("%w: %s", controlplane.ErrImageNotFound, image)
	case strings.HasPrefix(image, "reg.test/") && !strings.Contains(image, "@"):
		return name + "@sha256:" + strings.Repeat("1", 64), nil
	}
	return image, nil
}

// TestImageResolverHook: an internal_docker image_uri is resolved before
// the revision is made (create and PATCH); external_docker's is not.
func TestImageResolverHook(t *testing.T) {
	im := &images{}
	f := newFixture(t, &controlplane.Options{Images: im})
	d := f.create(tenantA, `{"name": "a", "source": "internal_docker", "source_revision_config": {"image_uri": "reg.test/a:v1"}}`)
	diff(t, "created image", "reg.test/a@sha256:"+strings.Repeat("1", 64), *d.SourceRevisionConfig.ImageURI)
	d2, err := f.cp.UpdateDeployment(f.ctx, tenantA, d.ID, decode[controlplane.UpdateDeploymentRequest](t, `{"source_revision_config": {"image_uri": "reg.test/b:v2"}}`))
	if err != nil {
		t.Fatal(err)
	}
	rev, err := f.cp.GetRevision(f.ctx, tenantA, d.ID, *d2.LatestRevisionID)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "revision image", "reg.test/b@sha256:"+strings.Repeat("1", 64), *rev.SourceRevisionConfig.ImageURI)
	_, err = f.cp.UpdateDeployment(f.ctx, tenantA, d.ID, decode[controlplane.UpdateDeploymentRequest](t, `{"source_revision_config": {"image_uri": "reg.test/missing:v3"}}`))
	diff(t, "problems", []string{"body.source_revision_config.image_uri: unknown_reference"}, locTypes(problems(t, err)))
	n := len(im.seen)
	e := f.create(tenantA, `{"name": "e", "source": "external_docker", "source_revision_config": {"image_uri": "reg.test/a:v1"}}`)
	diff(t, "external_docker image kept", "reg.test/a:v1", *e.SourceRevisionConfig.ImageURI)
	diff(t, "resolver calls for external_docker", n, len(im.seen))
}
