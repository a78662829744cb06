package controlplane_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storemem"
)

// TestCheckLayout: a new store and one in the current layout (deployments
// of two tenants, revisions, a listener, work done and pending, a
// deployment removed) pass; a store holding deployments under text keys,
// or the records of name_contains indexes of another layout, is refused
// with an error wrapping ErrOldLayout that names what it found.
func TestCheckLayout(t *testing.T) {
	ctx := context.Background()
	current := func(t *testing.T) (*controlplane.ControlPlane, store.Store) {
		f := newFixture(t, nil)
		cp := f.cp
		if err := cp.CheckLayout(ctx); err != nil {
			t.Fatalf("CheckLayout of a new store: %v", err)
		}
		f.listener(tenantA)
		for _, name := range []string{"agent-1", "agent-2", "Agent-3"} {
			f.create(tenantA, dockerBody(name))
		}
		gone := f.create(tenantB, dockerBody("gone"))
		f.create(tenantB, dockerBody("kept"))
		if err := cp.DeleteDeployment(ctx, tenantB, gone.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := cp.Process(ctx, quick{}); err != nil {
			t.Fatal(err)
		}
		if err := cp.CheckLayout(ctx); err != nil {
			t.Fatalf("CheckLayout of a store this build wrote: %v", err)
		}
		return cp, f.st
	}
	current(t)
	for _, tc := range []struct {
		name, col, key, what string
	}{
		{"text keys", "cp_deployments", tenantA + "/0190a000-0000-7000-8000-000000000001", "text keys"},
		{"name blocks", "cp_deployment_name_blocks", "\x01\x00\x06\x4b\x1d\x3a\x60\x00\x00\x01", "name blocks"},
		{"unpositioned trigrams", "cp_deployment_grams", "\x01age\x00\x06\x4b\x1d\x3a\x60\x00\x00\x01", "trigrams"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp, st := current(t)
			err := st.Update(ctx, func(tx store.Tx) error { return tx.Put(tc.col, tc.key, []byte("agent-1")) })
			if err != nil {
				t.Fatal(err)
			}
			err = cp.CheckLayout(ctx)
			if !errors.Is(err, controlplane.ErrOldLayout) {
				t.Fatalf("CheckLayout = %v, want ErrOldLayout", err)
			}
			if !strings.Contains(err.Error(), tc.what) {
				t.Errorf("error %q does not say it found %s", err, tc.what)
			}
		})
	}
}

// touchStore records the collections that every read and write of its
// transactions goes to.
type touchStore struct {
	store.Store
	mu      sync.Mutex
	touched map[string]bool
}

func (s *touchStore) touch(col string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.touched[col] = true
}

func (s *touchStore) View(ctx context.Context, fn func(store.Reader) error) error {
	return s.Store.View(ctx, func(r store.Reader) error { return fn(touchTx{Reader: r, s: s}) })
}

func (s *touchStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	return s.Store.Update(ctx, func(tx store.Tx) error { return fn(touchTx{Reader: tx, tx: tx, s: s}) })
}

type touchTx struct {
	store.Reader
	tx store.Tx // nil in a View
	s  *touchStore
}

func (t touchTx) Get(col, key string) ([]byte, error) {
	t.s.touch(col)
	return t.Reader.Get(col, key)
}

func (t touchTx) Scan(col, prefix string, opts *store.ScanOptions, fn func(string, []byte) (bool, error)) error {
	t.s.touch(col)
	return t.Reader.Scan(col, prefix, opts, fn)
}

func (t touchTx) Create(col, key string, v []byte) error {
	t.s.touch(col)
	return t.tx.Create(col, key, v)
}
func (t touchTx) Put(col, key string, v []byte) error { t.s.touch(col); return t.tx.Put(col, key, v) }
func (t touchTx) Delete(col, key string) error        { t.s.touch(col); return t.tx.Delete(col, key) }

// TestListsAndDeletesTouchOnlyCurrentCollections: creating, listing (with
// every kind of filter, and a deep offset) and removing deployments
// through the lifecycle read and write no collection of an earlier
// layout.
func TestListsAndDeletesTouchOnlyCurrentCollections(t *testing.T) {
	ctx := context.Background()
	st := &touchStore{Store: storemem.New(), touched: map[string]bool{}}
	defer st.Close()
	cp := controlplane.New(st, nil)
	var ids []string
	for i := range 40 {
		d, err := cp.CreateDeployment(ctx, tenantA, &controlplane.CreateDeploymentRequest{Name: new(fmt.Sprintf("agent-%03d", i)),
			Source: new(controlplane.SourceExternalDocker), SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("r/a:1")}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, d.ID)
	}
	for _, q := range []*controlplane.ListDeploymentsQuery{
		nil,
		{Offset: 25},
		{NameContains: "1"},
		{NameContains: "t-"},
		{NameContains: "agent-01"},
		{NameContains: "AGENT", Offset: 30},
		{Status: controlplane.StatusAwaitingDatabase},
		{DeploymentType: controlplane.DeploymentTypeDev},
		{RemoteReconciled: new(false)},
		{TagValueIDs: []string{"44444444-4444-4444-8444-444444444444"}},
		{DeploymentIDs: ids[:3]},
	} {
		if _, err := cp.ListDeployments(ctx, tenantA, q); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids[:20] {
		if err := cp.DeleteDeployment(ctx, tenantA, id); err != nil {
			t.Fatal(err)
		}
	}
	for {
		ok, err := cp.Process(ctx, quick{})
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
	}
	page, err := cp.ListDeployments(ctx, tenantA, &controlplane.ListDeploymentsQuery{NameContains: "agent", Limit: new(100)})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Resources) != 20 {
		t.Fatalf("%d deployments left after removing 20 of 40, want 20", len(page.Resources))
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, col := range []string{"cp_deployment_name_blocks", "cp_deployment_grams"} {
		if st.touched[col] {
			t.Errorf("%s was read or written", col)
		}
	}
	if !st.touched["cp_deployment_pgrams"] {
		t.Error("the gram index was never touched: the test does not see the store's use")
	}
}
