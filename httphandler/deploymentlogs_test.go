package httphandler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/deployplane/deployplane/controlplane"
)

type deploymentLogAnswer struct {
	Items []struct {
		ID        string `json:"id"`
		Timestamp string `json:"timestamp"`
		Level     string `json:"level"`
		Message   string `json:"message"`
	} `json:"items"`
	NextCursor *string `json:"next_cursor"`
}

// TestDeploymentLogsRoute: GET /v2/deployment-logs over a real server:
// its answer's exact shape, paging from cursor to cursor over the logs of
// every revision, its filters, and its refusals, each at its loc.
func TestDeploymentLogsRoute(t *testing.T) {
	s, cp, f := logServer(t)
	ctx := context.Background()
	dep, first := f.github.ID, *f.github.LatestRevisionID
	second := must[controlplane.Revision](t, s, keyA, "POST", "/v2/deployments/"+dep+"/revisions", "", 201).ID
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	for i, rev := range []string{first, second} {
		lines := []controlplane.LogLine{
			{Type: controlplane.LogBuild, Time: t0.Add(time.Duration(i) * time.Minute), Message: "Step 1/2 : FROM base"},
			{Type: controlplane.LogDeploy, Time: t0.Add(time.Duration(i)*time.Minute + time.Second), Message: "listening on 8000"},
			{Type: controlplane.LogDeploy, Time: t0.Add(time.Duration(i)*time.Minute + 2*time.Second), Level: controlplane.LevelError, Message: "connection refused"},
		}
		if err := cp.AppendLogs(ctx, tenantA, dep, rev, lines...); err != nil {
			t.Fatal(err)
		}
	}
	get := func(query string) reply { return s.as(keyA, "GET", "/v2/deployment-logs?"+query, "") }

	// The exact wire shape: the line as the revision log routes answer it.
	r := get("deployment_id=" + dep + "&log_type=BUILD&page_size=1")
	var one deploymentLogAnswer
	if err := json.Unmarshal(r.body, &one); r.status != 200 || err != nil || one.NextCursor == nil {
		t.Fatalf("%d %v %s", r.status, err, r.body)
	}
	want := `{"items":[{"id":"` + first + `:build:1","timestamp":"2026-11-21T10:00:00.000000Z","level":"INFO",` +
		`"message":"Step 1/2 : FROM base"}],"next_cursor":"` + *one.NextCursor + `"}` + "\n"
	diff(t, "the body", want, string(r.body))
	if strings.ContainsAny(*one.NextCursor, "+/=") {
		t.Errorf("next_cursor %q is not URL-safe", *one.NextCursor)
	}

	walk := func(query string) []string {
		t.Helper()
		var out []string
		cursor := ""
		for range 20 {
			q := query
			if cursor != "" {
				q += "&cursor=" + url.QueryEscape(cursor)
			}
			var a deploymentLogAnswer
			r := get(q)
			if r.status != 200 || json.Unmarshal(r.body, &a) != nil {
				t.Fatalf("GET ?%s: %d %s", q, r.status, r.body)
			}
			for _, it := range a.Items {
				out = append(out, it.ID[len(it.ID)-1:]+" "+it.Message)
			}
			if a.NextCursor == nil {
				return out
			}
			cursor = *a.NextCursor
		}
		t.Fatalf("GET ?%s: no end", query)
		return nil
	}
	for _, c := range []struct {
		name, query string
		want        []string
	}{
		{"every revision's deploy log, by default", "deployment_id=" + dep + "&page_size=1",
			[]string{"1 listening on 8000", "2 connection refused", "1 listening on 8000", "2 connection refused"}},
		{"desc", "deployment_id=" + dep + "&page_size=3&sort_order=desc",
			[]string{"2 connection refused", "1 listening on 8000", "2 connection refused", "1 listening on 8000"}},
		{"one revision", "deployment_id=" + dep + "&revision_id=" + second + "&log_type=deploy",
			[]string{"1 listening on 8000", "2 connection refused"}},
		{"level", "deployment_id=" + dep + "&level=ERROR", []string{"2 connection refused", "2 connection refused"}},
		{"query", "deployment_id=" + dep + "&query=LISTENING", []string{"1 listening on 8000", "1 listening on 8000"}},
		{"time window", "deployment_id=" + dep + "&start_time=2026-11-21T10:01:00Z&end_time=2026-11-21T10:01:02Z",
			[]string{"1 listening on 8000"}},
		{"the build log", "deployment_id=" + dep + "&log_type=BUILD", []string{"1 Step 1/2 : FROM base", "1 Step 1/2 : FROM base"}},
	} {
		diff(t, c.name, c.want, walk(c.query))
	}

	// Refusals, each at its loc.
	for _, c := range []struct {
		name, query string
		want        []string
	}{
		{"no deployment_id", "", []string{"query.deployment_id: missing"}},
		{"not a uuid", "deployment_id=agent&revision_id=latest", []string{"query.deployment_id: uuid_parsing", "query.revision_id: uuid_parsing"}},
		{"page_size", "deployment_id=" + dep + "&page_size=101", []string{"query.page_size: less_than_equal"}},
		{"page_size not a number, with the rest", "deployment_id=" + dep + "&page_size=ten&log_type=RUNTIME&sort_order=up",
			[]string{"query.page_size: int_parsing", "query.log_type: literal_error", "query.sort_order: literal_error"}},
		{"cursor", "deployment_id=" + dep + "&cursor=abc", []string{"query.cursor: value_error"}},
		{"cursor of another order", "deployment_id=" + dep + "&log_type=build&sort_order=desc&cursor=" + url.QueryEscape(*one.NextCursor),
			[]string{"query.cursor: value_error"}},
		{"cursor of another log", "deployment_id=" + dep + "&cursor=" + url.QueryEscape(*one.NextCursor), []string{"query.cursor: value_error"}},
		{"level", "deployment_id=" + dep + "&level=LOUD", []string{"query.level: literal_error"}},
	} {
		diff(t, c.name, slices.Sorted(slices.Values(c.want)), locTypes(problems(t, get(c.query))))
	}
	// Not found: an unknown deployment or revision; tenant B asking for A's
	// deployment, with A's cursor or without.
	for _, c := range []struct {
		key, query, detail string
	}{
		{keyA, "deployment_id=00000000-0000-7000-8000-0000000000ff", "Deployment ID 00000000-0000-7000-8000-0000000000ff not found."},
		{keyA, "deployment_id=" + dep + "&revision_id=00000000-0000-7000-8000-0000000000ff", "Revision ID 00000000-0000-7000-8000-0000000000ff not found."},
		{keyB, "deployment_id=" + dep, "Deployment ID " + dep + " not found."},
	} {
		r := s.as(c.key, "GET", "/v2/deployment-logs?"+c.query, "")
		if r.status != 404 || detail(t, r) != c.detail {
			t.Errorf("GET ?%s: %d %s, want 404 %s", c.query, r.status, r.body, c.detail)
		}
	}
	r = s.as(keyB, "GET", "/v2/deployment-logs?deployment_id="+dep+"&log_type=BUILD&cursor="+url.QueryEscape(*one.NextCursor), "")
	diff(t, "tenant B with A's cursor", []string{"query.cursor: value_error"}, locTypes(problems(t, r)))
}

// TestFreeCountRoute: GET /v2/deployments/free-count answers {"count": N},
// the tenant's dev_free deployments; the path is no deployment id.
func TestFreeCountRoute(t *testing.T) {
	s := newServer(t, nil)
	f := newFixture(t, s) // a github deployment of type prod
	r := s.as(keyA, "GET", "/v2/deployments/free-count", "")
	diff(t, "no free deployment", "200 {\"count\":0}\n", fmt.Sprint(r.status)+" "+string(r.body))
	for _, name := range []string{"free-1", "free-2"} {
		must[controlplane.Deployment](t, s, keyA, "POST", "/v2/deployments",
			`{"name": "`+name+`", "source": "internal_docker", "source_config": {"deployment_type": "dev_free"}, "source_revision_config": {}}`, 201)
	}
	must[controlplane.Deployment](t, s, keyA, "POST", "/v2/deployments",
		`{"name": "dev", "source": "internal_docker", "source_config": {"deployment_type": "dev"}, "source_revision_config": {}}`, 201)
	must[controlplane.Deployment](t, s, keyB, "POST", "/v2/deployments",
		`{"name": "free-b", "source": "internal_docker", "source_config": {"deployment_type": "dev_free"}, "source_revision_config": {}}`, 201)
	diff(t, "tenant A", "200 {\"count\":2}\n", func() string {
		r := s.as(keyA, "GET", "/v2/deployments/free-count", "")
		return fmt.Sprint(r.status) + " " + string(r.body)
	}())
	diff(t, "tenant B", "200 {\"count\":1}\n", func() string {
		r := s.as(keyB, "GET", "/v2/deployments/free-count", "")
		return fmt.Sprint(r.status) + " " + string(r.body)
	}())
	// The deployment routes still take ids beside it.
	if r := s.as(keyA, "GET", "/v2/deployments/"+f.github.ID, ""); r.status != 200 {
		t.Errorf("GET a deployment: %d %s", r.status, r.body)
	}
	for _, m := range []string{"PATCH", "DELETE", "POST"} {
		if r := s.as(keyA, m, "/v2/deployments/free-count", "{}"); r.status != 405 || r.header.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s /v2/deployments/free-count: %d Allow %q, want 405", m, r.status, r.header.Get("Allow"))
		}
	}
}

// FuzzDeploymentLogsQuery: any query of GET /v2/deployment-logs is
// answered 200, 404 or a well-formed 422, never a 500.
func FuzzDeploymentLogsQuery(f *testing.F) {
	ft := newFuzzTarget(f)
	d := "deployment_id=" + ft.deploymentID
	for _, s := range []string{"", d, d + "&log_type=BUILD&sort_order=desc&page_size=100", d + "&page_size=0&log_type=x&sort_order=y",
		d + "&revision_id=" + ft.deploymentID, d + "&cursor=AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", d + "&cursor=%zz",
		d + "&level=warn&query=%C3%A9", d + "&start_time=2026-11-21T10:00:00Z&end_time=2026", "deployment_id=x&deployment_id=" + ft.deploymentID,
		"%zz", d + "&run_id=r"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) { ft.check(t, "GET", "/v2/deployment-logs", q, nil) })
}
