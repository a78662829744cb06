package storepg_test

import (
	"context"
	"fmt"
	"log"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storepg"
)

// These examples need a PostgreSQL server, so they have no Output comment:
// go test compiles them but does not run them. The tests in this package
// do the same things against a real server.

// Open a Store that owns its connection pool, write a record and read it
// back.
func ExampleOpen() {
	ctx := context.Background()
	s, err := storepg.Open(ctx, "postgres://deployplane:secret@db.internal:5432/deployplane?pool_max_conns=16",
		&storepg.Options{Schema: "deployplane"})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	err = s.Update(ctx, func(tx store.Tx) error {
		return tx.Put("greetings", "hello", []byte("world"))
	})
	if err != nil {
		log.Fatal(err)
	}
	var v []byte
	err = s.View(ctx, func(r store.Reader) error {
		var err error
		v, err = r.Get("greetings", "hello")
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(v))
}

// Run a Store over a pool the program also uses for its own queries. The
// program closes the pool, after the Store.
func ExampleOpenPool() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://deployplane:secret@db.internal:5432/deployplane")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	s, err := storepg.OpenPool(ctx, pool, nil) // schema "deployplane"
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM deployplane.records").Scan(&n); err != nil {
		log.Fatal(err)
	}
	fmt.Println(n, "records")
}
