package tokens_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/deployplane/deployplane/controlplane/internal/tokens"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/store/storetest"
	"github.com/deployplane/deployplane/storemem"
)

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

const (
	id1 = "0190a000-0000-7000-8000-000000000001"
	id2 = "0190a000-0000-7000-8000-000000000002"
	id3 = "0190a000-0000-7000-8000-000000000003"
)

func create(t *testing.T, st store.Store, tenant, listener, id string, at time.Time) string {
	t.Helper()
	var tok string
	err := st.Update(context.Background(), func(tx store.Tx) (err error) {
		tok, err = tokens.Create(tx, tenant, listener, id, at)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func list(t *testing.T, st store.Store, tenant, listener string, offset, limit int) []tokens.Token {
	t.Helper()
	var page []tokens.Token
	err := st.View(context.Background(), func(r store.Reader) (err error) {
		page, err = tokens.List(r, tenant, listener, offset, limit)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return page
}

func dump(t *testing.T, st store.Store) map[string]string {
	t.Helper()
	d, err := storetest.Dump(context.Background(), st, tokens.Collection)
	if err != nil {
		t.Fatal(err)
	}
	return d[tokens.Collection]
}

// TestTokens: a token is Prefix, its id, "_" and a secret; only its
// digest is stored; it is listed newest first without its secret, paged;
// it authenticates its tenant and listener, and is refused once deleted
// or once its listener's tokens are.
func TestTokens(t *testing.T) {
	ctx := context.Background()
	st := storemem.New()
	defer st.Close()
	tok := create(t, st, "acme", "edge-1", id1, t0)
	tok2 := create(t, st, "acme", "edge-1", id2, t0.Add(time.Second))
	other := create(t, st, "acme", "edge-2", id3, t0)
	if !strings.HasPrefix(tok, tokens.Prefix+id1+"_") || len(tok) < len(tokens.Prefix)+36+1+20 {
		t.Errorf("token %q", tok)
	}
	if id, ok := tokens.Parse(tok); !ok || id != id1 {
		t.Errorf("Parse(%q) = %q, %v", tok, id, ok)
	}
	for k, v := range dump(t, st) {
		if strings.Contains(k+v, tok[len(tok)-20:]) {
			t.Errorf("the token's secret is stored: %q -> %q", k, v)
		}
	}

	want := []tokens.Token{{ID: id2, Created: t0.Add(time.Second)}, {ID: id1, Created: t0}}
	if diff := cmp.Diff(want, list(t, st, "acme", "edge-1", 0, 20)); diff != "" {
		t.Errorf("list (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want[1:], list(t, st, "acme", "edge-1", 1, 1)); diff != "" {
		t.Errorf("second page (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want[:1], list(t, st, "acme", "edge-1", 0, 1)); diff != "" {
		t.Errorf("first page of one (-want +got):\n%s", diff)
	}
	if page := list(t, st, "other", "edge-1", 0, 20); len(page) != 0 {
		t.Errorf("another tenant's listener: %v", page)
	}

	tenant, listener, err := tokens.Authenticate(ctx, st, tok, t0.Add(time.Hour))
	if err != nil || tenant != "acme" || listener != "edge-1" {
		t.Fatalf("Authenticate = %q, %q, %v", tenant, listener, err)
	}
	for _, bad := range []string{"", tokens.Prefix, tok + "x", tok[:len(tok)-1], strings.Replace(tok, id1, id2, 1),
		tokens.Prefix + id1 + "_", tokens.Prefix + "_secret", strings.ToUpper(tok), tokens.Prefix + "not-an-id_secret"} {
		if _, _, err := tokens.Authenticate(ctx, st, bad, t0); !errors.Is(err, tokens.ErrInvalid) {
			t.Errorf("Authenticate(%q): %v, want ErrInvalid", bad, err)
		}
	}

	// Deleted only through its own tenant and listener.
	err = st.Update(ctx, func(tx store.Tx) error {
		for _, c := range []struct{ tenant, listener, id string }{
			{"acme", "edge-2", id1}, {"other", "edge-1", id1}, {"acme", "edge-1", "x"}} {
			var nf *tokens.NotFoundError
			if err := tokens.Delete(tx, c.tenant, c.listener, c.id); !errors.As(err, &nf) || nf.ID != c.id {
				t.Errorf("Delete(%q, %q, %q): %v, want a NotFoundError", c.tenant, c.listener, c.id, err)
			}
		}
		return tokens.Delete(tx, "acme", "edge-1", id1)
	})
	if err != nil {
		t.Fatal(err)
	}
	err = st.Update(ctx, func(tx store.Tx) error { return tokens.Delete(tx, "acme", "edge-1", id1) })
	if !errors.As(err, new(*tokens.NotFoundError)) {
		t.Errorf("delete twice: %v", err)
	}
	if _, _, err := tokens.Authenticate(ctx, st, tok, t0); !errors.Is(err, tokens.ErrInvalid) {
		t.Errorf("a deleted token: %v", err)
	}
	if _, _, err := tokens.Authenticate(ctx, st, tok2, t0); err != nil {
		t.Errorf("the other token after a deletion: %v", err)
	}

	// A listener's tokens go together; another listener's stay.
	if err := st.Update(ctx, func(tx store.Tx) error { return tokens.DeleteListener(tx, "acme", "edge-1") }); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tokens.Authenticate(ctx, st, tok2, t0); !errors.Is(err, tokens.ErrInvalid) {
		t.Errorf("a token of a deleted listener: %v", err)
	}
	if _, _, err := tokens.Authenticate(ctx, st, other, t0); err != nil {
		t.Errorf("another listener's token: %v", err)
	}
	keys := slices.Sorted(maps.Keys(dump(t, st)))
	if len(keys) != 2 || !strings.Contains(keys[1], "edge-2") {
		t.Errorf("left after the listener's deletion: %q", keys)
	}
}

// TestUseRecorded: Authenticate records a token's use, then not again
// until UseEvery has passed since the last one recorded; a store that
// holds the token's use is unchanged by a use within that time.
func TestUseRecorded(t *testing.T) {
	ctx := context.Background()
	st := storemem.New()
	defer st.Close()
	tok := create(t, st, "acme", "edge-1", id1, t0)
	used := func() time.Time {
		t.Helper()
		return list(t, st, "acme", "edge-1", 0, 1)[0].Used
	}
	if !used().IsZero() {
		t.Fatalf("a new token's use: %v", used())
	}
	auth := func(at time.Time) {
		t.Helper()
		if _, _, err := tokens.Authenticate(ctx, st, tok, at); err != nil {
			t.Fatal(err)
		}
	}
	at := t0.Add(time.Hour)
	auth(at)
	if used() != at {
		t.Fatalf("used %v, want %v", used(), at)
	}
	before := dump(t, st)
	auth(at.Add(tokens.UseEvery / 2))
	auth(at.Add(tokens.UseEvery - time.Microsecond))
	if diff := cmp.Diff(before, dump(t, st)); diff != "" {
		t.Errorf("uses within UseEvery wrote (-before +after):\n%s", diff)
	}
	auth(at.Add(tokens.UseEvery))
	if want := at.Add(tokens.UseEvery); used() != want {
		t.Errorf("used %v, want %v", used(), want)
	}
}

// TestLayout: the records, byte for byte (the stores already written hold
// them), less the digest, which the secret makes.
func TestLayout(t *testing.T) {
	ctx := context.Background()
	st := storemem.New()
	defer st.Close()
	tok := create(t, st, "acme", "edge-1", id1, t0)
	if _, _, err := tokens.Authenticate(ctx, st, tok, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	got := dump(t, st)
	rec := got["k"+id1]
	if i, j := strings.Index(rec, `"h":"`), strings.Index(rec, `","c"`); i >= 0 && j == i+5+64 {
		rec = rec[:i+5] + "H" + rec[j:]
	}
	got["k"+id1] = rec
	want := map[string]string{
		"k" + id1:                              `{"t":"acme","l":"edge-1","h":"H","c":1795255200000000,"u":1795255260000000}`,
		"oacme/edge-1/800660c66c7a2800/" + id1: "",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
}
