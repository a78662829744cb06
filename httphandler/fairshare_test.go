package httphandler_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/dashboard"
	"github.com/deployplane/deployplane/githubapp"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/storemem"
)

// The fairness tests: what one client that holds its requests open costs
// the others. Their clients stall on purpose, over real connections.

// stalled is a request sent over its own connection whose body stops
// after its first byte.
type stalled struct {
	conn   net.Conn
	local  string        // the connection's address on the client's side (the server's RemoteAddr)
	done   chan struct{} // closed once the server answered or closed the connection
	status int           // the answer's status, once done; 0: closed without one
}

// stall sends the head of a request with a body of length bytes, and one
// byte of that body, then nothing; headers are name, value pairs.
func stall(t *testing.T, base, method, path string, length int, headers ...string) *stalled {
	t.Helper()
	host := strings.TrimPrefix(base, "http://")
	c, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", method, path, host, length)
	for i := 0; i+1 < len(headers); i += 2 {
		fmt.Fprintf(&b, "%s: %s\r\n", headers[i], headers[i+1])
	}
	b.WriteString("\r\nx")
	if _, err := io.WriteString(c, b.String()); err != nil {
		t.Fatal(err)
	}
	st := &stalled{conn: c, local: c.LocalAddr().String(), done: make(chan struct{})}
	go func() {
		defer close(st.done)
		if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
			st.status = resp.StatusCode
			resp.Body.Close()
		}
	}()
	t.Cleanup(func() {
		c.Close()
		<-st.done
	})
	return st
}

// answered reports whether the server has answered (or closed) st.
func (st *stalled) answered() bool {
	select {
	case <-st.done:
		return true
	default:
		return false
	}
}

// bodyWatch records, by client address, the requests whose body the
// handler has started to read, and those it has answered.
type bodyWatch struct {
	mu   sync.Mutex
	seen map[string]bool
}

// install wraps the server's handler (a serverSetup.http function).
func (bw *bodyWatch) install(srv *http.Server) {
	next := srv.Handler
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer bw.mark(r.RemoteAddr)
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = &watchedBody{ReadCloser: r.Body, read: func() { bw.mark(r.RemoteAddr) }}
		}
		next.ServeHTTP(w, r)
	})
}

func (bw *bodyWatch) mark(addr string) {
	bw.mu.Lock()
	defer bw.mu.Unlock()
	if bw.seen == nil {
		bw.seen = map[string]bool{}
	}
	bw.seen[addr] = true
}

// reached reports whether the handler has started to read the body of
// the request from addr, or has answered it.
func (bw *bodyWatch) reached(addr string) bool {
	bw.mu.Lock()
	defer bw.mu.Unlock()
	return bw.seen[addr]
}

// watchedBody calls read as each Read begins.
type watchedBody struct {
	io.ReadCloser
	read func()
}

func (b *watchedBody) Read(p []byte) (int, error) {
	b.read()
	return b.ReadCloser.Read(p)
}

// settled waits until the handler is reading the body of every request of
// sts, or has answered it (net/http may then wait for the rest of the
// body before it sends the answer).
func settled(t *testing.T, bw *bodyWatch, sts []*stalled) {
	t.Helper()
	eventually(t, "the stalled requests reach the handler", func() (bool, string) {
		n := 0
		for _, st := range sts {
			if bw.reached(st.local) {
				n++
			}
		}
		return n == len(sts), fmt.Sprintf("%d of %d", n, len(sts))
	})
}

// within gets path with key (none when empty) on a new connection, and
// fails the test unless the answer is 200 within a second.
func within(t *testing.T, s *server, key, path string) {
	t.Helper()
	req, err := http.NewRequest("GET", s.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("X-Api-Key", key)
	}
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s beside the stalled requests: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s beside the stalled requests: %d %s", path, resp.StatusCode, b)
	}
}

// uploadURLs issues n upload URLs of a new internal_source deployment of
// key's tenant, and returns their paths and queries.
func uploadURLs(t *testing.T, s *server, key string, n int) []string {
	t.Helper()
	d := must[controlplane.Deployment](t, s, key, "POST", "/v2/deployments",
		`{"name": "lg-src", "source": "internal_source", "source_revision_config": {}}`, 201)
	var out []string
	for range n {
		u := must[struct {
			UploadURL string `json:"upload_url"`
		}](t, s, key, "POST", "/v2/deployments/"+d.ID+"/upload-url", "", 200)
		pu, err := url.Parse(u.UploadURL)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, pu.RequestURI())
	}
	return out
}

// TestSlowBodiesHoldNoPlace: clients that send the head of a request and
// one byte of its body, then nothing, on the dashboard's sign-in, the
// GitHub webhook (with a signature header) and 64 upload PUTs of one
// tenant, take no place of the in-flight cap while the server waits for
// their bodies: another tenant's requests, and the dashboard's pages, are
// answered meanwhile.
func TestSlowBodiesHoldNoPlace(t *testing.T) {
	cp := controlplane.New(storemem.New(), &controlplane.Options{GitHubApp: stubApp{}, GitHubInstallStates: githubapp.NewStates(storemem.New(), nil)})
	opts := langgraphDeployOptions(t, cp, &httphandler.Options{
		Load:      &httphandler.LoadLimits{MaxInFlight: 64},
		Dashboard: &dashboard.Options{Sessions: storemem.New()},
	})
	var bw bodyWatch
	s := newServerWith(t, serverSetup{cp: cp, opts: opts, http: bw.install})
	puts := uploadURLs(t, s, keyA, 64)

	form := []string{"Content-Type", "application/x-www-form-urlencoded"}
	var sts, signins []*stalled
	for range 70 {
		signins = append(signins, stall(t, s.url, "POST", "/ui/signin", 100000, form...))
	}
	for range 10 { // within the body limit of public routes
		sts = append(sts, stall(t, s.url, "POST", "/ui/signin", 1000, form...))
	}
	for range 70 {
		sts = append(sts, stall(t, s.url, "POST", "/v1/integrations/github/webhook", 100000,
			"X-Hub-Signature-256", "sha256=00", "X-GitHub-Event", "push", "Content-Type", "application/json"))
	}
	for _, p := range puts {
		sts = append(sts, stall(t, s.url, "PUT", p, 1000, "Content-Type", "application/gzip"))
	}
	sts = append(sts, signins...)
	settled(t, &bw, sts)

	within(t, s, keyB, "/v2/deployments")
	within(t, s, keyA, "/v2/deployments")
	within(t, s, "", "/ui/signin")
	within(t, s, "", "/openapi.json")

	// A body larger than the limit of public routes is refused from its
	// Content-Length, before any of it is read.
	for i, st := range signins {
		select {
		case <-st.done:
		case <-time.After(pollDeadline):
			t.Fatalf("sign-in %d with a body of 100000 bytes: no answer", i)
		}
		if st.status != http.StatusRequestEntityTooLarge {
			t.Fatalf("sign-in %d with a body of 100000 bytes: %d, want 413", i, st.status)
		}
	}
}

// TestLongPollShares: a tenant that holds as many event streams as it
// may still leaves long polls to the others: tenant B's stream and
// ?wait=terminal are served, tenant A's next ones are refused as its
// share, until one of its streams ends.
func TestLongPollShares(t *testing.T) {
	for _, c := range []struct {
		name  string
		load  *httphandler.LoadLimits
		share int
	}{
		{"16 long polls", &httphandler.LoadLimits{MaxLongPolls: 16}, 8}, // the least default share
		{"defaults", nil, httphandler.DefaultMaxLongPolls / 4},
		{"a set share", &httphandler.LoadLimits{MaxLongPolls: 16, MaxLongPollsPerTenant: 3}, 3},
	} {
		t.Run(c.name, func(t *testing.T) { longPollShares(t, c.load, c.share) })
	}
}

func longPollShares(t *testing.T, load *httphandler.LoadLimits, share int) {
	s := newServer(t, &httphandler.Options{Load: load})
	dA := must[controlplane.Deployment](t, s, keyA, "POST", "/v2/deployments", dockerBody("agent-a"), 201)
	dB := must[controlplane.Deployment](t, s, keyB, "POST", "/v2/deployments", dockerBody("agent-b"), 201)
	waitA := "/v2/deployments/" + dA.ID + "/revisions/" + *dA.LatestRevisionID + "?wait=terminal&timeout=0"
	waitB := "/v2/deployments/" + dB.ID + "/revisions/" + *dB.LatestRevisionID + "?wait=terminal&timeout=0"

	// Tenant A opens streams until it is refused.
	var streams []*sseStream
	for {
		st, r := tryStream(t, s, keyA, "/v2/events")
		if st == nil {
			if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") != "1" {
				t.Fatalf("tenant A's stream %d: %d %s", len(streams)+1, r.status, r.body)
			}
			if d := detail(t, r); !strings.Contains(d, "this workspace") || !strings.Contains(d, "long polls") {
				t.Errorf("the refusal of tenant A's stream %d: %q", len(streams)+1, d)
			}
			break
		}
		streams = append(streams, st)
		if len(streams) > share {
			t.Fatalf("tenant A holds %d long polls", len(streams))
		}
	}
	diff(t, "streams tenant A holds", share, len(streams))
	if r := s.as(keyA, "GET", waitA, ""); r.status != http.StatusServiceUnavailable {
		t.Errorf("tenant A's wait beside its streams: %d %s", r.status, r.body)
	}

	// Tenant B is served.
	b := s.stream(t, keyB, "/v2/events")
	must[controlplane.Revision](t, s, keyB, "GET", waitB, "", 200)
	b.close()

	// Once one of A's streams ends, A may open another.
	streams[0].close()
	eventually(t, "tenant A's closed stream gives its place back", func() (bool, string) {
		r := s.as(keyA, "GET", waitA, "")
		return r.status == http.StatusOK, fmt.Sprint(r.status)
	})
}

// tryStream opens an event stream: the stream, or the answer when it is
// not one.
func tryStream(t *testing.T, s *server, key, path string) (*sseStream, reply) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), streamDeadline)
	req, err := http.NewRequestWithContext(ctx, "GET", s.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Api-Key", key)
	resp, err := s.client.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		defer cancel()
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return nil, reply{status: resp.StatusCode, header: resp.Header, body: b}
	}
	st := &sseStream{t: t, resp: resp, rd: bufio.NewReader(resp.Body), cancel: cancel}
	t.Cleanup(st.close)
	return st, reply{}
}

// blockingRegistry is a testRegistry whose URL waits until release is
// closed, announcing each call on entered: a push-token request holds its
// place until the test lets it go.
type blockingRegistry struct {
	*testRegistry
	entered chan struct{}
	release chan struct{}
}

func (b *blockingRegistry) URL(deploymentID string) string {
	b.entered <- struct{}{}
	<-b.release
	return b.testRegistry.URL(deploymentID)
}

// TestInFlightShares: a tenant whose requests fill its share of the
// in-flight cap is refused more, and another tenant is served.
func TestInFlightShares(t *testing.T) {
	for _, c := range []struct {
		name  string
		load  *httphandler.LoadLimits
		share int
	}{
		{"16 places", &httphandler.LoadLimits{MaxInFlight: 16}, 8}, // the least default share
		{"defaults", nil, httphandler.DefaultMaxInFlight() / 2},
		{"a set share", &httphandler.LoadLimits{MaxInFlight: 16, MaxInFlightPerTenant: 3}, 3},
	} {
		t.Run(c.name, func(t *testing.T) { inFlightShares(t, c.load, c.share) })
	}
}

func inFlightShares(t *testing.T, load *httphandler.LoadLimits, share int) {
	cp := controlplane.New(storemem.New(), nil)
	reg := &blockingRegistry{testRegistry: registryAt(cp, "127.0.0.1:5000"), entered: make(chan struct{}), release: make(chan struct{})}
	s := newServerCP(t, cp, &httphandler.Options{Registry: reg, Load: load})
	img := must[controlplane.Deployment](t, s, keyA, "POST", "/v2/deployments",
		`{"name": "lg-docker", "source": "internal_docker", "source_config": {"deployment_type": "dev"}, "source_revision_config": {}}`, 201)
	var once sync.Once
	let := func() { once.Do(func() { close(reg.release) }) }
	t.Cleanup(let)

	// Tenant A's requests, held, until one is refused.
	held := make(chan reply, 2*share)
	refused := make(chan reply, 1)
	n := 0
	for n < 2*share {
		go func() {
			r := s.as(keyA, "POST", "/v2/deployments/"+img.ID+"/push-token", "")
			if r.status == http.StatusServiceUnavailable {
				refused <- r
				return
			}
			held <- r
		}()
		select {
		case <-reg.entered:
			n++
			continue
		case r := <-refused:
			if d := detail(t, r); !strings.Contains(d, "this workspace") || r.header.Get("Retry-After") != "1" {
				t.Errorf("the refusal of tenant A's request %d: %q", n+1, d)
			}
		}
		break
	}
	diff(t, "requests tenant A holds", share, n)
	if r := s.as(keyB, "GET", "/v2/deployments", ""); r.status != http.StatusOK {
		t.Errorf("tenant B beside tenant A's requests: %d %s", r.status, r.body)
	}
	if r := s.as(keyA, "GET", "/v2/deployments", ""); r.status != http.StatusServiceUnavailable {
		t.Errorf("tenant A beyond its share: %d %s", r.status, r.body)
	}
	let()
	for range n {
		if r := <-held; r.status != http.StatusOK {
			t.Errorf("a held request: %d %s", r.status, r.body)
		}
	}
}

// blockingRealm is a registry realm whose requests wait until release is
// closed, announcing each on entered.
type blockingRealm struct {
	entered chan struct{}
	release chan struct{}
}

func (b *blockingRealm) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	b.entered <- struct{}{}
	<-b.release
	w.WriteHeader(http.StatusOK)
}

// TestAddressShares: requests to public routes count in the share of
// their client address (RateLimit.ClientAddr): an address that holds its
// share of the in-flight cap is refused more, another is served.
func TestAddressShares(t *testing.T) {
	realm := &blockingRealm{entered: make(chan struct{}), release: make(chan struct{})}
	s := newServer(t, &httphandler.Options{RegistryRealm: realm, Load: &httphandler.LoadLimits{
		MaxInFlight: 16, MaxInFlightPerTenant: 3,
		RateLimit: &httphandler.RateLimit{ClientAddr: func(r *http.Request) string { return r.Header.Get("X-Test-Client") }},
	}})
	var once sync.Once
	let := func() { once.Do(func() { close(realm.release) }) }
	t.Cleanup(let)
	done := make(chan reply, 3)
	for range 3 {
		go func() { done <- s.do("GET", httphandler.RealmJWKSPath, "", "X-Test-Client", "x") }()
		<-realm.entered
	}
	if r := s.do("GET", "/openapi.json", "", "X-Test-Client", "x"); r.status != http.StatusServiceUnavailable {
		t.Errorf("address x beyond its share: %d, want 503", r.status)
	} else if d := detail(t, r); !strings.Contains(d, "this client address already has 3 requests in progress") {
		t.Errorf("address x beyond its share: %q", d)
	}
	if r := s.do("GET", "/openapi.json", "", "X-Test-Client", "y"); r.status != http.StatusOK {
		t.Errorf("address y: %d", r.status)
	}
	// The key of a tenant is its own client, whatever its address.
	if r := s.do("GET", "/v2/deployments", "", "X-Test-Client", "x", "X-Api-Key", keyA); r.status != http.StatusOK {
		t.Errorf("tenant A from address x: %d %s", r.status, r.body)
	}
	let()
	for range 3 {
		if r := <-done; r.status != http.StatusOK {
			t.Errorf("a held realm request: %d %s", r.status, r.body)
		}
	}
}
