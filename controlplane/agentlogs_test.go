package controlplane_test

import (
	"errors"
	"testing"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/store"
)

// TestAgentLogsOutsideALease: an agent appends lines to a revision of its
// listener's deployment without a lease and reads them back; another
// listener's agent, another tenant, a deployment on another listener and
// a revision not the deployment's are not found; lines of unknown type or
// level are refused at their loc and nothing is written.
func TestAgentLogsOutsideALease(t *testing.T) { inBubbleOverStores(t, testAgentLogsOutsideALease) }

func testAgentLogsOutsideALease(t *testing.T, st store.Store) {
	f := newAgentFixture(t, st)
	edge, other := f.listener(tenantA, "edge-1"), f.listener(tenantA, "edge-2")
	d := f.deployment(tenantA, "remote", edge)
	elsewhere := f.deployment(tenantA, "elsewhere", other)
	rev := *d.LatestRevisionID

	if err := f.cp.AgentAppendLogs(f.ctx, tenantA, edge, d.ID, rev,
		controlplane.LogLine{Type: controlplane.LogDeploy, Message: "listening on :8000"},
		controlplane.LogLine{Type: controlplane.LogDeploy, Level: "warn", Message: "slow start"}); err != nil {
		t.Fatal(err)
	}
	page, err := f.cp.AgentListLogs(f.ctx, tenantA, edge, d.ID, rev, &controlplane.LogQuery{Type: controlplane.LogDeploy})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range page.Logs {
		got = append(got, string(e.Level)+" "+e.Message)
	}
	if want := []string{"INFO listening on :8000", "WARNING slow start"}; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("the agent's lines: %q, want %q", got, want)
	}

	line := controlplane.LogLine{Type: controlplane.LogDeploy, Message: "x"}
	for _, tt := range []struct {
		name                         string
		tenant, listener, dep, revID string
	}{
		{"another listener's agent", tenantA, other, d.ID, rev},
		{"another tenant", tenantB, edge, d.ID, rev},
		{"a deployment on another listener", tenantA, edge, elsewhere.ID, *elsewhere.LatestRevisionID},
		{"a revision of another deployment", tenantA, edge, d.ID, *elsewhere.LatestRevisionID},
		{"not an id", tenantA, edge, "nope", rev},
	} {
		wantErr(t, tt.name+" appends", f.cp.AgentAppendLogs(f.ctx, tt.tenant, tt.listener, tt.dep, tt.revID, line), apierr.ErrNotFound)
		_, err := f.cp.AgentListLogs(f.ctx, tt.tenant, tt.listener, tt.dep, tt.revID, &controlplane.LogQuery{Type: controlplane.LogDeploy})
		wantErr(t, tt.name+" reads", err, apierr.ErrNotFound)
	}

	err = f.cp.AgentAppendLogs(f.ctx, tenantA, edge, d.ID, rev, line,
		controlplane.LogLine{Type: "stdout", Message: "x"}, controlplane.LogLine{Type: controlplane.LogBuild, Level: "loud"})
	var ve *apierr.ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 2 ||
		!equalLoc(ve.Problems[0].Loc, "body", "lines", 1, "type") || !equalLoc(ve.Problems[1].Loc, "body", "lines", 2, "level") {
		t.Fatalf("lines of unknown type and level: %v", err)
	}
	w := f.claim(tenantA, edge)
	err = f.cp.LogAgent(f.ctx, tenantA, edge, w.Lease, controlplane.LogLine{Type: "stdout"})
	if !errors.As(err, &ve) || !equalLoc(ve.Problems[0].Loc, "body", "lines", 0, "type") {
		t.Fatalf("LogAgent, a line of unknown type: %v", err)
	}
	page, err = f.cp.AgentListLogs(f.ctx, tenantA, edge, d.ID, rev, &controlplane.LogQuery{Type: controlplane.LogDeploy})
	if err != nil || len(page.Logs) != 2 {
		t.Errorf("after refused lines: %v, %d lines, want the 2 first", err, len(page.Logs))
	}
	_, err = f.cp.AgentListLogs(f.ctx, tenantA, edge, d.ID, rev, &controlplane.LogQuery{})
	if !errors.As(err, &ve) || !equalLoc(ve.Problems[0].Loc, "query", "type") {
		t.Errorf("a query without its type: %v", err)
	}
}

func equalLoc(loc []any, want ...any) bool {
	if len(loc) != len(want) {
		return false
	}
	for i := range loc {
		if loc[i] != want[i] {
			return false
		}
	}
	return true
}
