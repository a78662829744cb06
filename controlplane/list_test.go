package controlplane_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/storemem"
)

var tagIDs = []string{
	"11111111-1111-4111-8111-111111111111",
	"22222222-2222-4222-8222-222222222222",
	"33333333-3333-4333-8333-333333333333",
}

// matches is the list filter written the obvious way, over a whole
// deployment: the model ListDeployments must agree with.
func matches(d *controlplane.Deployment, q *controlplane.ListDeploymentsQuery) bool {
	if q.NameContains != "" && !strings.Contains(strings.ToLower(d.Name), strings.ToLower(q.NameContains)) {
		return false
	}
	if q.Status != "" && d.Status != q.Status {
		return false
	}
	if q.RemoteReconciled != nil && *q.RemoteReconciled != (d.Source == controlplane.SourceExternalDocker) {
		return false
	}
	if len(q.TagValueIDs) > 0 && !slices.ContainsFunc(q.TagValueIDs, func(t string) bool { return slices.Contains(d.TagValueIDs, t) }) {
		return false
	}
	if q.ImageVersion != "" && (d.ImageVersion == nil || *d.ImageVersion != q.ImageVersion) {
		return false
	}
	if q.DeploymentType != "" && (d.SourceConfig.DeploymentType == nil || *d.SourceConfig.DeploymentType != q.DeploymentType) {
		return false
	}
	if len(q.DeploymentIDs) > 0 && !slices.Contains(q.DeploymentIDs, d.ID) {
		return false
	}
	if q.ListenerID != "" && (d.SourceConfig.ListenerID == nil || !strings.EqualFold(*d.SourceConfig.ListenerID, q.ListenerID)) {
		return false
	}
	return true
}

// TestListDeploymentsModel checks random queries over random deployments
// against the obvious filter over every deployment, newest first.
func TestListDeploymentsModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		st := storemem.New()
		defer st.Close()
		now := t0
		ids := 0
		cp := controlplane.New(st, &controlplane.Options{
			// Several deployments share a timestamp, so the id breaks ties.
			Clock: func() time.Time {
				if rapid.Bool().Draw(rt, "tick") {
					now = now.Add(time.Millisecond)
				}
				return now
			},
			NewID: func() string { ids++; return fmt.Sprintf("00000000-0000-7000-8000-%012x", ids) },
		})
		intg, err := cp.CreateIntegration(ctx, tenantA, &controlplane.CreateIntegrationRequest{InstallationID: new(int64(1)), Name: new("i")})
		if err != nil {
			rt.Fatal(err)
		}
		var listeners []string
		for i := range 2 {
			l, err := cp.CreateListener(ctx, tenantA, &controlplane.CreateListenerRequest{
				ComputeType: new("k8s"), ComputeID: new(fmt.Sprint("cluster-", i)),
				ComputeConfig: &controlplane.ComputeConfig{K8sNamespaces: []string{"agents"}}})
			if err != nil {
				rt.Fatal(err)
			}
			listeners = append(listeners, l.ID)
		}
		var all []*controlplane.Deployment // newest first
		var deleted []string
		n := rapid.IntRange(0, 25).Draw(rt, "n")
		for i := range n {
			name := rapid.SampledFrom([]string{"Alpha", "beta", "alphabet", "gamma", "Delta-Alpha"}).Draw(rt, "name") + fmt.Sprint(i)
			tags := rapid.SliceOfDistinct(rapid.SampledFrom(tagIDs), rapid.ID).Draw(rt, "tags")
			var req *controlplane.CreateDeploymentRequest
			if rapid.Bool().Draw(rt, "github") {
				req = decode[controlplane.CreateDeploymentRequest](rt, githubBody(name, intg.ID))
				req.SourceConfig.DeploymentType = new(rapid.SampledFrom([]controlplane.DeploymentType{"dev_free", "dev", "prod"}).Draw(rt, "type"))
			} else {
				req = decode[controlplane.CreateDeploymentRequest](rt, dockerBody(name))
				if l := rapid.IntRange(-1, len(listeners)-1).Draw(rt, "listener"); l >= 0 {
					req.SourceConfig = &controlplane.SourceConfig{ListenerID: &listeners[l],
						ListenerConfig: &controlplane.ListenerConfig{K8sNamespace: new("agents")}}
				}
			}
			req.TagValueIDs = tags
			d, err := cp.CreateDeployment(ctx, tenantA, req)
			if err != nil {
				rt.Fatal(err)
			}
			if rapid.IntRange(0, 3).Draw(rt, "delete") == 0 {
				deleted = append(deleted, d.ID)
			}
			// The sequencer moves the gram records written so far into
			// the gram blocks: lists then read both.
			if rapid.IntRange(0, 5).Draw(rt, "sequence") == 0 {
				if err := cp.SequenceEvents(ctx); err != nil {
					rt.Fatal(err)
				}
			}
			all = append([]*controlplane.Deployment{d}, all...)
		}
		reachEngine(rt, ctx, cp) // else a delete removes the deployment at once
		for i, d := range all {
			if slices.Contains(deleted, d.ID) {
				if err := cp.DeleteDeployment(ctx, tenantA, d.ID); err != nil {
					rt.Fatal(err)
				}
				if all[i], err = cp.GetDeployment(ctx, tenantA, d.ID); err != nil {
					rt.Fatal(err)
				}
			}
		}
		// Noise in another tenant.
		if _, err := cp.CreateDeployment(ctx, tenantB, decode[controlplane.CreateDeploymentRequest](rt, dockerBody("alpha"))); err != nil {
			rt.Fatal(err)
		}
		slices.SortStableFunc(all, func(a, b *controlplane.Deployment) int {
			if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
				return c
			}
			return strings.Compare(b.ID, a.ID)
		})

		for range 5 {
			q := &controlplane.ListDeploymentsQuery{
				Limit:          new(rapid.IntRange(1, 10).Draw(rt, "limit")),
				Offset:         rapid.IntRange(0, 12).Draw(rt, "offset"),
				NameContains:   rapid.SampledFrom([]string{"", "", "ALPHA", "bet", "1", "zzz"}).Draw(rt, "name_contains"),
				Status:         rapid.SampledFrom([]controlplane.DeploymentStatus{"", "", "AWAITING_DATABASE", "AWAITING_DELETE", "READY"}).Draw(rt, "status"),
				DeploymentType: rapid.SampledFrom([]controlplane.DeploymentType{"", "", "prod", "dev"}).Draw(rt, "type"),
				ImageVersion:   rapid.SampledFrom([]string{"", "", "", "1.0"}).Draw(rt, "image_version"),
				TagValueIDs:    rapid.SliceOfNDistinct(rapid.SampledFrom(tagIDs), 0, 2, rapid.ID).Draw(rt, "tag_value_ids"),
			}
			if l := rapid.IntRange(-3, len(listeners)-1).Draw(rt, "listener_id"); l >= 0 {
				q.ListenerID = listeners[l]
				if rapid.Bool().Draw(rt, "upper") {
					q.ListenerID = strings.ToUpper(q.ListenerID)
				}
			}
			if rapid.Bool().Draw(rt, "remote") {
				q.RemoteReconciled = new(rapid.Bool().Draw(rt, "remote_reconciled"))
			}
			if len(all) > 0 && rapid.IntRange(0, 3).Draw(rt, "by_ids") == 0 {
				q.DeploymentIDs = idsOf(rapid.SliceOfN(rapid.SampledFrom(all), 1, 6).Draw(rt, "ids"))
				if rapid.Bool().Draw(rt, "unknown_id") {
					q.DeploymentIDs = append(q.DeploymentIDs, "00000000-0000-7000-8000-0000000000ff")
				}
			}
			var want []controlplane.Deployment
			for _, d := range all {
				if matches(d, q) {
					want = append(want, *d)
				}
			}
			if q.Offset < len(want) {
				want = want[q.Offset:min(len(want), q.Offset+*q.Limit)]
			} else {
				want = []controlplane.Deployment{}
			}
			got, err := cp.ListDeployments(ctx, tenantA, q)
			if err != nil {
				rt.Fatal(err)
			}
			diff(rt, fmt.Sprintf("page for %+v", *q), &controlplane.DeploymentPage{Resources: want, Offset: q.Offset + len(want)}, got)
		}
	})
}

func idsOf(ds []*controlplane.Deployment) []string {
	var ids []string
	for _, d := range ds {
		ids = append(ids, d.ID)
	}
	return ids
}

func TestListDeploymentsQueryValidation(t *testing.T) {
	tests := []struct {
		name string
		q    controlplane.ListDeploymentsQuery
		want []string
	}{
		{"zero value", controlplane.ListDeploymentsQuery{}, nil},
		{"limit 1 and 100", controlplane.ListDeploymentsQuery{Limit: new(100)}, nil},
		{"limit 0", controlplane.ListDeploymentsQuery{Limit: new(0)}, []string{"query.limit: greater_than_equal"}},
		{"limit 101", controlplane.ListDeploymentsQuery{Limit: new(101)}, []string{"query.limit: less_than_equal"}},
		{"offset -1", controlplane.ListDeploymentsQuery{Offset: -1}, []string{"query.offset: greater_than_equal"}},
		{"status", controlplane.ListDeploymentsQuery{Status: "DONE"}, []string{"query.status: literal_error"}},
		{"deployment_type", controlplane.ListDeploymentsQuery{DeploymentType: "huge"}, []string{"query.deployment_type: literal_error"}},
		{"tag ids", controlplane.ListDeploymentsQuery{TagValueIDs: []string{tagIDs[0], "x"}}, []string{"query.tag_value_ids: uuid_parsing"}},
		{"deployment ids", controlplane.ListDeploymentsQuery{DeploymentIDs: []string{"x"}}, []string{"query.deployment_ids: uuid_parsing"}},
		{"too many ids", controlplane.ListDeploymentsQuery{DeploymentIDs: slices.Repeat([]string{tagIDs[0]}, 101)}, []string{"query.deployment_ids: too_long"}},
		{"listener id", controlplane.ListDeploymentsQuery{ListenerID: "x"}, []string{"query.listener_id: uuid_parsing"}},
		{"name_contains too long", controlplane.ListDeploymentsQuery{NameContains: strings.Repeat("a", 64)}, []string{"query.name_contains: string_too_long"}},
		{"all at once", controlplane.ListDeploymentsQuery{Limit: new(0), Offset: -1, Status: "x", DeploymentType: "y"},
			[]string{"query.limit: greater_than_equal", "query.offset: greater_than_equal", "query.status: literal_error", "query.deployment_type: literal_error"}},
	}
	f := newFixture(t, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.q.Validate()
			_, listErr := f.cp.ListDeployments(f.ctx, tenantA, &tt.q)
			if tt.want == nil {
				if err != nil || listErr != nil {
					t.Fatalf("Validate: %v, ListDeployments: %v; want nil", err, listErr)
				}
				return
			}
			diff(t, "Validate", tt.want, locTypes(problems(t, err)))
			diff(t, "ListDeployments", tt.want, locTypes(problems(t, listErr)))
		})
	}
}

func TestListDeploymentsPaging(t *testing.T) {
	f := newFixture(t, nil)
	var ids []string
	for i := range 7 {
		ids = append([]string{f.create(tenantA, dockerBody(fmt.Sprint("d", i))).ID}, ids...)
	}
	var got []string
	offset := 0
	for {
		page, err := f.cp.ListDeployments(f.ctx, tenantA, &controlplane.ListDeploymentsQuery{Limit: new(3), Offset: offset})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Resources) == 0 {
			diff(t, "offset of an empty page", offset, page.Offset)
			break
		}
		for _, d := range page.Resources {
			got = append(got, d.ID)
		}
		diff(t, "next offset", offset+len(page.Resources), page.Offset)
		offset = page.Offset
	}
	diff(t, "ids, newest first", ids, got)
	page, err := f.cp.ListDeployments(f.ctx, tenantB, nil)
	if err != nil || page.Resources == nil || len(page.Resources) != 0 {
		t.Errorf("another tenant's list = %+v, %v; want empty", page, err)
	}
}

// TestListOffsetsOfManyTenants: the tenants past the 23rd have key
// prefixes of several bytes, and the order counts of every tenant are
// folded in one scan that reads each change's tenant from its key: deep
// pages of the first and the last tenant skip exactly, before the fold
// and after it.
func TestListOffsetsOfManyTenants(t *testing.T) {
	f := newFixture(t, nil)
	tenants := make([]string, 30)
	want := map[string][]string{} // newest first
	for i := range tenants {
		tenants[i] = fmt.Sprintf("tenant-%02d", i)
		for j := range 3 {
			d := f.create(tenants[i], dockerBody(fmt.Sprint("d", j)))
			want[tenants[i]] = append([]string{d.ID}, want[tenants[i]]...)
		}
	}
	for _, folded := range []bool{false, true} {
		if folded {
			if err := f.cp.SequenceEvents(f.ctx); err != nil {
				t.Fatal(err)
			}
		}
		for _, tenant := range []string{tenants[0], tenants[29]} {
			for offset := range 4 {
				page, err := f.cp.ListDeployments(f.ctx, tenant, &controlplane.ListDeploymentsQuery{Limit: new(1), Offset: offset})
				if err != nil {
					t.Fatal(err)
				}
				if got, want := idsOf(ptrs(page.Resources)), want[tenant][min(offset, 3):min(offset+1, 3)]; !slices.Equal(got, want) {
					t.Errorf("%s at offset %d, folded %v: %v, want %v", tenant, offset, folded, got, want)
				}
			}
		}
	}
}

func ptrs(ds []controlplane.Deployment) []*controlplane.Deployment {
	var out []*controlplane.Deployment
	for i := range ds {
		out = append(out, &ds[i])
	}
	return out
}

// TestQueryLimitsOfTheControlPlane: ValidateWith(cp.Limits()) applies the
// ControlPlane's limits, as its list methods do; Validate the defaults.
func TestQueryLimitsOfTheControlPlane(t *testing.T) {
	f := newFixture(t, &controlplane.Options{Limits: controlplane.Limits{MaxFilterIDs: 2}})
	lim := f.cp.Limits()
	if lim.MaxFilterIDs != 2 || lim.MaxStringBytes != controlplane.DefaultLimits().MaxStringBytes {
		t.Errorf("Limits() = %+v, want MaxFilterIDs 2 and defaults elsewhere", lim)
	}
	ids := []string{"11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222", "33333333-3333-4333-8333-333333333333"}
	q := &controlplane.ListDeploymentsQuery{DeploymentIDs: ids}
	if err := q.Validate(); err != nil {
		t.Errorf("Validate (default limits): %v", err)
	}
	diff(t, "ValidateWith", []string{"query.deployment_ids: too_long"}, locTypes(problems(t, q.ValidateWith(lim))))
	_, err := f.cp.ListDeployments(f.ctx, tenantA, q)
	diff(t, "ListDeployments", []string{"query.deployment_ids: too_long"}, locTypes(problems(t, err)))
	for _, err := range []error{(&controlplane.ListRevisionsQuery{Limit: new(0)}).ValidateWith(lim), (&controlplane.ListListenersQuery{Offset: -1}).ValidateWith(lim)} {
		if len(problems(t, err)) != 1 {
			t.Errorf("ValidateWith: %v", err)
		}
	}
}

// TestListQueryEnums: the list filters accept every value of the enum
// lists and name them all in the message of a value they refuse.
func TestListQueryEnums(t *testing.T) {
	for _, s := range controlplane.DeploymentStatuses() {
		if err := (&controlplane.ListDeploymentsQuery{Status: s}).Validate(); err != nil {
			t.Errorf("status %s: %v", s, err)
		}
	}
	for _, ty := range controlplane.DeploymentTypes() {
		if err := (&controlplane.ListDeploymentsQuery{DeploymentType: ty}).Validate(); err != nil {
			t.Errorf("type %s: %v", ty, err)
		}
	}
	for _, s := range controlplane.RevisionStatuses() {
		if err := (&controlplane.ListRevisionsQuery{Status: []controlplane.RevisionStatus{s}}).Validate(); err != nil {
			t.Errorf("revision status %s: %v", s, err)
		}
	}
	ps := problems(t, (&controlplane.ListDeploymentsQuery{Status: "x", DeploymentType: "y"}).Validate())
	want := []string{"Input should be 'AWAITING_DATABASE', 'READY', 'UNUSED', 'AWAITING_DELETE' or 'UNKNOWN'",
		"Input should be 'dev_free', 'dev', 'prod', 'dev_zero' or 'dev_free_zero'"}
	if len(ps) != 2 || ps[0].Msg != want[0] || ps[1].Msg != want[1] {
		t.Errorf("messages %+v, want %q", ps, want)
	}
}
