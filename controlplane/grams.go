package controlplane

import (
	"errors"
	"slices"
	"strings"

	"github.com/deployplane/deployplane/store"
)

// The gram index answers name_contains, a substring filter no key prefix
// can answer, at a cost that follows the matches rather than the fleet.
// Each deployment has one record of cp_deployment_grams per distinct
// trigram of its lowercased name padded with two NUL bytes ("ab" gives
// "ab\x00" and "b\x00\x00"), keyed tenant prefix, gram, then the
// deployment's order tail (timeKey, encID(id)), with an empty value. So
// one gram's records are a posting list, newest first in a reverse scan,
// and every name has at least one gram (names are never empty). Names are
// immutable: grams are written when a deployment is created and deleted
// when it is removed, in the same Update, and no two creates rewrite a
// shared record.
//
// A needle of 3 bytes or more matches only deployments that hold each of
// its trigrams: the lists are intersected newest first by leapfrogging
// (each list is sought to the newest tail not newer than the current
// candidate, until all agree), so the cost follows the shortest list and
// the agreements, and a candidate is confirmed on its summary (holding all
// of a needle's trigrams is not containing it). A needle of 1 or 2 bytes
// is the prefix of a gram at each of its places in a name (the padding
// makes this true at the end too), so its matches are the union of the
// lists of the grams that start with it: the grams present are found by
// seeking from one to the next, and their lists are merged newest first.
// That union is exact; no summary is read to confirm it.
const (
	colDeploymentGrams = "cp_deployment_grams"
	gramLen            = 3
)

// nameGrams returns the distinct grams of a name.
func nameGrams(name string) []string {
	s := strings.ToLower(name) + "\x00\x00"
	gs := make([]string, 0, len(s))
	for i := 0; i+gramLen <= len(s); i++ {
		if g := s[i : i+gramLen]; !slices.Contains(gs, g) {
			gs = append(gs, g)
		}
	}
	return gs
}

// gramKeys lists the gram records of the deployment named name at tail.
func gramKeys(tp, tail, name string) []string {
	gs := nameGrams(name)
	for i, g := range gs {
		gs[i] = tp + g + tail
	}
	return gs
}

// hasGrams reports whether the deployment named name at tail has its gram
// records (a deployment written before the gram index has none until
// Migrate gives it them).
func hasGrams(r store.Reader, tp, tail, name string) (bool, error) {
	_, err := r.Get(colDeploymentGrams, tp+nameGrams(name)[0]+tail)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return false, err
}

// putGrams writes the gram records of a deployment.
func putGrams(tx store.Tx, tp, tail, name string) error {
	for _, k := range gramKeys(tp, tail, name) {
		if err := tx.Put(colDeploymentGrams, k, nil); err != nil {
			return err
		}
	}
	return nil
}

// deleteGrams removes the gram records of a deployment.
func deleteGrams(tx store.Tx, tp, tail, name string) error {
	for _, k := range gramKeys(tp, tail, name) {
		if err := tx.Delete(colDeploymentGrams, k); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
	}
	return nil
}

// nameBytesOK reports whether every byte of a lowercased needle may occur
// in a lowercased name; a needle with another byte matches nothing.
func nameBytesOK(needle string) bool {
	for i := 0; i < len(needle); i++ {
		if b := needle[i]; !isAlnum(b) && b != '.' && b != '_' && b != '-' {
			return false
		}
	}
	return true
}

// gramsExact reports whether scanGrams's candidates for needle are
// exactly its matches.
func gramsExact(needle string) bool { return len(needle) < gramLen || !nameBytesOK(needle) }

// gramsComplete reports whether every deployment of the tenant has its
// gram records and counts: none is left in a name block of an earlier
// build (Migrate moves them).
func gramsComplete(r store.Reader, tp string) (bool, error) {
	found := false
	err := r.Scan(colDeploymentNameBlocks, tp, nil, func(string, []byte) (bool, error) {
		found = true
		return false, nil
	})
	return !found, err
}

// scanGrams calls fn with the tail of every deployment of the tenant that
// may match needle (lowercase, non-empty), newest first, until fn returns
// false. When gramsExact(needle) the candidates are exactly the matches;
// otherwise fn confirms each on its summary.
func scanGrams(r store.Reader, tp, needle string, fn func(tail string) (bool, error)) error {
	if !nameBytesOK(needle) {
		return nil
	}
	if len(needle) < gramLen {
		return unionGrams(r, tp, needle, fn)
	}
	var grams []string
	for i := 0; i+gramLen <= len(needle); i++ {
		if g := needle[i : i+gramLen]; !slices.Contains(grams, g) {
			grams = append(grams, g)
		}
	}
	grams, err := sparsestGrams(r, tp, grams)
	if err != nil {
		return err
	}
	return leapfrog(r, tp, grams, fn)
}

// Since every candidate is confirmed on its summary, the lists intersected
// may be any subset of the needle's grams: sparsestGrams leaves out the
// lists that look dense, which would cost a seek per candidate and rule
// little out (a gram every name holds, "age" of "agent-..."). A list is
// judged by its densityProbe-th newest record: if that lies among the
// tenant's densityProbe*densityRatio newest deployments, the list holds
// about one in densityRatio or more of them, and is left out. The others
// are kept, sparsest first (a list shorter than densityProbe first of
// all); when every list looks dense, the leapfrogGrams sparsest are kept.
const (
	leapfrogGrams = 2
	densityProbe  = 32
	densityRatio  = 8
)

func sparsestGrams(r store.Reader, tp string, grams []string) ([]string, error) {
	if len(grams) <= leapfrogGrams {
		return grams, nil
	}
	reach := make(map[string]string, len(grams)) // gram -> its densityProbe-th newest tail, "" when shorter
	for _, g := range grams {
		prefix := tp + g
		n, last := 0, ""
		err := r.Scan(colDeploymentGrams, prefix, &store.ScanOptions{Reverse: true}, func(k string, _ []byte) (bool, error) {
			n++
			if n == densityProbe {
				last = k[len(prefix):]
			}
			return n < densityProbe, nil
		})
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return []string{g}, nil // an empty list: nothing matches
		}
		reach[g] = last
	}
	slices.SortStableFunc(grams, func(a, b string) int { return strings.Compare(reach[a], reach[b]) })
	// The tenant's densityProbe*densityRatio-th newest deployment.
	var ref string
	n := 0
	err := r.Scan(colDeploymentOrder, tp, &store.ScanOptions{Reverse: true}, func(k string, _ []byte) (bool, error) {
		n++
		ref = k[len(tp):]
		return n < densityProbe*densityRatio, nil
	})
	if err != nil {
		return nil, err
	}
	keep := leapfrogGrams
	if n == densityProbe*densityRatio {
		for keep < len(grams) && reach[grams[keep]] < ref {
			keep++
		}
	}
	return grams[:keep], nil
}

// seekGram returns the newest tail of gram's list that is not newer than
// bound (any, when bound is ""), or strictly older when strict.
func seekGram(r store.Reader, prefix, bound string, strict bool) (string, bool, error) {
	var tail string
	found := false
	opts := &store.ScanOptions{Reverse: true}
	if bound != "" {
		opts.Start = prefix + bound
	}
	err := r.Scan(colDeploymentGrams, prefix, opts, func(k string, _ []byte) (bool, error) {
		t := k[len(prefix):]
		if strict && t == bound {
			return true, nil
		}
		tail, found = t, true
		return false, nil
	})
	return tail, found, err
}

// leapfrog intersects the lists of grams newest first.
func leapfrog(r store.Reader, tp string, grams []string, fn func(tail string) (bool, error)) error {
	cur, strict := "", false
	for {
		agreed := 0
		for i := 0; agreed < len(grams); i = (i + 1) % len(grams) {
			t, ok, err := seekGram(r, tp+grams[i], cur, strict)
			if err != nil || !ok {
				return err
			}
			strict = false
			if t == cur {
				agreed++
			} else {
				cur, agreed = t, 1
			}
		}
		if more, err := fn(cur); !more || err != nil {
			return err
		}
		strict = true // on to the next older candidate
	}
}

// unionGrams merges newest first the lists of the grams that start with
// needle (1 or 2 bytes), each deployment once.
func unionGrams(r store.Reader, tp, needle string, fn func(tail string) (bool, error)) error {
	var cursors []*tagCursor
	start := ""
	for {
		var g string
		err := r.Scan(colDeploymentGrams, tp+needle, &store.ScanOptions{Start: start}, func(k string, _ []byte) (bool, error) {
			g = k[len(tp) : len(tp)+gramLen]
			return false, nil
		})
		if err != nil {
			return err
		}
		if g == "" {
			break
		}
		cursors = append(cursors, &tagCursor{col: colDeploymentGrams, prefix: tp + g})
		start = tp + g[:gramLen-1] + string(g[gramLen-1]+1) // past every record of g
	}
	return mergeNewest(r, cursors, fn)
}

// mergeNewest merges the cursors' lists newest first and calls fn with
// each tail once, until fn returns false or the lists end.
func mergeNewest(r store.Reader, cursors []*tagCursor, fn func(tail string) (bool, error)) error {
	for {
		var tail string
		for _, c := range cursors {
			if err := c.fill(r); err != nil {
				return err
			}
			if len(c.buf) > 0 && c.buf[0] > tail {
				tail = c.buf[0]
			}
		}
		if tail == "" {
			return nil
		}
		for _, c := range cursors { // the newest, once, whichever lists carry it
			if len(c.buf) > 0 && c.buf[0] == tail {
				c.buf = c.buf[1:]
			}
		}
		if more, err := fn(tail); !more || err != nil {
			return err
		}
	}
}
