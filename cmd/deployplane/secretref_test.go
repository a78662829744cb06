package main

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/deployplane/deployplane/controlplane"
)

// -docker-secret-ref, repeated, is the Docker deployer's map, and the
// control plane's check of the deployments -deployer docker runs.
func TestDockerSecretRefFlag(t *testing.T) {
	var f deployerFlags
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f.register(fs, func(string) string { return "" })
	if err := fs.Parse([]string{"-deployer", "docker", "-docker-secret-ref", "db-creds/password=file:/run/secrets/db",
		"-docker-secret-ref", "api/key=env:API_KEY"}); err != nil {
		t.Fatal(err)
	}
	if got := f.secretRefs.String(); got != "api/key=env:API_KEY,db-creds/password=file:/run/secrets/db" {
		t.Errorf("-docker-secret-ref gives %s", got)
	}
	d := &controlplane.Deployment{}
	if p := f.secretReferenceProblem(d, controlplane.SecretReference{Name: "A", SecretName: "api", SecretKey: "key"}); p != "" {
		t.Errorf("a mapped reference: %q", p)
	}
	p := f.secretReferenceProblem(d, controlplane.SecretReference{Name: "A", SecretName: "other", SecretKey: "key"})
	if !strings.Contains(p, "Docker deployer") || !strings.Contains(p, "other/key") {
		t.Errorf("an unmapped reference: %q", p)
	}
	onListener := &controlplane.Deployment{SourceConfig: controlplane.SourceConfig{ListenerID: new("l")}}
	if p := f.secretReferenceProblem(onListener, controlplane.SecretReference{Name: "A", SecretName: "other", SecretKey: "key"}); p != "" {
		t.Errorf("a deployment on a listener is its deployer's to check: %q", p)
	}
	if err := fs.Parse([]string{"-docker-secret-ref", "no-equals"}); err == nil {
		t.Error("a value without = was accepted")
	}
}
