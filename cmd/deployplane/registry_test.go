package main

import (
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// The built-in registry, wired: POST .../push-token answers a token and
// the registry_url of the deployment's repository; an image pushed there
// with it is what a PATCH by tag deploys, recorded by digest.
func TestRegistryWired(t *testing.T) {
	url, _, stderr := server(t, []string{"-db", ":memory:", "-sim-step", "10ms", "-registry-addr", "127.0.0.1:0",
		"-registry-storage", t.TempDir()}, map[string]string{"DEPLOYPLANE_API_KEY": "k"})
	status, d := call(t, "POST", url+"/v2/deployments", "k", `{"name": "lg", "source": "internal_docker", "source_config": {"deployment_type": "dev"}, "source_revision_config": {}}`)
	if status != 201 || d["latest_revision_id"] != nil {
		t.Fatalf("create: %d %v", status, d)
	}
	id := d["id"].(string)
	status, tok := call(t, "POST", url+"/v2/deployments/"+id+"/push-token", "k", "")
	if status != 200 {
		t.Fatalf("push-token: %d %v", status, tok)
	}
	regURL, _ := tok["registry_url"].(string)
	host, prefix, _ := strings.Cut(regURL, "/")
	if prefix != "deployments/"+id || !strings.Contains(stderr.String(), "registry="+host) {
		t.Fatalf("registry_url %q; log:\n%s", regURL, stderr)
	}
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(regURL+"/agent:v1", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithAuth(&authn.Basic{Username: "oauth2accesstoken", Password: tok["token"].(string)})); err != nil {
		t.Fatalf("push with the token: %v", err)
	}
	dg, _ := img.Digest()
	status, p := call(t, "PATCH", url+"/v2/deployments/"+id, "k",
		`{"revision_source": "internal_docker", "source_revision_config": {"image_uri": "`+regURL+`/agent:v1"}, "tracked_packages": ["langgraph"]}`)
	if status != 200 {
		t.Fatalf("PATCH: %d %v", status, p)
	}
	if got := p["source_revision_config"].(map[string]any)["image_uri"]; got != regURL+"/agent@"+dg.String() {
		t.Errorf("image_uri %v, want the pushed digest %s", got, dg)
	}
	waitStatus(t, url, "k", id, p["latest_revision_id"].(string), "DEPLOYED")
	// A tag never pushed is 422 at image_uri.
	if status, body := call(t, "PATCH", url+"/v2/deployments/"+id, "k", `{"source_revision_config": {"image_uri": "`+regURL+`/agent:v9"}}`); status != 422 {
		t.Errorf("PATCH with a tag never pushed: %d %v", status, body)
	}
	// Another source: the contract's 400.
	status, e := call(t, "POST", url+"/v2/deployments", "k", `{"name": "ext", "source": "external_docker", "source_revision_config": {"image_uri": "r/x:1"}}`)
	if status != 201 {
		t.Fatal(status, e)
	}
	status, body := call(t, "POST", url+"/v2/deployments/"+e["id"].(string)+"/push-token", "k", "")
	if status != 400 || body["detail"] != "push token is only available for 'internal_docker' source deployments" {
		t.Errorf("push-token of external_docker: %d %v", status, body)
	}
}

// Without a registry (the simulated deployer's default) push-token says
// so.
func TestNoRegistry(t *testing.T) {
	url, _, _ := server(t, []string{"-db", ":memory:"}, map[string]string{"DEPLOYPLANE_API_KEY": "k"})
	_, d := call(t, "POST", url+"/v2/deployments", "k", `{"name": "lg", "source": "internal_docker"}`)
	status, body := call(t, "POST", url+"/v2/deployments/"+d["id"].(string)+"/push-token", "k", "")
	if status != 400 || !strings.Contains(body["detail"].(string), "runs no registry") {
		t.Errorf("push-token without a registry: %d %v", status, body)
	}
}
