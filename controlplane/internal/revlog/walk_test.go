package revlog_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/deployplane/deployplane/controlplane/internal/revlog"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storemem"
)

// counting is a Reader that counts the keys it reads (each Get, each key
// a Scan visits).
type counting struct {
	store.Reader
	n int
}

func (c *counting) Get(col, key string) ([]byte, error) {
	c.n++
	return c.Reader.Get(col, key)
}

func (c *counting) Scan(col, prefix string, opts *store.ScanOptions, fn func(string, []byte) (bool, error)) error {
	return c.Reader.Scan(col, prefix, opts, func(k string, v []byte) (bool, error) {
		c.n++
		return fn(k, v)
	})
}

// walkPage reads one page of w and how many keys it read.
func walkPage(t *rapid.T, st store.Store, l *revlog.Logs, w revlog.Walk) (*revlog.WalkPage, int) {
	var p *revlog.WalkPage
	var reads int
	err := st.View(context.Background(), func(r store.Reader) error {
		c := &counting{Reader: r}
		var err error
		p, err = l.Walk(c, &w)
		reads = c.n
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return p, reads
}

// walkState is a deployment's logs for the properties: revisions named
// with one length (key order is name order), lines of every level, each
// revision's logs under compact keys or, as an earlier build wrote them,
// under text keys (which later writes, with a tenant prefix, keep).
type walkState struct {
	st   store.Store
	l    *revlog.Logs
	revs []string
	text map[string]bool // revision (and kind) -> its log is under text keys
	n    int             // lines written so far, for distinct times and messages
}

func (s *walkState) write(t *rapid.T, rev string, kind revlog.Kind, n int) {
	lines := make([]revlog.Line, n)
	for i := range lines {
		s.n++
		lines[i] = revlog.Line{Time: t0.Add(time.Duration(s.n) * time.Second),
			Level:   rapid.SampledFrom(revlog.Levels()).Draw(t, "level"),
			Message: fmt.Sprintf("line %d %s", s.n, rapid.SampledFrom([]string{"ok", "warn", "fail"}).Draw(t, "word"))}
	}
	k := revlog.Key{Tenant: "t", TenantPrefix: tpT, Deployment: "d", Revision: rev, Kind: kind}
	text, seen := s.text[rev+string(kind)]
	if !seen {
		text = rapid.Bool().Draw(t, "text keys")
		s.text[rev+string(kind)] = text
	}
	if text && (!seen || rapid.Bool().Draw(t, "as an earlier build")) {
		k.TenantPrefix = ""
	}
	err := s.st.Update(context.Background(), func(tx store.Tx) error {
		_, err := s.l.Append(tx, k, lines)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(s.revs, rev) {
		s.revs = append(s.revs, rev)
		slices.Sort(s.revs)
	}
}

// writeSome appends a few lines to a log of a revision, a new one
// sometimes.
func (s *walkState) writeSome(t *rapid.T) {
	rev := fmt.Sprintf("r%02d", rapid.IntRange(0, 9).Draw(t, "rev"))
	kind := rapid.SampledFrom([]revlog.Kind{revlog.Build, revlog.Deploy}).Draw(t, "kind")
	s.write(t, rev, kind, rapid.IntRange(1, 12).Draw(t, "lines"))
}

// all is every line of the walk's logs that its filter keeps, in its
// order, read with List: what paging through the logs must answer.
func (s *walkState) all(t *rapid.T, w revlog.Walk) []revlog.Found {
	revs := slices.Clone(s.revs)
	if w.Revision != "" {
		revs = []string{w.Revision}
	}
	if w.Filter.Desc {
		slices.Reverse(revs)
	}
	f := w.Filter
	f.Limit = 1 << 30
	out := []revlog.Found{}
	err := s.st.View(context.Background(), func(r store.Reader) error {
		for _, rev := range revs {
			es, err := s.l.List(r, revlog.Key{Tenant: "t", TenantPrefix: tpT, Deployment: "d", Revision: rev, Kind: w.Kind}, &f)
			if err != nil {
				return err
			}
			for _, e := range es {
				out = append(out, revlog.Found{Revision: rev, Entry: e})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func drawWalk(t *rapid.T, s *walkState) revlog.Walk {
	w := revlog.Walk{Tenant: "t", TenantPrefix: tpT, Deployment: "d", Kind: rapid.SampledFrom([]revlog.Kind{revlog.Build, revlog.Deploy}).Draw(t, "walk kind"),
		Filter: revlog.Filter{Desc: rapid.Bool().Draw(t, "desc"), Limit: rapid.IntRange(1, 7).Draw(t, "limit")},
		Budget: rapid.IntRange(1, 6).Draw(t, "budget")}
	if len(s.revs) > 0 && rapid.IntRange(0, 3).Draw(t, "one revision") == 0 {
		w.Revision = rapid.SampledFrom(s.revs).Draw(t, "revision")
	}
	switch rapid.IntRange(0, 5).Draw(t, "filter") {
	case 0:
		w.Filter.Level = rapid.SampledFrom(revlog.Levels()).Draw(t, "level filter")
	case 1:
		w.Filter.Query = rapid.SampledFrom([]string{"FAIL", "warn", "dropped", "line 1"}).Draw(t, "query")
	case 2:
		w.Filter.Start = t0.Add(time.Duration(rapid.IntRange(0, s.n+1).Draw(t, "start")) * time.Second)
		w.Filter.End = w.Filter.Start.Add(time.Duration(rapid.IntRange(1, 20).Draw(t, "window")) * time.Second)
	}
	return w
}

func newWalkState(t *rapid.T) *walkState {
	st := storemem.New()
	s := &walkState{st: st, l: revlog.New(&revlog.Options{MaxLines: rapid.IntRange(3, 40).Draw(t, "max lines")}), text: map[string]bool{}}
	for range rapid.IntRange(0, 20).Draw(t, "writes") {
		s.writeSome(t)
	}
	return s
}

// before reports whether place a comes before b in the walk's order.
func before(a, b revlog.Found, desc bool) bool {
	if desc {
		a, b = b, a
	}
	return a.Revision < b.Revision || a.Revision == b.Revision && a.Seq < b.Seq
}

// Paging through a deployment's logs answers every line its filter keeps,
// each once, in key order, whatever the page size and the read budget;
// each page holds at most its limit and reads a bounded number of keys,
// whatever the logs' length; the walk ends (Next nil) only at their end.
func TestWalkPagesEveryLine(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := newWalkState(t)
		defer s.st.Close()
		w := drawWalk(t, s)
		want := s.all(t, w)
		got := []revlog.Found{}
		for pages := 0; ; pages++ {
			if pages > 10000 {
				t.Fatalf("no end after %d pages", pages)
			}
			p, reads := walkPage(t, s.st, s.l, w)
			if len(p.Lines) > w.Filter.Limit {
				t.Fatalf("a page of %d lines, limit %d", len(p.Lines), w.Filter.Limit)
			}
			// Each line read costs one key; each revision passed, its meta
			// record, a seek and the key that ends its scan.
			if bound := 4*w.Budget + 4; reads > bound {
				t.Fatalf("a page read %d keys, budget %d", reads, w.Budget)
			}
			got = append(got, p.Lines...)
			if p.Next == nil {
				break
			}
			w.After = p.Next
		}
		diff2(t, "the lines of every page", want, got)
	})
}

// Lines appended between pages (to any revision's log, new revisions
// included) and lines dropped by retention never make a walk answer a
// line twice or out of order, and every line that was there when it began
// and is still there when it ends is answered.
func TestWalkStableUnderAppends(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := newWalkState(t)
		defer s.st.Close()
		w := drawWalk(t, s)
		w.Filter.Level, w.Filter.Query, w.Filter.Start, w.Filter.End = "", "", time.Time{}, time.Time{}
		initial := s.all(t, w)
		var got []revlog.Found
		for pages := 0; ; pages++ {
			if pages > 10000 {
				t.Fatalf("no end after %d pages", pages)
			}
			p, _ := walkPage(t, s.st, s.l, w)
			got = append(got, p.Lines...)
			if p.Next == nil {
				break
			}
			w.After = p.Next
			for range rapid.IntRange(0, 2).Draw(t, "appends") {
				s.writeSome(t)
			}
		}
		for i := 1; i < len(got); i++ {
			if !before(got[i-1], got[i], w.Filter.Desc) {
				t.Fatalf("line %s:%d answered after %s:%d", got[i].Revision, got[i].Seq, got[i-1].Revision, got[i-1].Seq)
			}
		}
		final := s.all(t, w)
		answered := func(e revlog.Found) bool {
			return slices.ContainsFunc(got, func(g revlog.Found) bool { return g.Revision == e.Revision && g.Seq == e.Seq })
		}
		for _, e := range initial {
			still := slices.ContainsFunc(final, func(f revlog.Found) bool { return f.Revision == e.Revision && f.Seq == e.Seq && f.Dropped == 0 })
			if e.Dropped == 0 && still && !answered(e) {
				t.Fatalf("line %s:%d (%q), there from start to end, was not answered", e.Revision, e.Seq, e.Message)
			}
		}
	})
}

// A walk of one revision reads that revision's log alone, and a place in
// another revision is an error (the caller binds a place to its walk).
func TestWalkOneRevision(t *testing.T) {
	st := open(t)
	l := revlog.New(nil)
	for _, rev := range []string{"r1", "r2", "r3"} {
		k := revlog.Key{Tenant: "t", TenantPrefix: tpT, Deployment: "d", Revision: rev, Kind: revlog.Deploy}
		if rev == "r2" {
			k.TenantPrefix = "" // under text keys, as an earlier build wrote it
		}
		appendLines(t, st, l, k, line(1, rev+" a"), line(2, rev+" b"))
	}
	appendLines(t, st, l, revlog.Key{Tenant: "t", TenantPrefix: tpT, Deployment: "other", Revision: "r1", Kind: revlog.Deploy}, line(1, "other deployment"))
	appendLines(t, st, l, revlog.Key{Tenant: "t", Deployment: "other", Revision: "r1", Kind: revlog.Deploy}, line(1, "other deployment, text"))
	appendLines(t, st, l, revlog.Key{Tenant: "u", TenantPrefix: tpU, Deployment: "d", Revision: "r1", Kind: revlog.Deploy}, line(1, "other tenant"))
	walk := func(w revlog.Walk) (*revlog.WalkPage, error) {
		var p *revlog.WalkPage
		err := st.View(context.Background(), func(r store.Reader) error {
			var err error
			p, err = l.Walk(r, &w)
			return err
		})
		return p, err
	}
	msgs := func(p *revlog.WalkPage) []string {
		out := []string{}
		for _, f := range p.Lines {
			out = append(out, f.Message)
		}
		return out
	}
	p, err := walk(revlog.Walk{Tenant: "t", TenantPrefix: tpT, Deployment: "d", Kind: revlog.Deploy, Filter: revlog.Filter{Limit: 10}})
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "every revision", []string{"r1 a", "r1 b", "r2 a", "r2 b", "r3 a", "r3 b"}, msgs(p))
	if p.Next != nil {
		t.Errorf("Next %+v at the end", *p.Next)
	}
	p, err = walk(revlog.Walk{Tenant: "t", TenantPrefix: tpT, Deployment: "d", Kind: revlog.Deploy, Revision: "r2", Filter: revlog.Filter{Limit: 1, Desc: true}})
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "one revision, desc", []string{"r2 b"}, msgs(p))
	diff(t, "its next place", &revlog.Place{Revision: "r2", Seq: 2}, p.Next)
	if _, err := walk(revlog.Walk{Tenant: "t", TenantPrefix: tpT, Deployment: "d", Kind: revlog.Deploy, Revision: "r2", After: &revlog.Place{Revision: "r1", Seq: 1}}); err == nil {
		t.Error("a place of another revision was taken")
	}
	p, err = walk(revlog.Walk{Tenant: "t", TenantPrefix: tpT, Deployment: "d", Kind: revlog.Build, Filter: revlog.Filter{Limit: 10}})
	if err != nil || len(p.Lines) != 0 || p.Next != nil {
		t.Errorf("the build logs, which none has: %+v, %v", p, err)
	}
}

func diff2(t *rapid.T, what string, want, got any) {
	t.Helper()
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("%s (-want +got):\n%s", what, d)
	}
}
