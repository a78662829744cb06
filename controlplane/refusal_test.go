package controlplane_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/internal/testclock"
	"github.com/deployplane/deployplane/storemem"
)

// TestIsRefusal: the errors a Reporter answers when the control plane
// refuses a report (the deployment deleted, a step that may not follow,
// the lease taken by another worker) are refusals, wrapped or not; its
// other errors, and errors that do not come from a Reporter, are not.
func TestIsRefusal(t *testing.T) {
	ctx := context.Background()
	got := map[string]error{}

	// An illegal step, then a report after the deployment was deleted.
	st := storemem.New()
	defer st.Close()
	cp := controlplane.New(st, nil)
	d, err := cp.CreateDeployment(ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t, dockerBody("deleted")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Process(ctx, &script{deploy: func(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
		got["unknown log type"] = r.Log(ctx, controlplane.LogLine{Type: "audit", Message: "x"})
		got["illegal step"] = r.Report(ctx, controlplane.Step{Status: controlplane.RevisionDeployed})
		if err := cp.DeleteDeployment(ctx, tenantA, d.ID); err != nil {
			t.Fatal(err)
		}
		got["deleted"] = r.Report(ctx, controlplane.Step{Status: controlplane.RevisionQueued})
		return nil
	}}); err != nil {
		t.Fatal(err)
	}

	// The old owner's report once another worker holds the lease.
	st2 := storemem.New()
	defer st2.Close()
	clock := testclock.New(t0, time.Microsecond)
	opts := &controlplane.Options{Clock: clock.Now, LeaseDuration: time.Hour} // renewals never run
	a, b := controlplane.New(st2, opts), controlplane.New(st2, opts)
	if _, err := a.CreateDeployment(ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t, dockerBody("taken"))); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Process(ctx, &script{deploy: func(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
		clock.Advance(2 * time.Hour)
		_, err := b.Process(ctx, &script{deploy: func(ctx context.Context, w *controlplane.Work, rb controlplane.Reporter) error {
			got["lease lost"] = r.Report(ctx, controlplane.Step{Status: controlplane.RevisionQueued})
			got["lease lost, log"] = r.Log(ctx, controlplane.LogLine{Type: controlplane.LogDeploy, Level: controlplane.LevelInfo, Message: "late"})
			return rb.Report(ctx, controlplane.Step{Status: controlplane.RevisionQueued})
		}})
		return err
	}}); err != nil {
		t.Fatal(err)
	}

	if got["unknown log type"] == nil {
		t.Error("a log line of unknown type was accepted")
	}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"deleted", got["deleted"], true},
		{"illegal step", got["illegal step"], true},
		{"lease lost", got["lease lost"], true},
		{"lease lost, log", got["lease lost, log"], true},
		{"wrapped", fmt.Errorf("deployer: %w", got["lease lost"]), true},
		{"unknown log type", got["unknown log type"], false},
		{"nil", nil, false},
		{"cancelled", context.Canceled, false},
		{"not found", &apierr.NotFoundError{Kind: apierr.KindDeployment, ID: d.ID}, false},
		{"conflict", apierr.ErrConflict, false},
		{"other", errors.New("connection reset"), false},
	} {
		if c.want && c.err == nil {
			t.Errorf("%s: the report succeeded, want a refusal", c.name)
			continue
		}
		if got := controlplane.IsRefusal(c.err); got != c.want {
			t.Errorf("%s: IsRefusal(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}
