package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry/handlers"
)

// TestLanggraphDeployExternalRegistry: the real langgraph deploy --image
// against a server whose registry is an external CNCF Distribution
// registry trusting the server's realm: the CLI's docker login and push
// go through the realm with the push token, the Docker deployer pulls
// the image with a pull token the same way, and the deployment answers.
func TestLanggraphDeployExternalRegistry(t *testing.T) {
	ctx, host, docker := langgraphDockerEnv(t)
	client := langgraphClient(t)
	suffix := randSuffix()
	img := "reg20-okserver-" + suffix + ":ext"
	buildOKServerImage(ctx, t, docker, img)
	t.Cleanup(func() {
		out, _ := exec.Command("docker", "-H", host, "images", "--format", "{{.Repository}}:{{.Tag}}").Output()
		for _, ref := range strings.Fields(string(out)) {
			if strings.Contains(ref, "reg20-okserver-"+suffix) || strings.Contains(ref, "/deployments/") && strings.Contains(ref, "reg20-ext-"+suffix) {
				exec.Command("docker", "-H", host, "rmi", "-f", ref).Run()
			}
		}
	})

	// The external registry on loopback (docker pushes plain HTTP there),
	// its realm behind a proxy pointed at the server once it listens.
	data := t.TempDir()
	regSrv := httptest.NewUnstartedServer(nil)
	regHost := regSrv.Listener.Addr().String()
	var target atomic.Pointer[url.URL]
	realm := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target.Load()) }})
	t.Cleanup(realm.Close)
	srvURL, _, stderr := server(t, []string{"-db", filepath.Join(data, "dp.db"), "-deployer", "docker", "-docker-host", host,
		"-docker-network", "host", "-build-network", "host",
		"-docker-proxy-addr", "127.0.0.1:0", "-registry-external-url", "http://" + regHost,
		"-docker-instance", "reg20-" + suffix, "-docker-postgres-image", "", "-docker-redis-image", ""},
		map[string]string{"DEPLOYPLANE_API_KEY": "k"})
	u, _ := url.Parse(srvURL)
	target.Store(u)
	cfg := &configuration.Configuration{}
	cfg.Storage = configuration.Storage{"filesystem": configuration.Parameters{"rootdirectory": filepath.Join(data, "images")}}
	cfg.Auth = configuration.Auth{"token": configuration.Parameters{"realm": realm.URL + "/registry/token", "service": regHost,
		"issuer": "deployplane", "jwks": filepath.Join(data, "deployplane-registry-token.jwks.json")}}
	app := handlers.NewApp(context.Background(), cfg)
	t.Cleanup(func() { _ = app.Shutdown() })
	regSrv.Config.Handler = app
	regSrv.Start()
	t.Cleanup(regSrv.Close)

	project := t.TempDir()
	if err := os.WriteFile(filepath.Join(project, "langgraph.json"), []byte(`{"dependencies": ["."], "graphs": {"agent": "./agent.py:graph"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(project, "agent.py"), []byte("graph = None\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	name := "reg20-ext-" + suffix
	cmd := exec.CommandContext(ctx, client, "deploy", "--image", img, "--name", name, "--no-input")
	cmd.Dir = project
	cmd.Env = append(os.Environ(), "LANGGRAPH_HOST_URL="+srvURL, "LANGSMITH_API_KEY=k", "DOCKER_HOST="+host, "NO_COLOR=1",
		"DOCKER_CONFIG="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("langgraph deploy --image: %v\n%s\nserver log:\n%s", err, out, stderr)
	}
	status, page := call(t, "GET", srvURL+"/v2/deployments?name_contains="+name, "k", "")
	res, _ := page["resources"].([]any)
	if status != 200 || len(res) != 1 {
		t.Fatalf("the deployment the CLI created: %d %v\nCLI output:\n%s", status, page, out)
	}
	d := res[0].(map[string]any)
	id := d["id"].(string)
	image, _ := d["source_revision_config"].(map[string]any)["image_uri"].(string)
	if d["status"] != "READY" || !strings.HasPrefix(image, regHost+"/deployments/"+id+"/") || !strings.Contains(image, "@sha256:") {
		t.Errorf("deployment after the CLI: %v\nCLI output:\n%s", d, out)
	}
	depURL, _ := d["url"].(string)
	resp, err := http.Get(depURL + "/ok")
	if err != nil {
		t.Fatalf("GET the deployment's url %q: %v", depURL, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != "ok "+img {
		t.Errorf("GET %s/ok: %d %q", depURL, resp.StatusCode, body)
	}
	// The image the deployer ran came from the external registry: the
	// daemon holds it by the registry's name.
	if out := docker("images", "--format", "{{.Repository}}"); !strings.Contains(out, regHost+"/deployments/"+id+"/") {
		t.Errorf("the daemon has no image of %s/deployments/%s:\n%s", regHost, id, out)
	}
	call(t, "DELETE", srvURL+"/v2/deployments/"+id, "k", "")
	for deadline := time.Now().Add(2 * time.Minute); ; {
		if status, _ := call(t, "GET", srvURL+"/v2/deployments/"+id, "k", ""); status == 404 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the deployment is still there two minutes after DELETE")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
