package controlplane

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/store/storetest"
	"github.com/deployplane/deployplane/storemem"
)

// TestNameGramsShape pins the shape of a name's gram records (storemem's
// memory at scale follows their number): max(1, n-1) for a name of n
// bytes, each the trigram at its place of the lowercased name and one NUL.
func TestNameGramsShape(t *testing.T) {
	for _, tc := range []struct {
		name string
		want []string
	}{
		{"A", []string{"a\x00\x00\x00"}},
		{"Ab", []string{"ab\x00\x00"}},
		{"aaaa", []string{"aaa\x00", "aaa\x01", "aa\x00\x02"}},
		{"agent-0001234", []string{"age\x00", "gen\x01", "ent\x02", "nt-\x03", "t-0\x04", "-00\x05", "000\x06", "001\x07",
			"012\x08", "123\x09", "234\x0a", "34\x00\x0b"}},
	} {
		if got := nameGrams(tc.name); !slices.Equal(got, tc.want) {
			t.Errorf("nameGrams(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// crashingStore fails every Update after the first few, as a crash would.
type crashingStore struct {
	store.Store
	left atomic.Int64
}

var errCrashed = errors.New("crashed")

func (s *crashingStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	if s.left.Add(-1) < 0 {
		return errCrashed
	}
	return s.Store.Update(ctx, fn)
}

// TestMigrateGramsV1: a store whose deployments carry the unpositioned
// trigram records of earlier builds answers name_contains exactly before,
// during (after a crash at any batch, and with deployments removed
// half-way) and after Migrate, which leaves exactly the positioned grams
// that creating the deployments writes today, and none of the old ones.
func TestMigrateGramsV1(t *testing.T) {
	ctx := context.Background()
	old := migrateGramsV1Batch
	migrateGramsV1Batch = 16
	t.Cleanup(func() { migrateGramsV1Batch = old })
	for _, crashAfter := range []int64{0, 1, 3, 7, 10} {
		t.Run(fmt.Sprint("crash after ", crashAfter), func(t *testing.T) {
			st := storemem.New()
			defer st.Close()
			ids := 0
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			cp := New(st, &Options{
				Clock: func() time.Time { now = now.Add(time.Second); return now },
				NewID: func() string { ids++; return fmt.Sprintf("00000000-0000-7000-8000-%012x", ids) },
			})
			rnd := rand.New(rand.NewPCG(uint64(crashAfter), 18))
			names := map[string]map[string]string{} // tenant -> id -> lowercased name
			for i := range 200 {
				tenant := []string{"t1", "t2"}[i%2]
				name := string("aAb1"[rnd.IntN(4)])
				for range rnd.IntN(9) {
					name += string("ab1A-."[rnd.IntN(6)])
				}
				d, err := cp.CreateDeployment(ctx, tenant, &CreateDeploymentRequest{Name: new(name), Source: new(SourceExternalDocker),
					SourceRevisionConfig: &SourceRevisionConfig{ImageURI: new("r/a:1")}})
				if err != nil {
					if strings.Contains(err.Error(), "already exists") {
						continue
					}
					t.Fatal(err)
				}
				if names[tenant] == nil {
					names[tenant] = map[string]string{}
				}
				names[tenant][d.ID] = strings.ToLower(name)
			}
			want, err := storetest.Dump(ctx, st, colDeploymentGrams)
			if err != nil {
				t.Fatal(err)
			}
			// Back to the earlier builds' records.
			err = st.Update(ctx, func(tx store.Tx) error {
				for _, tenant := range []string{"t1", "t2"} {
					tp, err := cp.readTenant(tx, tenant)
					if err != nil {
						return err
					}
					var tails, ns []string
					err = tx.Scan(colDeploymentSums, tp, nil, func(k string, v []byte) (bool, error) {
						name, _, _ := strings.Cut(string(v), "\x00")
						tails, ns = append(tails, k[len(tp):]), append(ns, name)
						return true, nil
					})
					if err != nil {
						return err
					}
					for i, tail := range tails {
						if err := deleteGrams(tx, tp, tail, ns[i], gramsCurrent); err != nil {
							return err
						}
						for _, g := range nameGramsV1(ns[i]) {
							if err := tx.Put(colDeploymentGramsV1, tp+g+tail, nil); err != nil {
								return err
							}
						}
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			checkNames(t, cp, names)
			cs := &crashingStore{Store: st}
			cs.left.Store(crashAfter)
			if err := New(cs, nil).Migrate(ctx); !errors.Is(err, errCrashed) {
				t.Fatalf("Migrate with a crash after %d Updates: %v", crashAfter, err)
			}
			checkNames(t, cp, names)
			// Remove a deployment of each tenant half-way: one still in
			// the old records, or already moved.
			for _, tenant := range []string{"t1", "t2"} {
				id := slices.Sorted(maps.Keys(names[tenant]))[int(crashAfter)%len(names[tenant])]
				err := st.Update(ctx, func(tx store.Tx) error {
					rec, err := cp.getDeployment(tx, tenant, id)
					if err != nil {
						return err
					}
					tp, err := cp.readTenant(tx, tenant)
					if err != nil {
						return err
					}
					for _, k := range gramKeys(tp, rec.tail(), rec.Name) {
						delete(want[colDeploymentGrams], k)
					}
					return cp.removeDeployment(tx, tenant, rec)
				})
				if err != nil {
					t.Fatal(err)
				}
				delete(names[tenant], id)
			}
			checkNames(t, cp, names)
			if err := cp.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			got, err := storetest.Dump(ctx, st, colDeploymentGrams, colDeploymentGramsV1)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(got[colDeploymentGramsV1]); n > 0 {
				t.Errorf("%d unpositioned trigram records left after Migrate", n)
			}
			if !maps.Equal(want[colDeploymentGrams], got[colDeploymentGrams]) {
				t.Errorf("gram records after Migrate: %d, want the %d a fresh store has", len(got[colDeploymentGrams]), len(want[colDeploymentGrams]))
			}
			checkNames(t, cp, names)
		})
	}
}

// checkNames checks name_contains for every substring of the live names
// (and a few needles no name holds) against the names themselves.
func checkNames(t *testing.T, cp *ControlPlane, names map[string]map[string]string) {
	t.Helper()
	ctx := context.Background()
	for tenant, byID := range names {
		needles := map[string]bool{"zz": true, "q": true, "a1a1a1a": true}
		for _, n := range byID {
			for i := range len(n) {
				for j := i + 1; j <= len(n); j++ {
					needles[n[i:j]] = true
				}
			}
		}
		for needle := range needles {
			var want []string
			for id, n := range byID {
				if strings.Contains(n, needle) {
					want = append(want, id)
				}
			}
			slices.Sort(want)
			var got []string
			for off := 0; ; off += MaxPageLimit {
				page, err := cp.ListDeployments(ctx, tenant, &ListDeploymentsQuery{NameContains: strings.ToUpper(needle), Limit: new(MaxPageLimit), Offset: off})
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range page.Resources {
					got = append(got, d.ID)
				}
				if len(page.Resources) < MaxPageLimit {
					break
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("%s: name_contains %q: %d deployments, want %d", tenant, needle, len(got), len(want))
			}
		}
	}
}
