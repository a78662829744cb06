package uploads_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploysim"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/internal/testclock"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storemem"
	"github.com/deployplane/deployplane/uploads"
)

const (
	tenant = "0190f0a0-0000-7000-8000-00000000000a"
	apiKey = "key-of-the-uploads-tests"
)

var key32 = bytes.Repeat([]byte{7}, 32)

// env is a server over one store: the API with its uploads, as
// cmd/deployplane wires them.
type env struct {
	t      *testing.T
	clock  *testclock.Clock
	st     store.Store
	cp     *controlplane.ControlPlane
	svc    *uploads.Service
	bucket *blob.Bucket
	srv    *httptest.Server
}

type envOptions struct {
	maxBytes int64
	st       store.Store  // shared with another env: a replica
	bucket   *blob.Bucket // shared with another env
	clock    *testclock.Clock
}

func newEnv(t *testing.T, o *envOptions) *env {
	t.Helper()
	if o == nil {
		o = &envOptions{}
	}
	e := &env{t: t, clock: o.clock, st: o.st, bucket: o.bucket}
	if e.clock == nil {
		e.clock = testclock.New(time.Now().UTC(), time.Microsecond)
	}
	if e.st == nil {
		e.st = storemem.New()
	}
	if e.bucket == nil {
		b, err := fileblob.OpenBucket(t.TempDir(), &fileblob.Options{NoTempDir: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		e.bucket = b
	}
	e.cp = controlplane.New(e.st, &controlplane.Options{Clock: e.clock.Now, Uploads: uploads.Records{}})
	srv := httptest.NewUnstartedServer(nil)
	srv.Start()
	t.Cleanup(srv.Close)
	svc, err := uploads.New(e.cp, &uploads.Options{Bucket: e.bucket, Key: key32, PublicURL: srv.URL, MaxBytes: o.maxBytes, Clock: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	keys, err := httphandler.NewKeyTable([]httphandler.Key{{SHA256: httphandler.HashKey(apiKey), Tenants: []string{tenant}}})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = httphandler.New(e.cp, &httphandler.Options{Authenticator: keys, Uploads: svc})
	e.srv = srv
	return e
}

type answer struct {
	status int
	body   []byte
}

func (e *env) api(method, path, body string) answer {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("X-Api-Key", apiKey)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return do(e.t, req)
}

func do(t *testing.T, req *http.Request) answer {
	t.Helper()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{res.StatusCode, b}
}

// put sends body to an upload URL as langgraph deploy does.
func put(t *testing.T, uploadURL string, body io.Reader, length int64, headers ...string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, uploadURL, body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = length
	req.Header.Set("Content-Type", "application/gzip")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return do(t, req)
}

func (a answer) detail(t *testing.T) string {
	t.Helper()
	var b struct{ Detail string }
	if err := json.Unmarshal(a.body, &b); err != nil {
		t.Fatalf("not a JSON detail: %s", a.body)
	}
	return b.Detail
}

func (e *env) create(name, source string) string {
	e.t.Helper()
	body := `{"name": "` + name + `", "source": "` + source + `", "source_config": {}, "source_revision_config": {}}`
	if source == "external_docker" {
		body = `{"name": "` + name + `", "source": "external_docker", "source_revision_config": {"image_uri": "img"}}`
	}
	a := e.api("POST", "/v2/deployments", body)
	if a.status != 201 {
		e.t.Fatalf("create: %d %s", a.status, a.body)
	}
	var d struct{ ID string }
	_ = json.Unmarshal(a.body, &d)
	return d.ID
}

func (e *env) uploadURL(id string) (uploadURL, objectPath string) {
	e.t.Helper()
	a := e.api("POST", "/v2/deployments/"+id+"/upload-url", "")
	if a.status != 200 {
		e.t.Fatalf("upload-url: %d %s", a.status, a.body)
	}
	var r struct {
		UploadURL  string `json:"upload_url"`
		ObjectPath string `json:"object_path"`
	}
	if err := json.Unmarshal(a.body, &r); err != nil {
		e.t.Fatal(err)
	}
	return r.UploadURL, r.ObjectPath
}

func (e *env) patch(id, objectPath string) answer {
	e.t.Helper()
	return e.api("PATCH", "/v2/deployments/"+id, `{"revision_source": "internal_source", "source_revision_config": `+
		`{"source_tarball_path": "`+objectPath+`", "langgraph_config_path": "langgraph.json"}}`)
}

func (e *env) tarball(id, objectPath string) (string, error) {
	rc, err := e.svc.OpenTarball(context.Background(), tenant, id, objectPath)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return string(b), err
}

func TestUploadRoundTrip(t *testing.T) {
	e := newEnv(t, nil)
	id := e.create("agent", "internal_source")
	u, p := e.uploadURL(id)
	if !strings.HasPrefix(u, e.srv.URL+uploads.PathPrefix+"/"+tenant+"/"+id+"/") || !strings.HasPrefix(p, "uploads/"+id+"/") {
		t.Fatalf("upload_url %s, object_path %s", u, p)
	}
	// Named before the upload: 422 at the field.
	a := e.patch(id, p)
	if a.status != 422 || !strings.Contains(string(a.body), `"source_tarball_path"`) || !strings.Contains(string(a.body), "has not completed") {
		t.Fatalf("PATCH before the upload: %d %s", a.status, a.body)
	}
	a = put(t, u, strings.NewReader("the tarball"), int64(len("the tarball")), uploads.HeaderContentLengthRange, "0,209715200")
	if a.status != 200 || len(a.body) != 0 {
		t.Fatalf("PUT: %d %q", a.status, a.body)
	}
	if got, err := e.tarball(id, p); err != nil || got != "the tarball" {
		t.Fatalf("OpenTarball = %q, %v", got, err)
	}
	// Single use.
	a = put(t, u, strings.NewReader("again"), 5)
	if a.status != 409 || a.detail(t) != "This upload URL was already used." {
		t.Fatalf("second PUT: %d %s", a.status, a.body)
	}
	if got, _ := e.tarball(id, p); got != "the tarball" {
		t.Fatalf("the second PUT changed the tarball: %q", got)
	}
	a = e.patch(id, p)
	if a.status != 200 {
		t.Fatalf("PATCH: %d %s", a.status, a.body)
	}
	var d controlplane.Deployment
	_ = json.Unmarshal(a.body, &d)
	if d.LatestRevisionID == nil || d.SourceRevisionConfig.SourceTarballPath == nil || *d.SourceRevisionConfig.SourceTarballPath != p {
		t.Fatalf("PATCH answered %s", a.body)
	}
}

// TestRecordsRefuseOtherPaths: with Records as the control plane's
// UploadChecker, a PATCH may name only a completed upload of its own
// deployment: a path never issued, or one uploaded to another deployment,
// is 422 at the field.
func TestRecordsRefuseOtherPaths(t *testing.T) {
	e := newEnv(t, nil)
	id := e.create("agent", "internal_source")
	other := e.create("other", "internal_source")
	u, p := e.uploadURL(other)
	if a := put(t, u, strings.NewReader("tarball"), 7); a.status != 200 {
		t.Fatalf("PUT: %d %s", a.status, a.body)
	}
	for _, path := range []string{"uploads/a.tar.gz", p} {
		a := e.patch(id, path)
		if a.status != 422 || !strings.Contains(string(a.body), `"source_tarball_path"`) || !strings.Contains(string(a.body), "unknown_reference") {
			t.Errorf("PATCH naming %s: %d %s", path, a.status, a.body)
		}
	}
	if a := e.patch(other, p); a.status != 200 {
		t.Errorf("PATCH of its own deployment: %d %s", a.status, a.body)
	}
}

func TestUploadURLRefusals(t *testing.T) {
	e := newEnv(t, nil)
	docker := e.create("img", "external_docker")
	a := e.api("POST", "/v2/deployments/"+docker+"/upload-url", "")
	if a.status != 400 || a.detail(t) != "upload URL is only available for 'internal_source' source deployments" {
		t.Errorf("external_docker: %d %s", a.status, a.body)
	}
	if a := e.api("POST", "/v2/deployments/0190f0a0-0000-7000-8000-0000000000ff/upload-url", ""); a.status != 404 {
		t.Errorf("unknown deployment: %d %s", a.status, a.body)
	}
	// Another deployment's upload, or a made-up path: 422.
	id, other := e.create("one", "internal_source"), e.create("two", "internal_source")
	u, p := e.uploadURL(other)
	if a := put(t, u, strings.NewReader("x"), 1); a.status != 200 {
		t.Fatalf("PUT: %d %s", a.status, a.body)
	}
	for _, path := range []string{p, "uploads/" + id + "/0190f0a0-0000-7000-8000-0000000000ee.tar.gz", "gs://bucket/x.tar.gz"} {
		a := e.patch(id, path)
		if a.status != 422 || !strings.Contains(string(a.body), `["body","source_revision_config","source_tarball_path"]`) {
			t.Errorf("PATCH naming %s: %d %s", path, a.status, a.body)
		}
	}
	if a := e.api("POST", "/v2/deployments/"+id+"/revisions", `{"source_revision_config": {"source_tarball_path": "`+p+`"}}`); a.status != 422 {
		t.Errorf("POST .../revisions naming another deployment's upload: %d %s", a.status, a.body)
	}
}

func TestUploadSignature(t *testing.T) {
	e := newEnv(t, nil)
	id := e.create("agent", "internal_source")
	other := e.create("other", "internal_source")
	u, _ := e.uploadURL(id)
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	tamper := func(f func(u *url.URL)) string {
		c := *parsed
		f(&c)
		return c.String()
	}
	q := parsed.Query()
	for name, bad := range map[string]string{
		"no signature":       tamper(func(u *url.URL) { u.RawQuery = "expires=" + q.Get("expires") }),
		"another signature":  tamper(func(u *url.URL) { u.RawQuery = strings.Replace(u.RawQuery, "signature=", "signature=A", 1) }),
		"a later expiry":     tamper(func(u *url.URL) { u.RawQuery = strings.Replace(u.RawQuery, "expires=", "expires=9", 1) }),
		"another deployment": tamper(func(u *url.URL) { u.Path = strings.Replace(u.Path, id, other, 1) }),
		"another tenant":     tamper(func(u *url.URL) { u.Path = strings.Replace(u.Path, tenant, "0190f0a0-0000-7000-8000-00000000000b", 1) }),
		"another upload": tamper(func(u *url.URL) {
			// Another last digit (the same one would be the genuine URL).
			last := "0"
			if strings.HasSuffix(u.Path, "0") {
				last = "1"
			}
			u.Path = u.Path[:len(u.Path)-1] + last
		}),
	} {
		a := put(t, bad, strings.NewReader("x"), 1)
		if a.status != 403 || a.detail(t) != "The upload URL's signature is not valid." {
			t.Errorf("%s: %d %s", name, a.status, a.body)
		}
	}
	// A path of another shape is not an upload URL at all.
	if a := put(t, tamper(func(u *url.URL) { u.Path += "/x" }), strings.NewReader("x"), 1); a.status != 404 {
		t.Errorf("a path of another shape: %d %s", a.status, a.body)
	}
	// The genuine URL still works: refusals spend nothing.
	if a := put(t, u, strings.NewReader("x"), 1); a.status != 200 {
		t.Errorf("genuine URL after the refusals: %d %s", a.status, a.body)
	}
}

func TestUploadExpires(t *testing.T) {
	e := newEnv(t, nil)
	id := e.create("agent", "internal_source")
	u, _ := e.uploadURL(id)
	e.clock.Advance(uploads.URLTTL)
	a := put(t, u, strings.NewReader("x"), 1)
	if a.status != 403 || a.detail(t) != "The upload URL has expired." {
		t.Fatalf("PUT after 15 minutes: %d %s", a.status, a.body)
	}
}

func TestUploadTooLarge(t *testing.T) {
	e := newEnv(t, &envOptions{maxBytes: 1000})
	id := e.create("agent", "internal_source")
	u, p := e.uploadURL(id)
	body := strings.Repeat("x", 1001)
	for name, a := range map[string]answer{
		"content length": put(t, u, strings.NewReader(body), 1001),
		"chunked":        put(t, u, io.MultiReader(strings.NewReader(body)), -1),
		"range header":   put(t, u, strings.NewReader(body[:11]), 11, uploads.HeaderContentLengthRange, "0,10"),
		"range chunked":  put(t, u, io.MultiReader(strings.NewReader(body[:11])), -1, uploads.HeaderContentLengthRange, "0,10"),
	} {
		if a.status != 413 || !strings.Contains(a.detail(t), "larger than the limit of") {
			t.Errorf("%s: %d %s", name, a.status, a.body)
		}
	}
	if _, err := e.tarball(id, p); !errors.Is(err, uploads.ErrTarballGone) {
		t.Errorf("a refused upload left a tarball: %v", err)
	}
	if a := put(t, u, strings.NewReader("x"), 1, uploads.HeaderContentLengthRange, "5,10"); a.status != 400 {
		t.Errorf("smaller than the range: %d %s", a.status, a.body)
	}
	if a := put(t, u, io.MultiReader(strings.NewReader("x")), -1, uploads.HeaderContentLengthRange, "5,10"); a.status != 400 {
		t.Errorf("chunked, smaller than the range: %d %s", a.status, a.body)
	}
	if _, err := e.tarball(id, p); !errors.Is(err, uploads.ErrTarballGone) {
		t.Errorf("a refused upload left a tarball: %v", err)
	}
	if a := put(t, u, strings.NewReader("x"), 1, uploads.HeaderContentLengthRange, "ten"); a.status != 400 {
		t.Errorf("a malformed range: %d %s", a.status, a.body)
	}
	// Failed PUTs give the URL back: it still takes the tarball once.
	if a := put(t, u, strings.NewReader(body[:1000]), 1000); a.status != 200 {
		t.Fatalf("PUT of 1000 bytes: %d %s", a.status, a.body)
	}
}

// gate is a body whose first Read says so on read, then waits for open
// before it sends its one byte.
type gate struct {
	started    bool
	sent       bool
	open, read chan struct{}
}

func (g *gate) Read(p []byte) (int, error) {
	if !g.started {
		g.started = true
		close(g.read)
		<-g.open
	}
	if g.sent {
		return 0, io.EOF
	}
	g.sent = true
	p[0] = 'a'
	return 1, nil
}

// TestUploadSingleUseAcrossReplicas: two servers over one store and one
// bucket (replicas); a URL one of them issued is used once in all.
func TestUploadSingleUseAcrossReplicas(t *testing.T) {
	a := newEnv(t, nil)
	b := newEnv(t, &envOptions{st: a.st, bucket: a.bucket, clock: a.clock})
	id := a.create("agent", "internal_source")
	u, p := a.uploadURL(id)
	onB := strings.Replace(u, a.srv.URL, b.srv.URL, 1)

	// The first PUT, to replica a, holds its claim while its body waits.
	// With Expect: 100-continue the client sends the body only once the
	// server reads it, which it does after claiming the upload: the
	// body's first Read means the claim is taken.
	g := &gate{open: make(chan struct{}), read: make(chan struct{})}
	req, err := http.NewRequest(http.MethodPut, u, g)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = 1
	req.Header.Set("Expect", "100-continue")
	tr := &http.Transport{ExpectContinueTimeout: time.Hour}
	defer tr.CloseIdleConnections()
	first := make(chan int, 1)
	go func() {
		res, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			first <- -1
			return
		}
		res.Body.Close()
		first <- res.StatusCode
	}()
	<-g.read
	if r := put(t, onB, strings.NewReader("b"), 1); r.status != 409 {
		t.Errorf("PUT on replica b while a streams: %d %s", r.status, r.body)
	}
	close(g.open)
	if status := <-first; status != 200 {
		t.Fatalf("PUT on replica a: %d", status)
	}
	if r := put(t, onB, strings.NewReader("b"), 1); r.status != 409 {
		t.Errorf("PUT on replica b after a: %d %s", r.status, r.body)
	}
	if got, err := b.tarball(id, p); err != nil || got != "a" {
		t.Errorf("replica b reads %q, %v", got, err)
	}
	if r := b.patch(id, p); r.status != 200 {
		t.Errorf("PATCH on replica b: %d %s", r.status, r.body)
	}
}

// zeros reads n zero bytes, generated as read.
type zeros struct{ n int64 }

func (z *zeros) Read(p []byte) (int, error) {
	if z.n <= 0 {
		return 0, io.EOF
	}
	k := min(int64(len(p)), z.n)
	clear(p[:k])
	z.n -= k
	return int(k), nil
}

// TestUploadStreams: a 64 MiB upload is not held in memory: the whole
// process allocates far less than the body while it is received.
func TestUploadStreams(t *testing.T) {
	e := newEnv(t, nil)
	id := e.create("agent", "internal_source")
	u, p := e.uploadURL(id)
	const size = 64 << 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if a := put(t, u, &zeros{size}, size); a.status != 200 {
		t.Fatalf("PUT: %d %s", a.status, a.body)
	}
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > size/4 {
		t.Errorf("receiving %d bytes allocated %d bytes", size, alloc)
	}
	attrs, err := e.bucket.Attributes(context.Background(), tenant+"/"+id+"/"+strings.TrimSuffix(strings.TrimPrefix(p, "uploads/"+id+"/"), ".tar.gz")+".tar.gz")
	if err != nil || attrs.Size != size {
		t.Fatalf("stored: %+v, %v", attrs, err)
	}
}

func (e *env) blobCount() int {
	e.t.Helper()
	n := 0
	it := e.bucket.List(nil)
	for {
		o, err := it.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return n
		}
		if err != nil {
			e.t.Fatal(err)
		}
		if !o.IsDir {
			n++
		}
	}
}

func (e *env) sweep() int {
	e.t.Helper()
	n, err := e.svc.Sweep(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// TestSweepKeepsNewestRevisions: of twelve tarballs, each named by a
// revision, the two oldest go once their grace is over; a tarball no
// revision names goes too, and one not yet named within its grace stays.
func TestSweepKeepsNewestRevisions(t *testing.T) {
	e := newEnv(t, nil)
	id := e.create("agent", "internal_source")
	var paths, revisions []string
	for range 12 {
		u, p := e.uploadURL(id)
		if a := put(t, u, strings.NewReader(p), int64(len(p))); a.status != 200 {
			t.Fatalf("PUT: %d %s", a.status, a.body)
		}
		a := e.patch(id, p)
		var d struct {
			LatestRevisionID string `json:"latest_revision_id"`
		}
		if a.status != 200 || json.Unmarshal(a.body, &d) != nil {
			t.Fatalf("PATCH: %d %s", a.status, a.body)
		}
		paths, revisions = append(paths, p), append(revisions, d.LatestRevisionID)
	}
	uNever, pNever := e.uploadURL(id) // issued, never uploaded
	_ = uNever
	if n := e.sweep(); n != 0 {
		t.Fatalf("swept %d within the grace", n)
	}
	e.clock.Advance(uploads.URLTTL + uploads.Grace + time.Second)
	uLate, pLate := e.uploadURL(id) // uploaded, not named yet: within its grace
	if a := put(t, uLate, strings.NewReader("late"), 4); a.status != 200 {
		t.Fatal(a.status)
	}
	if n := e.sweep(); n != 3 {
		t.Fatalf("swept %d, want the 2 oldest and the one never uploaded", n)
	}
	for i, p := range paths {
		_, err := e.tarball(id, p)
		if gone := errors.Is(err, uploads.ErrTarballGone); gone != (i < 2) {
			t.Errorf("tarball %d: %v", i, err)
		}
	}
	if a := e.patch(id, paths[0]); a.status != 422 {
		t.Errorf("PATCH naming a removed tarball: %d %s", a.status, a.body)
	}
	// Redeploying a revision whose tarball went is refused at once (not
	// a build that fails later); one whose tarball is kept redeploys.
	if a := e.api("POST", "/v2/deployments/"+id+"/revisions/"+revisions[0]+"/redeploy", ""); a.status != 400 || !strings.Contains(string(a.body), "no longer kept") {
		t.Errorf("redeploy of a revision whose tarball went: %d %s", a.status, a.body)
	}
	if a := e.api("POST", "/v2/deployments/"+id+"/revisions/"+revisions[2]+"/redeploy", ""); a.status/100 != 2 {
		t.Errorf("redeploy of a revision whose tarball is kept: %d %s", a.status, a.body)
	}
	if a := e.patch(id, pNever); a.status != 422 {
		t.Errorf("PATCH naming an upload never made: %d %s", a.status, a.body)
	}
	if a := e.patch(id, pLate); a.status != 200 {
		t.Errorf("PATCH naming the late upload: %d %s", a.status, a.body)
	}
	if got := e.blobCount(); got != 11 {
		t.Errorf("%d tarballs stored, want 11", got)
	}
}

// TestSweepRemovesDeletedDeployments: a deployment's tarballs go once it
// is deleted.
func TestSweepRemovesDeletedDeployments(t *testing.T) {
	e := newEnv(t, nil)
	id, keep := e.create("agent", "internal_source"), e.create("kept", "internal_source")
	for _, d := range []string{id, id, keep} {
		u, p := e.uploadURL(d)
		if a := put(t, u, strings.NewReader("t"), 1); a.status != 200 {
			t.Fatal(a.status)
		}
		if a := e.patch(d, p); a.status != 200 {
			t.Fatal(a.status, string(a.body))
		}
	}
	if a := e.api("DELETE", "/v2/deployments/"+id, ""); a.status != 204 {
		t.Fatal(a.status)
	}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = e.cp.Run(ctx, deploysim.New(&deploysim.Options{Step: time.Millisecond})) })
	deadline := time.Now().Add(time.Minute)
	for e.api("GET", "/v2/deployments/"+id, "").status != 404 {
		if time.Now().After(deadline) {
			t.Fatal("the deployment was not removed within a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	wg.Wait()
	if n := e.sweep(); n != 2 {
		t.Fatalf("swept %d, want the deleted deployment's 2", n)
	}
	if got := e.blobCount(); got != 1 {
		t.Errorf("%d tarballs stored, want the kept deployment's 1", got)
	}
	if n := e.sweep(); n != 0 {
		t.Errorf("a second sweep removed %d", n)
	}
}

func TestOpenTarballRefusesOtherDeployments(t *testing.T) {
	e := newEnv(t, nil)
	id, other := e.create("agent", "internal_source"), e.create("other", "internal_source")
	u, p := e.uploadURL(id)
	if a := put(t, u, strings.NewReader("t"), 1); a.status != 200 {
		t.Fatal(a.status)
	}
	if _, err := e.svc.OpenTarball(context.Background(), tenant, other, p); !errors.Is(err, uploads.ErrTarballGone) {
		t.Errorf("another deployment's tarball: %v", err)
	}
	if _, err := e.svc.OpenTarball(context.Background(), "0190f0a0-0000-7000-8000-00000000000b", id, p); !errors.Is(err, uploads.ErrTarballGone) {
		t.Errorf("another tenant's tarball: %v", err)
	}
}
