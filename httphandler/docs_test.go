package httphandler_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/storemem"
)

func fetch(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

var assetRef = regexp.MustCompile(`(?:src|href)="([^"]+)"`)

// checkDocs fetches the docs page at base+"/docs" and every asset it
// links, and checks that the page loads the document at base+"/openapi.json",
// whose server is base.
func checkDocs(t *testing.T, origin, base string) {
	t.Helper()
	resp, page := fetch(t, origin+base+"/docs")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET %s/docs: %d %s", base, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if !strings.Contains(page, `"swaggerJsonUrl":"`+base+`/openapi.json"`) {
		t.Errorf("the page does not load %s/openapi.json:\n%s", base, page)
	}
	refs := assetRef.FindAllStringSubmatch(page, -1)
	if len(refs) < 3 {
		t.Fatalf("the page links %d assets, want its scripts, styles and icons:\n%s", len(refs), page)
	}
	for _, m := range refs {
		if !strings.HasPrefix(m[1], base+"/docs/") {
			t.Errorf("asset %s is not served by this handler (want it under %s/docs/)", m[1], base)
			continue
		}
		resp, body := fetch(t, origin+m[1])
		if resp.StatusCode != 200 || len(body) < 100 {
			t.Errorf("GET %s: %d, %d bytes", m[1], resp.StatusCode, len(body))
		}
		if strings.HasSuffix(m[1], ".js") && !strings.Contains(resp.Header.Get("Content-Type"), "javascript") {
			t.Errorf("GET %s: Content-Type %q", m[1], resp.Header.Get("Content-Type"))
		}
	}
	resp, body := fetch(t, origin+base+"/openapi.json")
	var doc struct {
		Servers []struct{ URL string } `json:"servers"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s/openapi.json: %d %v", base, resp.StatusCode, err)
	}
	// The mount point, and the same under /api-host, which the handler
	// serves too, unless it is mounted there.
	want := []string{"/", "/api-host"}
	if base != "" {
		want = []string{base}
	}
	var got []string
	for _, s := range doc.Servers {
		got = append(got, s.URL)
	}
	if !slices.Equal(got, want) {
		t.Errorf("servers %v, want %v", got, want)
	}
}

// TestDocs: GET /docs is a public interactive page over the document
// whose assets this handler serves (no CDN), at the root and under the
// prefix an embedding program mounts the handler at (Options.BasePath).
func TestDocs(t *testing.T) {
	s := newServer(t, nil)
	checkDocs(t, s.url, "")
	for _, path := range []string{"/docs/no-such-asset.js", "/docs/a/b/c", "/docs/..%2fopenapi.json"} {
		r := s.do("GET", path, "")
		if r.status != 404 || r.header.Get("Content-Type") != "application/json" || string(r.body) != `{"detail":"Not Found"}`+"\n" {
			t.Errorf("GET %s: %d %s %q, want the JSON 404", path, r.status, r.header.Get("Content-Type"), r.body)
		}
	}
	if r := s.do("POST", "/docs", ""); r.status != 405 {
		t.Errorf("POST /docs: %d, want 405", r.status)
	}

	api := httphandler.New(controlplane.New(storemem.New(), nil), &httphandler.Options{BasePath: "/api-host"})
	t.Cleanup(func() { _ = api.Close() })
	mux := http.NewServeMux()
	mux.Handle("/api-host/", http.StripPrefix("/api-host", api))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	checkDocs(t, srv.URL, "/api-host")
}
