package controlplane

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"pgregory.net/rapid"

	"github.com/deployplane/deployplane/controlplane/internal/keyenc"
	"github.com/deployplane/deployplane/controlplane/internal/workqueue"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storemem"
)

// TestJobOfUnit: the key of a unit of work, split by the work queue,
// gives the job the listener, deployment and revision ids it was made
// of.
func TestJobOfUnit(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var id string
		if rapid.Bool().Draw(rt, "uuid") {
			u, _ := uuid.FromBytes(rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(rt, "bytes"))
			id = u.String()
		} else {
			id = rapid.String().Draw(rt, "id")
		}
		tp := keyenc.TenantPrefix(rapid.Uint64Range(1, 1<<40).Draw(rt, "tenant"))
		u, ok := workqueue.Parse(workqueue.Unit{Range: agentRange(tp, id), Deployment: keyenc.ID(id), Revision: keyenc.Time(time.UnixMicro(0)) + keyenc.ID(id)}.Key())
		if !ok || u.Range.Tenant != tp {
			rt.Fatalf("a work queue key of tenant %q splits %v to %q", tp, ok, u.Range.Tenant)
		}
		if j := newJob(&workqueue.Lease{Unit: u}, "t"); j.listener != id || j.deployment != id || j.revision != id {
			rt.Fatalf("a work queue key of id %q splits to listener %q, deployment %q, revision %q", id, j.listener, j.deployment, j.revision)
		}
	})
}

// TestTenantCacheOnlyCommitted: a tenant prefix read or assigned inside
// an Update is not cached while it runs (the Update may yet roll back),
// but is once it has committed; one read by a View is, and a rolled-back
// assignment leaves nothing behind.
func TestTenantCacheOnlyCommitted(t *testing.T) {
	ctx := context.Background()
	st := storemem.New()
	cp := New(st, nil)
	// cached reports whether cp's cache holds the tenant's prefix: asked
	// over an empty store, only the cache knows it.
	empty := storemem.New()
	cached := func(cp *ControlPlane, tenant string) (p string) {
		_ = empty.View(ctx, func(r store.Reader) (err error) { p, err = cp.tenants.Prefix(r, tenant); return err })
		if p == keyenc.NoTenant {
			return ""
		}
		return p
	}
	rollback := errorString("roll back")
	err := cp.st.Update(ctx, func(tx store.Tx) error {
		p, err := cp.writeTenant(tx, "t1")
		if err != nil || p == keyenc.NoTenant {
			t.Fatalf("writeTenant = %q, %v", p, err)
		}
		if p2, _ := cp.readTenant(tx, "t1"); p2 != p || cached(cp, "t1") != "" {
			t.Fatalf("read in the Update: %q (cached %q), want %q, not cached", p2, cached(cp, "t1"), p)
		}
		return rollback
	})
	if err != rollback {
		t.Fatal(err)
	}
	err = cp.st.View(ctx, func(r store.Reader) error {
		p, err := cp.readTenant(r, "t1")
		if p != keyenc.NoTenant || cached(cp, "t1") != "" {
			t.Fatalf("after a rollback: %q, cached %q", p, cached(cp, "t1"))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var assigned string
	if err := cp.st.Update(ctx, func(tx store.Tx) (err error) { assigned, err = cp.writeTenant(tx, "t1"); return err }); err != nil {
		t.Fatal(err)
	}
	// Committed now: the Update's prefix is cached (eventStore).
	if p := cached(cp, "t1"); p != assigned {
		t.Fatalf("after the Update committed: cached %q, want %q", p, assigned)
	}
	// Another ControlPlane over the store has nothing cached; its View
	// reads the prefix and caches it.
	other := New(st, nil)
	err = other.st.View(ctx, func(r store.Reader) error {
		if p := cached(other, "t1"); p != "" {
			t.Fatalf("cached %q before the read", p)
		}
		p, err := other.readTenant(r, "t1")
		if p != assigned || cached(other, "t1") != assigned {
			t.Fatalf("View read %q (cached %q), want %q, cached", p, cached(other, "t1"), assigned)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }
