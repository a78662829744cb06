package storemem_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storemem"
)

// A View runs to completion while an Update is still inside its closure, and
// sees the state from before that Update.
func TestViewDoesNotWaitForUpdate(t *testing.T) {
	ctx := context.Background()
	st := storemem.New()
	defer st.Close()
	if err := st.Update(ctx, func(tx store.Tx) error { return tx.Put("c", "k", []byte("old")) }); err != nil {
		t.Fatal(err)
	}

	inside, release := make(chan struct{}), make(chan struct{})
	updated := make(chan error, 1)
	go func() {
		updated <- st.Update(ctx, func(tx store.Tx) error {
			if err := tx.Put("c", "k", []byte("new")); err != nil {
				return err
			}
			close(inside)
			<-release
			return nil
		})
	}()
	<-inside

	viewed := make(chan string, 1)
	go func() {
		_ = st.View(ctx, func(r store.Reader) error {
			v, err := r.Get("c", "k")
			viewed <- string(v)
			return err
		})
	}()
	select {
	case got := <-viewed:
		if got != "old" {
			t.Errorf("View during Update read %q, want %q", got, "old")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("View waited for the running Update")
	}
	close(release)
	if err := <-updated; err != nil {
		t.Fatal(err)
	}
	_ = st.View(ctx, func(r store.Reader) error {
		if v, _ := r.Get("c", "k"); string(v) != "new" {
			t.Errorf("after the Update, read %q, want %q", v, "new")
		}
		return nil
	})
}

// Close waits for a transaction in flight, and the store refuses work after.
func TestCloseWaitsForRunningTransaction(t *testing.T) {
	ctx := context.Background()
	st := storemem.New()
	inside, release := make(chan struct{}), make(chan struct{})
	viewDone := make(chan error, 1)
	go func() {
		viewDone <- st.View(ctx, func(store.Reader) error {
			close(inside)
			<-release
			return nil
		})
	}()
	<-inside
	closed := make(chan struct{})
	go func() { _ = st.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while a View was running")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-closed
	if err := <-viewDone; err != nil {
		t.Fatal(err)
	}
	if err := st.View(ctx, func(store.Reader) error { return nil }); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("View after Close = %v, want ErrClosed", err)
	}
}
