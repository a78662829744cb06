package main

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestSizeLimitsAnswerJSON: the server's limits of URL and headers are the
// handler's, answered as JSON with a detail, not net/http's plain-text 431
// (http.Server.MaxHeaderBytes is above the handler's limits).
func TestSizeLimitsAnswerJSON(t *testing.T) {
	url, _, _ := server(t, []string{"-db", filepath.Join(t.TempDir(), "db")}, map[string]string{"DEPLOYPLANE_API_KEY": "env-key"})
	for _, tt := range []struct {
		name    string
		path    string
		headers []string
		status  int
	}{
		{"200 KB query", "/v2/deployments?name_contains=" + strings.Repeat("a", 200<<10), nil, 414},
		{"100 KB header", "/v2/deployments", []string{"X-Huge", strings.Repeat("h", 100<<10)}, 431},
	} {
		req, err := http.NewRequest("GET", url+tt.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Api-Key", "env-key")
		for i := 0; i+1 < len(tt.headers); i += 2 {
			req.Header.Set(tt.headers[i], tt.headers[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var body struct {
			Detail string `json:"detail"`
		}
		if err := json.Unmarshal(b, &body); err != nil || resp.StatusCode != tt.status || body.Detail == "" {
			t.Errorf("%s: %d %.200q, want %d with a JSON detail", tt.name, resp.StatusCode, b, tt.status)
		}
	}
}
