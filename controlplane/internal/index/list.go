package index

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/deployplane/deployplane/store"
)

// Options tune how List walks the gram index. Zero fields take the
// defaults; a negative one means none.
type Options struct {
	// ShortNeedleLists: a Query.Name of 1 or 2 bytes is often in many
	// names (a digit, a letter), and its gram lists are then many, each
	// costing a seek before the first answer (grams.go). When it has more
	// lists than this, List first walks the tenant's newest summaries, up
	// to ShortNeedleBudget of them, and is done when the page fills (or
	// the tenant has no more); otherwise the gram lists answer. Default
	// DefaultShortNeedleLists.
	ShortNeedleLists int
	// ShortNeedleBudget is the most summaries that walk reads: at most
	// 4*(Offset+Limit) and at most this. Default DefaultShortNeedleBudget.
	ShortNeedleBudget int
	// PlaceProbes is how many candidate places of a Query.Name of 6 bytes
	// or more List checks one by one for its next covering trigram, where
	// with more it lists the trigram's places (grams.go). Default
	// DefaultPlaceProbes.
	PlaceProbes int
}

// The defaults of Options.
const (
	DefaultShortNeedleLists  = 32
	DefaultShortNeedleBudget = 1024
	DefaultPlaceProbes       = 8
)

// Index answers lists by the Options it was made with.
type Index struct {
	o Options
}

// New returns the Index of o; nil means the defaults.
func New(o *Options) *Index {
	var x Index
	if o != nil {
		x.o = *o
	}
	for _, f := range []struct {
		v   *int
		def int
	}{
		{&x.o.ShortNeedleLists, DefaultShortNeedleLists},
		{&x.o.ShortNeedleBudget, DefaultShortNeedleBudget},
		{&x.o.PlaceProbes, DefaultPlaceProbes},
	} {
		switch {
		case *f.v == 0:
			*f.v = f.def
		case *f.v < 0:
			*f.v = 0
		}
	}
	return &x
}

// Query asks for one page of a tenant's entries, newest first (tails in
// descending order). One source is walked: the records of Terms, else
// the gram index of Name, else the order records; every other condition
// is checked on each candidate the walk yields.
type Query struct {
	// Terms, when given, walks the entries that carry any of them, merged
	// newest first, each entry once. A term that names few entries walks
	// fast; the caller picks it.
	Terms []string
	// Name keeps the entries whose lowercased name contains Name
	// lowercased (strings.ToLower). Without Terms, the gram index is
	// walked, which yields exactly the matches; with Terms, it is checked
	// on each candidate's summary.
	Name string
	// With keeps the entries that also carry every one of these terms (a
	// Get of a term record per candidate and term, until one is missing).
	With []string
	// Keep, when not nil, keeps the entries whose summary it accepts (a
	// Get of the summary per candidate). It is given the summary record's
	// bytes, valid during the call only.
	Keep func(summary []byte) bool
	// Offset is how many of the entries kept are skipped before the page.
	// Walking the order records with no other condition, it is skipped
	// over the order counts (counts.go) rather than entry by entry.
	Offset int
	// Limit is the most tails returned; none when it is not positive.
	Limit int
}

// List returns the tails of the page q asks for of the tenant's entries.
func (x *Index) List(r store.Reader, tp string, q *Query) ([]string, error) {
	if q.Limit <= 0 {
		return nil, nil
	}
	p := &page{r: r, tp: tp, q: q, needle: strings.ToLower(q.Name), skip: q.Offset}
	p.needleBytes = []byte(p.needle)
	var err error
	switch terms := uniq(q.Terms); {
	case len(terms) == 1:
		p.nameOnSummary = p.needle != ""
		prefix := tp + terms[0]
		err = r.Scan(ColTerms, prefix, &store.ScanOptions{Reverse: true}, func(k string, _ []byte) (bool, error) {
			return p.visit(k[len(prefix):])
		})
	case len(terms) > 1:
		// Each term's records a chunk at a time: the cost follows the
		// offset and the limit, not the number of entries of the terms.
		p.nameOnSummary = p.needle != ""
		its := make([]tailIter, len(terms))
		for i, t := range terms {
			its[i] = &cursor{col: ColTerms, prefix: tp + t}
		}
		err = mergeNewest(r, its, p.visit)
	case p.needle != "":
		err = x.byName(p)
	default:
		opts := &store.ScanOptions{Reverse: true}
		if !p.filtered() && p.skip > 0 {
			start, rest, err := skipOrder(r, tp, p.skip)
			if err != nil || start == "" {
				return nil, err
			}
			opts.Start, p.skip = start, rest
		}
		err = r.Scan(ColOrder, tp, opts, func(k string, _ []byte) (bool, error) {
			return p.visit(k[len(tp):])
		})
	}
	if err != nil {
		return nil, err
	}
	return p.tails, nil
}

// uniq returns terms without repeats, in their order.
func uniq(terms []string) []string {
	var out []string
	for _, t := range terms {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// page is one List under way.
type page struct {
	r           store.Reader
	tp          string
	q           *Query
	needle      string // q.Name lowercased
	needleBytes []byte // needle, to look for in summaries
	// nameOnSummary: the walk does not answer the needle, so each
	// candidate's summary is read for it.
	nameOnSummary bool
	skip          int
	tails         []string
}

// filtered reports whether a candidate of the walk is checked.
func (p *page) filtered() bool {
	return p.nameOnSummary || p.q.Keep != nil || len(p.q.With) > 0
}

// visit takes the next candidate of the walk, newest first, and reports
// whether the page wants more.
func (p *page) visit(tail string) (bool, error) {
	if p.filtered() {
		ok, err := p.check(tail)
		if err != nil || !ok {
			return err == nil, err
		}
	}
	if p.skip > 0 {
		p.skip--
		return true, nil
	}
	p.tails = append(p.tails, tail)
	return len(p.tails) < p.q.Limit, nil
}

// check reports whether the entry at tail passes what the walk does not
// answer: the needle and Keep on its summary, With on its term record.
func (p *page) check(tail string) (bool, error) {
	if p.nameOnSummary || p.q.Keep != nil {
		b, err := p.r.Get(ColSummaries, p.tp+tail)
		if err != nil {
			return false, fmt.Errorf("index: the entry at %q has no summary record: %w", tail, err)
		}
		if !p.match(b) {
			return false, nil
		}
	}
	return p.with(tail)
}

// match reports whether a summary passes the needle, when the walk does
// not answer it, and Keep.
func (p *page) match(summary []byte) bool {
	if p.nameOnSummary {
		name, _, _ := bytes.Cut(summary, []byte{0})
		if !bytes.Contains(name, p.needleBytes) {
			return false
		}
	}
	return p.q.Keep == nil || p.q.Keep(summary)
}

// with reports whether the entry at tail carries every term of q.With.
func (p *page) with(tail string) (bool, error) {
	for _, t := range p.q.With {
		_, err := p.r.Get(ColTerms, p.tp+t+tail)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return false, nil
		case err != nil:
			return false, err
		}
	}
	return true, nil
}

// byName walks the gram index for p's needle; see Options for a needle of
// 1 or 2 bytes.
func (x *Index) byName(p *page) error {
	if !nameBytesOK(p.needle) {
		return nil // no name holds one of its bytes
	}
	if len(p.needle) < gramLen {
		lists, err := shortNeedleLists(p.r, p.tp, p.needle, x.o.ShortNeedleLists)
		if err != nil {
			return err
		}
		if len(lists) > x.o.ShortNeedleLists {
			done, err := x.newestSummaries(p)
			if err != nil || done {
				return err
			}
		}
	}
	// The gram index yields exactly the matches; summaries are read only
	// when Keep needs them.
	return x.scanGrams(p.r, p.tp, p.needle, p.visit)
}

// newestSummaries walks the summaries of the tenant newest first, at most
// min(4*(offset+limit), ShortNeedleBudget) of them, and puts in p.tails
// the page of those p matches. done reports whether that page is the
// answer: it is full, or every summary was walked.
func (x *Index) newestSummaries(p *page) (done bool, err error) {
	budget := min(4*(p.q.Offset+p.q.Limit), x.o.ShortNeedleBudget)
	n, skip := 0, p.q.Offset
	var tails []string
	done = true
	nameOnSummary := p.nameOnSummary
	p.nameOnSummary = true
	defer func() { p.nameOnSummary = nameOnSummary }()
	err = p.r.Scan(ColSummaries, p.tp, &store.ScanOptions{Reverse: true}, func(k string, v []byte) (bool, error) {
		if n++; n > budget {
			done = false
			return false, nil
		}
		if !p.match(v) {
			return true, nil
		}
		tail := k[len(p.tp):]
		if ok, err := p.with(tail); err != nil || !ok {
			return err == nil, err
		}
		if skip > 0 {
			skip--
			return true, nil
		}
		tails = append(tails, tail)
		return len(tails) < p.q.Limit, nil
	})
	if done && err == nil {
		p.tails = tails
	}
	return done, err
}

// cursor walks one list of keys (a term's records, a gram's) newest
// first, a chunk at a time.
type cursor struct {
	col    string
	prefix string
	buf    []string // tails read and not yet merged, newest first
	last   string   // the last key read: where the next chunk starts
	chunk  int      // the size of the last chunk read
	done   bool
}

// cursorChunk is the most keys a cursor reads in one Scan.
const cursorChunk = 128

func (c *cursor) fill(r store.Reader) error {
	if len(c.buf) > 0 || c.done {
		return nil
	}
	opts := &store.ScanOptions{Reverse: true, Start: c.last}
	// The first chunk is small (many cursors may be merged, most of which
	// give few records to a page), the later ones double up to cursorChunk.
	chunk := max(min(2*c.chunk, cursorChunk), 8)
	c.chunk = chunk
	n := 0
	err := r.Scan(c.col, c.prefix, opts, func(k string, _ []byte) (bool, error) {
		if k == c.last {
			return true, nil // Start is inclusive: already merged
		}
		c.buf = append(c.buf, k[len(c.prefix):])
		c.last = k
		n++
		return n < chunk, nil
	})
	c.done = n < chunk
	return err
}

func (c *cursor) next(r store.Reader) (string, bool, error) {
	if err := c.fill(r); err != nil || len(c.buf) == 0 {
		return "", false, err
	}
	t := c.buf[0]
	c.buf = c.buf[1:]
	return t, true, nil
}
