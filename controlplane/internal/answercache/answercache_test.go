package answercache_test

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/deployplane/deployplane/controlplane/internal/answercache"
)

// TestServedOnlyForTheSameRecord: an answer is served for its tenant, id
// and the very bytes it was made from, and for nothing else; a Put
// replaces the answer of its id; the stored bytes are copied.
func TestServedOnlyForTheSameRecord(t *testing.T) {
	c := answercache.New(1 << 20)
	stored := []byte(`{"v":1,"n":"a"}`)
	c.Put("t1", "d1", stored, []byte("answer 1"))
	if got := c.Get("t1", "d1", []byte(`{"v":1,"n":"a"}`)); string(got) != "answer 1" {
		t.Fatalf("Get = %q", got)
	}
	for _, miss := range []struct{ tenant, id, stored string }{
		{"t2", "d1", `{"v":1,"n":"a"}`}, // another tenant
		{"t1", "d2", `{"v":1,"n":"a"}`}, // another id
		{"t1", "d1", `{"v":1,"n":"b"}`}, // the record rewritten
		{"t1", "d1", ""},
	} {
		if got := c.Get(miss.tenant, miss.id, []byte(miss.stored)); got != nil {
			t.Errorf("Get(%q, %q, %q) = %q, want nil", miss.tenant, miss.id, miss.stored, got)
		}
	}
	stored[0] = 'x' // the caller's bytes change (a store's, after its transaction)
	if got := c.Get("t1", "d1", []byte(`{"v":1,"n":"a"}`)); string(got) != "answer 1" {
		t.Fatalf("after the caller's bytes changed: Get = %q", got)
	}
	c.Put("t1", "d1", []byte(`{"v":1,"n":"b"}`), []byte("answer 2"))
	if got := c.Get("t1", "d1", []byte(`{"v":1,"n":"a"}`)); got != nil {
		t.Errorf("the replaced answer: %q", got)
	}
	if got := c.Get("t1", "d1", []byte(`{"v":1,"n":"b"}`)); string(got) != "answer 2" {
		t.Errorf("the new answer: %q", got)
	}
	if n, _ := c.Len(); n != 1 {
		t.Errorf("%d entries, want 1", n)
	}
	c.Drop("d1")
	c.Drop("d9") // none kept: no error
	if n, size := c.Len(); n != 0 || size != 0 || c.Get("t1", "d1", []byte(`{"v":1,"n":"b"}`)) != nil {
		t.Errorf("after Drop: %d entries of %d bytes", n, size)
	}
}

// TestBounded: the entries stay within the limit however many are put,
// the last one put is kept, one larger than a quarter of its shard is
// not, and a limit of 0 or less keeps nothing.
func TestBounded(t *testing.T) {
	for _, limit := range []int{200 << 10, 0, -1} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			c := answercache.New(limit)
			stored := []byte(strings.Repeat("s", 300))
			for i := range 2000 {
				id := fmt.Sprintf("d%d", i)
				c.Put("t1", id, stored, bytes.Repeat([]byte("a"), 500))
				if _, size := c.Len(); size > max(limit, 0) {
					t.Fatalf("after %d answers %d bytes are kept, beyond %d", i+1, size, limit)
				}
				if kept := c.Get("t1", id, stored) != nil; kept != (limit > 0) {
					t.Fatalf("answer %d kept %v", i, kept)
				}
			}
			if n, _ := c.Len(); limit > 0 && (n == 0 || n >= 2000) || limit <= 0 && n != 0 {
				t.Fatalf("%d answers kept of 2000", n)
			}
			if limit > 0 {
				big := bytes.Repeat([]byte("a"), limit/16/4)
				c.Put("t1", "big", stored, big)
				if c.Get("t1", "big", stored) != nil {
					t.Error("an answer larger than a quarter of its shard is kept")
				}
			}
		})
	}
}

// TestConcurrent: Gets, Puts and Drops of many ids at once (run with
// -race); what a Get serves is always an answer put for its record.
func TestConcurrent(t *testing.T) {
	c := answercache.New(64 << 10)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 500 {
				id := fmt.Sprint("d", (i*7+w)%50)
				stored := []byte(fmt.Sprint("rec", i%3))
				switch i % 5 {
				case 0:
					c.Drop(id)
				case 1, 2:
					c.Put("t", id, stored, []byte(id+"/"+string(stored)))
				default:
					if a := c.Get("t", id, stored); a != nil && string(a) != id+"/"+string(stored) {
						t.Errorf("Get(%s, %s) = %q", id, stored, a)
					}
				}
			}
		})
	}
	wg.Wait()
}
