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
	"time"

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
// answered and answers again from them, with no request, while the
// listener's list (read again once 5 s old) gives the deployment the
// same digest: a deployment that changed, or one that is gone, is asked
// for again; one new since the list, and a revision not terminal, are
// always asked for; asking for a revision it did not keep makes it ask
// for the deployment again.
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
		getDep := func(id string) func() error {
			return func() error { _, err := c.GetDeployment(ctx, tenant, id); return err }
		}
		getRev := func(dep, rev string) func() error {
			return func() error { _, err := c.GetRevision(ctx, tenant, dep, rev); return err }
		}

		step("the first deployment", []string{"list", "deployment"}, getDep(f))
		step("the same again", nil, getDep(f))
		step("its failed revision", []string{"revision"}, getRev(f, fRev))
		step("the same again", nil, getRev(f, fRev))
		step("the deployment after a revision it had not kept", []string{"deployment"}, getDep(f))
		step("and again", nil, getDep(f))
		if other != "" {
			step("a revision waiting", []string{"revision"}, getRev(other, bRev))
			step("the same: not terminal, asked for again", []string{"revision"}, getRev(other, bRev))
		}
		time.Sleep(5 * time.Second)
		step("after 5 s, unchanged", []string{"list"}, getDep(f))
		step("its revision", nil, getRev(f, fRev))

		name := "renamed"
		if _, err := w.cp.UpdateDeployment(ctx, tenant, f, &controlplane.UpdateDeploymentRequest{DisplayName: &name}); err != nil {
			t.Fatal(err)
		}
		step("changed, within 5 s of the list", nil, getDep(f))
		time.Sleep(5 * time.Second)
		var got *controlplane.Deployment
		step("changed, the list read again", []string{"list", "deployment"}, func() error {
			var err error
			got, err = c.GetDeployment(ctx, tenant, f)
			return err
		})
		if got == nil || got.DisplayName == nil || *got.DisplayName != name {
			t.Errorf("the changed deployment answers %+v, want display_name %q", got, name)
		}
		step("its revision, kept no more", []string{"revision"}, getRev(f, fRev))

		n, _ := w.deploy("new")
		step("a deployment new since the list", []string{"deployment"}, getDep(n.ID))
		step("the same: asked for again", []string{"deployment"}, getDep(n.ID))

		if err := w.cp.DeleteDeployment(ctx, tenant, f); err != nil { // it never ran: gone at once
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second)
		_, err = c.GetDeployment(ctx, tenant, f)
		if !errors.Is(err, apierr.ErrNotFound) {
			t.Errorf("the deleted deployment: %v, want not found", err)
		}
		if got := sent.take(); !slices.Equal(got, []string{"list", "deployment"}) {
			t.Errorf("the deleted deployment: sent %q, want the list and the deployment", got)
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
			if _, err := c.GetDeployment(context.Background(), "t", "d1"); err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Second)
		}
		if l, d := len(s.of("deployments")), len(s.of("deployments/d1")); l != 1 || d != 3 {
			t.Errorf("%d lists and %d deployments asked for, want 1 and 3", l, d)
		}
	})
}
