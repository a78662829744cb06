package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// langgraphClient finds shared/clients/langgraph (the real langgraph CLI)
// in a parent directory of the test's, or skips.
func langgraphClient(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		p := filepath.Join(dir, "shared", "clients", "langgraph")
		if _, err := os.Stat(p); err == nil {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skip("no shared/clients/langgraph in a parent directory: the real langgraph CLI is not here")
		}
		dir = parent
	}
}

// TestFailedBuildLogs is the README's walk-through of a failed build: with
// -sim-fail-at BUILDING a github revision ends BUILD_FAILED; its
// status_history shows the statuses it went through, and its build log,
// read with curl's GET and with the real `langgraph deploy logs`, ends
// with the failure at ERROR.
func TestFailedBuildLogs(t *testing.T) {
	url, _, _ := server(t, []string{"-db", ":memory:", "-sim-step", "5ms", "-sim-fail-at", "BUILDING", "-allow-unverified-integrations"},
		map[string]string{"DEPLOYPLANE_API_KEY": "k"})
	d := githubDeployment(t, url, "k")
	id, rev := d["id"].(string), d["latest_revision_id"].(string)
	waitStatus(t, url, "k", id, rev, "BUILD_FAILED")
	status, r := call(t, "GET", url+"/v2/deployments/"+id+"/revisions/"+rev, "k", "")
	var statuses []string
	for _, h := range r["status_history"].([]any) {
		statuses = append(statuses, h.(map[string]any)["status"].(string))
	}
	if got := strings.Join(statuses, " "); status != 200 || got != "CREATING QUEUED AWAITING_BUILD BUILDING BUILD_FAILED" {
		t.Errorf("status_history: %d %s", status, got)
	}
	status, page := call(t, "GET", url+"/v2/deployments/"+id+"/revisions/"+rev+"/logs?type=build&order=desc&limit=1", "k", "")
	logs, _ := page["logs"].([]any)
	if status != 200 || len(logs) != 1 || logs[0].(map[string]any)["level"] != "ERROR" ||
		logs[0].(map[string]any)["message"] != "simulated failure at BUILDING" || page["next_offset"] == nil {
		t.Errorf("the last build line: %d %v", status, page)
	}

	client := langgraphClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	if d, ok := t.Deadline(); ok {
		ctx, cancel = context.WithDeadline(context.Background(), d.Add(-time.Until(d)/10))
	}
	defer cancel()
	cmd := exec.CommandContext(ctx, client, "deploy", "logs", "--deployment-id", id, "--type", "build", "--level", "error")
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "LANGGRAPH_HOST_URL="+url, "LANGSMITH_API_KEY=k")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("langgraph deploy logs: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "Using latest revision: "+rev) || !strings.Contains(string(out), "[ERROR] simulated failure at BUILDING") ||
		strings.Contains(string(out), "[INFO]") {
		t.Errorf("langgraph deploy logs --type build --level error:\n%s", out)
	}
}
