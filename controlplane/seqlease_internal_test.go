package controlplane

import (
	"context"
	"testing"
	"time"

	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storemem"
)

// TestSequencerLease: of two replicas over one store, the first whose
// writes trigger a run takes the lease, the other skips its runs (its
// events wait in the outbox for the holder's) until the lease lapses;
// the holder renews it at each run.
func TestSequencerLease(t *testing.T) {
	ctx := context.Background()
	st := storemem.New()
	t.Cleanup(func() { st.Close() })
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	a, b := New(st, &Options{Clock: clock}), New(st, &Options{Clock: clock})

	outbox := func() int {
		t.Helper()
		n := 0
		err := st.View(ctx, func(r store.Reader) error {
			return r.Scan(colEventOutbox, "", nil, func(string, []byte) (bool, error) { n++; return true, nil })
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// trigger counts enough events written in replica cp to run its
	// sequencer.
	trigger := func(cp *ControlPlane) { cp.seq.wrote(ctx, eventSeqEvery) }

	createEventsDeployment(t, b, "from-b")
	trigger(a) // a takes the lease and numbers b's events too
	if n := outbox(); n != 0 {
		t.Fatalf("after the holder's run, %d events left in the outbox, want 0", n)
	}
	createEventsDeployment(t, b, "from-b-2")
	trigger(b) // held by a: b skips
	if n := outbox(); n == 0 {
		t.Fatal("a replica ran the sequencer while another held the lease")
	}
	now = now.Add(seqLeaseTTL / 2)
	trigger(a) // the holder renews, and numbers them
	if n := outbox(); n != 0 {
		t.Fatalf("the holder's second run left %d events, want 0", n)
	}
	createEventsDeployment(t, b, "from-b-3")
	now = now.Add(seqLeaseTTL - time.Microsecond) // within the renewed lease
	trigger(b)
	if n := outbox(); n == 0 {
		t.Fatal("a replica ran the sequencer within the renewed lease of another")
	}
	now = now.Add(time.Microsecond) // lapsed
	trigger(b)
	if n := outbox(); n != 0 {
		t.Fatalf("after the lease lapsed, the other replica's run left %d events, want 0", n)
	}
	// SequenceEvents does not ask for the lease (b holds it now).
	createEventsDeployment(t, a, "from-a")
	if err := a.SequenceEvents(ctx); err != nil {
		t.Fatal(err)
	}
	if n := outbox(); n != 0 {
		t.Fatalf("SequenceEvents left %d events, want 0", n)
	}
}
