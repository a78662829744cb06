package keyenc_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"pgregory.net/rapid"

	"github.com/deployplane/deployplane/controlplane/internal/keyenc"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storemem"
)

// TestKeyParts: every key part decodes to what was encoded, delimits
// itself (decoding stops where the part ends, and IDLen and TenantLen
// say where), and sorts as its value does: ids that are canonical UUIDs
// as their text, times in time order; tenant prefixes are never a prefix
// of one another and start with a byte 0x01-0x1f.
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
		got, rest, ok := keyenc.ParseID(keyenc.ID(id) + tail)
		if !ok || got != id || rest != tail {
			rt.Fatalf("ParseID(ID(%q)+%q) = %q, %q, %v", id, tail, got, rest, ok)
		}
		if n := keyenc.IDLen(keyenc.ID(id) + tail); n != len(keyenc.ID(id)) {
			rt.Fatalf("IDLen(ID(%q)+%q) = %d, want %d", id, tail, n, len(keyenc.ID(id)))
		}
		if len(id) == 36 && strings.ToLower(id) == id {
			if _, err := uuid.Parse(id); err == nil && len(keyenc.ID(id)) != 17 {
				rt.Fatalf("UUID %s encodes in %d bytes", id, len(keyenc.ID(id)))
			}
		}
		if n, w := len(keyenc.Str(id)), len(id); n <= w || keyenc.Str(id)[n-w:] != id {
			rt.Fatalf("Str(%q) = %q", id, keyenc.Str(id))
		}

		a, b := rapid.Uint64Range(1, 1<<40).Draw(rt, "a"), rapid.Uint64Range(1, 1<<40).Draw(rt, "b")
		pa, pb := keyenc.TenantPrefix(a), keyenc.TenantPrefix(b)
		if n := keyenc.TenantLen(pa + keyenc.ID(id)); n != len(pa) {
			rt.Fatalf("tenant number %d: prefix %q, TenantLen %d", a, pa, n)
		}
		if n := keyenc.TenantLen(pa[:len(pa)-1]); n != 0 {
			rt.Fatalf("tenant prefix %q cut short: TenantLen %d", pa, n)
		}
		if a != b && (strings.HasPrefix(pa, pb) || strings.HasPrefix(pb, pa)) {
			rt.Fatalf("tenant prefixes %q and %q: one begins the other", pa, pb)
		}
		if pa[0] == 0 || pa[0] >= ' ' {
			rt.Fatalf("tenant prefix %q starts outside 0x01-0x1f", pa)
		}

		ta := time.UnixMicro(rapid.Int64Range(-1<<50, 1<<50).Draw(rt, "ta"))
		tb := time.UnixMicro(rapid.Int64Range(-1<<50, 1<<50).Draw(rt, "tb"))
		if (keyenc.Time(ta) < keyenc.Time(tb)) != ta.Before(tb) || len(keyenc.Time(ta)) != keyenc.TimeLen {
			rt.Fatalf("Time order of %v and %v", ta, tb)
		}
	})
	u1, u2 := "0190a000-0000-7000-8000-000000000001", "0190a000-0000-7000-8000-0000000000ff"
	if !(keyenc.ID(u1) < keyenc.ID(u2)) {
		t.Error("UUIDs do not sort as their text")
	}
	if keyenc.ID(strings.ToUpper(u1)) == keyenc.ID(u1) {
		t.Error("a UUID not in canonical form encodes as the canonical one")
	}
	for _, k := range []string{"", keyenc.NoTenant, " acme/", "\x18"} {
		if n := keyenc.TenantLen(k); n != 0 {
			t.Errorf("TenantLen(%q) = %d", k, n)
		}
	}
	for _, k := range []string{"", "\x01" + strings.Repeat("x", 15), "\x02\x05abc", "\x03"} {
		if _, _, ok := keyenc.ParseID(k); ok || keyenc.IDLen(k) != 0 {
			t.Errorf("ParseID(%q) ok, IDLen %d", k, keyenc.IDLen(k))
		}
	}
}

// TestAppendID: AppendID appends ID's part, which takes a UUID in
// canonical form only (any byte changed, a letter's case included,
// makes it an id of the other kind), and ID of a UUID allocates at most
// its string.
func TestAppendID(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		u, _ := uuid.FromBytes(rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(rt, "bytes"))
		b := []byte(u.String())
		for _, i := range rapid.SliceOfN(rapid.IntRange(0, 35), 0, 2).Draw(rt, "changed") {
			b[i] = rapid.SampledFrom([]byte("0aAfFgG-{} ")).Draw(rt, "to")
		}
		id := string(b)
		dst := rapid.String().Draw(rt, "dst")
		got := string(keyenc.AppendID([]byte(dst), id))
		p, err := uuid.Parse(id)
		canonical := err == nil && p.String() == id
		if got[:len(dst)] != dst || got[len(dst):] != keyenc.ID(id) || (len(got)-len(dst) == 17) != canonical {
			rt.Fatalf("AppendID(%q, %q) = %q; ID: %q; canonical UUID: %v", dst, id, got, keyenc.ID(id), canonical)
		}
	})
	id := "0190a000-0000-7000-8000-0000000000ff"
	if n := testing.AllocsPerRun(100, func() { _ = keyenc.ID(id) }); n > 1 {
		t.Errorf("ID of a UUID: %v allocations, want at most 1", n)
	}
}

// TestTenantPrefixBytes: the prefixes of a few numbers, byte for byte
// (the stores already written hold them).
func TestTenantPrefixBytes(t *testing.T) {
	for n, want := range map[uint64]string{1: "\x01", 23: "\x17", 24: "\x18\x18", 42: "\x18\x2a", 255: "\x18\xff",
		256: "\x19\x01\x00", 1 << 40: "\x1d\x01\x00\x00\x00\x00\x00", 1<<64 - 1: "\x1f" + strings.Repeat("\xff", 8)} {
		if got := keyenc.TenantPrefix(n); got != want {
			t.Errorf("TenantPrefix(%d) = %q, want %q", n, got, want)
		}
	}
	if got := keyenc.Time(time.UnixMicro(0)); got != "\x80\x00\x00\x00\x00\x00\x00\x00" {
		t.Errorf("Time(0) = %q", got)
	}
	if got := keyenc.ID("0190a000-0000-7000-8000-000000000001"); got != "\x01\x01\x90\xa0\x00\x00\x00\x70\x00\x80\x00\x00\x00\x00\x00\x00\x01" {
		t.Errorf("ID of a UUID = %q", got)
	}
	if got := keyenc.ID("ab"); got != "\x02\x02ab" {
		t.Errorf("ID(ab) = %q", got)
	}
}

// TestAssign: tenants get the next number, once, and its prefix maps back
// to the tenant; a counter past 23 gives the longer prefixes.
func TestAssign(t *testing.T) {
	ctx := context.Background()
	st := storemem.New()
	var c keyenc.Tenants
	assign := func(tenant string) string {
		t.Helper()
		var p string
		if err := st.Update(ctx, func(tx store.Tx) (err error) { p, err = c.Assign(tx, nil, tenant); return err }); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if a, b, a2 := assign("a"), assign("b"), assign("a"); a != keyenc.TenantPrefix(1) || b != keyenc.TenantPrefix(2) || a2 != a {
		t.Fatalf("assigned %q, %q, then %q", a, b, a2)
	}
	if err := st.Update(ctx, func(tx store.Tx) error {
		return tx.Put(keyenc.ColTenants, "#", []byte(strconv.Itoa(41)))
	}); err != nil {
		t.Fatal(err)
	}
	if p := assign("c"); p != keyenc.TenantPrefix(42) {
		t.Fatalf("the 42nd tenant: %q", p)
	}
	for tenant, p := range map[string]string{"a": keyenc.TenantPrefix(1), "c": keyenc.TenantPrefix(42)} {
		var fresh keyenc.Tenants // nothing cached: read from the store
		got, err := fresh.Tenant(ctx, st, p)
		if err != nil || got != tenant {
			t.Errorf("Tenant(%q) = %q, %v, want %q", p, got, err, tenant)
		}
	}
	if _, err := c.Tenant(ctx, st, keyenc.TenantPrefix(3)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an unassigned prefix: %v", err)
	}
	if err := st.Update(ctx, func(tx store.Tx) error { return tx.Put(keyenc.ColTenants, "#", []byte("x")) }); err != nil {
		t.Fatal(err)
	}
	if err := st.Update(ctx, func(tx store.Tx) error { _, err := c.Assign(tx, nil, "d"); return err }); err == nil {
		t.Error("a malformed counter assigned a prefix")
	}
}

// TestCacheOnlyCommitted: a prefix read or assigned inside an Update is
// not cached while it runs (the Update may yet roll back), but is once
// Commit says it has committed; one read by a View of a store Views made
// is, one read by a View of another store is not, and a rolled-back
// assignment leaves nothing behind.
func TestCacheOnlyCommitted(t *testing.T) {
	ctx := context.Background()
	raw := storemem.New()
	st := keyenc.Views(raw)
	var c keyenc.Tenants
	// cached is the prefix c holds for the tenant, "" for none: asked
	// over an empty store, only the cache knows it.
	empty := storemem.New()
	cached := func(tenant string) (p string) {
		_ = empty.View(ctx, func(r store.Reader) (err error) { p, err = c.Prefix(r, tenant); return err })
		if p == keyenc.NoTenant {
			return ""
		}
		return p
	}
	rollback := errors.New("roll back")
	err := st.Update(ctx, func(tx store.Tx) error {
		var pending keyenc.Pending
		p, err := c.Assign(tx, &pending, "t1")
		if err != nil || p == keyenc.NoTenant {
			t.Fatalf("Assign = %q, %v", p, err)
		}
		if p2, _ := c.Prefix(tx, "t1"); p2 != p || cached("t1") != "" {
			t.Fatalf("read in the Update: %q (cached %q), want %q, not cached", p2, cached("t1"), p)
		}
		return rollback
	})
	if err != rollback {
		t.Fatal(err)
	}
	err = st.View(ctx, func(r store.Reader) error {
		p, err := c.Prefix(r, "t1")
		if p != keyenc.NoTenant || cached("t1") != "" {
			t.Fatalf("after a rollback: %q, cached %q", p, cached("t1"))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var pending keyenc.Pending
	var assigned string
	err = st.Update(ctx, func(tx store.Tx) (err error) {
		pending = keyenc.Pending{}
		if assigned, err = c.Assign(tx, &pending, "t1"); err != nil {
			return err
		}
		// The Update's later Assigns answer from pending: delete the
		// record, and the prefix is still the one assigned.
		if err := tx.Delete(keyenc.ColTenants, "tt1"); err != nil {
			return err
		}
		if again, err := c.Assign(tx, &pending, "t1"); err != nil || again != assigned {
			t.Fatalf("Assign again in the Update = %q, %v, want %q", again, err, assigned)
		}
		return rollback
	})
	if err != rollback || cached("t1") != "" {
		t.Fatalf("%v, cached %q", err, cached("t1"))
	}
	if err := st.Update(ctx, func(tx store.Tx) (err error) {
		pending = keyenc.Pending{}
		assigned, err = c.Assign(tx, &pending, "t1")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if cached("t1") != "" {
		t.Fatal("cached before Commit")
	}
	c.Commit(&pending)
	if p := cached("t1"); p != assigned {
		t.Fatalf("after Commit: cached %q, want %q", p, assigned)
	}

	// A View of the store itself, not made by Views, caches nothing; one
	// of Views' store does.
	var fresh keyenc.Tenants
	c2 := &fresh
	read := func(st store.Store) string {
		var p string
		if err := st.View(ctx, func(r store.Reader) (err error) { p, err = c2.Prefix(r, "t1"); return err }); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cached2 := func() bool {
		var p string
		_ = empty.View(ctx, func(r store.Reader) (err error) { p, err = c2.Prefix(r, "t1"); return err })
		return p != keyenc.NoTenant
	}
	if p := read(raw); p != assigned || cached2() {
		t.Fatalf("read outside Views: %q, cached %v", p, cached2())
	}
	if p := read(st); p != assigned || !cached2() {
		t.Fatalf("read in a View of Views: %q, cached %v", p, cached2())
	}
}
