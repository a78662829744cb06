package expiry_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/deployplane/deployplane/internal/expiry"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storemem"
)

// TestSweep: a sweep removes at most Batch expired records, oldest first,
// each with its entry; records not yet expired stay; an entry whose record
// is gone already is removed without error.
func TestSweep(t *testing.T) {
	ctx := context.Background()
	st := storemem.New()
	defer st.Close()
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	err := st.Update(ctx, func(tx store.Tx) error {
		for i := range 12 { // expired 12 minutes ago down to 1
			k := fmt.Sprintf("r/%02d", i)
			if i != 3 { // r/03's record is gone already
				if err := tx.Put("c", k, []byte("x")); err != nil {
					return err
				}
			}
			if err := tx.Put("c", expiry.Entry(now.Add(time.Duration(i-12)*time.Minute), k), nil); err != nil {
				return err
			}
		}
		for _, k := range []string{"r/late1", "r/late2"} {
			if err := tx.Put("c", k, []byte("x")); err != nil {
				return err
			}
			if err := tx.Put("c", expiry.Entry(now.Add(time.Hour), k), nil); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	records := func() []string {
		var out []string
		_ = st.View(ctx, func(r store.Reader) error {
			return r.Scan("c", "r/", nil, func(k string, _ []byte) (bool, error) {
				out = append(out, k)
				return true, nil
			})
		})
		return out
	}
	sweep := func() {
		t.Helper()
		if err := st.Update(ctx, func(tx store.Tx) error { return expiry.Sweep(tx, "c", expiry.Key(now)) }); err != nil {
			t.Fatal(err)
		}
	}
	sweep()
	want := []string{"r/08", "r/09", "r/10", "r/11", "r/late1", "r/late2"}
	if diff := cmp.Diff(want, records()); diff != "" {
		t.Errorf("after one sweep (-want +got):\n%s", diff)
	}
	sweep()
	if diff := cmp.Diff([]string{"r/late1", "r/late2"}, records()); diff != "" {
		t.Errorf("after two sweeps (-want +got):\n%s", diff)
	}
	var entries int
	_ = st.View(ctx, func(r store.Reader) error {
		return r.Scan("c", "e/", nil, func(string, []byte) (bool, error) { entries++; return true, nil })
	})
	if entries != 2 {
		t.Errorf("%d entries left, want the 2 not expired", entries)
	}
}

// TestKeyOrder: keys sort as their times do, before and after 1970.
func TestKeyOrder(t *testing.T) {
	times := []time.Time{time.Unix(-100, 0), time.Unix(0, 0), time.Unix(0, 1000), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	for i := 1; i < len(times); i++ {
		if a, b := expiry.Key(times[i-1]), expiry.Key(times[i]); a >= b {
			t.Errorf("Key(%v) = %s is not before Key(%v) = %s", times[i-1], a, times[i], b)
		}
	}
}
