package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/imagebuild"
)

// helpText is -h's usage text with its lines joined, for phrases that
// wrap.
func helpText(t *testing.T) string {
	t.Helper()
	var stderr bytes.Buffer
	if err := run(context.Background(), []string{"-h"}, func(string) string { return "" }, io.Discard, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("run -h: %v", err)
	}
	return strings.Join(strings.Fields(stderr.String()), " ")
}

// TestBuildLimitFlags: -h documents the -build-* limits and their
// defaults, their values reach the Builder's options (the defaults being
// imagebuild's), and values that are not positive are usage errors.
func TestBuildLimitFlags(t *testing.T) {
	help := helpText(t)
	for _, want := range []string{"-build-clone-timeout D, -build-timeout D", "(default 5m)", "(default 30m)",
		"-build-max-repo-bytes N", "-build-max-bytes N, -build-max-files N", "(default 1073741824, 1 GiB)", "(default 100000)",
		"-build-max-depth N, -build-max-path-bytes N", "(default 64)", "(default 4096)", "BUILD_FAILED naming the limit and the path"} {
		if !strings.Contains(help, want) {
			t.Errorf("-h does not say %q", want)
		}
	}
	// The limits of imagebuild.Options, comparable.
	type limits struct {
		cloneTimeout, buildTimeout  time.Duration
		maxRepoBytes, maxCheckout   int64
		maxFiles, maxDepth, maxPath int
	}
	for _, tc := range []struct {
		args []string
		want limits
	}{
		{nil, limits{imagebuild.DefaultCloneTimeout, imagebuild.DefaultBuildTimeout, imagebuild.DefaultMaxRepoBytes,
			imagebuild.DefaultMaxCheckoutBytes, imagebuild.DefaultMaxFiles, imagebuild.DefaultMaxDepth, imagebuild.DefaultMaxPathBytes}},
		{[]string{"-build-clone-timeout", "1m", "-build-timeout", "2m", "-build-max-repo-bytes", "3", "-build-max-bytes", "4",
			"-build-max-files", "5", "-build-max-depth", "6", "-build-max-path-bytes", "7"},
			limits{time.Minute, 2 * time.Minute, 3, 4, 5, 6, 7}},
	} {
		c, err := parseFlags(tc.args, func(string) string { return "" }, io.Discard)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		o := c.deployer.builderOptions(&deployerEnv{})
		got := limits{o.CloneTimeout, o.BuildTimeout, o.MaxRepoBytes, o.MaxCheckoutBytes, o.MaxFiles, o.MaxDepth, o.MaxPathBytes}
		if got != tc.want {
			t.Errorf("%v: the Builder's limits are %+v, want %+v", tc.args, got, tc.want)
		}
	}
	for _, name := range []string{"-build-clone-timeout", "-build-timeout", "-build-max-repo-bytes", "-build-max-bytes",
		"-build-max-files", "-build-max-depth", "-build-max-path-bytes"} {
		var stderr bytes.Buffer
		if _, err := parseFlags([]string{name, "0"}, func(string) string { return "" }, &stderr); !errors.Is(err, errUsage) ||
			!strings.Contains(stderr.String(), name+" must be positive") {
			t.Errorf("%s 0: %v %q, want a usage error naming the flag", name, err, stderr.String())
		}
	}
	// The agent drives the same builds, with the same flags.
	if _, err := parseAgentFlags([]string{"-control-plane", "https://cp.example", "-listener-id", "l1", "-deployer", "sim",
		"-build-max-depth", "0"}, func(k string) string { return map[string]string{"DEPLOYPLANE_AGENT_TOKEN": "x"}[k] }, io.Discard); !errors.Is(err, errUsage) {
		t.Errorf("agent -build-max-depth 0: %v, want a usage error", err)
	}
}

// TestWorkersFlag: -workers reaches the control plane's Workers (and
// -tenant-workers its TenantWorkers beside it); it must be positive.
func TestWorkersFlag(t *testing.T) {
	if help := helpText(t); !strings.Contains(help, "-workers N revisions and deletions the reconcile loop drives (builds and deploys) at once (default 16)") {
		t.Error("-h does not document -workers and its default")
	}
	for _, tc := range []struct {
		args                   []string
		workers, tenantWorkers int
	}{
		{nil, controlplane.DefaultWorkers, 0},
		{[]string{"-workers", "40", "-tenant-workers", "5"}, 40, 5},
	} {
		c, err := parseFlags(tc.args, func(string) string { return "" }, io.Discard)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		var o controlplane.Options
		c.workerOptions(&o)
		if o.Workers != tc.workers || o.TenantWorkers != tc.tenantWorkers {
			t.Errorf("%v: Workers %d, TenantWorkers %d; want %d, %d", tc.args, o.Workers, o.TenantWorkers, tc.workers, tc.tenantWorkers)
		}
	}
	for _, bad := range []string{"0", "-1"} {
		if _, err := parseFlags([]string{"-workers", bad}, func(string) string { return "" }, io.Discard); !errors.Is(err, errUsage) {
			t.Errorf("-workers %s: %v, want a usage error", bad, err)
		}
	}
}

// TestUploadAndBodyFlags: -upload-rate-window reaches the handler's
// LoadLimits, -upload-max-bytes the uploads (a tarball one byte over is
// 413) and -webhook-max-body-bytes the GitHub webhook (413 too); -h
// documents each with its default, and values that are not positive are
// usage errors.
func TestUploadAndBodyFlags(t *testing.T) {
	help := helpText(t)
	for _, want := range []string{"-upload-rate-window D the span over which -min-upload-rate is measured (default 30s)",
		"-upload-max-bytes N the largest source tarball an upload PUT takes (default 209715200, 200 MiB)",
		"-webhook-max-body-bytes N body limit of a GitHub webhook delivery (default 26214400, 25 MiB"} {
		if !strings.Contains(help, want) {
			t.Errorf("-h does not say %q", want)
		}
	}
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{{nil, httphandler.DefaultUploadRateWindow}, {[]string{"-upload-rate-window", "5s"}, 5 * time.Second}} {
		c, err := parseFlags(tc.args, func(string) string { return "" }, io.Discard)
		if err != nil || c.loadLimits().UploadRateWindow != tc.want {
			t.Errorf("%v: %v, UploadRateWindow %v; want %v", tc.args, err, c.loadLimits().UploadRateWindow, tc.want)
		}
	}
	for _, args := range [][]string{{"-upload-rate-window", "0s"}, {"-upload-max-bytes", "0"}, {"-webhook-max-body-bytes", "-1"}} {
		if _, err := parseFlags(args, func(string) string { return "" }, io.Discard); !errors.Is(err, errUsage) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}

	url, _, _ := server(t, []string{"-db", ":memory:", "-upload-max-bytes", "100", "-webhook-max-body-bytes", "100",
		"-github-webhook-secret", "s"}, map[string]string{"DEPLOYPLANE_API_KEY": "k"})
	status, d := call(t, "POST", url+"/v2/deployments", "k", `{"name": "lg-src", "source": "internal_source",
		"source_config": {}, "source_revision_config": {}}`)
	if status != 201 {
		t.Fatalf("create: %d %v", status, d)
	}
	status, up := call(t, "POST", url+"/v2/deployments/"+d["id"].(string)+"/upload-url", "k", "")
	if status != 200 {
		t.Fatalf("upload-url: %d %v", status, up)
	}
	if status, r := call(t, "PUT", up["upload_url"].(string), "", strings.Repeat("x", 101)); status != 413 {
		t.Errorf("a tarball of 101 bytes with -upload-max-bytes 100: %d %v, want 413", status, r)
	}
	if status, r := call(t, "POST", url+"/v1/integrations/github/webhook", "", `{"x": "`+strings.Repeat("x", 100)+`"}`,
		"X-GitHub-Event", "push"); status != 413 {
		t.Errorf("a delivery of 109 bytes with -webhook-max-body-bytes 100: %d %v, want 413", status, r)
	}
}

// TestBuildLimitFlagsReachBuilds: with -build-max-depth 3, a github
// revision whose repository holds a path 4 levels deep ends BUILD_FAILED,
// its status_message (and build log) naming the limit and the path,
// before anything of it is written or built.
func TestBuildLimitFlagsReachBuilds(t *testing.T) {
	host := os.Getenv("DEPLOYPLANE_TEST_DOCKER")
	if host == "" {
		t.Skip("DEPLOYPLANE_TEST_DOCKER is not set: this test needs a Docker daemon (.ci/run starts one)")
	}
	root := t.TempDir()
	gitURL := gitHTTP(t, root)
	gitRepo(t, root, map[string]string{"langgraph.json": "{}", "src/agent/graphs/main.py": "graph = None\n"})
	url, _, _ := server(t, []string{"-db", ":memory:", "-deployer", "docker", "-docker-host", host, "-docker-network", "host",
		"-build-network", "host", "-docker-proxy-addr", "127.0.0.1:0", "-registry-addr", "off", "-docker-instance", "cmdtest-" + randHex(),
		"-docker-postgres-image", "", "-docker-redis-image", "", "-allow-unverified-integrations",
		"-egress-allow-hosts", strings.TrimPrefix(gitURL, "http://"), "-build-max-depth", "3"}, map[string]string{"DEPLOYPLANE_API_KEY": "k"})
	d := githubDeploymentOf(t, url, "k", "deep-"+randHex(), gitURL+"/agent.git", false)
	id, rev := d["id"].(string), d["latest_revision_id"].(string)
	t.Cleanup(func() { deleteDeployment(t, url, id) })
	waitStatus(t, url, "k", id, rev, "BUILD_FAILED")
	_, r := call(t, "GET", url+"/v2/deployments/"+id+"/revisions/"+rev, "k", "")
	const want = `clone failed: too large: the repository holds a path more than 3 levels deep: "src/agent/graphs/main.py"`
	if msg, _ := r["status_message"].(string); msg != want {
		t.Errorf("status_message %q, want %q", msg, want)
	}
}
