package httphandler_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/storemem"
)

// wireTimeRE is the timestamp format of wire contract section 1.
var wireTimeRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`)

// TestEveryTimestampIsFixedWidth: every timestamp in every answer that
// carries one (deployments, revisions, listeners, providers and their
// pages) is RFC 3339 UTC with six fractional digits. The clocks make
// fractions with trailing zeros (and none at all for the OAuth service),
// the ones a trimming encoder shortens.
func TestEveryTimestampIsFixedWidth(t *testing.T) {
	var ticks int
	clock := func() time.Time { // 10:00:00.1, .2, ...: one digit before trimming zeros
		ticks++
		return time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC).Add(time.Duration(ticks) * 100 * time.Millisecond)
	}
	s := newServerCP(t, controlplane.New(storemem.New(), &controlplane.Options{Clock: clock}), nil)
	f := newFixture(t, s)
	g := f.github.ID
	rev := *f.github.LatestRevisionID
	var checked int
	for _, c := range []struct {
		method, path, body string
		status             int
	}{
		{"POST", "/v2/deployments", dockerBody("another"), 201},
		{"GET", "/v2/deployments", "", 200},
		{"GET", "/v2/deployments?name_contains=agent&limit=1", "", 200},
		{"GET", "/v2/deployments/" + g, "", 200},
		{"PATCH", "/v2/deployments/" + g, `{"source_revision_config": {"repo_ref": "release"}}`, 200},
		{"PATCH", "/v2/deployments/" + g, `{"source_config": {"build_on_push": true}}`, 200},
		{"POST", "/v2/deployments/" + g + "/revisions", "", 201},
		{"GET", "/v2/deployments/" + g + "/revisions", "", 200},
		{"GET", "/v2/deployments/" + g + "/revisions/" + rev, "", 200},
		{"POST", "/v2/deployments/" + g + "/revisions/" + rev + "/redeploy", "", 200},
		{"POST", "/v2/listeners", `{"compute_type": "k8s", "compute_id": "cluster-9"}`, 201},
		{"GET", "/v2/listeners", "", 200},
		{"GET", "/v2/listeners/" + f.listener.ID, "", 200},
		{"PATCH", "/v2/listeners/" + f.listener.ID, `{"version": "2"}`, 200},
		{"POST", "/v2/auth/providers", s.providerBody("other", false), 200},
		{"GET", "/v2/auth/providers", "", 200},
		{"GET", "/v2/auth/providers/fake", "", 200},
		{"PATCH", "/v2/auth/providers/fake", `{"name": "Renamed"}`, 200},
	} {
		r := s.as(keyA, c.method, c.path, c.body)
		if r.status != c.status {
			t.Fatalf("%s %s: status %d, want %d: %s", c.method, c.path, r.status, c.status, r.body)
		}
		var v any
		if err := json.Unmarshal(r.body, &v); err != nil {
			t.Fatalf("%s %s: %v: %s", c.method, c.path, err, r.body)
		}
		n := 0
		walkTimestamps(t, c.method+" "+c.path, "", v, &n)
		if n < 2 {
			t.Errorf("%s %s: %d timestamps in %s, want created_at and updated_at at least", c.method, c.path, n, r.body)
		}
		checked += n
	}
	t.Logf("%d timestamps checked", checked)
}

// walkTimestamps checks every member named *_at and every string that
// parses as an RFC 3339 time in v, counting them in n.
func walkTimestamps(t *testing.T, what, name string, v any, n *int) {
	t.Helper()
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			walkTimestamps(t, what, k, e, n)
		}
	case []any:
		for _, e := range x {
			walkTimestamps(t, what, name, e, n)
		}
	case string:
		if _, err := time.Parse(time.RFC3339Nano, x); err == nil || strings.HasSuffix(name, "_at") {
			*n++
			if !wireTimeRE.MatchString(x) {
				t.Errorf("%s: %s = %q, want %s", what, name, x, wireTimeRE)
			}
		}
	default:
		if strings.HasSuffix(name, "_at") && !(x == nil && nullableTimes[name]) {
			t.Errorf("%s: %s = %v, want a timestamp string", what, name, x)
		}
	}
}

// nullableTimes are the timestamps that are null until what they record
// happens (a listener's agent seen, a listener token used).
var nullableTimes = map[string]bool{"last_heartbeat_at": true, "last_used_at": true}
