package main

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// The dashboard is served under /ui/ unless -ui=false, with its sessions
// in the server's store.
func TestDashboardFlag(t *testing.T) {
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, c := range []struct {
		args []string
		want int
	}{
		{nil, http.StatusOK},
		{[]string{"-ui=false"}, http.StatusNotFound},
	} {
		db := filepath.Join(t.TempDir(), "db")
		url, _, _ := server(t, append([]string{"-db", db}, c.args...), map[string]string{"DEPLOYPLANE_API_KEY": "env-key"})
		resp, err := noRedirect.Get(url + "/ui/signin")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%v: GET /ui/signin answered %d, want %d", c.args, resp.StatusCode, c.want)
		}
		if c.want == http.StatusOK && !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			t.Errorf("the sign-in page is %s", resp.Header.Get("Content-Type"))
		}
	}
}
