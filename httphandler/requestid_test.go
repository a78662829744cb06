package httphandler_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/deployplane/deployplane/httphandler"
)

// TestRequestID: a client's X-Request-Id is echoed (cut to
// MaxRequestIDBytes, unsafe bytes dropped) and logged; without one, or
// with nothing safe in it, the handler makes one.
func TestRequestID(t *testing.T) {
	s := newServer(t, nil)
	long := strings.Repeat("a1", 100)
	generated := regexp.MustCompile(`^[0-9a-f]{12}-[0-9]+$`)
	cases := []struct {
		name, sent, want string // want "": a generated id
	}{
		{"uuid", "0194c0de-0000-7000-8000-00000000000a", "0194c0de-0000-7000-8000-00000000000a"},
		{"safe punctuation", "trace:ab/12+x=y@host_1.2", "trace:ab/12+x=y@host_1.2"},
		{"too long", long, long[:httphandler.MaxRequestIDBytes]},
		{"unsafe bytes", "a b\t\"c\"<d>;e\\f%0Ag", "abcdef0Ag"},
		{"non-ASCII", "réq-ü1", "rq-1"},
		{"nothing safe", "<>  ;;", ""},
		{"absent", "", ""},
	}
	seen := map[string]bool{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var headers []string
			if c.sent != "" {
				headers = []string{"X-Request-Id", c.sent}
			}
			headers = append(headers, "X-Api-Key", keyA)
			r := s.do("GET", "/v2/deployments", "", headers...)
			got := r.header.Get("X-Request-Id")
			switch {
			case c.want == "" && !generated.MatchString(got):
				t.Errorf("X-Request-Id %q, want a generated one", got)
			case c.want != "" && got != c.want:
				t.Errorf("X-Request-Id %q, want %q", got, c.want)
			}
			if c.want == "" && seen[got] {
				t.Errorf("generated id %q twice", got)
			}
			seen[got] = true
			// The request's log record carries the same id.
			found := false
			for line := range strings.Lines(s.logs()) {
				var rec map[string]any
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatal(err)
				}
				if rec["msg"] == "request" && rec["request_id"] == got {
					found = true
				}
			}
			if !found {
				t.Errorf("no request record with request_id %q", got)
			}
		})
	}
}
