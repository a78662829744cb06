package httphandler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploysim"
	"github.com/deployplane/deployplane/githubapp"
	"github.com/deployplane/deployplane/storemem"
)

// logServer is a server over a ControlPlane the test writes logs through,
// with the fixture's github deployment.
func logServer(t *testing.T) (*server, *controlplane.ControlPlane, fixture) {
	t.Helper()
	cp := controlplane.New(storemem.New(), &controlplane.Options{GitHubApp: stubApp{}, GitHubInstallStates: githubapp.NewStates(storemem.New(), nil)})
	s := newServerCP(t, cp, nil)
	return s, cp, newFixture(t, s)
}

type logAnswer struct {
	Logs []struct {
		ID        string `json:"id"`
		Timestamp string `json:"timestamp"`
		Level     string `json:"level"`
		Message   string `json:"message"`
	} `json:"logs"`
	NextOffset *string `json:"next_offset"`
}

func (a logAnswer) messages() []string {
	out := []string{}
	for _, l := range a.Logs {
		out = append(out, l.Message)
	}
	return out
}

// TestLogRoutes: every log route over a real server, its answer's exact
// shape, its filters, paging and errors.
func TestLogRoutes(t *testing.T) {
	s, cp, f := logServer(t)
	dep, rev := f.github.ID, *f.github.LatestRevisionID
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	var lines []controlplane.LogLine
	for i, m := range []string{"Cloning https://github.com/acme/agent", "Step 1/2 : FROM base", "pip: ERROR resolver failed", "warning: slow mirror", "Build failed"} {
		lvl := controlplane.LevelInfo
		switch i {
		case 2, 4:
			lvl = controlplane.LevelError
		case 3:
			lvl = controlplane.LevelWarning
		}
		lines = append(lines, controlplane.LogLine{Type: controlplane.LogBuild, Time: t0.Add(time.Duration(i) * time.Second), Level: lvl, Message: m})
	}
	lines = append(lines, controlplane.LogLine{Type: controlplane.LogDeploy, Time: t0, Message: "never deployed"})
	if err := cp.AppendLogs(context.Background(), tenantA, dep, rev, lines...); err != nil {
		t.Fatal(err)
	}
	get := "/v2/deployments/" + dep + "/revisions/" + rev + "/logs?"
	post := "/v1/projects/" + dep + "/revisions/" + rev + "/"

	// The exact wire shape.
	r := s.as(keyA, "GET", get+"type=build&limit=1", "")
	if r.status != 200 {
		t.Fatalf("GET logs: %d %s", r.status, r.body)
	}
	var one logAnswer
	if err := json.Unmarshal(r.body, &one); err != nil || one.NextOffset == nil {
		t.Fatalf("%v %s", err, r.body)
	}
	want := `{"logs":[{"id":"` + rev + `:build:1","timestamp":"2026-11-21T10:00:00.000000Z","level":"INFO",` +
		`"message":"Cloning https://github.com/acme/agent"}],"next_offset":"` + *one.NextOffset + `"}` + "\n"
	diff(t, "GET logs body", want, string(r.body))

	all := []string{"Cloning https://github.com/acme/agent", "Step 1/2 : FROM base", "pip: ERROR resolver failed", "warning: slow mirror", "Build failed"}
	tests := []struct {
		name, method, path, body string
		want                     []string
	}{
		{"get build", "GET", get + "type=build", "", all},
		{"get desc", "GET", get + "type=build&order=desc&limit=2", "", []string{"Build failed", "warning: slow mirror"}},
		{"get level", "GET", get + "type=build&level=error", "", []string{"pip: ERROR resolver failed", "Build failed"}},
		{"get query", "GET", get + "type=build&query=error", "", []string{"pip: ERROR resolver failed"}},
		{"get window", "GET", get + "type=build&start_time=" + url.QueryEscape("2026-11-21T10:00:01Z") + "&end_time=" +
			url.QueryEscape("2026-11-21T11:00:03+01:00"), "", []string{"Step 1/2 : FROM base", "pip: ERROR resolver failed"}},
		{"get deploy", "GET", get + "type=deploy", "", []string{"never deployed"}},
		{"post build_logs as the CLI on failure", "POST", post + "build_logs", `{"order": "desc", "limit": 30}`,
			[]string{"Build failed", "warning: slow mirror", "pip: ERROR resolver failed", "Step 1/2 : FROM base", "Cloning https://github.com/acme/agent"}},
		{"post build_logs as deploy logs does", "POST", post + "build_logs",
			`{"limit": 100, "order": "desc", "level": "WARNING", "query": "MIRROR", "start_time": "2026-11-21T10:00:00Z", "end_time": null}`,
			[]string{"warning: slow mirror"}},
		{"post build_logs without a body", "POST", post + "build_logs", "", all},
		{"post revision deploy_logs", "POST", post + "deploy_logs", `{"order": "asc", "limit": 50}`, []string{"never deployed"}},
		{"post project deploy_logs", "POST", "/v1/projects/" + dep + "/deploy_logs", `{"limit": 50, "order": "desc"}`, []string{"never deployed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := must[logAnswer](t, s, keyA, tt.method, tt.path, tt.body, 200)
			diff(t, "messages", tt.want, a.messages())
		})
	}

	// Walk a log two lines at a time, in both orders, over HTTP; the CLI's
	// way (POST with offset) and the hosted API's (GET) agree.
	for _, order := range []string{"asc", "desc"} {
		var got []string
		offset := ""
		for range 10 {
			var a logAnswer
			if offset == "" || order == "desc" {
				a = must[logAnswer](t, s, keyA, "GET", get+"type=build&limit=2&order="+order+"&offset="+url.QueryEscape(offset), "", 200)
			} else {
				a = must[logAnswer](t, s, keyA, "POST", post+"build_logs", `{"order": "asc", "limit": 2, "offset": "`+offset+`"}`, 200)
			}
			got = append(got, a.messages()...)
			if a.NextOffset == nil {
				break
			}
			offset = *a.NextOffset
		}
		if order == "desc" {
			for i, j := 0, len(got)-1; i < j; i, j = i+1, j-1 {
				got[i], got[j] = got[j], got[i]
			}
		}
		diff(t, order+" walk", all, got)
	}
}

// TestLogRouteErrors: 422 lists every problem at its loc; unknown ids are
// 404 with the usual sentences.
func TestLogRouteErrors(t *testing.T) {
	s, _, f := logServer(t)
	dep, rev := f.github.ID, *f.github.LatestRevisionID
	unknown := "0194c0de-0000-7000-8000-0000000000ff"
	tests := []struct {
		name, method, path, body string
		want                     []string // locs and types of a 422
		notFound                 string
	}{
		{"type missing", "GET", "/v2/deployments/" + dep + "/revisions/" + rev + "/logs", "", []string{"query.type: missing"}, ""},
		{"every query problem", "GET", "/v2/deployments/" + dep + "/revisions/" + rev + "/logs?type=run&order=up&limit=x&offset=zz&level=loud&start_time=now",
			"", []string{"query.limit: int_parsing", "query.type: literal_error", "query.order: literal_error", "query.offset: value_error",
				"query.level: literal_error", "query.start_time: value_error"}, ""},
		{"limit range", "GET", "/v2/deployments/" + dep + "/revisions/" + rev + "/logs?type=build&limit=1001", "", []string{"query.limit: less_than_equal"}, ""},
		{"path and query", "GET", "/v2/deployments/nope/revisions/" + rev + "/logs?type=build&limit=0", "",
			[]string{"path.deployment_id: uuid_parsing", "query.limit: greater_than_equal"}, ""},
		{"body types", "POST", "/v1/projects/" + dep + "/revisions/" + rev + "/build_logs", `{"limit": "50", "order": 1}`,
			[]string{"body.limit: int_type", "body.order: string_type"}, ""},
		{"body rules", "POST", "/v1/projects/" + dep + "/deploy_logs", `{"limit": 0, "order": "newest", "offset": "x"}`,
			[]string{"body.order: literal_error", "body.limit: greater_than_equal", "body.offset: value_error"}, ""},
		{"body and path", "POST", "/v1/projects/nope/revisions/" + rev + "/deploy_logs", `{"limit": 5000}`,
			[]string{"path.project_id: uuid_parsing", "body.limit: less_than_equal"}, ""},
		{"malformed json", "POST", "/v1/projects/" + dep + "/deploy_logs", `{"limit": `, []string{"body.limit: json_invalid"}, ""},
		{"unknown deployment", "GET", "/v2/deployments/" + unknown + "/revisions/" + rev + "/logs?type=build", "", nil, "Deployment ID " + unknown + " not found."},
		{"unknown revision", "GET", "/v2/deployments/" + dep + "/revisions/" + unknown + "/logs?type=build", "", nil, "Revision ID " + unknown + " not found."},
		{"revision of another deployment", "POST", "/v1/projects/" + dep + "/revisions/" + *f.docker.LatestRevisionID + "/build_logs", "{}", nil,
			"Revision ID " + *f.docker.LatestRevisionID + " not found."},
		{"unknown project", "POST", "/v1/projects/" + unknown + "/deploy_logs", "{}", nil, "Deployment ID " + unknown + " not found."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := s.as(keyA, tt.method, tt.path, tt.body)
			if tt.notFound != "" {
				if r.status != 404 || detail(t, r) != tt.notFound {
					t.Errorf("%d %s, want 404 %q", r.status, r.body, tt.notFound)
				}
				return
			}
			var got []string
			for _, p := range problems(t, r) {
				var parts []string
				for _, l := range p.Loc {
					parts = append(parts, fmt.Sprint(l))
				}
				got = append(got, strings.Join(parts, ".")+": "+p.Type)
			}
			diff(t, "problems", tt.want, got)
		})
	}
}

// TestFailedBuildLogsOverHTTP is the README's walk-through: a github
// revision fails while building under the simulation, and its build log,
// read with the hosted API's GET and with langgraph-cli's POST, ends with
// the failure; the revision's status_history shows where it went.
func TestFailedBuildLogsOverHTTP(t *testing.T) {
	s, cp, f := logServer(t)
	sim := deploysim.New(&deploysim.Options{Step: time.Microsecond, FailAt: controlplane.RevisionBuilding, FailMessage: "pip install failed"})
	for {
		ok, err := cp.Process(context.Background(), sim)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
	}
	dep, rev := f.github.ID, *f.github.LatestRevisionID
	r := must[controlplane.Revision](t, s, keyA, "GET", "/v2/deployments/"+dep+"/revisions/"+rev, "", 200)
	var statuses []controlplane.RevisionStatus
	for _, h := range r.StatusHistory {
		statuses = append(statuses, h.Status)
	}
	diff(t, "status_history", []controlplane.RevisionStatus{"CREATING", "QUEUED", "AWAITING_BUILD", "BUILDING", "BUILD_FAILED"}, statuses)
	a := must[logAnswer](t, s, keyA, "GET", "/v2/deployments/"+dep+"/revisions/"+rev+"/logs?type=build&order=desc&limit=1", "", 200)
	if len(a.Logs) != 1 || a.Logs[0].Level != "ERROR" || a.Logs[0].Message != "pip install failed" {
		t.Errorf("last build line %+v, want the failure at ERROR", a.Logs)
	}
	b := must[logAnswer](t, s, keyA, "POST", "/v1/projects/"+dep+"/revisions/"+rev+"/build_logs", `{"order": "desc", "limit": 30}`, 200)
	if len(b.Logs) < 4 || b.Logs[0].Message != "pip install failed" || !strings.HasPrefix(b.Logs[len(b.Logs)-1].Message, "[simulated] Waiting") {
		t.Errorf("build log as langgraph-cli reads it: %v", b.messages())
	}
}
