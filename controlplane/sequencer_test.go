package controlplane_test

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/deployplane/deployplane/controlplane/controlplanetest"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storemem"
)

// TestEventsAcrossReplicas: two ControlPlanes over one storemem store
// (two replicas) with clocks an hour apart or less; see
// controlplanetest.EventsAcrossReplicas. storepg runs the same checks
// (storepg.TestReplicasEvents).
func TestEventsAcrossReplicas(t *testing.T) {
	controlplanetest.EventsAcrossReplicas(t, func(*rapid.T) [2]store.Store {
		st := storemem.New()
		return [2]store.Store{st, st}
	})
}

// TestEventsUnderConcurrentWrites: creates and changes from 16 goroutines
// across two replicas over one storemem store, while a follower on each
// reads.
func TestEventsUnderConcurrentWrites(t *testing.T) {
	st := storemem.New()
	defer st.Close()
	controlplanetest.EventsUnderConcurrentWrites(t, [2]store.Store{st, st}, 16, 8)
}
