package main

import (
	"testing"
)

// TestEgressAllowHosts: without -egress-allow-hosts a provider on loopback
// over http is refused at registration (the server would otherwise post
// code exchanges to its own machine on a tenant's behalf); with the
// provider's host allowed it is accepted, and other loopback ports are
// still refused.
func TestEgressAllowHosts(t *testing.T) {
	prov := newTinyProvider(t)
	host := prov.srv.Listener.Addr().String()
	body := func(base string) string {
		return `{"provider_id": "tiny", "name": "Tiny", "client_id": "cid", "auth_url": "` + base + `/authorize", "token_url": "` + base + `/token"}`
	}
	env := map[string]string{"DEPLOYPLANE_API_KEY": "k"}

	u, _ := start(t, []string{"-db", ":memory:"}, env)
	status, b := call(t, "POST", u+"/v2/auth/providers", "k", body(prov.srv.URL))
	if status != 422 || len(b["detail"].([]any)) != 2 {
		t.Errorf("http provider on loopback, no allowance: %d %v, want 422 at auth_url and token_url", status, b)
	}
	status, b = call(t, "POST", u+"/v2/auth/providers", "k", body("https://"+host))
	if status != 422 {
		t.Errorf("https provider on loopback, no allowance: %d %v, want 422", status, b)
	}

	u, _ = start(t, []string{"-db", ":memory:", "-egress-allow-hosts", " example.org, " + host}, env)
	if status, b := call(t, "POST", u+"/v2/auth/providers", "k", body(prov.srv.URL)); status != 200 {
		t.Errorf("allowed provider: %d %v, want 200", status, b)
	}
	if status, b := call(t, "POST", u+"/v2/auth/providers", "k", body("http://127.0.0.1:1")); status != 422 {
		t.Errorf("another loopback port: %d %v, want 422", status, b)
	}
}
