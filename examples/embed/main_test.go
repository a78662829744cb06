package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/internal/memnet"
	"github.com/deployplane/deployplane/storemem"
)

const key = "example-key"

func get(url string) string { return getWith(http.DefaultClient, url) }

func getWith(client *http.Client, url string) string {
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("X-Api-Key", key)
	resp, err := client.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(b)))
}

// Example: the service's routes and the API live side by side on one mux.
func Example() {
	mux, _, err := newMux(controlplane.New(storemem.New(), nil), key)
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()

	fmt.Println(get(srv.URL + "/healthz"))
	fmt.Println(get(srv.URL + "/"))
	fmt.Println(get(srv.URL + "/api-host/v2/deployments"))
	fmt.Println(get(srv.URL + "/api-host/v2/nothing"))
	// Output:
	// 200 ok
	// 200 the service's home page
	// 200 {"resources":[],"offset":0}
	// 404 {"detail":"Not Found"}
}

// TestMountedAPI creates a deployment through the prefix and reads it back,
// and checks that the service's own routes are untouched by the API.
func TestMountedAPI(t *testing.T) {
	mux, _, err := newMux(controlplane.New(storemem.New(), nil), key)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()

	req, _ := http.NewRequest("POST", srv.URL+"/api-host/v2/deployments",
		strings.NewReader(`{"name": "agent", "source": "external_docker", "source_revision_config": {"image_uri": "img:1"}}`))
	req.Header.Set("X-Api-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	var id string
	if i := strings.Index(string(b), `"id":"`); i >= 0 {
		id = string(b[i+6 : i+42])
	}
	if got := get(srv.URL + "/api-host/v2/deployments/" + id); !strings.HasPrefix(got, `200 {"id":"`+id) {
		t.Errorf("GET through the prefix: %s", got)
	}
	for url, want := range map[string]string{
		"/v2/deployments":               "404 404 page not found", // the API is only under the prefix
		"/api-host/openapi.json":        "200 {",
		"/api-host/v2/deployments/nope": `422 {"detail":[{"loc":["path","deployment_id"]`,
		"/api-host/docs":                "200 <!DOCTYPE html>", // the page, its assets under /api-host/docs/
		"/healthz":                      "200 ok",
	} {
		if got := get(srv.URL + url); !strings.HasPrefix(got, want) {
			t.Errorf("GET %s: %q, want prefix %q", url, got, want)
		}
	}
	// Generated clients call the document's server: the prefix.
	if got := get(srv.URL + "/api-host/openapi.json"); !strings.Contains(got, `"servers":[{"description":"This server (the path the API is mounted under)","url":"/api-host"}]`) {
		t.Errorf("the document does not name the prefix as its server: %.300s", got)
	}
}

// TestServeDeploys runs the example's whole service, reconcile loop
// included, and polls a deployment created through the prefix until its
// revision is DEPLOYED; then it stops the service through its context.
// It runs in a synctest bubble, on an in-memory network: the simulated
// deployer's steps and the polling pass in fake time.
func TestServeDeploys(t *testing.T) { synctest.Test(t, serveDeploys) }

func serveDeploys(t *testing.T) {
	var n memnet.Network
	var ln net.Listener = n.Listen()
	client := n.Client()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- serve(ctx, ln, key, time.Millisecond) }()
	base := "http://" + ln.Addr().String() + "/api-host/v2/deployments"

	req, _ := http.NewRequest("POST", base,
		strings.NewReader(`{"name": "agent", "source": "external_docker", "source_revision_config": {"image_uri": "img:1"}}`))
	req.Header.Set("X-Api-Key", key)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		ID               string `json:"id"`
		LatestRevisionID string `json:"latest_revision_id"`
	}
	err = json.NewDecoder(resp.Body).Decode(&d)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("create: %d %v", resp.StatusCode, err)
	}
	revURL := base + "/" + d.ID + "/revisions/" + d.LatestRevisionID
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) { // fake time
		got := getWith(client, revURL)
		if strings.Contains(got, `"status":"DEPLOYED"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the revision did not reach DEPLOYED: %s", got)
		}
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("serve: %v", err)
	}
}
