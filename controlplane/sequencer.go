package controlplane

import "context"

// The sequencer finishes work that changes leave for later, so that they
// do not all read and write the same records: it numbers the events of
// the outbox (controlplane/internal/eventlog) and folds the pending order
// count changes into the counts (controlplane/internal/index). The event
// log runs it itself every few hundred events a process commits, under
// its lease, and eventStore folds the counts after each such run.

// seqBatch caps the count changes one fold takes.
const seqBatch = 1024

// maintain numbers the outbox events of every tenant and folds the
// pending order count changes (packing new deployments' gram records
// into the gram blocks).
func (cp *ControlPlane) maintain(ctx context.Context) error {
	if err := cp.events.SequenceAll(ctx); err != nil {
		return err
	}
	return cp.fold(ctx)
}

// fold folds the pending order count changes, one fold at a time in this
// process (two at once would read and remove the same changes, and
// conflict).
func (cp *ControlPlane) fold(ctx context.Context) error {
	cp.folding.Lock()
	defer cp.folding.Unlock()
	return cp.foldCounts(ctx)
}

// SequenceEvents numbers the events of every tenant that have committed
// so far, in this replica and the others over the same store, and folds
// the pending changes of the order counts that unfiltered pages skip over
// (both are written by changes for a sequencer to finish later; see
// FollowEvents). Run calls it at each wake-up and poll, followers before
// they read, and a ControlPlane itself every few hundred events it
// writes; a program that calls none of them may call it now and then to
// keep the pending work short. Runs of one ControlPlane are coalesced:
// callers at once share one numbering run that began after their call,
// and fold one after the other.
func (cp *ControlPlane) SequenceEvents(ctx context.Context) error {
	return cp.eventErr("sequence events", cp.maintain(ctx))
}
