package httphandler_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/deployplane/deployplane/httphandler"
)

// TestRequestSizeLimits: a request whose URL or header fields are beyond
// the handler's limits is answered in the contract's shape, a JSON detail
// with 414 or 431, before authentication; one just within them is served.
// The test server's own limit (http.Server.MaxHeaderBytes) is above the
// handler's, as cmd/deployplane sets it.
func TestRequestSizeLimits(t *testing.T) {
	s := newServerWith(t, serverSetup{http: func(srv *http.Server) { srv.MaxHeaderBytes = 1 << 20 }})
	many := make([]string, 0, 2*2000)
	for i := range 2000 {
		many = append(many, fmt.Sprintf("X-Many-%d", i), strings.Repeat("v", 30))
	}
	tests := []struct {
		name    string
		path    string
		headers []string
		status  int
		detail  string
	}{
		{name: "200 KB query", path: "/v2/deployments?name_contains=" + strings.Repeat("a", 200<<10), status: 414,
			detail: "The request URL is longer than the limit of 16384 bytes."},
		{name: "long path", path: "/v2/deployments/" + strings.Repeat("b", 20<<10), status: 414,
			detail: "The request URL is longer than the limit of 16384 bytes."},
		{name: "long path, no credentials", path: "/" + strings.Repeat("c", 17<<10), status: 414,
			detail: "The request URL is longer than the limit of 16384 bytes."},
		{name: "many headers", path: "/v2/deployments", headers: many, status: 431,
			detail: "The request header fields are larger than the limit of 65536 bytes."},
		{name: "one huge header", path: "/v2/deployments", headers: []string{"X-Huge", strings.Repeat("h", 100<<10)}, status: 431,
			detail: "The request header fields are larger than the limit of 65536 bytes."},
		{name: "huge cookie", path: "/openapi.json", headers: []string{"Cookie", "a=" + strings.Repeat("h", 70<<10)}, status: 431,
			detail: "The request header fields are larger than the limit of 65536 bytes."},
		{name: "query within the limit", path: "/v2/deployments?ignored=" + strings.Repeat("a", 15<<10), status: 200},
		{name: "headers within the limit", path: "/v2/deployments", headers: many[:2*1000], status: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := s.do("GET", tt.path, "", append([]string{"X-Api-Key", keyA}, tt.headers...)...)
			diff(t, "status", tt.status, r.status)
			if tt.status != 200 {
				diff(t, "detail", tt.detail, detail(t, r))
				if r.header.Get("X-Request-Id") == "" {
					t.Error("no X-Request-Id")
				}
			}
		})
	}
}

// TestRequestSizeLimitOptions: Options.MaxURLBytes and MaxHeaderBytes set
// the limits.
func TestRequestSizeLimitOptions(t *testing.T) {
	s := newServer(t, &httphandler.Options{MaxURLBytes: 64, MaxHeaderBytes: 1024})
	r := s.as(keyA, "GET", "/v2/deployments?name_contains="+strings.Repeat("a", 40), "")
	diff(t, "status", 414, r.status)
	diff(t, "detail", "The request URL is longer than the limit of 64 bytes.", detail(t, r))
	r = s.do("GET", "/v2/deployments", "", "X-Api-Key", keyA, "X-Big", strings.Repeat("h", 1024))
	diff(t, "status", 431, r.status)
	diff(t, "detail", "The request header fields are larger than the limit of 1024 bytes.", detail(t, r))
	diff(t, "within both", 200, s.as(keyA, "GET", "/v2/deployments?limit=5", "").status)
}
