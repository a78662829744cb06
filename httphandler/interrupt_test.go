package httphandler_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/storemem"
)

// deployingUntilStopped is a Deployer that takes the first revision of
// each deployment to DEPLOYED, and any later one to DEPLOYING, where it
// says so on deploying and waits until its ctx ends, sending the cause.
type deployingUntilStopped struct{ deploying, causes chan error }

func (d deployingUntilStopped) Deploy(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
	to := controlplane.RevisionDeploying
	if w.Deployment.ActiveRevisionID == nil {
		to = controlplane.RevisionDeployed
	}
	_, err := controlplane.Advance(ctx, r, w.Revision.Source, w.Revision.Status, to, controlplane.Step{})
	if err != nil || to == controlplane.RevisionDeployed {
		return err
	}
	d.deploying <- nil
	<-ctx.Done()
	d.causes <- context.Cause(ctx)
	return nil
}

func (deployingUntilStopped) Teardown(context.Context, string, *controlplane.Deployment) error {
	return nil
}

// TestInterruptRevisionRoute: POST .../interrupt answers 200 and the
// revision INTERRUPTED, and the reconcile loop's Deploy of it stops with
// a cause matching controlplane.ErrRevisionEnded; the deployment's active
// revision serves on. A terminal revision (interrupted already, or
// DEPLOYED) is a 400 with a detail; malformed ids are 422s at their path
// locs; unknown ids and another tenant's are 404s. It answers under
// /api-host too, and every answer is one the OpenAPI document lists.
func TestInterruptRevisionRoute(t *testing.T) {
	cp := controlplane.New(storemem.New(), nil)
	s := newServerCP(t, cp, nil)
	doc := newDocChecker(t, s)
	const pattern = "/v2/deployments/{deployment_id}/revisions/{revision_id}/interrupt"
	dep := func(name string) controlplane.Deployment {
		return must[controlplane.Deployment](t, s, keyA, "POST", "/v2/deployments", dockerBody(name), 201)
	}
	interrupt := func(key, path string, want int) reply {
		t.Helper()
		r := s.as(key, "POST", path, "")
		if r.status != want {
			t.Fatalf("POST %s: %d, want %d: %s", path, r.status, want, r.body)
		}
		doc.check("POST", pattern, r)
		return r
	}
	path := func(d controlplane.Deployment, rev string) string {
		return "/v2/deployments/" + d.ID + "/revisions/" + rev + "/interrupt"
	}

	// A queued revision: interrupted without running.
	queued := dep("queued")
	r := interrupt(keyA, path(queued, *queued.LatestRevisionID), 200)
	var rev controlplane.Revision
	if err := json.Unmarshal(r.body, &rev); err != nil {
		t.Fatal(err)
	}
	if rev.Status != controlplane.RevisionInterrupted || rev.ID != *queued.LatestRevisionID {
		t.Errorf("interrupted revision: %s", r.body)
	}
	r = interrupt(keyA, path(queued, *queued.LatestRevisionID), 400)
	diff(t, "detail", "Revision "+rev.ID+" is INTERRUPTED: only a revision not yet terminal can be interrupted.", detail(t, r))

	// A revision the reconcile loop deploys is stopped, and the active
	// revision serves on.
	dp := deployingUntilStopped{deploying: make(chan error, 1), causes: make(chan error, 1)}
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- cp.Run(ctx, dp) }()
	t.Cleanup(func() { stop(); <-ran })
	done := dep("done")
	if first := must[controlplane.Revision](t, s, keyA, "GET", "/v2/deployments/"+done.ID+"/revisions/"+*done.LatestRevisionID+"?wait=terminal&timeout=60", "", 200); first.Status != controlplane.RevisionDeployed {
		t.Fatalf("the first revision: %s, want DEPLOYED", first.Status)
	}
	next := must[controlplane.Revision](t, s, keyA, "POST", "/v2/deployments/"+done.ID+"/revisions", "", 201)
	<-dp.deploying
	active := must[controlplane.Deployment](t, s, keyA, "GET", "/v2/deployments/"+done.ID, "", 200)
	interrupt(keyA, httphandler.APIHostPrefix+path(done, next.ID), 200)
	if cause := <-dp.causes; !errors.Is(cause, controlplane.ErrRevisionEnded) {
		t.Errorf("the Deploy of the interrupted revision ended with %v, want ErrRevisionEnded", cause)
	}
	got := must[controlplane.Deployment](t, s, keyA, "GET", "/v2/deployments/"+done.ID, "", 200)
	diff(t, "the deployment after its newest revision was interrupted", active, got)
	if got.ActiveRevisionID == nil || *got.ActiveRevisionID != *done.LatestRevisionID || got.Status != controlplane.StatusReady {
		t.Errorf("deployment: %s, active %v; want READY, its first revision active", got.Status, got.ActiveRevisionID)
	}
	r = interrupt(keyA, path(done, *done.LatestRevisionID), 400)
	diff(t, "detail", "Revision "+*done.LatestRevisionID+" is DEPLOYED: only a revision not yet terminal can be interrupted.", detail(t, r))

	const unknown = "00000000-0000-7000-8000-0000000000ff"
	for _, tc := range []struct {
		name, key, path string
		status          int
		want            string // the detail, or the 422's "loc: type" lines
	}{
		{"unknown deployment", keyA, "/v2/deployments/" + unknown + "/revisions/" + rev.ID + "/interrupt", 404, "Deployment ID " + unknown + " not found."},
		{"unknown revision", keyA, path(done, unknown), 404, "Revision ID " + unknown + " not found."},
		{"another deployment's revision", keyA, path(done, *queued.LatestRevisionID), 404, "Revision ID " + *queued.LatestRevisionID + " not found."},
		{"another tenant's", keyB, path(done, *done.LatestRevisionID), 404, "Deployment ID " + done.ID + " not found."},
		{"malformed ids", keyA, "/v2/deployments/x/revisions/y/interrupt", 422, "[path.deployment_id: uuid_parsing path.revision_id: uuid_parsing]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := interrupt(tc.key, tc.path, tc.status)
			if tc.status == 422 {
				var body struct{ Detail []apierr.Problem }
				if err := json.Unmarshal(r.body, &body); err != nil {
					t.Fatal(err)
				}
				diff(t, "problems", tc.want, fmt.Sprint(locTypes(body.Detail)))
				return
			}
			diff(t, "detail", tc.want, detail(t, r))
		})
	}
}
