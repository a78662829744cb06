package storepg_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storepg"
)

// TestHeldWrites checks Puts and Discards held back and sent together:
// a run of Puts goes as one statement in which only the last value of a
// key put twice counts, Discards keep their place among the Puts, a read
// sees the held writes before it, and what is still held when the closure
// returns commits, whether it goes with the COMMIT (an earlier write told
// the transaction's id: the Create first) or before it.
func TestHeldWrites(t *testing.T) {
	for _, createFirst := range []bool{true, false} {
		name := "puts-only"
		if createFirst {
			name = "create-first"
		}
		t.Run(name, func(t *testing.T) {
			s := openStore(t, nil)
			ctx := context.Background()
			if err := s.Update(ctx, func(tx store.Tx) error {
				return tx.Put("c", "gone-before", []byte("0"))
			}); err != nil {
				t.Fatalf("Update: %v", err)
			}
			var readD []byte
			var readErr, goneErr error
			err := s.Update(ctx, func(tx store.Tx) error {
				if createFirst {
					if err := tx.Create("c", "x", []byte("x")); err != nil {
						return err
					}
				}
				for _, w := range []struct {
					key, value string
					discard    bool
				}{
					{key: "a", value: "1"}, {key: "a", value: "2"}, // the last value counts
					{key: "b", value: "1"}, {key: "b", discard: true}, // put, then gone
					{key: "missing", discard: true}, // not there: no error
					{key: "gone-before", discard: true},
					{key: "c", value: "1"}, {key: "c", discard: true}, {key: "c", value: "2"}, // back again
					{key: "d", value: "1"},
				} {
					var err error
					if w.discard {
						err = store.Discard(tx, "c", w.key)
					} else {
						err = tx.Put("c", w.key, []byte(w.value))
					}
					if err != nil {
						return err
					}
				}
				readD, readErr = tx.Get("c", "d") // sends what is held
				_, goneErr = tx.Get("c", "gone-before")
				if err := store.Discard(tx, "c", "d"); err != nil {
					return err
				}
				if err := tx.Put("c", "e", []byte("1")); err != nil {
					return err
				}
				return tx.Put("c", "a", []byte("3")) // held until the end
			})
			if err != nil {
				t.Fatalf("Update: %v", err)
			}
			if readErr != nil || string(readD) != "1" {
				t.Errorf("Get of a held Put = %q, %v; want \"1\"", readD, readErr)
			}
			if !errors.Is(goneErr, store.ErrNotFound) {
				t.Errorf("Get of a held Discard's key = %v; want ErrNotFound", goneErr)
			}
			got := map[string]string{}
			err = s.View(ctx, func(r store.Reader) error {
				clear(got)
				return r.Scan("c", "", nil, func(k string, v []byte) (bool, error) {
					got[k] = string(v)
					return true, nil
				})
			})
			if err != nil {
				t.Fatalf("View: %v", err)
			}
			want := map[string]string{"a": "3", "c": "2", "e": "1"}
			if createFirst {
				want["x"] = "x"
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("records after the Update (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHeldDiscardFails checks that a Discard held back whose statement
// the server refuses (a trigger raises an error on deleting key "a") makes
// the Update fail with the server's error and commit nothing, whether it
// would have gone with the COMMIT (after a Create, which tells the
// transaction's id) or before it; and that the Store works on afterwards.
func TestHeldDiscardFails(t *testing.T) {
	for _, createFirst := range []bool{true, false} {
		name := "discard-only"
		if createFirst {
			name = "create-first"
		}
		t.Run(name, func(t *testing.T) {
			schema := newSchema(t, nil)
			s := openSchema(t, schema, &storepg.Options{MaxConns: 1}) // the next Update reuses the connection
			ctx := context.Background()
			conn, err := pgx.Connect(ctx, testDSN(t))
			if err != nil {
				t.Fatalf("pgx.Connect: %v", err)
			}
			defer conn.Close(ctx)
			fn := pgx.Identifier{schema, "refuse_delete"}.Sanitize()
			for _, stmt := range []string{
				`CREATE FUNCTION ` + fn + `() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$`,
				`CREATE TRIGGER refuse_delete BEFORE DELETE ON ` + pgx.Identifier{schema, "records"}.Sanitize() +
					` FOR EACH ROW WHEN (OLD.key = 'a'::bytea) EXECUTE FUNCTION ` + fn + `()`,
			} {
				if _, err := conn.Exec(ctx, stmt); err != nil {
					t.Fatalf("%s: %v", stmt, err)
				}
			}
			if err := s.Update(ctx, func(tx store.Tx) error {
				return tx.Put("c", "a", []byte("1"))
			}); err != nil {
				t.Fatalf("Update: %v", err)
			}
			err = s.Update(ctx, func(tx store.Tx) error {
				if createFirst {
					if err := tx.Create("c", "b", []byte("1")); err != nil {
						return err
					}
				}
				if err := tx.Put("c", "p", []byte("1")); err != nil {
					return err
				}
				if err := store.Discard(tx, "c", "a"); err != nil {
					t.Errorf("a Discard held back failed at once: %v", err)
				}
				return nil
			})
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Message != "refused" {
				t.Fatalf("Update = %v; want the trigger's error", err)
			}
			// The Store goes on, on the same connection.
			if err := s.Update(ctx, func(tx store.Tx) error { return tx.Put("c", "q", []byte("1")) }); err != nil {
				t.Fatalf("Update after the failed one: %v", err)
			}
			if diff := cmp.Diff([]string{"a", "q"}, collectionKeys(t, s, "c")); diff != "" {
				t.Errorf("keys after the failed Update (-want +got):\n%s", diff)
			}
		})
	}
}
