package githubapp_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/githubapp"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/store/storetest"
	"github.com/deployplane/deployplane/storemem"
)

func newStates(t *testing.T, now *time.Time) (*githubapp.States, store.Store) {
	t.Helper()
	st := storemem.New()
	t.Cleanup(func() { st.Close() })
	return githubapp.NewStates(st, &githubapp.StatesOptions{Clock: func() time.Time { return *now }}), st
}

func dumpStates(t *testing.T, st store.Store) map[string]string {
	t.Helper()
	d, err := storetest.Dump(context.Background(), st, githubapp.StatesCollection)
	if err != nil {
		t.Fatal(err)
	}
	return d[githubapp.StatesCollection]
}

// TestStatesRecords pins what a state leaves in the store: its SHA-256
// only, the tenant and expiry as JSON, and an expiry entry sorted by time.
func TestStatesRecords(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.FixedZone("", 3600))
	s, st := newStates(t, &now)
	state, err := s.Issue(context.Background(), "tenant-a")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(state))
	h := hex.EncodeToString(sum[:])
	want := map[string]string{
		"s/" + h:                    `{"tenant":"tenant-a","expires_at":"2026-01-02T02:19:05.123456Z"}`,
		"e/8006475e55601a80/s/" + h: "",
	}
	got := dumpStates(t, st)
	if len(got) != len(want) {
		t.Fatalf("records = %q, want %q", got, want)
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("record %s = %q (present %v), want %q", k, g, ok, v)
		}
	}
}

// TestStatesSingleUse: a state names its tenant once; a second use, a
// made-up state and an expired one (spent all the same) match
// controlplane.ErrUnknownInstallState.
func TestStatesSingleUse(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s, st := newStates(t, &now)
	state, err := s.Issue(ctx, "tenant-a")
	if err != nil {
		t.Fatal(err)
	}
	if tenant, err := s.Consume(ctx, state); err != nil || tenant != "tenant-a" {
		t.Fatalf("Consume = %q, %v; want tenant-a", tenant, err)
	}
	for _, st := range []string{state, "made-up"} {
		if _, err := s.Consume(ctx, st); !errors.Is(err, controlplane.ErrUnknownInstallState) {
			t.Errorf("Consume(%q) = %v, want ErrUnknownInstallState", st, err)
		}
	}
	old, err := s.Issue(ctx, "tenant-a")
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(controlplane.GitHubInstallStateTTL)
	if _, err := s.Consume(ctx, old); !errors.Is(err, controlplane.ErrUnknownInstallState) {
		t.Errorf("Consume of an expired state = %v, want ErrUnknownInstallState", err)
	}
	if n := len(dumpStates(t, st)); n != 0 {
		t.Errorf("%d records left, want none (the expired state spent)", n)
	}
}

// TestStatesExpire: each new state removes a few expired ones, so that
// expired states do not pile up.
func TestStatesExpire(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s, st := newStates(t, &now)
	for range 20 {
		now = now.Add(time.Second)
		if _, err := s.Issue(ctx, "tenant-a"); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(controlplane.GitHubInstallStateTTL + time.Minute)
	// Three more states remove the 20 old ones, leaving the new ones (and
	// their expiry entries).
	for range 3 {
		if _, err := s.Issue(ctx, "tenant-a"); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(dumpStates(t, st)); n != 2*3 {
		t.Errorf("state records = %d, want %d (the expired ones removed)", n, 2*3)
	}
}
