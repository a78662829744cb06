package httphandler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"regexp"
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

// TestLogHandlerRequestLines: with NewLogHandler's handler as the Logger,
// the request log writes its records itself: after Close, every request
// served has its line, in the order the requests ended, in slog's JSON
// form; the records of other loggers sharing the handler (With, the
// Error of a panic) go through slog and never interleave with them, though
// the writer is a plain bytes.Buffer with no lock of its own (the race
// detector would see two writes at once).
func TestLogHandlerRequestLines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		logger := slog.New(httphandler.NewLogHandler(&out, httphandler.LogJSON))
		h := httphandler.New(controlplane.New(storemem.New(), nil), &httphandler.Options{Logger: logger, LogBuffer: 8})
		other := logger.With("service", "other")
		var ids, paths []string
		var wg sync.WaitGroup
		wg.Go(func() {
			for i := range 200 {
				other.Info("elsewhere", "i", i)
			}
		})
		for i := range 300 {
			p := "/openapi.json"
			if i%3 == 0 {
				p = "/nowhere/" + strconv.Itoa(i) + "/\"quoted\" and spaced"
			}
			ids = append(ids, serveID(t, h, strings.ReplaceAll(strings.ReplaceAll(p, " ", "%20"), `"`, "%22")))
			paths = append(paths, p)
		}
		wg.Wait()
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
		var recs []map[string]string
		elsewhere := 0
		for line := range strings.Lines(out.String()) {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("not a JSON line: %q: %v", line, err)
			}
			switch m["msg"] {
			case "elsewhere":
				if m["service"] != "other" || m["i"] != float64(elsewhere) {
					t.Fatalf("record %d of the other logger: %v", elsewhere, m)
				}
				elsewhere++
			case "request":
				r := map[string]string{"service": "api"} // checkRecords wants the attribute of the other tests' loggers
				for k, v := range m {
					r[k] = fmt.Sprint(v)
				}
				recs = append(recs, r)
			default:
				t.Fatalf("unexpected line %q", line)
			}
		}
		if elsewhere != 200 {
			t.Errorf("%d records of the other logger, want 200", elsewhere)
		}
		checkRecords(t, recs, ids, paths)
	})
}

// TestLogHandlerIsSlogs: NewLogHandler writes what slog's own handlers
// write, for every record: a request's line (its time, duration and id
// aside, which differ between two requests) and any other record.
func TestLogHandlerIsSlogs(t *testing.T) {
	for _, c := range []struct {
		format httphandler.LogFormat
		slog   func(io.Writer) slog.Handler
	}{
		{httphandler.LogJSON, func(w io.Writer) slog.Handler { return slog.NewJSONHandler(w, nil) }},
		{httphandler.LogText, func(w io.Writer) slog.Handler { return slog.NewTextHandler(w, nil) }},
	} {
		var mine, theirs bytes.Buffer
		for _, h := range []slog.Handler{httphandler.NewLogHandler(&mine, c.format), c.slog(&theirs)} {
			api := httphandler.New(controlplane.New(storemem.New(), nil), &httphandler.Options{Logger: slog.New(h)})
			w := httptest.NewRecorder()
			r := httptest.NewRequest("GET", "/v2/deployments/x%20y", nil)
			r.Header.Set("X-Request-Id", "the-id")
			api.ServeHTTP(w, r)
			_ = api.Close()
			slog.New(h).Debug("not written")
			slog.New(h).With("k", "v").WithGroup("g").Warn("other", "a", 1)
		}
		mask := regexp.MustCompile(`(time|duration)(=|":)"?[^ ,"]+"?`)
		m, th := mask.ReplaceAllString(mine.String(), "$1"), mask.ReplaceAllString(theirs.String(), "$1")
		if m != th || !strings.Contains(m, "the-id") || strings.Count(m, "\n") != 2 {
			t.Errorf("format %d:\nNewLogHandler: %s\nslog:          %s", c.format, m, th)
		}
	}
}
