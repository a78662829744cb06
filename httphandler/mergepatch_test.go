package httphandler_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/deployplane/deployplane/controlplane"
)

// A PATCH in plain JSON keeps the meaning the Terraform provider relies on
// (null: no change; resource_spec: replaced whole; secrets []: no change);
// a JSON merge patch (RFC 7396) removes what it sets to null and merges
// resource_spec member by member.
func TestMergePatch(t *testing.T) {
	s := newServer(t, nil)
	d := must[controlplane.Deployment](t, s, keyA, "POST", "/v2/deployments", `{"name": "mp", "source": "external_docker",
		"display_name": "Merge patch", "source_config": {"custom_url": "https://mp.example",
			"resource_spec": {"cpu": 1, "max_scale": 3, "labels": {"a": "1", "b": "2"}}},
		"source_revision_config": {"image_uri": "registry.example/agent:1"},
		"secrets": [{"name": "S", "value": "v"}], "agent": {"agent_id": "ag", "environment": "staging"}}`, 201)
	if d.DisplayName == nil || *d.DisplayName != "Merge patch" {
		t.Fatalf("display_name on create: %v", d.DisplayName)
	}
	path := "/v2/deployments/" + d.ID
	patch := func(contentType, body string, status int) controlplane.Deployment {
		t.Helper()
		r := s.do("PATCH", path, body, "X-Api-Key", keyA, "Content-Type", contentType)
		if r.status != status {
			t.Fatalf("PATCH %s %s: %d, want %d: %s", contentType, body, r.status, status, r.body)
		}
		var out controlplane.Deployment
		if status == 200 {
			if err := json.Unmarshal(r.body, &out); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	const plain, merge = "application/json", "application/merge-patch+json"

	got := patch(plain, `{"display_name": null, "source_config": {"custom_url": null}, "secrets": [], "agent": null}`, 200)
	if got.DisplayName == nil || got.SourceConfig.CustomURL == nil || len(got.Secrets) != 1 || got.Agent == nil || *got.LatestRevisionID != *d.LatestRevisionID {
		t.Fatalf("plain JSON nulls changed the deployment: %+v", got)
	}

	got = patch(merge+"; charset=utf-8", `{"display_name": null, "source_config": {"custom_url": null}, "agent": null}`, 200)
	if got.DisplayName != nil || got.SourceConfig.CustomURL != nil || got.Agent != nil {
		t.Fatalf("merge patch did not remove: display_name %v custom_url %v agent %v", got.DisplayName, got.SourceConfig.CustomURL, got.Agent)
	}
	if *got.LatestRevisionID != *d.LatestRevisionID {
		t.Fatal("removing in-place fields made a revision")
	}

	got = patch(merge, `{"source_config": {"resource_spec": {"cpu": 2, "labels": {"a": null, "c": "3"}}}}`, 200)
	spec := got.SourceConfig.ResourceSpec
	if spec == nil || *spec.CPU != 2 || spec.MaxScale == nil || *spec.MaxScale != 3 || fmt.Sprint(spec.Labels) != "map[b:2 c:3]" {
		t.Fatalf("merged resource_spec %+v", spec)
	}
	if *got.LatestRevisionID == *d.LatestRevisionID {
		t.Fatal("a resource_spec merge made no revision")
	}
	rev := *got.LatestRevisionID

	got = patch(merge, `{"secrets": []}`, 200)
	if len(got.Secrets) != 0 || *got.LatestRevisionID == rev {
		t.Fatalf("secrets [] in a merge patch: secrets %v, latest %s (was %s)", got.Secrets, *got.LatestRevisionID, rev)
	}

	got = patch(plain, `{"source_config": {"resource_spec": {"cpu": 4}}}`, 200)
	if spec := got.SourceConfig.ResourceSpec; *spec.CPU != 4 || spec.MaxScale != nil || spec.Labels != nil {
		t.Fatalf("plain JSON resource_spec is not replaced whole: %+v", spec)
	}

	for _, tc := range []struct{ body, loc string }{
		{`{"name": null}`, "[body name]"},
		{`{"source_revision_config": {"image_uri": null}}`, "[body source_revision_config image_uri]"},
		{`{"source_config": {"resource_spec": {"nope": null}}}`, "[body source_config resource_spec nope]"},
		{`{"source_config": {"resource_spec": {"min_scale": 5, "max_scale": 2}}}`, "[body source_config resource_spec min_scale]"},
		{`{"source_config": {"listener_id": null}}`, "[body source_config listener_id]"},
	} {
		r := s.do("PATCH", path, tc.body, "X-Api-Key", keyA, "Content-Type", merge)
		ps := problems(t, r)
		if r.status != 422 || len(ps) != 1 || fmt.Sprint(ps[0].Loc) != tc.loc {
			t.Errorf("merge patch %s: %d %+v, want one problem at %s", tc.body, r.status, ps, tc.loc)
		}
	}
}
