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

// The proxy tells the container where it is mounted: X-Forwarded-Prefix
// is the path of the deployment's url (ProxyURL's path, then the id),
// X-Forwarded-Host and -Proto the host and scheme the request came to
// the proxy with, and X-Forwarded-For its client, whatever of these the
// client sent. The path and query reach the container without the
// prefix.
func TestProxyForwardedHeaders(t *testing.T) {
	names := []string{"X-Forwarded-Prefix", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Forwarded-For"}
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.URL.RequestURI())
		for _, n := range names {
			io.WriteString(w, "|"+r.Header.Get(n))
		}
	}))
	t.Cleanup(echo.Close)
	for _, c := range []struct {
		name, proxyURL, host string
		headers              map[string]string
		want                 string
	}{
		{name: "at the root", proxyURL: "http://127.0.0.1:8125", host: "agents.example:8125",
			want: "/threads?limit=2|/dep-1|agents.example:8125|http|127.0.0.1"},
		{name: "under a path", proxyURL: "https://front.example/deploy/agents/", host: "front.example",
			want: "/threads?limit=2|/deploy/agents/dep-1|front.example|http|127.0.0.1"},
		{name: "a client's headers", proxyURL: "http://127.0.0.1:8125", host: "agents.example",
			headers: map[string]string{"X-Forwarded-Prefix": "/evil", "X-Forwarded-Host": "evil.example",
				"X-Forwarded-Proto": "https", "X-Forwarded-For": "10.9.8.7"},
			want: "/threads?limit=2|/dep-1|agents.example|http|127.0.0.1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := New(&Options{Host: "unix:///nonexistent.sock", ProxyURL: c.proxyURL})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Close() })
			d.proxy.set("dep-1", []*backend{{addr: strings.TrimPrefix(echo.URL, "http://")}})
			srv := httptest.NewServer(d.Proxy())
			t.Cleanup(srv.Close)
			req, err := http.NewRequest("GET", srv.URL+"/dep-1/threads?limit=2", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Host = c.host
			for k, v := range c.headers {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(b) != c.want {
				t.Errorf("%s: %q\nwant      %q", resp.Status, b, c.want)
			}
		})
	}
}
