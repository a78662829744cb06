package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// tinyProvider is an OAuth provider on an httptest.Server: /authorize
// redirects back with a code, /token exchanges it after checking the client
// secret and the PKCE verifier. It keeps every secret it sees.
type tinyProvider struct {
	srv    *httptest.Server
	secret string

	mu         sync.Mutex
	challenges map[string]string // code -> PKCE challenge
	seen       []string          // states, codes, verifiers, tokens
}

func newTinyProvider(t *testing.T) *tinyProvider {
	p := &tinyProvider{secret: "client-secret-" + rand.Text(), challenges: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		code := "code-" + rand.Text()
		p.mu.Lock()
		p.challenges[code] = q.Get("code_challenge")
		p.seen = append(p.seen, code, q.Get("state"))
		p.mu.Unlock()
		back, _ := url.Parse(q.Get("redirect_uri"))
		back.RawQuery = url.Values{"code": {code}, "state": {q.Get("state")}}.Encode()
		http.Redirect(w, r, back.String(), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		_, secret, ok := r.BasicAuth()
		if !ok {
			secret = r.PostForm.Get("client_secret")
		}
		secret, _ = url.QueryUnescape(secret)
		v := r.PostForm.Get("code_verifier")
		sum := sha256.Sum256([]byte(v))
		p.mu.Lock()
		defer p.mu.Unlock()
		challenge, known := p.challenges[r.PostForm.Get("code")]
		delete(p.challenges, r.PostForm.Get("code"))
		if secret != p.secret || !known || base64.RawURLEncoding.EncodeToString(sum[:]) != challenge {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error": "invalid_grant"}`)
			return
		}
		at, rt := "at-"+rand.Text(), "rt-"+rand.Text()
		p.seen = append(p.seen, v, at, rt)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": at, "refresh_token": rt, "token_type": "Bearer", "expires_in": 3600})
	})
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	return p
}

func (p *tinyProvider) secrets() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string{p.secret}, p.seen...)
}

// start runs the command in-process and returns its URL and a function
// that stops it (and returns its log).
func start(t *testing.T, args []string, env map[string]string) (string, func() string) {
	t.Helper()
	return startHooked(t, testHooks{}, args, env)
}

// startHooked is start with hooks that observe the server.
func startHooked(t *testing.T, hooks testHooks, args []string, env map[string]string) (string, func() string) {
	t.Helper()
	ctx, cancel := context.WithCancel(withTestHooks(context.Background(), hooks))
	stderr := newWatcher()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"-addr", "127.0.0.1:0"}, args...), func(k string) string { return env[k] }, io.Discard, stderr)
	}()
	var u string
	select {
	case u = <-stderr.addr:
	case err := <-done:
		cancel()
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	stopped := false
	stop := func() string {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("run: %v", err)
			}
		}
		return stderr.String()
	}
	t.Cleanup(func() { stop() })
	return u, stop
}

// TestOAuthKeyFileAndRestart: without a configured secret key the first
// start creates <db>.secret-key (0600, 64 hex digits); an OAuth flow runs
// end to end through the server (the default public URL is the listening
// address); after a restart the same key file is reused, so the stored
// token still decrypts and authenticate answers completed with it. No
// code, state, verifier, token or client secret reaches the log.
func TestOAuthKeyFileAndRestart(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "deployplane.db")
	keyPath := db + ".secret-key"
	env := map[string]string{"DEPLOYPLANE_API_KEY": "k"}
	prov := newTinyProvider(t)

	u, stop := start(t, []string{"-db", db, "-egress-allow-hosts", prov.srv.Listener.Addr().String()}, env)
	info, err := os.Stat(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", info.Mode().Perm())
	}
	first, err := os.ReadFile(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if k, err := hex.DecodeString(strings.TrimSpace(string(first))); err != nil || len(k) != 32 {
		t.Errorf("key file holds %d bytes of %q, want 64 hex digits", len(first), "...")
	}

	status, _ := call(t, "POST", u+"/v2/auth/providers", "k", `{"provider_id": "tiny", "name": "Tiny", "client_id": "cid",
		"client_secret": "`+prov.secret+`", "auth_url": "`+prov.srv.URL+`/authorize", "token_url": "`+prov.srv.URL+`/token", "uses_pkce": true}`)
	if status != 200 {
		t.Fatalf("create provider: %d", status)
	}
	status, a := call(t, "POST", u+"/v2/auth/authenticate", "k", `{"user_id": "user-1", "provider": "tiny", "scopes": ["read"]}`)
	if status != 200 || a["status"] != "pending" {
		t.Fatalf("authenticate: %d %v", status, a)
	}
	authURL, _ := url.Parse(a["url"].(string))
	if got, want := authURL.Query().Get("redirect_uri"), u+"/v2/auth/callback/tiny"; got != want {
		t.Errorf("redirect_uri %s, want %s", got, want)
	}
	resp, err := http.Get(a["url"].(string)) // the browser: provider, then the callback, no API key
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), "You can close this window") {
		t.Fatalf("callback page: %d %s", resp.StatusCode, page)
	}
	status, w := call(t, "GET", u+"/v2/auth/wait/"+a["auth_id"].(string)+"?timeout=5", "k", "")
	if status != 200 || w["status"] != "completed" || w["token"] == nil {
		t.Fatalf("wait: %d %v", status, w)
	}
	token := w["token"].(string)
	logs := stop()

	u, stop = start(t, []string{"-db", db, "-egress-allow-hosts", prov.srv.Listener.Addr().String()}, env)
	again, err := os.ReadFile(keyPath)
	if err != nil || !bytes.Equal(first, again) {
		t.Errorf("the key file changed across the restart (%v)", err)
	}
	if info, err := os.Stat(keyPath); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("key file after the restart: %v %v", info, err)
	}
	status, got := call(t, "POST", u+"/v2/auth/authenticate", "k", `{"user_id": "user-1", "provider": "tiny", "scopes": ["read"]}`)
	want := map[string]any{"status": "completed", "token": token, "url": nil, "auth_id": nil}
	if d := cmp.Diff(want, got); status != 200 || d != "" {
		t.Errorf("authenticate after the restart: %d (-want +got):\n%s", status, d)
	}
	logs += stop()

	if !strings.Contains(logs, "msg=request method=GET path=/v2/auth/callback/tiny status=200") {
		t.Errorf("no request record of the callback:\n%s", logs)
	}
	for _, secret := range append(prov.secrets(), strings.TrimSpace(string(first))) {
		if strings.Contains(logs, secret) {
			t.Errorf("the log holds the secret %q:\n%s", secret, logs)
		}
	}
}

// TestSecretKeySources: DEPLOYPLANE_SECRET_KEY (hex or base64) and
// -secret-key-file are used as given and create no key file; malformed
// keys, or both sources at once, stop the start; -db :memory: writes no
// key anywhere.
func TestSecretKeySources(t *testing.T) {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		args []string
		env  string
	}{
		"env hex":    {env: hex.EncodeToString(key)},
		"env base64": {env: base64.RawURLEncoding.EncodeToString(key)},
		"file":       {args: []string{"-secret-key-file", keyFile}},
	} {
		db := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".db")
		u, stop := start(t, append([]string{"-db", db}, c.args...), map[string]string{"DEPLOYPLANE_API_KEY": "k", "DEPLOYPLANE_SECRET_KEY": c.env})
		if status, b := call(t, "GET", u+"/v2/auth/providers/none", "k", ""); status != 404 || b["detail"] != "OAuth provider none not found." {
			t.Errorf("%s: the OAuth helpers are not served: %d %v", name, status, b)
		}
		logs := stop()
		if _, err := os.Stat(db + ".secret-key"); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: a key file was generated although a key was given (%v)", name, err)
		}
		if strings.Contains(logs, hex.EncodeToString(key)) || strings.Contains(logs, base64.RawURLEncoding.EncodeToString(key)[:20]) {
			t.Errorf("%s: the log holds the key:\n%s", name, logs)
		}
	}

	before, _ := os.ReadDir(dir)
	u, stop := start(t, []string{"-db", ":memory:"}, map[string]string{"DEPLOYPLANE_API_KEY": "k"})
	if status, b := call(t, "GET", u+"/v2/auth/providers/none", "k", ""); status != 404 || b["detail"] != "OAuth provider none not found." {
		t.Errorf(":memory:: the OAuth helpers are not served: %d %v", status, b)
	}
	if logs := stop(); !strings.Contains(logs, "ephemeral") {
		t.Errorf(":memory: does not say its key is ephemeral:\n%s", logs)
	}
	if after, _ := os.ReadDir(dir); len(after) != len(before) {
		t.Errorf(":memory: wrote files: %d -> %d", len(before), len(after))
	}
	cwd, _ := os.Getwd()
	if _, err := os.Stat(filepath.Join(cwd, ":memory:.secret-key")); !errors.Is(err, os.ErrNotExist) {
		t.Error(":memory: wrote a key file in the working directory")
	}

	bad := filepath.Join(dir, "bad")
	_ = os.WriteFile(bad, []byte("not a key"), 0o600)
	_ = os.WriteFile(filepath.Join(dir, "garbled.db.secret-key"), []byte("0123"), 0o600)
	for name, c := range map[string]struct {
		args []string
		env  string
		want error
	}{
		"env too short":        {env: "abcd"},
		"file not a key":       {args: []string{"-secret-key-file", bad}},
		"missing file":         {args: []string{"-secret-key-file", filepath.Join(dir, "missing")}},
		"env and file":         {args: []string{"-secret-key-file", keyFile}, env: hex.EncodeToString(key), want: errUsage},
		"garbled key file":     {args: []string{"-db", filepath.Join(dir, "garbled.db")}},
		"public URL not http":  {args: []string{"-public-url", "ftp://example.com"}},
		"public URL has query": {args: []string{"-public-url", "https://example.com/?a=b"}},
		"bad egress host":      {args: []string{"-egress-allow-hosts", "127.0.0.1,http://x"}},
	} {
		args := append([]string{"-addr", "127.0.0.1:0", "-db", ":memory:"}, c.args...)
		err := run(context.Background(), args, func(k string) string {
			return map[string]string{"DEPLOYPLANE_API_KEY": "k", "DEPLOYPLANE_SECRET_KEY": c.env}[k]
		}, io.Discard, io.Discard)
		if err == nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: run = %v", name, err)
		}
		if err != nil && (strings.Contains(err.Error(), hex.EncodeToString(key)) || strings.Contains(err.Error(), "not a key")) {
			t.Errorf("%s: the error quotes the key: %v", name, err)
		}
	}
}

func TestParseSecretKey(t *testing.T) {
	key := bytes.Repeat([]byte{0xfb, 0xff, 0x01}, 11)[:32]
	for _, ok := range []string{
		hex.EncodeToString(key), strings.ToUpper(hex.EncodeToString(key)), " " + hex.EncodeToString(key) + "\n",
		base64.StdEncoding.EncodeToString(key), base64.RawStdEncoding.EncodeToString(key),
		base64.URLEncoding.EncodeToString(key), base64.RawURLEncoding.EncodeToString(key) + "\r\n",
	} {
		got, err := parseSecretKey(ok)
		if err != nil || !bytes.Equal(got, key) {
			t.Errorf("parseSecretKey(%q) = %x, %v", ok, got, err)
		}
	}
	for _, bad := range []string{"", "00", hex.EncodeToString(key)[:62], hex.EncodeToString(key) + "00",
		base64.StdEncoding.EncodeToString(key[:31]), base64.StdEncoding.EncodeToString(append(key, 0)), strings.Repeat("z", 64)} {
		if got, err := parseSecretKey(bad); err == nil {
			t.Errorf("parseSecretKey(%q) = %x, want an error", bad, got)
		}
	}
}

func TestDefaultPublicURL(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:8124": "http://127.0.0.1:8124",
		"0.0.0.0:8124":   "http://127.0.0.1:8124",
		"[::]:9000":      "http://127.0.0.1:9000",
		"[::1]:9000":     "http://[::1]:9000",
		"10.1.2.3:80":    "http://10.1.2.3:80",
	} {
		a, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := defaultPublicURL(a); got != want {
			t.Errorf("defaultPublicURL(%s) = %s, want %s", addr, got, want)
		}
	}
}

// TestShutdownEndsLongPolls: a long poll in flight when the server is told
// to stop answers 503 at once instead of holding the shutdown (which would
// end it at the 60 s shutdown timeout by closing its connection, without
// an answer).
func TestShutdownEndsLongPolls(t *testing.T) {
	prov := newTinyProvider(t)
	polling := make(chan struct{}, 1)
	u, stop := startHooked(t, testHooks{longPoll: func() { polling <- struct{}{} }},
		[]string{"-db", ":memory:", "-shutdown-timeout", "60s", "-egress-allow-hosts", prov.srv.Listener.Addr().String()},
		map[string]string{"DEPLOYPLANE_API_KEY": "k"})
	status, _ := call(t, "POST", u+"/v2/auth/providers", "k", `{"provider_id": "tiny", "name": "Tiny", "client_id": "cid",
		"auth_url": "`+prov.srv.URL+`/authorize", "token_url": "`+prov.srv.URL+`/token"}`)
	if status != 200 {
		t.Fatalf("create provider: %d", status)
	}
	_, a := call(t, "POST", u+"/v2/auth/authenticate", "k", `{"user_id": "u", "provider": "tiny", "scopes": []}`)
	got := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("GET", u+"/v2/auth/wait/"+a["auth_id"].(string)+"?timeout=300", nil)
		req.Header.Set("X-Api-Key", "k")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- 0
			return
		}
		resp.Body.Close()
		got <- resp.StatusCode
	}()
	<-polling // the poll is in the server's handler
	logs := stop()
	if s := <-got; s != http.StatusServiceUnavailable {
		t.Errorf("the long poll answered %d, want 503\n%s", s, logs)
	}
}
