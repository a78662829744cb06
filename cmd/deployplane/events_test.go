package main

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"
)

// TestShutdownEndsEventStreams: an event stream open when the server is
// told to stop ends cleanly (the end of its chunked body, not a cut
// connection) at once, instead of holding the shutdown until its timeout.
func TestShutdownEndsEventStreams(t *testing.T) {
	u, stop := startHooked(t, testHooks{}, []string{"-db", ":memory:", "-shutdown-timeout", "60s"},
		map[string]string{"DEPLOYPLANE_API_KEY": "k"})
	req, _ := http.NewRequest("GET", u+"/v2/events", nil)
	req.Header.Set("X-Api-Key", "k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET /v2/events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if status, _ := call(t, "POST", u+"/v2/deployments", "k", `{"name": "agent", "source": "external_docker",
		"source_revision_config": {"image_uri": "registry.example/agent:1"}}`); status != 201 {
		t.Fatalf("create: %d", status)
	}
	rd := bufio.NewReader(resp.Body)
	if line, err := rd.ReadString('\n'); err != nil || line != "event: deployment\n" {
		t.Fatalf("the stream's first line: %q, %v", line, err)
	}
	start := time.Now()
	logs := stop()
	_, err = io.Copy(io.Discard, rd)
	if err != nil && !errors.Is(err, io.EOF) {
		t.Errorf("the stream ended with %v, want a clean end\n%s", err, logs)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("the shutdown took %v: the stream held it", took)
	}
}
