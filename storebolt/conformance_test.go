package storebolt_test

import (
	"path/filepath"
	"testing"

	"github.com/deployplane/deployplane/controlplane/controlplanetest"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/store/storetest"
	"github.com/deployplane/deployplane/storebolt"
	"github.com/deployplane/deployplane/storemem"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		Open: func(t testing.TB) store.Store { return openTemp(t, nil) },
		Reopen: func(t testing.TB, closed store.Store) store.Store {
			return openPath(t, closed.(*storebolt.Store).Path(), nil)
		},
	})
}

// TestControlPlaneStateMachine runs the controlplane state machine over
// storemem and storebolt side by side: every step is checked against the
// model on both, and the same random sequence must give identical results and
// identical store contents.
func TestControlPlaneStateMachine(t *testing.T) {
	controlplanetest.Run(t,
		func() (store.Store, error) { return storemem.New(), nil },
		func() (store.Store, error) { return storebolt.Open(filepath.Join(t.TempDir(), "db"), nil) },
	)
}

// TestControlPlaneLogs runs the revision logs' model test over storebolt.
func TestControlPlaneLogs(t *testing.T) {
	controlplanetest.RunLogs(t, func() (store.Store, error) { return storebolt.Open(filepath.Join(t.TempDir(), "db"), nil) })
}

// TestControlPlaneDeploymentLogs runs the deployment logs' model test
// over storebolt.
func TestControlPlaneDeploymentLogs(t *testing.T) {
	controlplanetest.RunDeploymentLogs(t, func() (store.Store, error) { return storebolt.Open(filepath.Join(t.TempDir(), "db"), nil) })
}
