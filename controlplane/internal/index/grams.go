package index

import (
	"errors"
	"slices"
	"strings"

	"github.com/deployplane/deployplane/store"
)

// The gram index answers Query.Name, a substring filter no key prefix
// can answer, at a cost that follows the matches rather than the fleet.
//
// # Records
//
// An entry has one record of cp_deployment_pgrams per place of its
// lowercased name s (names are ASCII, so lowering keeps every byte's
// place): for a name of n >= 2 bytes, the trigrams of s+"\x00" at places
// 0 to n-2 (the last is s[n-2], s[n-1], NUL); for a name of one byte, the
// one gram s+"\x00\x00" at place 0. The key is the tenant prefix, the
// gram (3 bytes), the place (1 byte), then the entry's tail; the value
// is empty. So a name has max(1, n-1)
// records (agent-0001234, 13 bytes: 12), and the records of one gram at
// one place are a posting list, newest first in a reverse scan. Names
// are immutable: the records are written when an entry is new and
// deleted when it is removed, in the caller's Update, and no two new
// entries rewrite a shared record (no counter, no hot spot). Fold later
// packs them into the list's blocks, under the same prefix
// (gramblocks.go); a list is its blocks and its records, merged.
//
// # Needles of 3 bytes or more: exact from the index
//
// A needle of L >= 3 bytes lies at place P of a name exactly when the
// name holds, for each offset o of the needle from 0 to L-3, the
// needle's trigram at o at place P+o. It is enough to ask that of a set
// of offsets whose trigrams cover every byte of the needle (0, 3, 6, ...
// and L-3): two positioned trigrams that overlap or touch pin down every
// byte between them. So the matches are exact from the index, and no
// summary is read to confirm them.
//
// The places P to try come from the index too: the places the first
// covering trigram holds in the tenant are found by seeking from one
// place's list to the next (a few seeks: names are at most 63 bytes),
// and P must be a place of the first trigram, the second's less 3, and
// so on (asked of each P left when they are few: Options.PlaceProbes).
// A needle whose trigrams all exist but never at the right distances from
// each other (1000000 in a fleet of agent-0dddddd: "100" and "000" are in
// thousands of names, but never "100" at P with "000" at P+3 and P+4) is
// refuted there, after a few dozen seeks, whatever the size of the fleet.
// For each P left, the lists of the covering trigrams at their places
// are intersected newest first by leapfrogging (each list is sought to
// the newest tail not newer than the current candidate, until all agree),
// so the cost follows the shortest list and the agreements (the list
// that last moved the candidate is sought first, so the sparsest leads
// and each agreement costs a seek per covering trigram, or none where a
// list's next tails were read with the last seek: gramList); the answers
// of the P tried are merged newest first, each entry once.
//
// The cost that can still grow with the fleet: a needle whose positioned
// trigrams are each common while they seldom agree (the leapfrog seeks
// once per alternation between the lists), and an offset deep into the
// matches (every match before it is walked).
//
// # Needles of 1 or 2 bytes
//
// A needle of 1 or 2 bytes at place P of a name is the start of the gram
// at place P, but for a 1-byte needle at the name's last byte, which is
// the middle of the last gram ("?b\x00" for b) or the start of the one
// gram of a 1-byte name ("b\x00\x00"). So the matches are the union of
// every list (gram, place) whose gram starts with the needle, found by
// seeking from one list to the next, and, for 1 byte b, of the lists of
// the grams c, b, NUL for every byte c a lowercased name may hold: a
// union, exact, merged newest first, no summary read. Such a needle is
// often in many names (a digit, a letter), and its lists are then many
// (411 for "7" in a fleet of agent-0dddddd), each costing a seek before
// the first answer: when there are more than Options.ShortNeedleLists of
// them, List first walks the tenant's newest summaries (list.go), and
// merges the lists only when those do not fill the page.
const gramLen = 3

// nameAlphabet is every byte a lowercased name may hold.
const nameAlphabet = "-._0123456789abcdefghijklmnopqrstuvwxyz"

// nameGrams returns the positioned grams of a name: each gram's 3 bytes
// and its place's byte, in place order.
func nameGrams(name string) []string {
	s := strings.ToLower(name)
	if len(s) == 1 {
		return []string{s + "\x00\x00\x00"}
	}
	s += "\x00"
	gs := make([]string, 0, len(s)-2)
	for p := 0; p+gramLen <= len(s); p++ {
		gs = append(gs, s[p:p+gramLen]+string(rune(p)))
	}
	return gs
}

// gramKeys lists the gram records of the entry named name at tail.
func gramKeys(tp, tail, name string) []string {
	gs := nameGrams(name)
	for i, g := range gs {
		gs[i] = tp + g + tail
	}
	return gs
}

// putGrams writes the gram records of an entry with write (a Tx's Put,
// or store.Insert for a new entry's).
func putGrams(write writeFunc, tp, tail, name string) error {
	for _, k := range gramKeys(tp, tail, name) {
		if err := write(ColGrams, k, nil); err != nil {
			return err
		}
	}
	return nil
}

// deleteGrams removes the gram records of an entry, or its tails from
// the gram blocks that hold them (gramblocks.go).
func deleteGrams(tx store.Tx, tp, tail, name string) error {
	for _, k := range gramKeys(tp, tail, name) {
		_, err := tx.Get(ColGrams, k)
		switch {
		case err == nil:
			err = tx.Delete(ColGrams, k)
		case errors.Is(err, store.ErrNotFound):
			err = removeFromBlock(tx, k[:len(k)-len(tail)], tail)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// nameBytesOK reports whether every byte of a lowercased needle may occur
// in a lowercased name; a needle with another byte matches nothing.
func nameBytesOK(needle string) bool {
	for i := 0; i < len(needle); i++ {
		if strings.IndexByte(nameAlphabet, needle[i]) < 0 {
			return false
		}
	}
	return true
}

// scanGrams calls fn with the tail of every entry of the tenant whose
// lowercased name contains needle (lowercase, non-empty), newest
// first, each once, until fn returns false. The tails are exactly the
// matches.
func (x *Index) scanGrams(r store.Reader, tp, needle string, fn func(tail string) (bool, error)) error {
	if !nameBytesOK(needle) {
		return nil
	}
	var its []tailIter
	if len(needle) < gramLen {
		lists, err := shortNeedleLists(r, tp, needle, 0)
		if err != nil {
			return err
		}
		for _, l := range lists {
			its = append(its, &gramList{prefix: l})
		}
	} else {
		var err error
		if its, err = x.needlePlaces(r, tp, needle); err != nil {
			return err
		}
	}
	return mergeNewest(r, its, fn)
}

// shortNeedleLists returns the lists whose union is the matches of a
// needle of 1 or 2 bytes, or, when most > 0, the first most+1 of them
// when there are more than most.
func shortNeedleLists(r store.Reader, tp, needle string, most int) ([]string, error) {
	lists, err := gramLists(r, tp, needle, nil, most)
	if err != nil || len(needle) > 1 {
		return lists, err
	}
	for i := 0; i < len(nameAlphabet) && (most == 0 || len(lists) <= most); i++ {
		// At the name's last byte: the middle of its last gram.
		if c := nameAlphabet[i]; c != needle[0] {
			if lists, err = gramLists(r, tp, string(c)+needle+"\x00", lists, most); err != nil {
				return nil, err
			}
		}
	}
	return lists, nil
}

// gramLists appends to lists the prefix (tenant prefix, gram, place) of
// every list of the tenant whose gram starts with gramPrefix, seeking
// from one list to the next (a list's blocks and gram records share its
// prefix); when most > 0, it stops once lists holds more than most.
func gramLists(r store.Reader, tp, gramPrefix string, lists []string, most int) ([]string, error) {
	start := ""
	for most == 0 || len(lists) <= most {
		var list string
		err := r.Scan(ColGrams, tp+gramPrefix, &store.ScanOptions{Start: start}, func(k string, _ []byte) (bool, error) {
			list = k[:len(tp)+gramLen+1]
			return false, nil
		})
		if err != nil || list == "" {
			return lists, err
		}
		lists = append(lists, list)
		start = list[:len(list)-1] + string(rune(list[len(list)-1]+1)) // past every record of the list
	}
	return lists, nil
}

// needleCover returns the offsets of a needle (3 bytes or more) whose
// trigrams cover each of its bytes: 0, 3, 6, ... and len-3.
func needleCover(needle string) []int {
	var offs []int
	for o := 0; o < len(needle)-gramLen; o += gramLen {
		offs = append(offs, o)
	}
	return append(offs, len(needle)-gramLen)
}

// needlePlaces returns, for each place P where the needle (3 bytes or
// more) may lie in some name of the tenant, the leapfrog over the lists
// of its covering trigrams at their places from P. While the candidate
// places are at most Options.PlaceProbes, it checks each (a Scan each)
// for the next covering trigram; with more, it lists the trigram's places
// (a Scan per place it holds, plus one).
func (x *Index) needlePlaces(r store.Reader, tp, needle string) ([]tailIter, error) {
	offs := needleCover(needle)
	var places []int // candidate P, ascending
	for i, o := range offs {
		g := needle[o : o+gramLen]
		var ps []int
		if i > 0 && len(places) <= x.o.PlaceProbes {
			// Few places left: ask for each whether the trigram is
			// there, rather than list every place it holds.
			for _, p := range places {
				found := false
				err := r.Scan(ColGrams, tp+g+string(rune(p+o)), nil, func(string, []byte) (bool, error) {
					found = true
					return false, nil
				})
				if err != nil {
					return nil, err
				}
				if found {
					ps = append(ps, p)
				}
			}
		} else {
			lists, err := gramLists(r, tp, g, nil, 0)
			if err != nil {
				return nil, err
			}
			for _, l := range lists {
				if p := int(l[len(l)-1]) - o; p >= 0 && (i == 0 || slices.Contains(places, p)) {
					ps = append(ps, p)
				}
			}
		}
		places = ps
		if len(places) == 0 {
			return nil, nil
		}
	}
	its := make([]tailIter, 0, len(places))
	for _, p := range places {
		lf := &leapfrog{}
		for _, o := range offs {
			lf.lists = append(lf.lists, &gramList{prefix: tp + needle[o:o+gramLen] + string(rune(p+o))})
		}
		its = append(its, lf)
	}
	return its, nil
}

// tailIter yields order tails newest first, each once.
type tailIter interface {
	next(r store.Reader) (tail string, ok bool, err error)
}

// gramList is one list (a gram at a place), walked newest first: its
// gram records (recordList) and its blocks (blockList) merged. As a
// tailIter it yields every tail of the list; in a leapfrog it is sought
// at bounds that only go older.
type gramList struct {
	prefix  string
	records recordList
	blocks  blockList
	last    string // the last tail next returned
}

// seek returns the newest tail of the list that is not newer than bound
// (any, when bound is ""), or strictly older when strict. The bounds of
// successive calls must not get newer.
func (l *gramList) seek(r store.Reader, bound string, strict bool) (string, bool, error) {
	if l.records.prefix == "" {
		l.records.prefix, l.blocks.prefix = l.prefix, l.prefix
	}
	a, okA, err := l.records.seek(r, bound, strict)
	if err != nil {
		return "", false, err
	}
	b, okB, err := l.blocks.seek(r, bound, strict)
	if err != nil || !okA && !okB {
		return "", false, err
	}
	return max(a, b), true, nil
}

func (l *gramList) next(r store.Reader) (string, bool, error) {
	t, ok, err := l.seek(r, l.last, l.last != "")
	if ok {
		l.last = t
	}
	return t, ok, err
}

// recordList is the gram records of one list, sought at bounds that only go
// older: buf holds the tails its last Scan read, newest first and
// contiguous in the list, so that a bound that falls among them is
// answered without a seek. The matches of a needle are often close to
// each other in a list (deployments named alike are often created
// together): the Scan reads more tails at once while they answer the
// next bounds, and one when they do not.
type recordList struct {
	prefix string
	buf    []string
	hits   int  // bounds answered from buf since it was read
	end    bool // buf reaches the oldest record of the list
	chunk  int  // tails the next Scan reads
}

// gramListChunk is the most tails a recordList reads in one Scan.
const gramListChunk = 32

// seek returns the newest tail of the list that is not newer than bound
// (any, when bound is ""), or strictly older when strict. The bounds of
// successive calls must not get newer.
func (l *recordList) seek(r store.Reader, bound string, strict bool) (string, bool, error) {
	for len(l.buf) > 0 && bound != "" && (l.buf[0] > bound || strict && l.buf[0] == bound) {
		l.buf = l.buf[1:]
	}
	if len(l.buf) > 0 {
		l.hits++
		return l.buf[0], true, nil
	}
	if l.end {
		return "", false, nil
	}
	switch {
	case l.chunk == 0:
		l.chunk = 2
	case l.hits > 0:
		l.chunk = min(2*l.chunk, gramListChunk)
	default:
		l.chunk = max(l.chunk/2, 2)
	}
	l.hits = 0
	opts := &store.ScanOptions{Reverse: true}
	if bound != "" {
		opts.Start = l.prefix + bound
	}
	n := 0
	err := r.Scan(ColGrams, l.prefix, opts, func(k string, _ []byte) (bool, error) {
		t := k[len(l.prefix):]
		if t == blockMark {
			return false, nil // the list's marker: every record is read
		}
		if strict && t == bound {
			return true, nil
		}
		l.buf = append(l.buf, t)
		n++
		return n < l.chunk, nil
	})
	l.end = n < l.chunk
	if err != nil || len(l.buf) == 0 {
		return "", false, err
	}
	return l.buf[0], true, nil
}

// leapfrog intersects the gram lists at lists newest first.
type leapfrog struct {
	lists  []*gramList
	cur    string
	strict bool // the next agreement must be older than cur
	done   bool
}

func (lf *leapfrog) next(r store.Reader) (string, bool, error) {
	if lf.done {
		return "", false, nil
	}
	agreed := 0
	for i := 0; agreed < len(lf.lists); i = (i + 1) % len(lf.lists) {
		t, ok, err := lf.lists[i].seek(r, lf.cur, lf.strict)
		if err != nil || !ok {
			lf.done = true
			return "", false, err
		}
		lf.strict = false
		if t == lf.cur {
			agreed++
		} else {
			lf.cur, agreed = t, 1
			// The list that jumps is sought first from now on: the
			// sparsest leads, and the dense ones agree at one seek each.
			lf.lists[0], lf.lists[i] = lf.lists[i], lf.lists[0]
			i = 0
		}
	}
	lf.strict = true // on to the next older candidate
	return lf.cur, true, nil
}

// mergeNewest merges the iterators newest first and calls fn with each
// tail once, until fn returns false or the iterators end.
func mergeNewest(r store.Reader, its []tailIter, fn func(tail string) (bool, error)) error {
	heads := make([]string, len(its)) // "" once an iterator has ended
	for i, it := range its {
		t, _, err := it.next(r)
		if err != nil {
			return err
		}
		heads[i] = t
	}
	for {
		tail := ""
		for _, h := range heads {
			tail = max(tail, h)
		}
		if tail == "" {
			return nil
		}
		if more, err := fn(tail); !more || err != nil {
			return err
		}
		for i, h := range heads { // the newest, once, whichever iterators carry it
			if h == tail {
				t, _, err := its[i].next(r)
				if err != nil {
					return err
				}
				heads[i] = t
			}
		}
	}
}
