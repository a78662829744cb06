package httphandler_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploysim"
	"github.com/deployplane/deployplane/storemem"
)

// simURL is the address the simulated deployer of TestDeploymentURLs
// reports with DEPLOYED.
const simURL = "http://agents.example:8125/{id}"

// TestDeploymentURLs: where a deployment answers, over HTTP, once the
// simulated deployer (reporting an address) has deployed it (wire contract
// sections 9 and 10). internal_source and internal_docker deployments,
// which langgraph deploy makes and whose custom_url it prints (as the
// CLIs' lists show it), answer the deployer's address as both custom_url
// and url; github's custom_url is the service's and is its url;
// external_docker's custom_url is the client's, and its url the
// deployer's address unless it set one.
func TestDeploymentURLs(t *testing.T) { synctest.Test(t, deploymentURLs) }

func deploymentURLs(t *testing.T) {
	cp := controlplane.New(storemem.New(), &controlplane.Options{PollInterval: 10 * time.Millisecond,
		Uploads: controlplane.AnyUpload{}, CustomURLTemplate: "https://{name}.agents.example"})
	s := newServerWith(t, serverSetup{cp: cp, inMemory: true})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cp.Run(ctx, sim(&deploysim.Options{URL: simURL})) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	in := must[controlplane.Integration](t, s, keyA, "POST", "/v1/integrations/github", `{"installation_id": 42, "name": "acme"}`, 201)
	at := func(id string) string { return strings.ReplaceAll(simURL, "{id}", id) }

	cases := []struct {
		name, body string
		// customBefore is custom_url as created (the id replaced in
		// "{id}"); custom and url are what the deployment answers once
		// DEPLOYED ("sim" for the deployer's address).
		customBefore, custom, url string
	}{
		{name: "github", body: githubBody("gh", in.ID),
			customBefore: "https://gh.agents.example", custom: "https://gh.agents.example", url: "https://gh.agents.example"},
		{name: "external_docker", body: dockerBody("ext"), url: "sim"},
		{name: "external_docker with custom_url", body: `{"name": "ext-custom", "source": "external_docker",
			"source_config": {"custom_url": "https://front.example/bot"}, "source_revision_config": {"image_uri": "registry.example/agent:1"}}`,
			customBefore: "https://front.example/bot", custom: "https://front.example/bot", url: "https://front.example/bot"},
		{name: "internal_docker", body: `{"name": "lg-docker", "source": "internal_docker",
			"source_revision_config": {"image_uri": "registry.example/agent@sha256:` + strings.Repeat("ab", 32) + `"}}`,
			custom: "sim", url: "sim"},
		{name: "internal_source", body: `{"name": "lg-src", "source": "internal_source",
			"source_revision_config": {"source_tarball_path": "uploads/agent.tar.gz"}}`,
			custom: "sim", url: "sim"},
	}
	for _, c := range cases {
		d := must[controlplane.Deployment](t, s, keyA, "POST", "/v2/deployments", c.body, 201)
		if got := deref(d.SourceConfig.CustomURL); got != nilIfEmpty(c.customBefore) {
			t.Errorf("%s: custom_url as created = %v, want %v", c.name, got, nilIfEmpty(c.customBefore))
		}
		if d.URL != nil {
			t.Errorf("%s: url before a revision is deployed = %q, want null", c.name, *d.URL)
		}
		s.waitRevision(t, keyA, d.ID, *d.LatestRevisionID, controlplane.RevisionDeployed)
		got := must[controlplane.Deployment](t, s, keyA, "GET", "/v2/deployments/"+d.ID, "", 200)
		want := func(v string) any {
			if v == "sim" {
				return at(d.ID)
			}
			return nilIfEmpty(v)
		}
		if deref(got.SourceConfig.CustomURL) != want(c.custom) || deref(got.URL) != want(c.url) {
			t.Errorf("%s: custom_url %v, url %v; want %v, %v", c.name, deref(got.SourceConfig.CustomURL), deref(got.URL), want(c.custom), want(c.url))
		}
		// The list answers the same (deploy list shows custom_url).
		page := must[controlplane.DeploymentPage](t, s, keyA, "GET", "/v2/deployments?deployment_ids="+d.ID, "", 200)
		if len(page.Resources) != 1 || deref(page.Resources[0].SourceConfig.CustomURL) != want(c.custom) {
			t.Errorf("%s: the list answers %+v", c.name, page.Resources)
		}
	}
}

// An internal_docker deployment's custom_url is not the client's: a
// create or a PATCH naming one is refused (not applicable), before and
// after the deployer set it; a new revision keeps it.
func TestInternalCustomURLIsTheDeployers(t *testing.T) {
	synctest.Test(t, internalCustomURLIsTheDeployers)
}

func internalCustomURLIsTheDeployers(t *testing.T) {
	cp := controlplane.New(storemem.New(), &controlplane.Options{PollInterval: 10 * time.Millisecond})
	s := newServerWith(t, serverSetup{cp: cp, inMemory: true})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cp.Run(ctx, sim(&deploysim.Options{URL: simURL})) }()
	t.Cleanup(func() { cancel(); <-done })

	r := s.as(keyA, "POST", "/v2/deployments", `{"name": "lg", "source": "internal_docker", "source_config": {"custom_url": "https://mine.example"}, "source_revision_config": {}}`)
	if ps := problems(t, r); len(ps) != 1 || ps[0].Type != "not_applicable_to_source" {
		t.Errorf("create with custom_url: %+v", ps)
	}
	d := must[controlplane.Deployment](t, s, keyA, "POST", "/v2/deployments", `{"name": "lg", "source": "internal_docker", "source_revision_config": {}}`, 201)
	if d.SourceConfig.CustomURL != nil || d.URL != nil || d.LatestRevisionID != nil {
		t.Fatalf("created without a source: custom_url %v, url %v, revision %v", deref(d.SourceConfig.CustomURL), deref(d.URL), deref(d.LatestRevisionID))
	}
	patch := func(body string) controlplane.Deployment {
		t.Helper()
		return must[controlplane.Deployment](t, s, keyA, "PATCH", "/v2/deployments/"+d.ID, body, 200)
	}
	img := func(n string) string {
		return `{"source_revision_config": {"image_uri": "registry.example/agent@sha256:` + strings.Repeat(n, 64) + `"}}`
	}
	first := patch(img("a"))
	s.waitRevision(t, keyA, d.ID, *first.LatestRevisionID, controlplane.RevisionDeployed)
	want := strings.ReplaceAll(simURL, "{id}", d.ID)
	r = s.as(keyA, "PATCH", "/v2/deployments/"+d.ID, `{"source_config": {"custom_url": "https://mine.example"}}`)
	if ps := problems(t, r); len(ps) != 1 || ps[0].Type != "not_applicable_to_source" {
		t.Errorf("PATCH of custom_url: %+v", ps)
	}
	second := patch(img("b"))
	if deref(second.SourceConfig.CustomURL) != want || deref(second.URL) != want {
		t.Errorf("a PATCH that makes a revision: custom_url %v, url %v, want %s", deref(second.SourceConfig.CustomURL), deref(second.URL), want)
	}
	s.waitRevision(t, keyA, d.ID, *second.LatestRevisionID, controlplane.RevisionDeployed)
	got := must[controlplane.Deployment](t, s, keyA, "GET", "/v2/deployments/"+d.ID, "", 200)
	if deref(got.SourceConfig.CustomURL) != want || deref(got.URL) != want || deref(got.ActiveRevisionID) != *second.LatestRevisionID {
		t.Errorf("after the second revision: custom_url %v, url %v, active %v", deref(got.SourceConfig.CustomURL), deref(got.URL), deref(got.ActiveRevisionID))
	}
}

// nilIfEmpty is v, or nil for "" (an answer's null, as deref gives it).
func nilIfEmpty(v string) any {
	if v == "" {
		return nil
	}
	return v
}
