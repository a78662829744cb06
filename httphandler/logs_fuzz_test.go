package httphandler_test

import (
	"testing"
)

// FuzzLogQuery: any query of GET .../logs is answered 200, 404 or a
// well-formed 422, never a 500. (The revision is the deployment's id, not
// found after the query validates: the decoder is what is fuzzed.)
func FuzzLogQuery(f *testing.F) {
	for _, s := range []string{"", "type=build", "type=deploy&order=desc&limit=1000", "type=build&limit=0", "type=x&order=y",
		"type=build&offset=MWE3", "type=build&offset=MWQ%0D0", "type=build&level=warn&query=%C3%A9", "type=build&start_time=2026-11-21T10:00:00Z&end_time=2026",
		"type=build&type=deploy", "%zz"} {
		f.Add(s)
	}
	ft := newFuzzTarget(f)
	p := "/v2/deployments/" + ft.deploymentID + "/revisions/" + ft.deploymentID + "/logs"
	f.Fuzz(func(t *testing.T, q string) { ft.check(t, "GET", p, q, nil) })
}

// FuzzLogsBody: any body of langgraph-cli's POST .../deploy_logs.
func FuzzLogsBody(f *testing.F) {
	for _, s := range []string{``, `null`, `{}`, `[]`, `{"limit": 50, "order": "desc"}`, `{"limit": 1e400}`, `{"limit": -1, "order": null}`,
		`{"offset": "MWE3", "order": "desc"}`, `{"level": 5, "query": ["a"], "start_time": {}}`, `{"limit": 50, "limit": "x"}`} {
		f.Add([]byte(s))
	}
	ft := newFuzzTarget(f)
	p := "/v1/projects/" + ft.deploymentID + "/deploy_logs"
	f.Fuzz(func(t *testing.T, body []byte) { ft.check(t, "POST", p, "", body) })
}
