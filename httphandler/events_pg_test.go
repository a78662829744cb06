package httphandler_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/internal/pgtest"
	"github.com/deployplane/deployplane/storepg"
)

// pgReplicas returns two servers, each with its own ControlPlane over its
// own storepg Store (and connection pool) on one new schema, as two
// replicas of cmd/deployplane over one database run. It skips without
// DEPLOYPLANE_TEST_POSTGRES_DSN.
func pgReplicas(t *testing.T) (a, b *server) {
	t.Helper()
	dsn := pgtest.DSN(t)
	schema := pgtest.Schema(t, dsn, "httphandler_test_") // registered first: dropped after the stores close
	var servers []*server
	for range 2 {
		st, err := storepg.Open(context.Background(), dsn, &storepg.Options{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		cp := controlplane.New(st, &controlplane.Options{EventPollInterval: 20 * time.Millisecond})
		servers = append(servers, newServerWith(t, serverSetup{cp: cp, noOAuth: true}))
	}
	return servers[0], servers[1]
}

// TestEventStreamReplicas: over one PostgreSQL database, a client of
// replica A sees the events of changes committed through replica B, with
// the ids B's clients see (a client resumes on either replica); changes
// committed through both at once get distinct, consecutive ids; and a
// wait=terminal on A answers when B's change makes the revision terminal.
func TestEventStreamReplicas(t *testing.T) {
	a, b := pgReplicas(t)
	onA := a.stream(t, keyA, "/v2/events")
	d := must[controlplane.Deployment](t, b, keyA, "POST", "/v2/deployments", dockerBody("agent"), 201)
	must[controlplane.Deployment](t, b, keyA, "PATCH", "/v2/deployments/"+d.ID, `{"source_config": {"custom_url": "https://b.example"}}`, 200)
	evs := onA.take(3)
	checkIDs(t, 0, evs)
	diff(t, "the events of B's changes, seen on A",
		[]string{"deployment/created/AWAITING_DATABASE", "revision/created/CREATING", "deployment/updated/AWAITING_DATABASE"}, summary(t, evs))

	onB := b.stream(t, keyA, "/v2/events", "Last-Event-ID", evs[0].ID)
	diff(t, "resumed on B after A's first event", evs[1:], onB.take(2))

	// Concurrent changes through both replicas: one event each, with
	// distinct consecutive ids, the same on both streams.
	var wg sync.WaitGroup
	for i := range 10 {
		for j, s := range []*server{a, b} {
			wg.Go(func() {
				r := s.as(keyA, "PATCH", "/v2/deployments/"+d.ID, fmt.Sprintf(`{"source_config": {"custom_url": "https://%d-%d.example"}}`, i, j))
				if r.status != 200 {
					t.Errorf("PATCH: %d %s", r.status, r.body)
				}
			})
		}
	}
	wg.Wait()
	fromA := onA.take(20)
	checkIDs(t, 3, fromA)
	diff(t, "the same events on both replicas", fromA, onB.take(20))

	// wait=terminal on A; B supersedes the revision (SKIPPED is terminal).
	// Had A not seen B's commit, it would answer (SKIPPED too) only at
	// the 60 s timeout.
	path := "/v2/deployments/" + d.ID + "/revisions/" + *d.LatestRevisionID + "?wait=terminal&timeout=60"
	done := make(chan controlplane.Revision)
	start := time.Now()
	go func() { done <- must[controlplane.Revision](t, a, keyA, "GET", path, "", 200) }()
	must[controlplane.Revision](t, b, keyA, "POST", "/v2/deployments/"+d.ID+"/revisions", "", 201)
	diff(t, "the wait on A", controlplane.RevisionSkipped, (<-done).Status)
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("the wait on A answered after %v: it did not see B's change", took)
	}
}
