package deploydocker

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Proxies sends each deployment's requests to the Deployer that runs it,
// and the rest to the first Deployer's Proxy (404); a deployment one
// Deployer runs is not served through another's table.
func TestProxies(t *testing.T) {
	serve := func(name string) string {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, name+" "+r.URL.Path)
		}))
		t.Cleanup(s.Close)
		return strings.TrimPrefix(s.URL, "http://")
	}
	mk := func() *Deployer {
		d, err := New(&Options{Host: "unix:///nonexistent.sock", ProxyURL: "http://127.0.0.1:1"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	east, west := mk(), mk()
	east.proxy.set("dep-e", []*backend{{addr: serve("east")}})
	west.proxy.set("dep-w", []*backend{{addr: serve("west")}})
	srv := httptest.NewServer(Proxies(east, west))
	defer srv.Close()
	for path, want := range map[string]string{
		"/dep-e/ok":      "200 east /ok",
		"/dep-w/threads": "200 west /threads",
		"/dep-x/ok":      `404 {"detail":"No deployment serves here."}`,
		"/":              `404 {"detail":"No deployment serves here."}`,
	} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if got := strings.TrimSpace(resp.Status[:3] + " " + string(b)); got != want {
			t.Errorf("GET %s: %q, want %q", path, got, want)
		}
	}
	if west.proxy.has("dep-e") || east.proxy.has("dep-w") {
		t.Errorf("a deployment is in the other Deployer's table")
	}
}
