package revlog

import (
	"fmt"
	"math"
	"strings"

	"github.com/deployplane/deployplane/controlplane/internal/keyenc"
	"github.com/deployplane/deployplane/store"
)

// Place is a place among the logs of one kind of a deployment: a
// revision's log, and a line's place (Entry.Seq) in it. Places are in key
// order: by revision (as the key orders them: by id, for ids of one
// length such as UUIDs), then by place in the log. A place needs no line
// there: lines appended or dropped since it was answered leave it where
// it was.
type Place struct {
	Revision string
	Seq      uint64
}

// Walk asks for one page of the logs of one kind of a deployment, each
// revision's log after the other in key order (the reverse with
// Filter.Desc), read by key ranges from the place where an earlier page
// stopped.
type Walk struct {
	Tenant, Deployment string
	Kind               Kind
	// TenantPrefix is the tenant's prefix in the compact key encoding, as
	// in Key: without one, only logs under text keys are walked.
	TenantPrefix string
	// Revision, when not "", walks that revision's log alone.
	Revision string
	// After, when not nil, is an earlier page's Next: the page starts
	// after it (before it, with Filter.Desc). With Revision, After names
	// that revision.
	After *Place
	// Filter chooses the lines: order, page size and filters. Its After is
	// not used.
	Filter Filter
	// Budget is the most stored lines a page reads, matching the filter or
	// not (a log that holds none costs one): a filter that few lines
	// match answers pages with fewer lines than Filter.Limit, or none,
	// rather than reading every log in one transaction. 0 or less means
	// DefaultWalkBudget.
	Budget int
}

// DefaultWalkBudget is the default Walk.Budget: one full log.
const DefaultWalkBudget = DefaultMaxLines

// Found is a line Walk found, with its revision.
type Found struct {
	Revision string
	Entry
}

// WalkPage is one page of a Walk.
type WalkPage struct {
	// Lines are the lines of the page, in the walk's order; never nil.
	Lines []Found
	// Next is where the next page starts (Walk.After): the place of the
	// last line read. It is nil when the walk reached the end of the logs
	// as they were read.
	Next *Place
}

// Walk reads one page of the logs w asks for. The logs of the
// deployment's revisions are found by seeking past each revision's keys,
// so a page costs the lines it reads and a seek per revision it passes,
// not the deployment's whole logs. Lines appended while a walk pages
// through its logs come after its places (a newer revision's log after an
// older one's), so no line is answered twice or skipped, whatever was
// appended or dropped between pages.
func (l *Logs) Walk(r store.Reader, w *Walk) (*WalkPage, error) {
	page := &WalkPage{Lines: []Found{}}
	limit := max(w.Filter.Limit, 1)
	budget := w.Budget
	if budget <= 0 {
		budget = DefaultWalkBudget
	}
	desc := w.Filter.Desc
	rev := w.Revision
	var after *uint64
	if w.After != nil {
		if w.Revision != "" && w.After.Revision != w.Revision {
			return nil, fmt.Errorf("revlog: a place in revision %q for a walk of revision %q", w.After.Revision, w.Revision)
		}
		rev, after = w.After.Revision, new(w.After.Seq)
	}
	key := func(rev string) Key {
		return Key{Tenant: w.Tenant, TenantPrefix: w.TenantPrefix, Deployment: w.Deployment, Revision: rev, Kind: w.Kind}
	}
	sk := seeker{r: r, w: w, desc: desc}
	var at *logAt // rev's log, when a seek found it
	if rev == "" {
		first, a, err := sk.next("")
		if err != nil || first == "" {
			return page, err
		}
		rev, at = first, a
		budget--
	}
	for {
		if budget <= 0 {
			page.Next = &Place{Revision: rev, Seq: startOf(desc)}
			if after != nil {
				page.Next.Seq = *after
			}
			return page, nil
		}
		f := w.Filter
		f.After, f.Limit = after, limit-len(page.Lines)
		var res listed
		var err error
		if at != nil {
			var m meta
			var found bool
			if m, found, err = readMeta(r, at.meta); err == nil && found {
				res, err = l.listAt(r, *at, m, &f, budget)
			} else if err == nil {
				res = listed{page: []Entry{}, end: true}
			}
		} else {
			res, err = l.list(r, key(rev), &f, budget)
		}
		if err != nil {
			return nil, err
		}
		for _, e := range res.page {
			page.Lines = append(page.Lines, Found{Revision: rev, Entry: e})
		}
		budget -= max(res.read, 1)
		if !res.end {
			page.Next = &Place{Revision: rev, Seq: res.last}
			return page, nil
		}
		if w.Revision != "" {
			return page, nil
		}
		next, a, err := sk.next(rev)
		if err != nil {
			return nil, err
		}
		if next == "" {
			return page, nil
		}
		rev, after, at = next, nil, a
	}
}

// seeker finds the revisions of a walk's deployment that have logs, in
// the walk's order, over both layouts: the next under each is remembered
// until the walk reaches it, so that a step costs one seek. The two
// orders agree for revision ids of one length, such as UUIDs.
type seeker struct {
	r    store.Reader
	w    *Walk
	desc bool
	// The next revision under each layout after the walk's place ("":
	// none), once sought.
	text, compact       string
	textSet, compactSet bool
}

// next returns the revision whose logs follow rev's in the walk's order
// (the first when rev is ""), and where its log of the walk's kind would
// be: nil when it has logs under both layouts (one kind's written by an
// earlier build, the other's since), which locate tells apart. It returns
// "" when there is none.
func (s *seeker) next(rev string) (string, *logAt, error) {
	if !s.textSet || s.text == rev && rev != "" {
		t, err := seekText(s.r, s.w.Tenant, s.w.Deployment, rev, s.desc)
		if err != nil {
			return "", nil, err
		}
		s.text, s.textSet = t, true
	}
	if keyenc.TenantLen(s.w.TenantPrefix) > 0 && (!s.compactSet || s.compact == rev && rev != "") {
		c, err := seekCompact(s.r, s.w.TenantPrefix, s.w.Deployment, rev, s.desc)
		if err != nil {
			return "", nil, err
		}
		s.compact, s.compactSet = c, true
	}
	k := Key{Tenant: s.w.Tenant, TenantPrefix: s.w.TenantPrefix, Deployment: s.w.Deployment, Kind: s.w.Kind}
	switch {
	case s.text == "" && s.compact == "":
		return "", nil, nil
	case s.text == s.compact:
		return s.text, nil, nil
	case s.compact == "" || s.text != "" && (s.text < s.compact) != s.desc:
		k.Revision = s.text
		at := textAt(k)
		return s.text, &at, nil
	default:
		k.Revision = s.compact
		at := compactAt(k)
		return s.compact, &at, nil
	}
}

// seekText returns the revision whose text-keyed logs follow rev's in key
// order (precede them, with desc) among the deployment's, or the first
// (the last) when rev is "": "" when there is none. It reads one key.
func seekText(r store.Reader, tenant, deployment, rev string, desc bool) (string, error) {
	prefix := tenant + "/" + deployment + "/"
	opts := &store.ScanOptions{Reverse: desc}
	switch {
	case rev != "" && desc:
		opts.Start = prefix + rev // every key of rev's logs is greater: it goes on with '/'
	case rev != "":
		opts.Start = prefix + rev + "0" // '0' follows '/': past every key of rev's logs
	}
	var next string
	err := r.Scan(Collection, prefix, opts, func(k string, _ []byte) (bool, error) {
		name, _, ok := strings.Cut(k[len(prefix):], "/")
		if !ok || name == "" {
			return false, fmt.Errorf("revlog: malformed log key %q", k)
		}
		next = name
		return false, nil
	})
	return next, err
}

// seekCompact is seekText over the compact keys.
func seekCompact(r store.Reader, tenantPrefix, deployment, rev string, desc bool) (string, error) {
	prefix := tenantPrefix + keyenc.ID(deployment)
	opts := &store.ScanOptions{Reverse: desc}
	switch {
	case rev != "" && desc:
		opts.Start = prefix + keyenc.ID(rev) // every key of rev's logs extends it
	case rev != "":
		opts.Start = prefix + keyenc.ID(rev) + "\xff" // past every key of rev's logs (a kind's byte follows the id)
	}
	var next string
	err := r.Scan(Collection, prefix, opts, func(k string, _ []byte) (bool, error) {
		id, _, ok := keyenc.ParseID(k[len(prefix):])
		if !ok {
			return false, fmt.Errorf("revlog: malformed log key %q", k)
		}
		next = id
		return false, nil
	})
	return next, err
}

// startOf is the place before every line of a log in a walk's order: no
// line is at place 0, nor at the largest.
func startOf(desc bool) uint64 {
	if desc {
		return math.MaxUint64
	}
	return 0
}
