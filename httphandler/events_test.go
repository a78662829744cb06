package httphandler_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storemem"
)

// The event streams (GET /v2/events, /v2/deployments/{id}/events) and
// ?wait=terminal, over a real server. Most tests run in a synctest bubble
// on an in-memory network (helpers_test.go), so the reconcile loop, the
// heartbeats and the timeouts run on the bubble's fake clock; every read
// of a stream is bounded by streamDeadline of that clock.

// streamDeadline bounds each stream in fake time; only a hang reaches it.
const streamDeadline = time.Minute

// sseEvent is one event of a stream.
type sseEvent struct {
	Name, ID, Data string
}

// change decodes the event's data.
func (e sseEvent) change(t testing.TB) eventData {
	t.Helper()
	var d eventData
	if err := json.Unmarshal([]byte(e.Data), &d); err != nil {
		t.Fatalf("event %s %s: %v: %s", e.Name, e.ID, err, e.Data)
	}
	return d
}

// eventData is the data of deployment and revision events.
type eventData struct {
	Change       string                   `json:"change"`
	DeploymentID string                   `json:"deployment_id"`
	RevisionID   string                   `json:"revision_id"`
	Deployment   *controlplane.Deployment `json:"deployment"`
	Revision     *controlplane.Revision   `json:"revision"`
	Detail       string                   `json:"detail"`
}

// sseStream reads one event stream.
type sseStream struct {
	t        testing.TB
	resp     *http.Response
	rd       *bufio.Reader
	cancel   context.CancelFunc
	comments []string
}

// stream opens path with key and the headers (name, value pairs) and
// checks that it is an event stream.
func (s *server) stream(t testing.TB, key, path string, headers ...string) *sseStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), streamDeadline)
	req, err := http.NewRequestWithContext(ctx, "GET", s.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Api-Key", key)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := s.client.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("GET %s: %d %s: %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	st := &sseStream{t: t, resp: resp, rd: bufio.NewReader(resp.Body), cancel: cancel}
	t.Cleanup(st.close)
	return st
}

// close hangs up.
func (st *sseStream) close() {
	st.cancel()
	st.resp.Body.Close()
}

// next reads the next event, keeping comments aside; io.EOF when the
// server ended the stream.
func (st *sseStream) next() (sseEvent, error) {
	var e sseEvent
	data := false
	for {
		line, err := st.rd.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) && line == "" && e == (sseEvent{}) {
				return e, io.EOF
			}
			return e, err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if e.Name != "" || e.ID != "" || data {
				return e, nil
			}
		case strings.HasPrefix(line, ":"):
			st.comments = append(st.comments, line)
		default:
			name, value, _ := strings.Cut(line, ": ")
			switch name {
			case "event":
				e.Name = value
			case "id":
				e.ID = value
			case "data":
				e.Data, data = value, true
			default:
				st.t.Fatalf("unexpected line %q", line)
			}
		}
	}
}

// must reads the next event.
func (st *sseStream) must() sseEvent {
	st.t.Helper()
	e, err := st.next()
	if err != nil {
		st.t.Fatalf("reading the stream: %v", err)
	}
	return e
}

// take reads n events.
func (st *sseStream) take(n int) []sseEvent {
	st.t.Helper()
	var out []sseEvent
	for range n {
		out = append(out, st.must())
	}
	return out
}

// until reads events until one satisfies done, and returns them all.
func (st *sseStream) until(done func(sseEvent) bool) []sseEvent {
	st.t.Helper()
	var out []sseEvent
	for {
		e := st.must()
		out = append(out, e)
		if done(e) {
			return out
		}
	}
}

// ended checks that the server ends the stream cleanly now.
func (st *sseStream) ended() {
	st.t.Helper()
	if e, err := st.next(); !errors.Is(err, io.EOF) {
		st.t.Fatalf("the stream goes on: %+v, %v", e, err)
	}
}

// summary is "name/change[/status]" of each event, for comparisons.
func summary(t testing.TB, evs []sseEvent) []string {
	t.Helper()
	var out []string
	for _, e := range evs {
		d := e.change(t)
		s := e.Name + "/" + d.Change
		switch {
		case d.Revision != nil:
			s += "/" + string(d.Revision.Status)
		case d.Deployment != nil:
			s += "/" + string(d.Deployment.Status)
		}
		out = append(out, s)
	}
	return out
}

// checkIDs: the ids are consecutive numbers after after (the log numbers
// every committed change, and nothing else).
func checkIDs(t testing.TB, after int, evs []sseEvent) {
	t.Helper()
	for i, e := range evs {
		n, err := strconv.Atoi(e.ID)
		if err != nil || n != after+1+i {
			t.Fatalf("event %d has id %q, want %d (ids: %v)", i, e.ID, after+1+i, eventIDs(evs))
		}
	}
}

func eventIDs(evs []sseEvent) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.ID)
	}
	return out
}

// liveServer is newLiveServer with the ControlPlane's options.
func liveServer(t *testing.T, o *controlplane.Options, opts *httphandler.Options) (*server, *controlplane.ControlPlane) {
	t.Helper()
	cp := controlplane.New(storemem.New(), o)
	s := newServerWith(t, serverSetup{cp: cp, opts: opts, inMemory: true})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cp.Run(ctx, sim(nil)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return s, cp
}

// TestEventStreamLifecycle: a client of /v2/events sees, in commit order,
// a deployment's creation, its revision's creation and every status it
// moves through, the deployment becoming READY, an in-place PATCH, the
// DELETE and the removal; a client of the deployment's own stream sees the
// same events and nothing of another deployment, and its stream ends after
// the deleted event. The events carry the wire JSON that GET answers.
func TestEventStreamLifecycle(t *testing.T) { synctest.Test(t, eventStreamLifecycle) }

func eventStreamLifecycle(t *testing.T) {
	s, _ := liveServer(t, &controlplane.Options{PollInterval: 10 * time.Millisecond}, nil)
	// With every log: the stream then has every event of the tenant, so
	// its ids are consecutive (the simulated deployer writes log lines).
	all := s.stream(t, keyA, "/v2/events?logs=build,deploy")
	d := must[controlplane.Deployment](t, s, keyA, "POST", "/v2/deployments", dockerBody("agent"), 201)
	own := s.stream(t, keyA, "/v2/deployments/"+d.ID+"/events", "Last-Event-ID", "0")
	other := must[controlplane.Deployment](t, s, keyA, "POST", "/v2/deployments", dockerBody("other"), 201)
	rev := s.waitRevision(t, keyA, d.ID, *d.LatestRevisionID, controlplane.RevisionDeployed)
	s.waitRevision(t, keyA, other.ID, *other.LatestRevisionID, controlplane.RevisionDeployed)
	patched := must[controlplane.Deployment](t, s, keyA, "PATCH", "/v2/deployments/"+d.ID,
		`{"source_config": {"custom_url": "https://agent.example"}}`, 200)
	if r := s.as(keyA, "DELETE", "/v2/deployments/"+d.ID, ""); r.status != 204 {
		t.Fatalf("DELETE: %d %s", r.status, r.body)
	}
	eventually(t, "the deployment to be removed", func() (bool, string) {
		r := s.as(keyA, "GET", "/v2/deployments/"+d.ID, "")
		return r.status == 404, strconv.Itoa(r.status)
	})

	var mine []sseEvent
	evs := all.until(func(e sseEvent) bool {
		d2 := e.change(t)
		if d2.DeploymentID == d.ID && e.Name != "log" {
			mine = append(mine, e)
		}
		return e.Name == "deployment" && d2.Change == "deleted" && d2.DeploymentID == d.ID
	})
	checkIDs(t, 0, evs)
	logs := 0
	for _, e := range evs {
		if e.Name == "log" && e.change(t).DeploymentID == d.ID {
			logs++
		}
	}
	if logs == 0 {
		t.Errorf("no log event of the deployment's revision in a stream that asked for logs: %v", summary(t, evs))
	}
	want := []string{"deployment/created/AWAITING_DATABASE", "revision/created/CREATING"}
	for _, st := range controlplane.HappyPath(controlplane.SourceExternalDocker)[1:] {
		want = append(want, "revision/status/"+string(st))
	}
	want = append(want, "deployment/status/READY", "deployment/updated/READY", "deployment/status/AWAITING_DELETE", "deployment/deleted")
	diff(t, "the deployment's events in the tenant stream", want, summary(t, mine))

	// The deployment's own stream (from the start: Last-Event-ID 0) has
	// exactly these, with the same ids, and then ends.
	diff(t, "the deployment's own stream", mine, own.take(len(mine)))
	own.ended()
	// Reconnecting once it is removed: the missed events up to the deleted
	// one, then the end; after the deleted one, 404 (so that EventSource
	// stops reconnecting).
	again := s.stream(t, keyA, "/v2/deployments/"+d.ID+"/events", "Last-Event-ID", mine[len(mine)-3].ID)
	diff(t, "reconnected after the removal", mine[len(mine)-2:], again.take(2))
	again.ended()
	r := s.do("GET", "/v2/deployments/"+d.ID+"/events", "", "X-Api-Key", keyA, "Last-Event-ID", mine[len(mine)-1].ID)
	if r.status != 404 {
		t.Errorf("reconnected after the deleted event: %d %s", r.status, r.body)
	}

	// The payloads are the wire JSON of GET.
	for _, e := range mine {
		d2 := e.change(t)
		if d2.Revision != nil && d2.Revision.Status == controlplane.RevisionDeployed {
			diff(t, "the DEPLOYED revision event", rev, *d2.Revision)
			diff(t, "its revision_id", rev.ID, d2.RevisionID)
		}
		if d2.Change == "updated" {
			diff(t, "the PATCH's event", patched, *d2.Deployment)
		}
		if d2.Change == "deleted" && (d2.Deployment != nil || d2.Revision != nil) {
			t.Errorf("a deleted event with a resource: %s", e.Data)
		}
	}
}

// TestEventStreamResume: a client that reconnects with the Last-Event-ID
// of the last event it read receives exactly the events it missed, those
// committed while it was away included: the same as a client that stayed
// connected, with no gap and no duplicate. No change that failed (a
// rolled-back Update, here a create whose tracing project fails after the
// deployment was written in it) has an event: the ids stay consecutive.
func TestEventStreamResume(t *testing.T) { synctest.Test(t, eventStreamResume) }

func eventStreamResume(t *testing.T) {
	cp := controlplane.New(storemem.New(), &controlplane.Options{TracingProjects: failingProjects{}})
	s := newServerWith(t, serverSetup{cp: cp, inMemory: true})
	stayed := s.stream(t, keyA, "/v2/events")
	away := s.stream(t, keyA, "/v2/events")
	d := must[controlplane.Deployment](t, s, keyA, "POST", "/v2/deployments", dockerBody("agent"), 201)
	if r := s.as(keyA, "POST", "/v2/deployments", dockerBody("fails")); r.status != 500 {
		t.Fatalf("a create whose tracing project fails: %d %s", r.status, r.body)
	}
	must[controlplane.Revision](t, s, keyA, "POST", "/v2/deployments/"+d.ID+"/revisions", "", 201)
	seen := away.take(4) // created, created, skipped, created
	away.close()
	// Changes while the client is away.
	for i := range 3 {
		must[controlplane.Deployment](t, s, keyA, "PATCH", "/v2/deployments/"+d.ID,
			fmt.Sprintf(`{"source_config": {"custom_url": "https://%d.example"}}`, i), 200)
	}
	must[controlplane.Revision](t, s, keyA, "POST", "/v2/deployments/"+d.ID+"/revisions", "", 201)
	const total = 4 + 1 + 3 + 3 // and: the deployment's update, three PATCHes, skipped, created, updated
	full := stayed.take(total)
	checkIDs(t, 0, full)
	diff(t, "what the client read before it left", full[:4], seen)

	back := s.stream(t, keyA, "/v2/events", "Last-Event-ID", seen[len(seen)-1].ID)
	diff(t, "the events after the reconnection", full[4:], back.take(total-4))
	// Nothing more: the next event of both is the next change.
	must[controlplane.Deployment](t, s, keyA, "PATCH", "/v2/deployments/"+d.ID, `{"source_config": {"custom_url": "https://last.example"}}`, 200)
	diff(t, "the next event", stayed.must(), back.must())
}

// failingProjects fails the tracing project of deployments named "fails",
// after the deployment and its events were written in the Update.
type failingProjects struct{}

func (failingProjects) CreateTracingProject(ctx context.Context, tx store.Tx, p controlplane.TracingProject) error {
	if p.Name == "fails" {
		return errors.New("the tracing service is down")
	}
	return controlplane.StoreTracingProjects{}.CreateTracingProject(ctx, tx, p)
}

// TestEventStreamGap: a client whose Last-Event-ID is older than the
// retained events gets a gap event first, then the retained events in
// order; an id the log never gave is a gap too.
func TestEventStreamGap(t *testing.T) { synctest.Test(t, eventStreamGap) }

func eventStreamGap(t *testing.T) {
	cp := controlplane.New(storemem.New(), &controlplane.Options{EventRetention: 10})
	s := newServerWith(t, serverSetup{cp: cp, inMemory: true})
	d := must[controlplane.Deployment](t, s, keyA, "POST", "/v2/deployments", dockerBody("agent"), 201)
	for i := range 70 { // events 3 to 72: the 64th pruned those before the newest 10
		must[controlplane.Deployment](t, s, keyA, "PATCH", "/v2/deployments/"+d.ID,
			fmt.Sprintf(`{"source_config": {"custom_url": "https://%d.example"}}`, i), 200)
	}
	st := s.stream(t, keyA, "/v2/events", "Last-Event-ID", "1")
	gap := st.must()
	if gap.Name != "gap" || gap.change(t).Detail == "" {
		t.Fatalf("first event %+v, want a gap", gap)
	}
	first := st.must()
	n, _ := strconv.Atoi(first.ID)
	if n <= 2 || gap.ID != strconv.Itoa(n-1) {
		t.Fatalf("after the gap (id %s): event %s", gap.ID, first.ID)
	}
	checkIDs(t, n-1, append([]sseEvent{first}, st.take(72-n)...))

	bogus := s.stream(t, keyA, "/v2/events", "Last-Event-ID", "not-an-id")
	if e := bogus.must(); e.Name != "gap" || e.ID != "72" {
		t.Fatalf("an unknown Last-Event-ID: %+v, want a gap at 72", e)
	}
	must[controlplane.Deployment](t, s, keyA, "PATCH", "/v2/deployments/"+d.ID, `{"source_config": {"custom_url": "https://x.example"}}`, 200)
	if e := bogus.must(); e.ID != "73" {
		t.Fatalf("after the gap: %+v, want event 73", e)
	}
}

// TestEventStreamTenants: a tenant's stream carries only its own events,
// another tenant's deployment stream is a 404, and the streams need
// credentials like every route.
func TestEventStreamTenants(t *testing.T) { synctest.Test(t, eventStreamTenants) }

func eventStreamTenants(t *testing.T) {
	s := newServerWith(t, serverSetup{inMemory: true})
	b := s.stream(t, keyB, "/v2/events")
	a := must[controlplane.Deployment](t, s, keyA, "POST", "/v2/deployments", dockerBody("agent"), 201)
	own := must[controlplane.Deployment](t, s, keyB, "POST", "/v2/deployments", dockerBody("agent"), 201)
	e := b.must()
	if d := e.change(t); d.DeploymentID != own.ID || e.ID != "1" {
		t.Fatalf("tenant B's first event: %+v, want its own deployment's as event 1", e)
	}
	r := s.as(keyB, "GET", "/v2/deployments/"+a.ID+"/events", "")
	if r.status != 404 || detail(t, r) != "Deployment ID "+a.ID+" not found." {
		t.Errorf("tenant B on A's deployment events: %d %s", r.status, r.body)
	}
	for _, p := range []string{"/v2/events", "/v2/deployments/" + a.ID + "/events"} {
		if r := s.do("GET", p, ""); r.status != 401 {
			t.Errorf("GET %s without credentials: %d", p, r.status)
		}
	}
	if got := problems(t, s.as(keyA, "GET", "/v2/events?logs=build,trace", "")); len(got) != 1 || fmt.Sprint(got[0].Loc) != "[query logs]" {
		t.Errorf("an unknown log type: %+v", got)
	}
	if got := problems(t, s.as(keyA, "GET", "/v2/deployments/nope/events", "")); fmt.Sprint(got[0].Loc) != "[path deployment_id]" {
		t.Errorf("a malformed deployment id: %+v", got)
	}
}

// TestEventStreamHeartbeatAndClose: an idle stream gets a heartbeat
// comment every EventHeartbeat; Close ends open streams cleanly, and a
// stream asked for afterwards is a 503.
func TestEventStreamHeartbeatAndClose(t *testing.T) { synctest.Test(t, eventStreamHeartbeatAndClose) }

func eventStreamHeartbeatAndClose(t *testing.T) {
	s := newServerWith(t, serverSetup{inMemory: true, opts: &httphandler.Options{EventHeartbeat: 5 * time.Second}})
	st := s.stream(t, keyA, "/v2/events")
	start := time.Now()
	ended := make(chan time.Duration)
	go func() { // a client reads as the server writes (the in-memory network has no buffer)
		e, err := st.next()
		if !errors.Is(err, io.EOF) {
			t.Errorf("the stream goes on: %+v, %v", e, err)
		}
		ended <- time.Since(start)
	}()
	time.Sleep(12 * time.Second) // fake time: two heartbeats
	_ = s.api.Close()
	if d := <-ended; d != 12*time.Second {
		t.Errorf("the stream ended after %v, want at the Close (12s)", d)
	}
	diff(t, "heartbeats", []string{": heartbeat", ": heartbeat"}, st.comments)
	r := s.as(keyA, "GET", "/v2/events", "")
	if r.status != 503 || r.header.Get("Retry-After") == "" {
		t.Errorf("a stream after Close: %d %s", r.status, r.body)
	}
}

// TestWaitTerminal: ?wait=terminal answers once the revision is terminal
// (well before its timeout), at the timeout with the revision as it is,
// at once for a revision already terminal, and at the Handler's Close;
// bad values are 422.
func TestWaitTerminal(t *testing.T) {
	t.Run("terminal", inBubble(func(t *testing.T) {
		s, _ := liveServer(t, &controlplane.Options{PollInterval: 10 * time.Millisecond}, nil)
		d := must[controlplane.Deployment](t, s, keyA, "POST", "/v2/deployments", dockerBody("agent"), 201)
		path := "/v2/deployments/" + d.ID + "/revisions/" + *d.LatestRevisionID
		start := time.Now()
		rev := must[controlplane.Revision](t, s, keyA, "GET", path+"?wait=terminal&timeout=60", "", 200)
		took := time.Since(start)
		diff(t, "status", controlplane.RevisionDeployed, rev.Status)
		if took >= time.Second {
			t.Errorf("the wait answered after %v; the deployer takes a few milliseconds", took)
		}
		diff(t, "the answer is GET's", must[controlplane.Revision](t, s, keyA, "GET", path, "", 200), rev)
		start = time.Now()
		must[controlplane.Revision](t, s, keyA, "GET", path+"?wait=terminal", "", 200)
		diff(t, "the wait on a terminal revision took", time.Duration(0), time.Since(start))
	}))
	t.Run("timeout", inBubble(func(t *testing.T) {
		s := newServerWith(t, serverSetup{inMemory: true}) // nothing moves revisions
		d := must[controlplane.Deployment](t, s, keyA, "POST", "/v2/deployments", dockerBody("agent"), 201)
		path := "/v2/deployments/" + d.ID + "/revisions/" + *d.LatestRevisionID
		for _, c := range []struct {
			query string
			want  time.Duration
		}{{"?wait=terminal&timeout=7", 7 * time.Second}, {"?wait=terminal&timeout=0", 0}, {"?wait=terminal", 30 * time.Second}} {
			start := time.Now()
			rev := must[controlplane.Revision](t, s, keyA, "GET", path+c.query, "", 200)
			diff(t, c.query+" status", controlplane.RevisionCreating, rev.Status)
			diff(t, c.query+" answered after", c.want, time.Since(start))
		}
		// A revision superseded while waited on is terminal (SKIPPED): the
		// wait answers at once.
		done := make(chan controlplane.Revision)
		start := time.Now()
		go func() {
			done <- must[controlplane.Revision](t, s, keyA, "GET", path+"?wait=terminal&timeout=5", "", 200)
		}()
		time.Sleep(time.Second)
		must[controlplane.Revision](t, s, keyA, "POST", "/v2/deployments/"+d.ID+"/revisions", "", 201)
		diff(t, "superseded while waiting", controlplane.RevisionSkipped, (<-done).Status)
		diff(t, "answered after", time.Second, time.Since(start))
	}))
	t.Run("close", inBubble(func(t *testing.T) {
		s := newServerWith(t, serverSetup{inMemory: true})
		d := must[controlplane.Deployment](t, s, keyA, "POST", "/v2/deployments", dockerBody("agent"), 201)
		path := "/v2/deployments/" + d.ID + "/revisions/" + *d.LatestRevisionID
		done := make(chan controlplane.Revision)
		go func() {
			done <- must[controlplane.Revision](t, s, keyA, "GET", path+"?wait=terminal&timeout=60", "", 200)
		}()
		time.Sleep(time.Second)
		start := time.Now()
		_ = s.api.Close()
		rev := <-done
		diff(t, "status at Close", controlplane.RevisionCreating, rev.Status)
		diff(t, "answered after Close", time.Duration(0), time.Since(start))
	}))
	t.Run("invalid", inBubble(func(t *testing.T) {
		s := newServerWith(t, serverSetup{inMemory: true})
		d := must[controlplane.Deployment](t, s, keyA, "POST", "/v2/deployments", dockerBody("agent"), 201)
		path := "/v2/deployments/" + d.ID + "/revisions/" + *d.LatestRevisionID
		for _, c := range []struct{ query, want string }{
			{"?wait=done", "[query wait] literal_error"},
			{"?wait=", "[query wait] literal_error"},
			{"?wait=terminal&timeout=61", "[query timeout] less_than_equal"},
			{"?wait=terminal&timeout=-1", "[query timeout] greater_than_equal"},
			{"?wait=terminal&timeout=soon", "[query timeout] int_parsing"},
			{"?wait=later&timeout=soon", "[query timeout] int_parsing; [query wait] literal_error"},
		} {
			var got []string
			for _, p := range problems(t, s.as(keyA, "GET", path+c.query, "")) {
				got = append(got, fmt.Sprint(p.Loc)+" "+p.Type)
			}
			slices.Sort(got)
			diff(t, c.query, c.want, strings.Join(got, "; "))
		}
		if r := s.as(keyB, "GET", path+"?wait=terminal&timeout=1", ""); r.status != 404 {
			t.Errorf("tenant B waits on A's revision: %d %s", r.status, r.body)
		}
	}))
}

// TestEventStreamLongPollCap: streams and ?wait= take places of the
// long-poll cap, not of the in-flight cap: with one place, a second
// stream or wait is a 503 while ordinary requests are served.
func TestEventStreamLongPollCap(t *testing.T) { synctest.Test(t, eventStreamLongPollCap) }

func eventStreamLongPollCap(t *testing.T) {
	s := newServerWith(t, serverSetup{inMemory: true, opts: &httphandler.Options{Load: &httphandler.LoadLimits{MaxLongPolls: 1, MaxInFlight: 1}}})
	d := must[controlplane.Deployment](t, s, keyA, "POST", "/v2/deployments", dockerBody("agent"), 201)
	st := s.stream(t, keyA, "/v2/events")
	for _, p := range []string{"/v2/events", "/v2/deployments/" + d.ID + "/events",
		"/v2/deployments/" + d.ID + "/revisions/" + *d.LatestRevisionID + "?wait=terminal&timeout=1"} {
		if r := s.as(keyA, "GET", p, ""); r.status != 503 || !strings.Contains(detail(t, r), "long polls") {
			t.Errorf("GET %s beside an open stream: %d %s", p, r.status, r.body)
		}
	}
	must[controlplane.Deployment](t, s, keyA, "GET", "/v2/deployments/"+d.ID, "", 200)
	st.close()
	synctest.Wait() // the stream's handler has seen the client go
	must[controlplane.Revision](t, s, keyA, "GET", "/v2/deployments/"+d.ID+"/revisions/"+*d.LatestRevisionID+"?wait=terminal&timeout=1", "", 200)
}
