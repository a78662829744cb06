package controlplane

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"pgregory.net/rapid"

	"github.com/deployplane/deployplane/controlplane/internal/workqueue"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storemem"
)

// TestKeyParts: every key part decodes to what was encoded, delimits
// itself (decoding stops where the part ends), and sorts as its value
// does: ids that are canonical UUIDs as their text, times in time order;
// tenant prefixes are never a prefix of one another.
func TestKeyParts(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var id string
		if rapid.Bool().Draw(rt, "uuid") {
			u, _ := uuid.FromBytes(rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(rt, "bytes"))
			id = u.String()
		} else {
			id = rapid.String().Draw(rt, "id")
		}
		tail := rapid.String().Draw(rt, "tail")
		got, rest, ok := decID(encID(id) + tail)
		if !ok || got != id || rest != tail {
			rt.Fatalf("decID(encID(%q)+%q) = %q, %q, %v", id, tail, got, rest, ok)
		}
		if len(id) == 36 && strings.ToLower(id) == id {
			if _, err := uuid.Parse(id); err == nil && len(encID(id)) != 17 {
				rt.Fatalf("UUID %s encodes in %d bytes", id, len(encID(id)))
			}
		}

		a, b := rapid.Uint64Range(1, 1<<40).Draw(rt, "a"), rapid.Uint64Range(1, 1<<40).Draw(rt, "b")
		pa, pb := encTenantNum(a), encTenantNum(b)
		// The work queue splits its keys by the same rules (it repeats them).
		u, ok := workqueue.Parse(workqueue.Unit{Range: agentRange(pa, id), Deployment: encID(id), Revision: timeKey(time.UnixMicro(0)) + encID(id)}.Key())
		if decTenantNum(pa) != a || !ok || u.Range.Tenant != pa {
			rt.Fatalf("tenant number %d: prefix %q decodes to %d, a work queue key splits %v to %q", a, pa, decTenantNum(pa), ok, u.Range.Tenant)
		}
		if j := newJob(&workqueue.Lease{Unit: u}, "t"); j.listener != id || j.deployment != id || j.revision != id {
			rt.Fatalf("a work queue key of id %q splits to listener %q, deployment %q, revision %q", id, j.listener, j.deployment, j.revision)
		}
		if a != b && (strings.HasPrefix(pa, pb) || strings.HasPrefix(pb, pa)) {
			rt.Fatalf("tenant prefixes %q and %q: one begins the other", pa, pb)
		}
		if pa[0] == 0 || pa[0] >= ' ' {
			rt.Fatalf("tenant prefix %q starts outside 0x01-0x1f", pa)
		}

		ta := time.UnixMicro(rapid.Int64Range(-1<<50, 1<<50).Draw(rt, "ta"))
		tb := time.UnixMicro(rapid.Int64Range(-1<<50, 1<<50).Draw(rt, "tb"))
		if (timeKey(ta) < timeKey(tb)) != ta.Before(tb) || len(timeKey(ta)) != 8 {
			rt.Fatalf("timeKey order of %v and %v", ta, tb)
		}
	})
	u1, u2 := "0190a000-0000-7000-8000-000000000001", "0190a000-0000-7000-8000-0000000000ff"
	if !(encID(u1) < encID(u2)) {
		t.Error("UUIDs do not sort as their text")
	}
	if encID(strings.ToUpper(u1)) == encID(u1) {
		t.Error("a UUID not in canonical form encodes as the canonical one")
	}
}

// TestTenantCacheOnlyCommitted: a tenant prefix read or assigned inside
// an Update is not cached while it runs (the Update may yet roll back),
// but is once it has committed; one read by a View is, and a rolled-back
// assignment leaves nothing behind.
func TestTenantCacheOnlyCommitted(t *testing.T) {
	ctx := context.Background()
	cp := New(storemem.New(), nil)
	cached := func(tenant string) bool { _, ok := cp.tenants.byName.Load(tenant); return ok }
	rollback := errorString("roll back")
	err := cp.st.Update(ctx, func(tx store.Tx) error {
		p, err := cp.writeTenant(tx, "t1")
		if err != nil || p == tenantNone {
			t.Fatalf("writeTenant = %q, %v", p, err)
		}
		if p2, _ := cp.readTenant(tx, "t1"); p2 != p || cached("t1") {
			t.Fatalf("read in the Update: %q (cached %v), want %q, not cached", p2, cached("t1"), p)
		}
		return rollback
	})
	if err != rollback {
		t.Fatal(err)
	}
	err = cp.st.View(ctx, func(r store.Reader) error {
		p, err := cp.readTenant(r, "t1")
		if p != tenantNone || cached("t1") {
			t.Fatalf("after a rollback: %q, cached %v", p, cached("t1"))
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
	if p, ok := cp.tenants.byName.Load("t1"); !ok || p != assigned {
		t.Fatalf("after the Update committed: cached %v %q, want %q", ok, p, assigned)
	}
	cp.tenants.byName.Delete("t1")
	err = cp.st.View(ctx, func(r store.Reader) error {
		p, err := cp.readTenant(r, "t1")
		if p != assigned || !cached("t1") {
			t.Fatalf("View read %q (cached %v), want %q, cached", p, cached("t1"), assigned)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }
