package controlplane_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/storemem"
)

// TestNameContainsAndOffsetsModel checks name_contains (needles of every
// length, the short ones of 1 and 2 bytes included, pieces of live names
// at their ends and inside, in any case, Unicode needles, bytes no name
// holds) and unfiltered pages at every offset against the
// obvious filter over every deployment, while deployments are created at
// times bunched into one instant or spread over weeks (the order counts'
// windows) and removed by the lifecycle, with the thresholds of the
// short needles' two paths and of the long needles' place checks drawn
// small.
func TestNameContainsAndOffsetsModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		st := storemem.New()
		defer st.Close()
		now := t0
		ids := 0
		cp := controlplane.New(st, &controlplane.Options{
			Clock: func() time.Time {
				now = now.Add(rapid.SampledFrom([]time.Duration{0, time.Microsecond, 70 * time.Millisecond, 20 * time.Second,
					2 * time.Hour, 14 * 24 * time.Hour}).Draw(rt, "tick"))
				return now
			},
			NewID: func() string { ids++; return fmt.Sprintf("00000000-0000-7000-8000-%012x", ids) },
		})
		// Short needles walk the newest summaries first when their gram
		// lists are many, within a budget, then the lists: both paths and
		// the switch between them at these sizes.
		controlplane.SetShortNeedle(t, rapid.IntRange(0, 40).Draw(rt, "short needle many"), rapid.IntRange(0, 48).Draw(rt, "short needle budget"))
		// Long needles' places: listed, or checked one by one.
		controlplane.SetPlaceProbes(t, rapid.IntRange(0, 8).Draw(rt, "place probes"))
		alpha := rapid.SampledFrom([]rune("abcAB1-._kKi"))
		live := map[string]*controlplane.Deployment{}
		n := rapid.IntRange(0, 40).Draw(rt, "n")
		for range n {
			// Short names, and names that repeat a trigram (aaaa).
			name := rapid.StringOfN(rapid.SampledFrom([]rune("abAB1k")), 1, 1, -1).Draw(rt, "first") +
				rapid.StringOfN(alpha, 0, 12, -1).Draw(rt, "rest")
			d, err := cp.CreateDeployment(ctx, tenantA, decode[controlplane.CreateDeploymentRequest](rt, dockerBody(name)))
			if err != nil {
				if strings.Contains(err.Error(), "already exists") {
					continue
				}
				rt.Fatal(err)
			}
			live[d.ID] = d
		}
		// Noise in another tenant.
		if _, err := cp.CreateDeployment(ctx, tenantB, decode[controlplane.CreateDeploymentRequest](rt, dockerBody("abc"))); err != nil {
			rt.Fatal(err)
		}
		// Remove some through the lifecycle (DeleteDeployment, then the
		// teardown removes every record).
		for id := range live {
			if rapid.IntRange(0, 4).Draw(rt, "remove "+id) == 0 {
				if err := cp.DeleteDeployment(ctx, tenantA, id); err != nil {
					rt.Fatal(err)
				}
				delete(live, id)
			}
		}
		for {
			ok, err := cp.Process(ctx, quick{})
			if err != nil {
				rt.Fatal(err)
			}
			if !ok {
				break
			}
		}
		var all []*controlplane.Deployment
		for _, d := range live {
			all = append(all, d)
		}
		slices.SortFunc(all, func(a, b *controlplane.Deployment) int {
			if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
				return c
			}
			return strings.Compare(b.ID, a.ID)
		})
		for range 12 {
			q := &controlplane.ListDeploymentsQuery{
				Limit:  new(rapid.IntRange(1, 10).Draw(rt, "limit")),
				Offset: rapid.IntRange(0, len(all)+2).Draw(rt, "offset"),
			}
			if rapid.Bool().Draw(rt, "first page") { // a selective needle's matches are all on it
				q.Offset = 0
			}
			switch rapid.IntRange(0, 4).Draw(rt, "needle kind") {
			case 0: // no filter: the offset is skipped over the counts
			case 1: // Unicode (the Kelvin sign lowercases to k, İ to 3 bytes), bytes no name holds
				q.NameContains = rapid.SampledFrom([]string{"\u212a", "\u212aI", "İ", "ſ", "é", "a\x00", "\x00", "zz", "abc", "ab ", "%"}).Draw(rt, "odd needle")
			case 2: // a piece of a live name, at its start, end or inside, in either case
				if len(all) > 0 {
					name := rapid.SampledFrom(all).Draw(rt, "of").Name
					i := rapid.IntRange(0, len(name)-1).Draw(rt, "from")
					j := rapid.IntRange(i+1, len(name)).Draw(rt, "to")
					q.NameContains = name[i:j]
					if rapid.Bool().Draw(rt, "near miss") { // one byte changed: the trigrams either side of it still agree
						b := []byte(q.NameContains)
						b[rapid.IntRange(0, len(b)-1).Draw(rt, "at")] = byte(alpha.Draw(rt, "byte"))
						q.NameContains = string(b)
					}
					if rapid.Bool().Draw(rt, "upper") {
						q.NameContains = strings.ToUpper(q.NameContains)
					}
				}
			default:
				q.NameContains = rapid.StringOfN(alpha, 1, 5, -1).Draw(rt, "needle")
			}
			var want []string
			for _, d := range all {
				if matches(d, q) {
					want = append(want, d.ID)
				}
			}
			want = want[min(len(want), q.Offset):min(len(want), q.Offset+*q.Limit)]
			page, err := cp.ListDeployments(ctx, tenantA, q)
			if err != nil {
				rt.Fatal(err)
			}
			got := []string{}
			for _, d := range page.Resources {
				got = append(got, d.ID)
			}
			if want == nil {
				want = []string{}
			}
			if !slices.Equal(want, got) {
				rt.Fatalf("name_contains %q offset %d limit %d: got %v, want %v", q.NameContains, q.Offset, *q.Limit, got, want)
			}
		}
	})
}

// TestNameContainsNearMisses asks, of names that share most of their
// trigrams, for every piece of each name and for that piece with any one
// byte changed (the trigrams either side of the change still agree with
// the name): the gram index must tell a needle that lies in a name from
// one whose trigrams are all there but not all in a row.
func TestNameContainsNearMisses(t *testing.T) {
	ctx := context.Background()
	st := storemem.New()
	defer st.Close()
	now := t0
	cp := controlplane.New(st, &controlplane.Options{Clock: func() time.Time { now = now.Add(time.Second); return now }})
	names := []string{"abcabcabcabc", "abcabdabcabc", "aaaaaaaaaaab", "ab-ab-ab-ab-", "x1x1x1x1x2x1", "abcdefghijkl", "abcdefgXijkl", "a"}
	for _, n := range names {
		if _, err := cp.CreateDeployment(ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t, dockerBody(n))); err != nil {
			t.Fatal(err)
		}
	}
	needles := map[string]bool{}
	for _, n := range names {
		for i := range min(len(n), 2) {
			for j := i + 1; j <= len(n); j++ {
				for k := i; k < j; k++ {
					for _, b := range []byte("aX2") {
						needle := []byte(n[i:j])
						needle[k-i] = b
						needles[string(needle)] = true
					}
				}
			}
		}
	}
	for needle := range needles {
		want := []string{}
		for _, n := range slices.Backward(names) { // newest first
			if strings.Contains(strings.ToLower(n), strings.ToLower(needle)) {
				want = append(want, n)
			}
		}
		page, err := cp.ListDeployments(ctx, tenantA, &controlplane.ListDeploymentsQuery{NameContains: needle})
		if err != nil {
			t.Fatal(err)
		}
		got := []string{}
		for _, d := range page.Resources {
			got = append(got, d.Name)
		}
		if !slices.Equal(got, want) {
			t.Errorf("name_contains %q: %q, want %q", needle, got, want)
		}
	}
}
