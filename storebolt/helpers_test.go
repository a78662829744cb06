package storebolt_test

import (
	"path/filepath"
	"testing"

	"github.com/deployplane/deployplane/storebolt"
)

// openTemp opens a store in a fresh file under t's temporary directory and
// closes it when t ends.
func openTemp(t testing.TB, opts *storebolt.Options) *storebolt.Store {
	t.Helper()
	return openPath(t, filepath.Join(t.TempDir(), "deployplane.db"), opts)
}

// openPath opens the store at path and closes it when t ends.
func openPath(t testing.TB, path string, opts *storebolt.Options) *storebolt.Store {
	t.Helper()
	s, err := storebolt.Open(path, opts)
	if err != nil {
		t.Fatalf("Open(%q): %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}
