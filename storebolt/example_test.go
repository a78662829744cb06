package storebolt_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storebolt"
)

func Example() {
	dir, err := os.MkdirTemp("", "storebolt-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "deployplane.db")

	st, err := storebolt.Open(path, nil)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	// Update returns nil once the write is committed and fsynced.
	err = st.Update(ctx, func(tx store.Tx) error {
		return tx.Create("deployments", "tenant-a/0192f5c0-0000-7000-8000-000000000001", []byte(`{"name":"agent"}`))
	})
	if err != nil {
		panic(err)
	}
	if err := st.Close(); err != nil {
		panic(err)
	}

	// The write survives reopening the file.
	st, err = storebolt.Open(path, nil)
	if err != nil {
		panic(err)
	}
	defer st.Close()
	err = st.View(ctx, func(r store.Reader) error {
		return r.Scan("deployments", "tenant-a/", nil, func(key string, value []byte) (bool, error) {
			fmt.Println(key, string(value))
			return true, nil
		})
	})
	if err != nil {
		panic(err)
	}
	// Output:
	// tenant-a/0192f5c0-0000-7000-8000-000000000001 {"name":"agent"}
}

func ExampleOpen_locked() {
	dir, err := os.MkdirTemp("", "storebolt-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "deployplane.db")

	st, err := storebolt.Open(path, nil)
	if err != nil {
		panic(err)
	}
	defer st.Close()
	// A second Open of a file in use waits LockTimeout, then gives up.
	_, err = storebolt.Open(path, &storebolt.Options{LockTimeout: 10 * time.Millisecond})
	fmt.Println(errors.Is(err, storebolt.ErrLocked))
	// Output:
	// true
}
