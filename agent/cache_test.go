package agent_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/deployplane/deployplane/agent"
	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
)

// counting is an http.RoundTripper that notes the kind of each agent
// route it sends: list (the listener's deployments), deployment, revision
// or the route's name.
type counting struct {
	rt   http.RoundTripper
	mu   sync.Mutex
	sent []string
}

func (c *counting) RoundTrip(r *http.Request) (*http.Response, error) {
	route := r.URL.Path[strings.LastIndex(r.URL.Path, "/agent/")+len("/agent/"):]
	kind := route
	switch parts := strings.Split(route, "/"); {
	case parts[0] != "deployments":
	case len(parts) == 1:
		kind = "list"
	case len(parts) == 2:
		kind = "deployment"
	default:
		kind = "revision"
	}
	c.mu.Lock()
	c.sent = append(c.sent, kind)
	c.mu.Unlock()
	return c.rt.RoundTrip(r)
}

// take returns the kinds sent since the last take.
func (c *counting) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sent
	c.sent = nil
	return s
}

// The Client keeps the deployments and terminal revisions it was
// answered; under a context of Reconciling it answers again from them,
// with no request, while the list read then gives the deployment the
// digest it had when it was answered. A deployment that changed, or one
// that is gone, is asked for again under the next Reconciling; one new
// since the list, a revision not terminal, and every answer outside
// Reconciling are always asked for; asking for a revision it did not keep
// makes it ask for the deployment again.
func TestStateAnswersKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		ctx := context.Background()
		w.deploy("a")
		b, bRev := w.deploy("b")
		// The first revision in the queue fails: it is terminal.
		work, err := w.cp.ClaimAgentWork(ctx, tenant, w.listener)
		if err != nil || work == nil {
			t.Fatalf("claim: %v %v", work, err)
		}
		if err := w.cp.FailAgentWork(ctx, tenant, w.listener, work.Lease, "no room"); err != nil {
			t.Fatal(err)
		}
		f, fRev := work.Work.Deployment.ID, work.Work.Revision.ID
		other := b.ID
		if f == b.ID {
			other = ""
		}
		sent := &counting{rt: w.client().Transport}
		c, err := agent.NewClient(&agent.Options{ControlPlane: "http://cp.test", ListenerID: w.listener, Token: w.token.Token,
			HTTPClient: &http.Client{Transport: sent}})
		if err != nil {
			t.Fatal(err)
		}
		step := func(what string, want []string, call func() error) {
			t.Helper()
			if err := call(); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if got := sent.take(); !slices.Equal(got, want) {
				t.Errorf("%s: sent %q, want %q", what, got, want)
			}
		}
		var rctx context.Context
		reconciling := func() error { rctx = c.Reconciling(ctx); return nil }
		getDep := func(ctx *context.Context, id string) func() error {
			return func() error { _, err := c.GetDeployment(*ctx, tenant, id); return err }
		}
		getRev := func(dep, rev string) func() error {
			return func() error { _, err := c.GetRevision(rctx, tenant, dep, rev); return err }
		}

		step("a reconciliation", []string{"list"}, reconciling)
		step("a deployment", []string{"deployment"}, getDep(&rctx, f))
		step("the same again", nil, getDep(&rctx, f))
		step("its failed revision", []string{"revision"}, getRev(f, fRev))
		step("the same again", nil, getRev(f, fRev))
		step("the deployment after a revision it had not kept", []string{"deployment"}, getDep(&rctx, f))
		step("and again", nil, getDep(&rctx, f))
		if other != "" {
			step("a revision waiting", []string{"revision"}, getRev(other, bRev))
			step("the same: not terminal, asked for again", []string{"revision"}, getRev(other, bRev))
		}
		step("outside a reconciliation", []string{"deployment"}, getDep(&ctx, f))
		step("the next reconciliation", []string{"list"}, reconciling)
		step("the deployment, unchanged", nil, getDep(&rctx, f))
		step("its revision", nil, getRev(f, fRev))

		name := "renamed"
		if _, err := w.cp.UpdateDeployment(ctx, tenant, f, &controlplane.UpdateDeploymentRequest{DisplayName: &name}); err != nil {
			t.Fatal(err)
		}
		step("changed since the reconciliation's list", nil, getDep(&rctx, f))
		step("the next reconciliation", []string{"list"}, reconciling)
		var got *controlplane.Deployment
		step("the changed deployment", []string{"deployment"}, func() error {
			var err error
			got, err = c.GetDeployment(rctx, tenant, f)
			return err
		})
		if got == nil || got.DisplayName == nil || *got.DisplayName != name {
			t.Errorf("the changed deployment answers %+v, want display_name %q", got, name)
		}
		step("its revision, kept no more", []string{"revision"}, getRev(f, fRev))

		n, _ := w.deploy("new")
		step("a deployment new since the list", []string{"deployment"}, getDep(&rctx, n.ID))
		step("the same: asked for again", []string{"deployment"}, getDep(&rctx, n.ID))

		if err := w.cp.DeleteDeployment(ctx, tenant, f); err != nil { // it never ran: gone at once
			t.Fatal(err)
		}
		step("the next reconciliation", []string{"list"}, reconciling)
		_, err = c.GetDeployment(rctx, tenant, f)
		if !errors.Is(err, apierr.ErrNotFound) {
			t.Errorf("the deleted deployment: %v, want not found", err)
		}
		if got := sent.take(); !slices.Equal(got, []string{"deployment"}) {
			t.Errorf("the deleted deployment: sent %q, want the deployment", got)
		}
	})
}

// Against a control plane whose list has no digests, the Client keeps
// nothing and reads the list once only.
func TestStateWithoutDigests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &scripted{answer: func(_ context.Context, route string, _ int, _ map[string]any) (int, any) {
			switch route {
			case "deployments":
				return http.StatusOK, map[string]any{"deployment_ids": []string{"d1"}, "next": nil}
			case "deployments/d1":
				return http.StatusOK, controlplane.Deployment{ID: "d1"}
			}
			return http.StatusNotFound, map[string]any{"detail": "Not Found"}
		}}
		c, err := agent.NewClient(&agent.Options{ControlPlane: "http://cp.test", ListenerID: "l1", Token: "dpl_lt_test",
			HTTPClient: &http.Client{Transport: agent.InProcess(s)}})
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			ctx := c.Reconciling(context.Background())
			if _, err := c.GetDeployment(ctx, "t", "d1"); err != nil {
				t.Fatal(err)
			}
		}
		if l, d := len(s.of("deployments")), len(s.of("deployments/d1")); l != 1 || d != 3 {
			t.Errorf("%d lists and %d deployments asked for, want 1 and 3", l, d)
		}
	})
}
