// Command quickstart shows the storage contract that every deployplane
// backend implements: an Update that commits, one that rolls back, and a
// newest-first page read with a reverse Scan.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storemem"
)

func main() {
	ctx := context.Background()
	st := storemem.New()
	defer st.Close()

	// Commit three records in one transaction.
	err := st.Update(ctx, func(tx store.Tx) error {
		for _, id := range []string{"0001", "0002", "0003"} {
			if err := tx.Create("deployments", "tenant-a/"+id, []byte(`{"name":"agent-`+id+`"}`)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}

	// A closure that fails leaves nothing behind.
	errCancelled := errors.New("changed my mind")
	err = st.Update(ctx, func(tx store.Tx) error {
		if err := tx.Put("deployments", "tenant-a/0004", []byte(`{}`)); err != nil {
			return err
		}
		return errCancelled
	})
	fmt.Println("rolled back:", errors.Is(err, errCancelled))

	// Newest first, two per page.
	err = st.View(ctx, func(r store.Reader) error {
		n := 0
		return r.Scan("deployments", "tenant-a/", &store.ScanOptions{Reverse: true},
			func(key string, value []byte) (bool, error) {
				fmt.Printf("%s %s\n", key, value)
				n++
				return n < 2, nil
			})
	})
	if err != nil {
		log.Fatal(err)
	}
}
