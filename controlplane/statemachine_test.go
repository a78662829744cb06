package controlplane_test

import (
	"testing"

	"github.com/deployplane/deployplane/controlplane/controlplanetest"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storemem"
)

func openMem() (store.Store, error) { return storemem.New(), nil }

// TestStateMachine runs the model-based state machine over two storemem
// instances side by side, so that the cross-store comparison itself is
// exercised; storebolt and storepg run the same machine from their tests.
func TestStateMachine(t *testing.T) {
	controlplanetest.Run(t, openMem, openMem)
}
