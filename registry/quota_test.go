package registry_test

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/deployplane/deployplane/registry"
)

const kib = 1 << 10

// image is a random image of one layer of about size bytes.
func image(t *testing.T, size int64) v1.Image {
	t.Helper()
	img, err := random.Image(size, 1)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// pushToken is a push token of a new internal_docker deployment of
// tenant A, and the deployment's id.
func (e *env) pushToken(t *testing.T, name string) (id, token string) {
	t.Helper()
	id = e.deployment(t, tenantA, name, "internal_docker")
	tok, err := e.tokens.IssuePushToken(e.ctx, tenantA, id)
	if err != nil {
		t.Fatal(err)
	}
	return id, tok.Token
}

// overQuota reports whether err is the registry's refusal of a push over
// the quota of deployment id, as go-containerregistry (and so crane and
// the CLIs built on it) reports it: DENIED, 403, with the message.
func overQuota(t *testing.T, err error, id string) bool {
	t.Helper()
	var te *transport.Error
	if !errors.As(err, &te) || te.StatusCode != http.StatusForbidden || len(te.Errors) == 0 {
		return false
	}
	d := te.Errors[0]
	return d.Code == transport.DeniedErrorCode && strings.Contains(d.Message, "registry quota exceeded: deployment "+id+" may store 1 MiB") &&
		strings.Contains(err.Error(), d.Message)
}

// TestQuotaRefusesPushOver: with a quota of 1 MiB per deployment, a push
// that fits succeeds, one that would go beyond it is refused with the
// registry's DENIED error, and another deployment still pushes. The blobs
// pushed count: after two pushes of 400 KiB, one of 300 KiB no longer
// fits.
func TestQuotaRefusesPushOver(t *testing.T) {
	e := newEnvWith(t, &registry.Options{Quota: 1 << 20})
	a, tokA := e.pushToken(t, "a")
	b, tokB := e.pushToken(t, "b")

	if err := e.push(image(t, 400*kib), "deployments/"+a+"/agent:v1", tokA); err != nil {
		t.Fatalf("a push under the quota: %v", err)
	}
	big := image(t, 700*kib)
	if err := e.push(big, "deployments/"+a+"/agent:v2", tokA); !overQuota(t, err, a) {
		t.Fatalf("a push over the quota: %v, want DENIED saying so", err)
	}
	if err := e.push(big, "deployments/"+b+"/agent:v1", tokB); err != nil {
		t.Fatalf("the same push into another deployment: %v", err)
	}
	// The refused push left nothing that counts.
	if err := e.push(image(t, 400*kib), "deployments/"+a+"/other:v1", tokA); err != nil {
		t.Fatalf("a second push of 400 KiB: %v", err)
	}
	if err := e.push(image(t, 300*kib), "deployments/"+a+"/agent:v3", tokA); !overQuota(t, err, a) {
		t.Fatalf("a push beyond what the pushed blobs leave: %v, want DENIED", err)
	}
}

// TestQuotaNone: a negative Options.Quota is no quota.
func TestQuotaNone(t *testing.T) {
	e := newEnvWith(t, &registry.Options{Quota: -1})
	a, tok := e.pushToken(t, "a")
	if err := e.push(image(t, 2<<20), "deployments/"+a+"/agent:v1", tok); err != nil {
		t.Fatalf("push without a quota: %v", err)
	}
}

// startUpload starts a blob upload into repo and returns its URL.
func (e *env) startUpload(t *testing.T, repo, token string) string {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://"+e.host+"/v2/"+repo+"/blobs/uploads/", nil)
	req.SetBasicAuth("oauth2accesstoken", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusAccepted || loc == "" {
		t.Fatalf("starting an upload: %d, Location %q", resp.StatusCode, loc)
	}
	if strings.HasPrefix(loc, "/") {
		loc = "http://" + e.host + loc
	}
	return loc
}

// patch sends body to the upload at loc in one PATCH of unknown length
// (chunked, as the docker daemon sends layers).
func patch(loc, token string, body io.Reader) (*http.Response, []byte, error) {
	req, err := http.NewRequest("PATCH", loc, io.NopCloser(body)) // unknown length
	if err != nil {
		return nil, nil, err
	}
	req.SetBasicAuth("oauth2accesstoken", token)
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// TestQuotaStreamedUpload: a blob sent in a body of unknown length is
// refused once it goes beyond the quota, with the registry's error
// format, and the refused upload's data is removed: it no longer counts.
func TestQuotaStreamedUpload(t *testing.T) {
	e := newEnvWith(t, &registry.Options{Quota: 1 << 20})
	a, tok := e.pushToken(t, "a")
	loc := e.startUpload(t, "deployments/"+a+"/agent", tok)
	resp, body, err := patch(loc, tok, io.LimitReader(rand.Reader, 1536*kib))
	if err != nil {
		t.Fatalf("PATCH: %v", err)
	}
	var answer struct {
		Errors []struct{ Code, Message string } `json:"errors"`
	}
	if err := json.Unmarshal(body, &answer); err != nil || resp.StatusCode != http.StatusForbidden ||
		resp.Header.Get("Content-Type") != "application/json" || len(answer.Errors) != 1 {
		t.Fatalf("PATCH over the quota: %d %s %q, want 403 with the registry's JSON errors", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if got := answer.Errors[0]; got.Code != "DENIED" || !strings.Contains(got.Message, "registry quota exceeded: deployment "+a) ||
		!strings.Contains(got.Message, "does not fit in the 1 MiB left") {
		t.Errorf("the error: %+v", got)
	}
	// The upload is gone.
	req, _ := http.NewRequest("GET", loc, nil)
	req.SetBasicAuth("oauth2accesstoken", tok)
	status, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	status.Body.Close()
	if status.StatusCode != http.StatusNotFound {
		t.Errorf("the refused upload: GET %d, want 404", status.StatusCode)
	}
	if err := e.push(image(t, 900*kib), "deployments/"+a+"/agent:v1", tok); err != nil {
		t.Errorf("a push of 900 KiB after the refused upload: %v", err)
	}
}

// TestQuotaConcurrentUploads: two uploads of one deployment sent at once,
// each under the quota and together beyond it, do not both succeed: each
// counts the other's bytes as they arrive.
func TestQuotaConcurrentUploads(t *testing.T) {
	e := newEnvWith(t, &registry.Options{Quota: 1 << 20})
	a, tok := e.pushToken(t, "a")
	sizes := []int64{700 * kib, 500 * kib}
	locs := []string{e.startUpload(t, "deployments/"+a+"/one", tok), e.startUpload(t, "deployments/"+a+"/two", tok)}
	statuses := make([]int, len(sizes))
	var wg sync.WaitGroup
	pipes := make([]*io.PipeWriter, len(sizes))
	for i := range sizes {
		pr, pw := io.Pipe()
		pipes[i] = pw
		wg.Go(func() {
			resp, _, err := patch(locs[i], tok, pr)
			if err != nil {
				t.Errorf("PATCH %d: %v", i, err)
				pr.CloseWithError(err)
				return
			}
			statuses[i] = resp.StatusCode
		})
	}
	// Both bodies flow at once, 64 KiB at a time each.
	chunk := make([]byte, 64*kib)
	for sent := int64(0); sent < sizes[0]; sent += int64(len(chunk)) {
		for i, pw := range pipes {
			if sent < sizes[i] {
				_, _ = rand.Read(chunk)
				_, _ = pw.Write(chunk) // fails once the upload is refused
			}
		}
	}
	for _, pw := range pipes {
		pw.Close()
	}
	wg.Wait()
	if statuses[0] == http.StatusAccepted && statuses[1] == http.StatusAccepted {
		t.Fatalf("two uploads of 700 and 500 KiB under a quota of 1 MiB both accepted")
	}
	if statuses[0] != http.StatusForbidden && statuses[1] != http.StatusForbidden {
		t.Fatalf("statuses %v, want a 403", statuses)
	}
}

// TestQuotaCountsUnfinishedUploads: the data of an upload not yet
// completed counts against the quota.
func TestQuotaCountsUnfinishedUploads(t *testing.T) {
	e := newEnvWith(t, &registry.Options{Quota: 1 << 20})
	a, tok := e.pushToken(t, "a")
	first := e.startUpload(t, "deployments/"+a+"/one", tok)
	if resp, body, err := patch(first, tok, io.LimitReader(rand.Reader, 600*kib)); err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("600 KiB: %v %v %s, want 202", resp, err, body)
	}
	second := e.startUpload(t, "deployments/"+a+"/two", tok)
	if resp, body, err := patch(second, tok, io.LimitReader(rand.Reader, 600*kib)); err != nil || resp.StatusCode != http.StatusForbidden ||
		!strings.Contains(string(body), "holds 600 KiB (unfinished uploads included)") {
		t.Fatalf("600 KiB beside an unfinished upload of 600 KiB: %v %v %s, want 403", resp, err, body)
	}
}

// TestQuotaAcrossReplicas: two registries over one storage and one
// control plane's store (replicas behind one host) count each other's
// uploads while they stream: an upload of 700 KiB under way in one leaves
// no room for 500 KiB in the other, under a quota of 1 MiB.
func TestQuotaAcrossReplicas(t *testing.T) {
	e := newEnvWith(t, &registry.Options{Quota: 1 << 20})
	other := e.replica(t, &registry.Options{Quota: 1 << 20})
	a, tok := e.pushToken(t, "a")
	loc := e.startUpload(t, "deployments/"+a+"/one", tok)
	pr, pw := io.Pipe()
	first := make(chan int, 1)
	go func() {
		resp, _, err := patch(loc, tok, pr)
		if err != nil {
			t.Errorf("PATCH of 700 KiB: %v", err)
			first <- 0
			return
		}
		first <- resp.StatusCode
	}()
	// 700 KiB in 64 KiB writes: each write returns once the registry has
	// read it, and the registry adds what it read to the ledger every
	// 64 KiB (a sixteenth of the quota), so at least 600 KiB is counted.
	chunk := make([]byte, 64*kib)
	for sent := 0; sent < 700*kib; sent += len(chunk) {
		_, _ = rand.Read(chunk)
		if _, err := pw.Write(chunk[:min(len(chunk), 700*kib-sent)]); err != nil {
			t.Fatal(err)
		}
	}
	second := other.startUpload(t, "deployments/"+a+"/two", tok)
	req, _ := http.NewRequest("PATCH", second, io.LimitReader(rand.Reader, 500*kib))
	req.ContentLength = 500 * kib
	req.SetBasicAuth("any", tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// Refused before the body when the ledger already counts enough of
	// the stream ("this upload of 500 KiB does not fit"), else while it
	// is read, once a re-read of the ledger does ("does not fit in the
	// ... left"): which depends on how far the other replica's count has
	// gone, and either refuses the same bytes.
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "does not fit") {
		t.Errorf("500 KiB in the other replica beside 700 KiB streaming: %d %s, want 403", resp.StatusCode, body)
	}
	pw.Close()
	if st := <-first; st != http.StatusAccepted {
		t.Errorf("the 700 KiB upload: %d, want 202", st)
	}
}

// replica is another registry over e's storage and store, served on a
// listener of its own.
func (e *env) replica(t *testing.T, opts *registry.Options) *env {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	r := *e
	r.host = srv.Listener.Addr().String()
	opts.Host, opts.Dir, opts.Aliases, opts.Ledger = r.host, e.dir, []string{e.host}, e.tokens
	reg, err := registry.New(e.ctx, e.tokens, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	r.reg = reg
	srv.Config.Handler = reg
	srv.Start()
	t.Cleanup(srv.Close)
	return &r
}
