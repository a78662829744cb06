package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distribution/distribution/v3"
	"github.com/distribution/distribution/v3/registry/api/errcode"
	storagedriver "github.com/distribution/distribution/v3/registry/storage/driver"
	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
)

// quota holds the blob bytes of each deployment's repositories under
// limit. A deployment's usage is the distinct blobs its repositories link
// (_layers), read from the storage, and the bytes its unfinished uploads
// have received, read from the ledger. An upload request reads both when
// it starts to send data and again every `every` bytes, adding what it
// received meanwhile to the ledger; between two reads, the bytes this
// process's uploads of the deployment receive are counted in memory
// (streamed), so that uploads running at once in one process count each
// other exactly, and those of other replicas sharing the ledger once
// they are added to it.
type quota struct {
	limit  int64
	every  int64         // bytes between two reads of the usage
	maxAge time.Duration // Options.UploadMaxAge
	ledger UploadLedger
	driver storagedriver.StorageDriver
	blobs  distribution.BlobStatter
	log    *slog.Logger

	mu     sync.Mutex
	active map[string]*streamed // by deployment id, while a request of it uploads
	sizes  map[digest.Digest]int64
}

// An upload request reads the usage again every quota/checksPerQuota
// bytes, and at least every maxCheckBytes: what another replica's upload
// has received and not yet added to the ledger is never more than that.
const (
	checksPerQuota = 16
	maxCheckBytes  = 16 << 20
)

// streamed counts the bytes this process's upload requests of one
// deployment have received (received), and how many of them are in the
// ledger (flushed); refs is how many such requests are running. mu
// orders the additions to the ledger with the reads of the two counts.
type streamed struct {
	mu       sync.Mutex
	received atomic.Int64
	flushed  atomic.Int64
	refs     int
}

// maxCachedSizes bounds quota.sizes (a blob's size never changes: its
// name is its digest).
const maxCachedSizes = 1 << 14

// repositoriesRoot is where Distribution's storage layout keeps the
// repositories: <root>/<name>/_layers/<algorithm>/<hex>/link names a blob
// the repository holds, <root>/<name>/_uploads/<id>/ is an unfinished
// upload.
const repositoriesRoot = "/docker/registry/v2/repositories"

func (q *quota) acquire(deploymentID string) *streamed {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.active[deploymentID]
	if s == nil {
		s = &streamed{}
		q.active[deploymentID] = s
	}
	s.refs++
	return s
}

func (q *quota) release(deploymentID string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if s := q.active[deploymentID]; s != nil {
		if s.refs--; s.refs == 0 {
			delete(q.active, deploymentID)
		}
	}
}

// usage is the bytes of the distinct blobs the deployment's repositories
// link in the storage.
func (q *quota) usage(ctx context.Context, deploymentID string) (blobs int64, err error) {
	root := path.Join(repositoriesRoot, Repository(deploymentID))
	linked := map[digest.Digest]bool{}
	err = walk(ctx, q.driver, root, func() { clear(linked) }, func(fi storagedriver.FileInfo) error {
		rel := strings.TrimPrefix(fi.Path(), root+"/")
		parts := strings.Split(rel, "/")
		if fi.IsDir() {
			if last := parts[len(parts)-1]; last == "_manifests" || last == "_uploads" {
				return storagedriver.ErrSkipDir // manifests are not counted; uploads are the ledger's
			}
			return nil
		}
		for i, p := range parts {
			if p == "_layers" && len(parts) == i+4 && parts[i+3] == "link" {
				if d := digest.NewDigestFromEncoded(digest.Algorithm(parts[i+1]), parts[i+2]); d.Validate() == nil {
					linked[d] = true
				}
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	for d := range linked {
		n, err := q.size(ctx, d)
		if err != nil {
			return 0, err
		}
		blobs += n
	}
	return blobs, nil
}

// size is the size of the blob d, 0 if the storage does not hold it.
func (q *quota) size(ctx context.Context, d digest.Digest) (int64, error) {
	q.mu.Lock()
	n, ok := q.sizes[d]
	q.mu.Unlock()
	if ok {
		return n, nil
	}
	desc, err := q.blobs.Stat(ctx, d)
	if errors.Is(err, distribution.ErrBlobUnknown) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	q.mu.Lock()
	if len(q.sizes) >= maxCachedSizes {
		clear(q.sizes)
	}
	q.sizes[d] = desc.Size
	q.mu.Unlock()
	return desc.Size, nil
}

// uploadPath is the path of a request that sends a blob's data (PATCH,
// or the closing PUT): the repository and the upload's id.
var uploadPath = regexp.MustCompile(`^/v2/(.+)/blobs/uploads/([^/]+)$`)

// uploadKey is the context key of a request's *upload, where the access
// controller finds it.
type uploadKey struct{}

// upload is one request of an upload: one that sends a blob's data
// (PATCH, or PUT with a body), under the quota, or one that finishes it
// (PUT, DELETE). Its body counts what it reads against the quota; beyond
// it, the body fails, the request is answered DENIED (the ResponseWriter
// replaces Distribution's answer to the failed read), and the upload's
// data is removed.
type upload struct {
	q          *quota
	ctx        context.Context
	repo, id   string
	body       io.ReadCloser
	length     int64 // the request's Content-Length; -1 when unknown
	deployment string
	authorized bool // the access controller granted push on repo

	started   bool
	counter   *streamed
	base      int64 // the usage at the last read of it
	start     int64 // counter.received then
	read      int64 // bytes of this request
	unflushed int64 // bytes of this request not yet in the ledger
	refused   errcode.Error
	exceeded  bool
	failed    error // reading the usage failed
}

// errOverQuota fails the body's Read of an upload beyond the quota.
var errOverQuota = errors.New("registry: over the deployment's quota")

// authorize is called by the access controller once it granted push on
// the upload's repository to g.
func (u *upload) authorize(g *Grant) {
	if g.Allows(u.repo, "push") {
		u.deployment, u.authorized = g.DeploymentID, true
	}
}

func (u *upload) Read(p []byte) (int, error) {
	if !u.started {
		u.failed = u.begin()
	} else if u.failed == nil && !u.exceeded && u.unflushed >= u.q.every {
		u.failed = u.check()
	}
	switch {
	case u.failed != nil:
		return 0, u.failed
	case u.exceeded:
		return 0, errOverQuota
	}
	// Read at most one byte beyond what is left, to know whether the body
	// goes beyond it.
	left := u.q.limit - u.base - (u.counter.received.Load() - u.start)
	if left < 0 {
		u.refuse(-1)
		return 0, errOverQuota
	}
	if left < int64(len(p)) {
		p = p[:left+1]
	}
	n, err := u.body.Read(p)
	now := u.counter.received.Add(int64(n))
	if over := u.base + now - u.start - u.q.limit; over > 0 {
		u.counter.received.Add(-int64(n)) // never stored
		u.refuse(-1)
		return 0, errOverQuota
	}
	u.read += int64(n)
	u.unflushed += int64(n)
	return n, err
}

func (u *upload) Close() error { return u.body.Close() }

// begin reads the deployment's usage, once the request is authorized and
// its handler reads the body.
func (u *upload) begin() error {
	u.started = true
	if !u.authorized {
		// Only the handler of an authorized request reads the body.
		u.exceeded = true
		u.refused = errcode.ErrorCodeDenied.WithMessage("the upload's data came before its authorization")
		return errOverQuota
	}
	u.counter = u.q.acquire(u.deployment)
	if err := u.check(); err != nil {
		return err
	}
	if u.length > 0 && u.base+u.length > u.q.limit {
		u.refuse(u.length)
	}
	return nil
}

// check adds what the request received since the last check to the
// ledger and reads the usage again: the blobs the storage holds, the
// ledger's unfinished uploads, and what this process's uploads of the
// deployment received and have not added to it yet.
func (u *upload) check() error {
	blobs, err := u.q.usage(u.ctx, u.deployment)
	if err != nil {
		return fmt.Errorf("registry: the usage of deployment %s: %w", u.deployment, err)
	}
	c := u.counter
	c.mu.Lock()
	defer c.mu.Unlock()
	unfinished, err := u.q.ledger.AddUpload(u.ctx, u.deployment, u.id, u.unflushed, u.q.maxAge)
	if err != nil {
		return fmt.Errorf("registry: the unfinished uploads of deployment %s: %w", u.deployment, err)
	}
	c.flushed.Add(u.unflushed)
	u.unflushed = 0
	received := c.received.Load()
	u.base = blobs + unfinished + received - c.flushed.Load()
	u.start = received
	return nil
}

// refuse records the answer to an upload beyond the quota. size is the
// request's Content-Length when that alone goes beyond it, else -1.
func (u *upload) refuse(size int64) {
	u.exceeded = true
	used := u.base + u.counter.received.Load() - u.start - u.read
	msg := fmt.Sprintf("registry quota exceeded: deployment %s may store %s of image blobs and holds %s (unfinished uploads included)",
		u.deployment, formatBytes(u.q.limit), formatBytes(used))
	if size > 0 {
		msg += fmt.Sprintf("; this upload of %s does not fit", formatBytes(size))
	} else {
		msg += fmt.Sprintf("; this upload does not fit in the %s left", formatBytes(max(u.q.limit-used, 0)))
	}
	u.refused = errcode.ErrorCodeDenied.WithMessage(msg)
	u.q.log.Info("registry: refused upload over quota", "deployment", u.deployment, "repository", u.repo,
		"quota_bytes", u.q.limit, "used_bytes", used)
}

// finish ends the request, answered status: what it received goes to the
// ledger, and an upload it finished (committed: PUT answered 201; or
// cancelled: DELETE answered 204) leaves it. An upload refused over the
// quota is removed, so that its data does not count.
func (u *upload) finish(ns distribution.Namespace, method string, status int) {
	// The request's context may be done (the client went away); the
	// count is the registry's own business.
	ctx := context.WithoutCancel(u.ctx)
	done := method == http.MethodPut && status == http.StatusCreated || method == http.MethodDelete && status == http.StatusNoContent
	if u.counter == nil {
		if done && u.authorized {
			u.drop(ctx)
		}
		return // nothing read: nothing counted, nothing stored
	}
	defer u.q.release(u.deployment)
	if !u.exceeded {
		if u.unflushed > 0 && !done {
			c := u.counter
			c.mu.Lock()
			if _, err := u.q.ledger.AddUpload(ctx, u.deployment, u.id, u.unflushed, u.q.maxAge); err != nil {
				u.q.log.Warn("registry: counting an unfinished upload", "repository", u.repo, "err", err)
			} else {
				c.flushed.Add(u.unflushed)
			}
			c.mu.Unlock()
		} else if done {
			u.counter.received.Add(-u.unflushed) // in the storage now, or gone
		}
		if done {
			u.drop(ctx)
		}
		return
	}
	u.counter.received.Add(-u.unflushed) // removed below
	u.drop(ctx)
	named, err := reference.WithName(u.repo)
	if err != nil {
		return
	}
	repo, err := ns.Repository(ctx, named)
	if err != nil {
		return
	}
	w, err := repo.Blobs(ctx).Resume(ctx, u.id)
	if err != nil {
		return // already gone
	}
	if err := w.Cancel(ctx); err != nil {
		u.q.log.Info("registry: removing an upload refused over quota", "repository", u.repo, "err", err)
	}
}

// drop removes the upload's count from the ledger.
func (u *upload) drop(ctx context.Context) {
	if err := u.q.ledger.DropUpload(ctx, u.deployment, u.id); err != nil {
		u.q.log.Warn("registry: dropping the count of an upload", "repository", u.repo, "err", err)
	}
}

// refusingWriter answers a request whose upload went over the quota with
// the quota's DENIED error, in place of what Distribution answers to the
// failed read (500 UNKNOWN).
type refusingWriter struct {
	http.ResponseWriter
	u        *upload
	answered bool
	code     int // the status answered
}

func (w *refusingWriter) WriteHeader(code int) {
	if w.u.exceeded {
		w.answer()
		return
	}
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *refusingWriter) Write(b []byte) (int, error) {
	if w.u.exceeded {
		w.answer()
		return len(b), nil
	}
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *refusingWriter) answer() {
	if w.answered {
		return
	}
	w.answered = true
	w.code = http.StatusForbidden
	h := w.ResponseWriter.Header()
	for _, k := range []string{"Location", "Range", "Docker-Upload-UUID", "Content-Length"} {
		h.Del(k)
	}
	_ = errcode.ServeJSON(w.ResponseWriter, w.u.refused)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *refusingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// formatBytes writes n in the largest binary unit it reaches: 512 B,
// 1.5 KiB, 10 GiB.
func formatBytes(n int64) string {
	const units = "KMGTPE"
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/1024, 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	s := fmt.Sprintf("%.1f", v)
	s = strings.TrimSuffix(s, ".0")
	return s + " " + units[i:i+1] + "iB"
}
