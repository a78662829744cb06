package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/deployplane/deployplane/controlplane"
)

// TestTenantWorkersFlag: -h documents -tenant-workers and its default,
// values below -1 are usage errors, and with -tenant-workers 1 the
// reconcile loop drives one revision of a tenant at a time: each of three
// revisions created together starts moving only after the one before it
// is DEPLOYED (their status_history intervals do not overlap; without the
// cap the loop would drive all three at once).
func TestTenantWorkersFlag(t *testing.T) {
	var stderr strings.Builder
	if err := run(context.Background(), []string{"-h"}, func(string) string { return "" }, io.Discard, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("run -h: %v", err)
	}
	help := strings.Join(strings.Fields(stderr.String()), " ")
	for _, want := range []string{"-tenant-workers N",
		fmt.Sprintf("of the %d the reconcile loop drives (default 0: a quarter of them, %d; -1: no cap)",
			controlplane.DefaultWorkers, controlplane.DefaultWorkers/4)} {
		if !strings.Contains(help, want) {
			t.Errorf("-h does not say %q", want)
		}
	}
	for _, bad := range []string{"-2", "x"} {
		if err := run(context.Background(), []string{"-tenant-workers", bad}, func(string) string { return "" }, io.Discard, io.Discard); !errors.Is(err, errUsage) {
			t.Errorf("-tenant-workers %s: %v, want a usage error", bad, err)
		}
	}

	url, _, _ := server(t, []string{"-db", ":memory:", "-sim-step", "100ms", "-tenant-workers", "1"}, map[string]string{"DEPLOYPLANE_API_KEY": "k"})
	type span struct{ start, end time.Time }
	var ids [][2]string
	for i := range 3 {
		status, d := call(t, "POST", url+"/v2/deployments", "k", fmt.Sprintf(`{"name": "agent-%d", "source": "external_docker",
			"source_revision_config": {"image_uri": "registry.example.com/agent:1"}}`, i))
		if status != 201 {
			t.Fatalf("create: %d %v", status, d)
		}
		ids = append(ids, [2]string{d["id"].(string), d["latest_revision_id"].(string)})
	}
	var spans []span
	for _, id := range ids {
		waitStatus(t, url, "k", id[0], id[1], "DEPLOYED")
		status, rev := call(t, "GET", url+"/v2/deployments/"+id[0]+"/revisions/"+id[1], "k", "")
		if status != 200 {
			t.Fatalf("GET revision: %d %v", status, rev)
		}
		hist := rev["status_history"].([]any)
		at := func(i int) time.Time {
			v, err := time.Parse(time.RFC3339Nano, hist[i].(map[string]any)["at"].(string))
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		// From the first status the deployer reported to DEPLOYED.
		spans = append(spans, span{at(1), at(len(hist) - 1)})
	}
	slices.SortFunc(spans, func(a, b span) int { return a.start.Compare(b.start) })
	for i := 1; i < len(spans); i++ {
		if spans[i].start.Before(spans[i-1].end) {
			t.Errorf("revisions driven at once with -tenant-workers 1: one moved at %v, before the one before it was DEPLOYED at %v",
				spans[i].start, spans[i-1].end)
		}
	}
}
