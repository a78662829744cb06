package revlog_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/deployplane/deployplane/controlplane/internal/revlog"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/store/storetest"
	"github.com/deployplane/deployplane/storemem"
)

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// tpT and tpU are the tenant prefixes (keyenc) of tenants t and u.
const tpT, tpU = "\x01", "\x02"

var (
	buildKey  = revlog.Key{Tenant: "t", TenantPrefix: tpT, Deployment: "d", Revision: "r", Kind: revlog.Build}
	deployKey = revlog.Key{Tenant: "t", TenantPrefix: tpT, Deployment: "d", Revision: "r", Kind: revlog.Deploy}
	// textKey is buildKey without a tenant prefix: its log is under the
	// text keys builds before the compact keys wrote.
	textKey = revlog.Key{Tenant: "t", Deployment: "d", Revision: "r", Kind: revlog.Build}
)

func open(t *testing.T) store.Store {
	t.Helper()
	st := storemem.New()
	t.Cleanup(func() { st.Close() })
	return st
}

func appendLines(t *testing.T, st store.Store, l *revlog.Logs, k revlog.Key, lines ...revlog.Line) []revlog.Entry {
	t.Helper()
	var out []revlog.Entry
	err := st.Update(context.Background(), func(tx store.Tx) error {
		var err error
		out, err = l.Append(tx, k, lines)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func list(t *testing.T, st store.Store, l *revlog.Logs, k revlog.Key, f revlog.Filter) []revlog.Entry {
	t.Helper()
	var out []revlog.Entry
	err := st.View(context.Background(), func(r store.Reader) error {
		var err error
		out, err = l.List(r, k, &f)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func line(sec int, msg string) revlog.Line {
	return revlog.Line{Time: t0.Add(time.Duration(sec) * time.Second), Level: revlog.Info, Message: msg}
}

func messages(es []revlog.Entry) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, e.Message)
	}
	return out
}

func diff(t *testing.T, what string, want, got any) {
	t.Helper()
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("%s (-want +got):\n%s", what, d)
	}
}

func dump(t *testing.T, st store.Store) map[string]string {
	t.Helper()
	out, err := storetest.Dump(context.Background(), st, revlog.Collection)
	if err != nil {
		t.Fatal(err)
	}
	return out[revlog.Collection]
}

// TestStoredBytes: the keys and values of a log are the documented layout,
// byte for byte, so that stores written earlier read the same: the
// compact keys, and the text keys of builds before them.
func TestStoredBytes(t *testing.T) {
	write := func(st store.Store, l *revlog.Logs, build, deploy revlog.Key) {
		appendLines(t, st, l, build, line(1, "a"))
		appendLines(t, st, l, build, line(2, "hello\r\n"))
		appendLines(t, st, l, build, revlog.Line{Time: t0.Add(3*time.Second + 1234567*time.Nanosecond), Level: revlog.Error, Message: "bad\xffutf"})
		appendLines(t, st, l, deploy, revlog.Line{Time: t0.Add(2 * time.Second), Level: revlog.Warning, Message: "dep1"})
	}
	st, l := open(t), revlog.New(&revlog.Options{MaxLines: 2})
	write(st, l, buildKey, deployKey)
	// "d" and "r" are not UUIDs: an id part of 0x02, the length, the bytes.
	diff(t, "cp_revision_logs, compact keys", map[string]string{
		"\x01\x02\x01d\x02\x01rb":          `{"v":1,"n":4,"f":2,"b":14,"d":1,"dt":1795255201000000}`,
		"\x01\x02\x01d\x02\x01rb/\x01\x02": "\x01\x01\x00\x06`\xc6l\x98\xac\x80hello",
		"\x01\x02\x01d\x02\x01rb/\x01\x03": "\x01\x03\x00\x06`\xc6l\xa7\xf3\x92bad\uFFFDutf",
		"\x01\x02\x01d\x02\x01rd":          `{"v":1,"n":2,"f":1,"b":4}`,
		"\x01\x02\x01d\x02\x01rd/\x01\x01": "\x01\x02\x00\x06`\xc6l\x98\xac\x80dep1",
	}, dump(t, st))

	st = open(t)
	write(st, l, textKey, revlog.Key{Tenant: "t", Deployment: "d", Revision: "r", Kind: revlog.Deploy})
	diff(t, "cp_revision_logs, text keys", map[string]string{
		"t/d/r/b":                  `{"v":1,"n":4,"f":2,"b":14,"d":1,"dt":1795255201000000}`,
		"t/d/r/b/0000000000000002": "\x01\x01\x00\x06`\xc6l\x98\xac\x80hello",
		"t/d/r/b/0000000000000003": "\x01\x03\x00\x06`\xc6l\xa7\xf3\x92bad\uFFFDutf",
		"t/d/r/d":                  `{"v":1,"n":2,"f":1,"b":4}`,
		"t/d/r/d/0000000000000001": "\x01\x02\x00\x06`\xc6l\x98\xac\x80dep1",
	}, dump(t, st))
}

// TestTextKeysKept: a log an earlier build wrote under text keys is read,
// appended to, bounded and deleted there by a Key with a tenant prefix,
// and a new log of the same revision goes under compact keys.
func TestTextKeysKept(t *testing.T) {
	st, l := open(t), revlog.New(&revlog.Options{MaxLines: 3})
	appendLines(t, st, l, textKey, line(1, "old 1"), line(2, "old 2"))
	appendLines(t, st, l, buildKey, line(3, "new 3"), line(4, "new 4"))
	appendLines(t, st, l, deployKey, line(5, "deploy 1"))
	diff(t, "the text log, read with a prefix", []string{"1 earlier lines dropped: this log keeps its last 3 lines and 5242880 bytes of messages", "old 2", "new 3", "new 4"},
		messages(list(t, st, l, buildKey, revlog.Filter{Limit: 10})))
	var text, compact int
	for k := range dump(t, st) {
		if strings.HasPrefix(k, "t/d/r/b") {
			text++
		} else if strings.HasPrefix(k, tpT) {
			compact++
		}
	}
	if text != 4 || compact != 2 {
		t.Errorf("%d text keys (want the build log's meta and 3 lines), %d compact (want the deploy log's 2)", text, compact)
	}
	if err := st.Update(context.Background(), func(tx store.Tx) error { return revlog.DeleteDeployment(tx, "t", tpT, "d") }); err != nil {
		t.Fatal(err)
	}
	if left := dump(t, st); len(left) != 0 {
		t.Errorf("keys left after DeleteDeployment: %q", left)
	}
}

// TestAppendReturnsStored: Append answers the lines it kept, cleaned, with
// their places; a batch's lines beyond the bounds are counted, not stored.
func TestAppendReturnsStored(t *testing.T) {
	st, l := open(t), revlog.New(&revlog.Options{MaxLines: 3, MaxLineBytes: 16})
	got := appendLines(t, st, l, buildKey, line(1, "one\n"), line(2, "two"))
	diff(t, "first batch", []revlog.Entry{
		{Seq: 1, Time: t0.Add(time.Second), Level: revlog.Info, Message: "one"},
		{Seq: 2, Time: t0.Add(2 * time.Second), Level: revlog.Info, Message: "two"},
	}, got)
	got = appendLines(t, st, l, buildKey, line(3, "a"), line(4, "b"), line(5, "c"), line(6, "ééééééééééé"))
	diff(t, "second batch", []revlog.Entry{
		{Seq: 4, Time: t0.Add(4 * time.Second), Level: revlog.Info, Message: "b"},
		{Seq: 5, Time: t0.Add(5 * time.Second), Level: revlog.Info, Message: "c"},
		{Seq: 6, Time: t0.Add(6 * time.Second), Level: revlog.Info, Message: "éé [truncated]"},
	}, got)
	all := list(t, st, l, buildKey, revlog.Filter{Limit: 10})
	diff(t, "log", []string{"3 earlier lines dropped: this log keeps its last 3 lines and 5242880 bytes of messages", "b", "c", "éé [truncated]"}, messages(all))
	diff(t, "marker", revlog.Entry{Seq: 3, Dropped: 3, Time: t0.Add(3 * time.Second), Level: revlog.Warning, Message: all[0].Message}, all[0])
}

// TestBoundedByBytes: a log keeps the newest lines within MaxBytes.
func TestBoundedByBytes(t *testing.T) {
	st, l := open(t), revlog.New(&revlog.Options{MaxBytes: 10})
	for i := range 6 {
		appendLines(t, st, l, buildKey, line(i, fmt.Sprintf("msg%d", i)))
	}
	diff(t, "log", []string{"4 earlier lines dropped: this log keeps its last 10000 lines and 10 bytes of messages", "msg4", "msg5"},
		messages(list(t, st, l, buildKey, revlog.Filter{Limit: 10})))
	diff(t, "other log", []string{}, messages(list(t, st, l, deployKey, revlog.Filter{Limit: 10})))
}

// TestUnknownLevel: a line of an unknown level fails the batch before
// anything is written.
func TestUnknownLevel(t *testing.T) {
	st, l := open(t), revlog.New(nil)
	err := st.Update(context.Background(), func(tx store.Tx) error {
		_, err := l.Append(tx, buildKey, []revlog.Line{line(1, "ok"), {Time: t0, Level: "LOUD", Message: "x"}})
		return err
	})
	if err == nil {
		t.Fatal("Append with level LOUD: nil error")
	}
	if d := dump(t, st); len(d) != 0 {
		t.Errorf("store after a failed Append: %q, want empty", d)
	}
}

// TestListPages: walking a log a page at a time, in either order, from
// the last place of each page, answers every line once, the marker in the
// place of the dropped lines.
func TestListPages(t *testing.T) {
	st, l := open(t), revlog.New(&revlog.Options{MaxLines: 5})
	for i := range 8 {
		appendLines(t, st, l, buildKey, line(i, fmt.Sprint(i)))
	}
	for _, desc := range []bool{false, true} {
		for limit := 1; limit <= 7; limit++ {
			var got []string
			f := revlog.Filter{Desc: desc, Limit: limit}
			for range 20 {
				page := list(t, st, l, buildKey, f)
				if len(page) == 0 {
					break
				}
				got = append(got, messages(page)...)
				f.After = &page[len(page)-1].Seq
			}
			want := []string{"3 earlier lines dropped: this log keeps its last 5 lines and 5242880 bytes of messages", "3", "4", "5", "6", "7"}
			if desc {
				want = []string{"7", "6", "5", "4", "3", want[0]}
			}
			diff(t, fmt.Sprintf("walk desc=%v limit=%d", desc, limit), want, got)
		}
	}
}

// TestListFilters: level, text (ignoring case) and time window keep the
// matching lines, the marker included.
func TestListFilters(t *testing.T) {
	st, l := open(t), revlog.New(&revlog.Options{MaxLines: 4})
	appendLines(t, st, l, buildKey,
		revlog.Line{Time: t0.Add(1 * time.Second), Level: revlog.Debug, Message: "dropped one"},
		revlog.Line{Time: t0.Add(2 * time.Second), Level: revlog.Info, Message: "Starting"},
		revlog.Line{Time: t0.Add(3 * time.Second), Level: revlog.Warning, Message: "disk ALMOST full"},
		revlog.Line{Time: t0.Add(4 * time.Second), Level: revlog.Error, Message: "Disk full"},
		revlog.Line{Time: t0.Add(5 * time.Second), Level: revlog.Info, Message: "done"})
	marker := "1 earlier lines dropped: this log keeps its last 4 lines and 5242880 bytes of messages"
	for _, tt := range []struct {
		name string
		f    revlog.Filter
		want []string
	}{
		{"level", revlog.Filter{Level: revlog.Warning}, []string{marker, "disk ALMOST full"}},
		{"query", revlog.Filter{Query: "DISK"}, []string{"disk ALMOST full", "Disk full"}},
		{"query matches marker", revlog.Filter{Query: "Dropped"}, []string{marker}},
		{"window", revlog.Filter{Start: t0.Add(2 * time.Second), End: t0.Add(4 * time.Second)}, []string{"Starting", "disk ALMOST full"}},
		{"window of marker", revlog.Filter{Start: t0, End: t0.Add(2 * time.Second)}, []string{marker}},
		{"desc level", revlog.Filter{Desc: true, Level: revlog.Info}, []string{"done", "Starting"}},
	} {
		tt.f.Limit = 10
		diff(t, tt.name, tt.want, messages(list(t, st, l, buildKey, tt.f)))
	}
}

// TestDeleteDeployment: every log of the deployment's revisions goes,
// under either layout, and no other deployment's, not even one whose name
// starts with the same.
func TestDeleteDeployment(t *testing.T) {
	st, l := open(t), revlog.New(nil)
	r2 := revlog.Key{Tenant: "t", Deployment: "d", Revision: "r2", Kind: revlog.Deploy} // text keys
	other := revlog.Key{Tenant: "t", TenantPrefix: tpT, Deployment: "d2", Revision: "r", Kind: revlog.Build}
	otherText := revlog.Key{Tenant: "t", Deployment: "d2", Revision: "r", Kind: revlog.Build}
	otherTenant := revlog.Key{Tenant: "u", TenantPrefix: tpU, Deployment: "d", Revision: "r", Kind: revlog.Build}
	for _, k := range []revlog.Key{buildKey, deployKey, r2, other, otherText, otherTenant} {
		appendLines(t, st, l, k, line(1, "x"))
	}
	if err := st.Update(context.Background(), func(tx store.Tx) error { return revlog.DeleteDeployment(tx, "t", tpT, "d") }); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range dump(t, st) {
		keys = append(keys, k)
	}
	if len(keys) != 6 {
		t.Errorf("keys left: %q, want the two of each other log", keys)
	}
	for _, k := range keys {
		if strings.HasPrefix(k, "t/d/") || strings.HasPrefix(k, tpT+"\x02\x01d") {
			t.Errorf("key %q left", k)
		}
	}
	diff(t, "deleted log", []string{}, messages(list(t, st, l, buildKey, revlog.Filter{Limit: 10})))
	diff(t, "deleted text log", []string{}, messages(list(t, st, l, r2, revlog.Filter{Limit: 10})))
}

// TestMalformedLine: a stored line the package cannot have written, or a
// line's key it cannot have made, is an error, not a line.
func TestMalformedLine(t *testing.T) {
	compactLine := "\x01\x02\x01d\x02\x01rb/"
	for _, tt := range []struct {
		name     string
		k        revlog.Key
		key, val string
	}{
		{"text keys, a bad line", textKey, "t/d/r/b/0000000000000001", "\x09"},
		{"text keys, a bad place", textKey, "t/d/r/b/00000000000000zz", "\x01\x01\x00\x06`\xc6l\x98\xac\x80x"},
		{"compact keys, a bad line", buildKey, compactLine + "\x01\x01", "\x09"},
		{"compact keys, a bad place", buildKey, compactLine + "\x02\x02", "\x01\x01\x00\x06`\xc6l\x98\xac\x80x"},
		{"compact keys, a place with a leading zero", buildKey, compactLine + "\x02\x00\x02", "\x01\x01\x00\x06`\xc6l\x98\xac\x80x"},
	} {
		st, l := open(t), revlog.New(nil)
		appendLines(t, st, l, tt.k, line(1, "x"))
		if err := st.Update(context.Background(), func(tx store.Tx) error {
			return tx.Put(revlog.Collection, tt.key, []byte(tt.val))
		}); err != nil {
			t.Fatal(err)
		}
		err := st.View(context.Background(), func(r store.Reader) error {
			_, err := l.List(r, buildKey, &revlog.Filter{Limit: 10})
			return err
		})
		if err == nil || errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: List: %v, want an error", tt.name, err)
		}
	}
}

// TestLevels: ParseLevel reads the five levels in any case, WARN as
// WARNING, and nothing else.
func TestLevels(t *testing.T) {
	diff(t, "levels", []revlog.Level{revlog.Debug, revlog.Info, revlog.Warning, revlog.Error, revlog.Critical}, revlog.Levels())
	for in, want := range map[string]revlog.Level{"debug": revlog.Debug, " Info ": revlog.Info, "warn": revlog.Warning, "WARNING": revlog.Warning, "critical": revlog.Critical} {
		if got, ok := revlog.ParseLevel(in); !ok || got != want {
			t.Errorf("ParseLevel(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "NOTICE", "warnings"} {
		if _, ok := revlog.ParseLevel(in); ok {
			t.Errorf("ParseLevel(%q) ok", in)
		}
	}
}

// TestOffsetRoundTrip: every offset decodes to what it encodes, and only
// one spelling decodes per position.
func TestOffsetRoundTrip(t *testing.T) {
	for _, desc := range []bool{false, true} {
		for _, seq := range []uint64{0, 1, 9, 10, 1 << 40, ^uint64(0)} {
			s := revlog.EncodeOffset(desc, seq)
			d, n, ok := revlog.DecodeOffset(s)
			if !ok || d != desc || n != seq {
				t.Errorf("DecodeOffset(EncodeOffset(%v, %d) = %q) = %v, %d, %v", desc, seq, s, d, n, ok)
			}
		}
	}
	diff(t, "EncodeOffset(false, 7)", "MWE3", revlog.EncodeOffset(false, 7))
	for _, bad := range []string{"", "MWE", "MWEwNw==", "MWEwNw", "MmE3", "MXg3", "MWEtMQ", "MWErNw", "MWE4888"} {
		if _, _, ok := revlog.DecodeOffset(bad); ok {
			t.Errorf("DecodeOffset(%q) ok, want refused", bad)
		}
	}
}

// FuzzDecodeOffset: the decoder never panics and accepts only what
// EncodeOffset makes.
func FuzzDecodeOffset(f *testing.F) {
	for _, s := range []string{"", "MWE3", revlog.EncodeOffset(true, 1<<63), "MWEwNw", "////"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if desc, seq, ok := revlog.DecodeOffset(s); ok && revlog.EncodeOffset(desc, seq) != s {
			t.Fatalf("DecodeOffset(%q) = %v, %d, which encodes as %q", s, desc, seq, revlog.EncodeOffset(desc, seq))
		}
	})
}

// TestPlacesPastOneByte: a compact key's place grows from one byte to two
// at 256 and still sorts as the number, in both orders and across pages.
func TestPlacesPastOneByte(t *testing.T) {
	st, l := open(t), revlog.New(&revlog.Options{MaxLines: 400})
	for i := 0; i < 600; i += 100 {
		batch := make([]revlog.Line, 100)
		for j := range batch {
			batch[j] = line(i+j, fmt.Sprintf("line %d", i+j+1))
		}
		appendLines(t, st, l, buildKey, batch...)
	}
	for _, desc := range []bool{false, true} {
		var seqs []uint64
		var after *uint64
		for {
			page := list(t, st, l, buildKey, revlog.Filter{Desc: desc, Limit: 7, After: after})
			if len(page) == 0 {
				break
			}
			for _, e := range page {
				seqs = append(seqs, e.Seq)
				if e.Dropped == 0 && e.Message != fmt.Sprintf("line %d", e.Seq) {
					t.Fatalf("place %d holds %q", e.Seq, e.Message)
				}
			}
			after = new(page[len(page)-1].Seq)
		}
		want := []uint64{}
		for seq := uint64(200); seq <= 600; seq++ { // 200: the line counting the dropped
			want = append(want, seq)
		}
		if desc {
			slices.Reverse(want)
		}
		diff(t, fmt.Sprintf("places, desc %v", desc), want, seqs)
	}
}
