package storepg_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storepg"
)

// lockModes returns the modes in which transactions hold, or wait for
// ("... waiting"), the lock on schema's table schema_migrations that
// Updates take, sorted.
func lockModes(ctx context.Context, conn *pgx.Conn, schema string) ([]string, error) {
	rows, err := conn.Query(ctx, `SELECT mode || CASE WHEN granted THEN '' ELSE ' waiting' END
		FROM pg_locks WHERE locktype = 'relation' AND relation = to_regclass($1)`,
		pgx.Identifier{schema, "schema_migrations"}.Sanitize())
	if err != nil {
		return nil, err
	}
	modes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	slices.Sort(modes)
	return modes, err
}

// TestAloneUpdateHoldsOthersBack makes an Update fail once with a
// serialization failure, with AloneAfter 1, so that its second try runs
// alone, and checks from the server's lock table that the first try held
// the shared lock and the second the exclusive one. While the second try
// runs, a View on another Store reads at once, and an Update on it waits;
// that Update then runs after the one alone, without a retry: its snapshot
// was taken after it got the lock, so it saw the write it had waited for.
func TestAloneUpdateHoldsOthersBack(t *testing.T) {
	ctx := context.Background()
	schema := newSchema(t, nil)
	s := openSchema(t, schema, &storepg.Options{AloneAfter: 1})
	other := openSchema(t, schema, nil)
	observer, err := pgx.Connect(ctx, testDSN(t))
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	defer observer.Close(ctx)

	var modes [][]string
	otherDone := make(chan error, 1)
	runs := 0
	err = s.Update(ctx, func(tx store.Tx) error {
		runs++
		n, err := readCounter(tx)
		if err != nil {
			return err
		}
		m, err := lockModes(ctx, observer, schema)
		if err != nil {
			return err
		}
		modes = append(modes, m)
		switch runs {
		case 1:
			// A concurrent write between the read and the write makes
			// PostgreSQL abort this try.
			if err := other.Update(ctx, func(tx store.Tx) error { return tx.Put("c", "n", []byte("100")) }); err != nil {
				return err
			}
		case 2:
			viewCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			var got int
			err := other.View(viewCtx, func(r store.Reader) error {
				var err error
				got, err = readCounter(r)
				return err
			})
			if err != nil {
				return fmt.Errorf("a View while the Update runs alone: %w", err)
			}
			if got != 100 {
				return fmt.Errorf("a View while the Update runs alone reads %d; want 100", got)
			}
			go func() { otherDone <- other.Update(ctx, increment) }()
			for {
				m, err := lockModes(ctx, observer, schema)
				if err != nil {
					return err
				}
				if slices.Contains(m, "RowExclusiveLock waiting") {
					break
				}
				if viewCtx.Err() != nil {
					return fmt.Errorf("the other Store's Update never waited for the lock; locks: %v", m)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		return tx.Put("c", "n", []byte(strconv.Itoa(n+1)))
	})
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	if runs != 2 {
		t.Fatalf("the closure ran %d times; want 2", runs)
	}
	if err := <-otherDone; err != nil {
		t.Fatalf("the other Store's Update: %v", err)
	}
	want := [][]string{{"RowExclusiveLock"}, {"ExclusiveLock"}}
	if diff := cmp.Diff(want, modes); diff != "" {
		t.Errorf("locks on schema_migrations during each try (-want +got):\n%s", diff)
	}
	if got := counter(t, s); got != 102 {
		t.Errorf("counter = %d; want 102 (100, then the Update alone, then the one that waited)", got)
	}
	if got := s.AloneRuns(); got != 1 {
		t.Errorf("AloneRuns() = %d; want 1", got)
	}
	if got := other.Retries(); got != 0 {
		t.Errorf("the Update that waited for the one alone was retried %d times; want 0", got)
	}
}

// TestAloneAfter checks after how many tries that fail with a serialization
// failure an Update runs alone: DefaultAloneAfter by default,
// Options.AloneAfter if set, never if that is negative. Each try that does
// not run alone is made to fail, up to three.
func TestAloneAfter(t *testing.T) {
	const shared, alone = "RowExclusiveLock", "ExclusiveLock"
	cases := []struct {
		name       string
		aloneAfter int
		want       []string // lock mode of each try
	}{
		{"default", 0, []string{shared, shared, alone}},
		{"after one", 1, []string{shared, alone}},
		{"never", -1, []string{shared, shared, shared, shared}},
	}
	if storepg.DefaultAloneAfter != 2 {
		t.Fatalf("DefaultAloneAfter = %d; the default case assumes 2", storepg.DefaultAloneAfter)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			schema := newSchema(t, nil)
			s := openSchema(t, schema, &storepg.Options{AloneAfter: c.aloneAfter})
			other := openSchema(t, schema, nil)
			observer, err := pgx.Connect(ctx, testDSN(t))
			if err != nil {
				t.Fatalf("Connect: %v", err)
			}
			defer observer.Close(ctx)
			var modes []string
			conflicts := 0
			err = s.Update(ctx, func(tx store.Tx) error {
				n, err := readCounter(tx)
				if err != nil {
					return err
				}
				m, err := lockModes(ctx, observer, schema)
				if err != nil {
					return err
				}
				if len(m) != 1 {
					return fmt.Errorf("locks on schema_migrations: %v; want this try's only", m)
				}
				modes = append(modes, m[0])
				// Another Store's write between the read and the write
				// makes PostgreSQL abort this try. (It would wait for a
				// try that runs alone.)
				if m[0] == shared && conflicts < 3 {
					conflicts++
					if err := other.Update(ctx, increment); err != nil {
						return err
					}
				}
				return tx.Put("c", "n", []byte(strconv.Itoa(n+1)))
			})
			if err != nil {
				t.Fatalf("Update: %v", err)
			}
			if diff := cmp.Diff(c.want, modes); diff != "" {
				t.Errorf("lock mode of each try (-want +got):\n%s", diff)
			}
			wantAlone := int64(0)
			if slices.Contains(c.want, alone) {
				wantAlone = 1
			}
			if got := s.AloneRuns(); got != wantAlone {
				t.Errorf("AloneRuns() = %d; want %d", got, wantAlone)
			}
			if got, want := counter(t, s), conflicts+1; got != want {
				t.Errorf("counter = %d; want %d", got, want)
			}
		})
	}
}
