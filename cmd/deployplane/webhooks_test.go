package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestWebhooksSurviveKill: deliveries pending when the server is killed
// (kill -9: no shutdown at all) are made once it is started again on the
// same bbolt file; the receiver, deduping by webhook-id as receivers
// should, misses no event.
func TestWebhooksSurviveKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}
	const tenant = "00000000-0000-4000-8000-00000000b00c"
	secret := "whsec_" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{9}, 24))
	keys := filepath.Join(t.TempDir(), "keys.json")
	if err := os.WriteFile(keys, []byte(`[{"key": "k", "tenant_ids": ["`+tenant+`"]}]`), 0o600); err != nil {
		t.Fatal(err)
	}

	// The receiver: failing until told otherwise; it keeps the events
	// of the deliveries it accepted, by webhook-id.
	var (
		mu       sync.Mutex
		failing  = true
		requests int
		accepted = map[string]string{} // webhook-id -> "type deployment_id"
	)
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id, ts := r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp")
		key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
		m := hmac.New(sha256.New, key)
		fmt.Fprintf(m, "%s.%s.%s", id, ts, body)
		if want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil)); r.Header.Get("webhook-signature") != want {
			t.Errorf("delivery %s: signature %q, want %q", id, r.Header.Get("webhook-signature"), want)
		}
		var p struct {
			Type string `json:"type"`
			Data struct {
				DeploymentID string `json:"deployment_id"`
			} `json:"data"`
		}
		_ = json.Unmarshal(body, &p)
		mu.Lock()
		defer mu.Unlock()
		requests++
		if failing {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if prev, ok := accepted[id]; ok && prev != p.Type+" "+p.Data.DeploymentID {
			t.Errorf("webhook-id %s sent for %s and for %s", id, prev, p.Type+" "+p.Data.DeploymentID)
		}
		accepted[id] = p.Type + " " + p.Data.DeploymentID
	}))
	defer rc.Close()

	db := filepath.Join(t.TempDir(), "deployplane.db")
	args := []string{"-db", db, "-keys", keys, "-registry-addr", "off", "-sim-step", "10ms",
		"-egress-allow-hosts", "127.0.0.1", "-webhook-retries", strings.Repeat("100ms,", 200) + "100ms", "-webhook-lease", "1s"}
	env := processEnv(t.TempDir())
	p, url := startServerProc(t, nil, env, args...)
	call := func(url, method, path, body string, want int) []byte {
		t.Helper()
		req, err := http.NewRequest(method, url+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Api-Key", "k")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d, want %d: %s", method, path, resp.StatusCode, want, b)
		}
		return b
	}
	var wh struct{ ID string }
	_ = json.Unmarshal(call(url, "POST", "/v2/webhooks", `{"url": "`+rc.URL+`/hook", "secret": "`+secret+`",
		"events": ["deployment.created", "revision.deployed"]}`, 201), &wh)
	want := map[string]bool{}
	create := func(url, name string) string {
		var d struct{ ID string }
		_ = json.Unmarshal(call(url, "POST", "/v2/deployments", `{"name": "`+name+`", "source": "external_docker",
			"source_revision_config": {"image_uri": "registry.example.com/`+name+`:1"}}`, 201), &d)
		want["deployment.created "+d.ID], want["revision.deployed "+d.ID] = true, true
		return d.ID
	}
	var ids []string
	for i := range 3 {
		ids = append(ids, create(url, fmt.Sprintf("agent-%d", i)))
	}
	// Every event is a pending delivery, and the receiver has refused
	// some attempts already.
	deadline := time.Now().Add(60 * time.Second)
	for {
		var page struct {
			Resources []struct{ Status string }
		}
		_ = json.Unmarshal(call(url, "GET", "/v2/webhooks/"+wh.ID+"/deliveries", "", 200), &page)
		mu.Lock()
		n := requests
		mu.Unlock()
		pending := 0
		for _, d := range page.Resources {
			if d.Status == "pending" {
				pending++
			}
		}
		if pending == len(want) && n > len(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("deliveries %+v after %d requests, want %d pending", page.Resources, n, len(want))
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.kill(t) // SIGKILL

	mu.Lock()
	failing = false
	mu.Unlock()
	_, url = startServerProc(t, nil, env, args...)
	ids = append(ids, create(url, "after-restart"))
	deadline = time.Now().Add(60 * time.Second)
	for {
		mu.Lock()
		got := map[string]bool{}
		for _, ev := range accepted {
			if got[ev] {
				t.Errorf("%s accepted under two webhook-ids", ev)
			}
			got[ev] = true
		}
		mu.Unlock()
		missing := []string{}
		for ev := range want {
			if !got[ev] {
				missing = append(missing, ev)
			}
		}
		if len(missing) == 0 {
			if len(got) != len(want) {
				t.Fatalf("accepted %v, want %v", got, want)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the restart, never delivered: %v (deployments %v)", missing, ids)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The log says so.
	var page struct {
		Resources []struct {
			Status   string
			Attempts int
		}
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		_ = json.Unmarshal(call(url, "GET", "/v2/webhooks/"+wh.ID+"/deliveries", "", 200), &page)
		done := len(page.Resources) == len(want)
		for _, d := range page.Resources {
			done = done && d.Status == "succeeded"
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivery log %+v", page.Resources)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
