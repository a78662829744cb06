package httphandler_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/storemem"
)

// collector is a slog.Handler keeping the records it handles; gate, when
// not nil, holds every Handle until it is closed.
type collector struct {
	gate  chan struct{}
	attrs []slog.Attr // from WithAttrs
	// panicOn, when not empty, is the path of the records Handle panics on.
	panicOn string

	mu   *sync.Mutex
	recs *[]map[string]string
}

func newCollector() *collector { return &collector{mu: &sync.Mutex{}, recs: &[]map[string]string{}} }

func (c *collector) Enabled(context.Context, slog.Level) bool { return true }

func (c *collector) Handle(_ context.Context, r slog.Record) error {
	if c.gate != nil {
		<-c.gate
	}
	if c.panicOn != "" {
		var path string
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "path" {
				path = a.Value.String()
			}
			return true
		})
		if path == c.panicOn {
			panic("collector: " + path)
		}
	}
	m := map[string]string{"msg": r.Message, "level": r.Level.String()}
	for _, a := range c.attrs {
		m[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value.String()
		return true
	})
	c.mu.Lock()
	*c.recs = append(*c.recs, m)
	c.mu.Unlock()
	return nil
}

func (c *collector) WithAttrs(as []slog.Attr) slog.Handler {
	d := *c
	d.attrs = append(append([]slog.Attr(nil), c.attrs...), as...)
	return &d
}

func (c *collector) WithGroup(string) slog.Handler { panic("no groups") }

func (c *collector) records() []map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]map[string]string(nil), *c.recs...)
}

// serveID serves GET target on h in-process and returns the request id.
func serveID(t *testing.T, h *httphandler.Handler, target string) string {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", target, nil))
	return w.Header().Get("X-Request-Id")
}

// checkRecords checks that recs are the request records of ids, in that
// order, with the attributes of the Logger.
func checkRecords(t *testing.T, recs []map[string]string, ids []string, paths []string) {
	t.Helper()
	if len(recs) != len(ids) {
		t.Fatalf("%d records, want %d", len(recs), len(ids))
	}
	for i, r := range recs {
		want := map[string]string{"msg": "request", "level": "INFO", "method": "GET", "path": paths[i],
			"request_id": ids[i], "service": "api", "tenant": ""}
		for k, v := range want {
			if r[k] != v {
				t.Errorf("record %d: %s = %q, want %q (%v)", i, k, r[k], v, r)
			}
		}
		if _, err := strconv.Atoi(r["status"]); err != nil || r["duration"] == "" {
			t.Errorf("record %d: status %q, duration %q", i, r["status"], r["duration"])
		}
	}
}

// TestRequestLogClose: every request record reaches the embedder's Logger
// (its attributes included), in the order the requests ended, once Close
// has returned, though far more requests than the buffer holds were served;
// and no goroutine of the log outlives it (synctest.Test fails on a
// goroutine left blocked in the bubble).
func TestRequestLogClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCollector()
		h := httphandler.New(controlplane.New(storemem.New(), nil), &httphandler.Options{
			Logger: slog.New(c).With("service", "api"), LogBuffer: 4})
		var ids, paths []string
		for i := range 100 {
			p := "/openapi.json"
			if i%3 == 0 {
				p = "/nowhere/" + strconv.Itoa(i)
			}
			ids = append(ids, serveID(t, h, p))
			paths = append(paths, p)
		}
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
		checkRecords(t, c.records(), ids, paths)
		// The handler serves on after Close, and a second Close flushes.
		ids = append(ids, serveID(t, h, "/openapi.json"))
		paths = append(paths, "/openapi.json")
		_ = h.Close()
		checkRecords(t, c.records(), ids, paths)
	})
}

// TestRequestLogFullBuffer: when LogBuffer records wait for a Logger that
// does not keep up, the next request waits for room instead of dropping its
// record; once the Logger moves, every record arrives, in order.
func TestRequestLogFullBuffer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCollector()
		c.gate = make(chan struct{})
		h := httphandler.New(controlplane.New(storemem.New(), nil), &httphandler.Options{
			Logger: slog.New(c).With("service", "api"), LogBuffer: 2})
		// The first record is taken by the log's goroutine, which then
		// waits at the gate; the next two fill the buffer.
		ids := []string{serveID(t, h, "/openapi.json")}
		synctest.Wait()
		ids = append(ids, serveID(t, h, "/openapi.json"), serveID(t, h, "/openapi.json"))
		done := make(chan string)
		go func() { done <- serveID(t, h, "/openapi.json") }()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("a request ended while the log's buffer was full")
		default:
		}
		close(c.gate)
		ids = append(ids, <-done)
		_ = h.Close()
		checkRecords(t, c.records(), ids, strings.Fields(strings.Repeat("/openapi.json ", 4)))
	})
}

// TestRequestLogLevel: a Logger above Info gets no request record, as
// before the log was asynchronous.
func TestRequestLogLevel(t *testing.T) {
	var b syncBuffer
	h := httphandler.New(controlplane.New(storemem.New(), nil), &httphandler.Options{
		Logger: slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	serveID(t, h, "/openapi.json")
	_ = h.Close()
	if b.String() != "" {
		t.Errorf("logged at Warn: %s", b.String())
	}
}

// TestRequestLogHandlerPanics: a Logger's handler that panics on one record
// loses that record only: the records after it arrive, Close returns, and
// the process goes on.
func TestRequestLogHandlerPanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCollector()
		c.panicOn = "/nowhere"
		h := httphandler.New(controlplane.New(storemem.New(), nil), &httphandler.Options{
			Logger: slog.New(c).With("service", "api"), LogBuffer: 2})
		ids := []string{serveID(t, h, "/openapi.json")}
		serveID(t, h, "/nowhere")
		ids = append(ids, serveID(t, h, "/openapi.json"))
		_ = h.Close()
		checkRecords(t, c.records(), ids, []string{"/openapi.json", "/openapi.json"})
	})
}
