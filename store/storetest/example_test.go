package storetest_test

import (
	"testing"

	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/store/storetest"
)

// A third-party backend runs the suite from a test function in its own
// package. This is the whole of that function for an in-memory store (here
// the suite's map-based reference store); a persistent store also sets
// Reopen, as the package documentation shows. The example has no output to
// check because Run needs the *testing.T of a real test: TestReference runs
// exactly this.
func ExampleRun() {
	testConformance := func(t *testing.T) {
		storetest.Run(t, storetest.Harness{
			Open: func(testing.TB) store.Store { return newRefStore(noBug) },
		})
	}
	_ = testConformance // in mystore_test.go: func TestConformance(t *testing.T) { ... }
}
