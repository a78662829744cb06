package deploydocker

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/deployplane/deployplane/internal/testclock"
)

// TestProxyTellsActivity: the requests the proxy serves are told to the
// ActivityRecorder, at most once a minute per deployment.
func TestProxyTellsActivity(t *testing.T) {
	clock := testclock.New(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), 0)
	var mu sync.Mutex
	var told []string
	d, err := New(&Options{Host: "unix:///nonexistent.sock", ProxyURL: "http://127.0.0.1:1", Clock: clock.Now, IdleTimeout: -1,
		ActivityRecorder: func(_ context.Context, tenant, dep string, at time.Time) error {
			mu.Lock()
			defer mu.Unlock()
			told = append(told, tenant+" "+dep+" "+at.Format("15:04:05"))
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "app") }))
	t.Cleanup(app.Close)
	d.proxy.put("dep-a", newRoute("tenant", "rev-1", false, []*backend{{addr: strings.TrimPrefix(app.URL, "http://")}}))
	srv := httptest.NewServer(d.Proxy())
	t.Cleanup(srv.Close)
	get := func(path string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	for range 3 {
		get("/dep-a/x")
	}
	get("/dep-none/x") // no deployment: nothing to tell
	clock.Advance(90 * time.Second)
	get("/dep-a/y")
	d.Close() // waits for the background calls
	mu.Lock()
	defer mu.Unlock()
	want := []string{"tenant dep-a 10:00:00", "tenant dep-a 10:01:30"}
	if strings.Join(told, ",") != strings.Join(want, ",") {
		t.Errorf("told %v, want %v", told, want)
	}
}
