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

	"github.com/distribution/distribution/v3"
	"github.com/distribution/distribution/v3/registry/api/errcode"
	storagedriver "github.com/distribution/distribution/v3/registry/storage/driver"
	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
)

// quota holds the blob bytes of each deployment's repositories under
// limit. A deployment's usage is read from the storage when an upload
// request starts to send data: the distinct blobs its repositories link
// (_layers) and the data of their unfinished uploads (_uploads). The
// bytes that this process's uploads receive after that are counted in
// memory (streamed), so that uploads running at once count each other.
type quota struct {
	limit  int64
	driver storagedriver.StorageDriver
	blobs  distribution.BlobStatter
	log    *slog.Logger

	mu     sync.Mutex
	active map[string]*streamed // by deployment id, while a request of it uploads
	sizes  map[digest.Digest]int64
}

// streamed counts the bytes this process's upload requests of one
// deployment have received; refs is how many such requests are running.
type streamed struct {
	bytes atomic.Int64
	refs  int
}

// maxCachedSizes bounds quota.sizes (a blob's size never changes: its
// name is its digest).
const maxCachedSizes = 1 << 14

// repositoriesRoot is where Distribution's storage layout keeps the
// repositories: <root>/<name>/_layers/<algorithm>/<hex>/link names a blob
// the repository holds, <root>/<name>/_uploads/<id>/data is an unfinished
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

// usage is what the deployment's repositories hold in the storage: the
// bytes of the distinct blobs they link, and those of their unfinished
// uploads.
func (q *quota) usage(ctx context.Context, deploymentID string) (blobs, unfinished int64, err error) {
	root := path.Join(repositoriesRoot, Repository(deploymentID))
	linked := map[digest.Digest]bool{}
	err = q.driver.Walk(ctx, root, func(fi storagedriver.FileInfo) error {
		rel := strings.TrimPrefix(fi.Path(), root+"/")
		parts := strings.Split(rel, "/")
		if fi.IsDir() {
			if parts[len(parts)-1] == "_manifests" {
				return storagedriver.ErrSkipDir // manifests are not counted
			}
			return nil
		}
		for i, p := range parts {
			switch {
			case p == "_layers" && len(parts) == i+4 && parts[i+3] == "link":
				if d := digest.NewDigestFromEncoded(digest.Algorithm(parts[i+1]), parts[i+2]); d.Validate() == nil {
					linked[d] = true
				}
			case p == "_uploads" && len(parts) == i+3 && parts[i+2] == "data":
				unfinished += fi.Size()
			}
		}
		return nil
	})
	if errors.As(err, new(storagedriver.PathNotFoundError)) {
		return 0, 0, nil // nothing pushed yet
	}
	if err != nil {
		return 0, 0, err
	}
	for d := range linked {
		n, err := q.size(ctx, d)
		if err != nil {
			return 0, 0, err
		}
		blobs += n
	}
	return blobs, unfinished, nil
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

// upload is one request that sends a blob's data, under the quota. Its
// body counts what it reads against the quota; beyond it, the body fails,
// the request is answered DENIED (the ResponseWriter replaces
// Distribution's answer to the failed read), and the upload's data is
// removed.
type upload struct {
	q          *quota
	ctx        context.Context
	repo, id   string
	body       io.ReadCloser
	length     int64 // the request's Content-Length; -1 when unknown
	deployment string
	authorized bool // the access controller granted push on repo

	started  bool
	counter  *streamed
	base     int64 // usage when the first read came
	start    int64 // counter.bytes then
	read     int64 // bytes of this request
	refused  errcode.Error
	exceeded bool
	failed   error // reading the usage failed
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
	}
	switch {
	case u.failed != nil:
		return 0, u.failed
	case u.exceeded:
		return 0, errOverQuota
	}
	// Read at most one byte beyond what is left, to know whether the body
	// goes beyond it.
	left := u.q.limit - u.base - (u.counter.bytes.Load() - u.start)
	if left < 0 {
		u.refuse(-1)
		return 0, errOverQuota
	}
	if left < int64(len(p)) {
		p = p[:left+1]
	}
	n, err := u.body.Read(p)
	now := u.counter.bytes.Add(int64(n))
	if over := u.base + now - u.start - u.q.limit; over > 0 {
		u.counter.bytes.Add(-int64(n)) // never stored
		u.refuse(-1)
		return 0, errOverQuota
	}
	u.read += int64(n)
	return n, err
}

func (u *upload) Close() error { return u.body.Close() }

// begin reads the deployment's usage from the storage, once the request
// is authorized and its handler reads the body.
func (u *upload) begin() error {
	u.started = true
	if !u.authorized {
		// Only the handler of an authorized request reads the body.
		u.exceeded = true
		u.refused = errcode.ErrorCodeDenied.WithMessage("the upload's data came before its authorization")
		return errOverQuota
	}
	u.counter = u.q.acquire(u.deployment)
	u.start = u.counter.bytes.Load()
	blobs, unfinished, err := u.q.usage(u.ctx, u.deployment)
	if err != nil {
		return fmt.Errorf("registry: the usage of deployment %s: %w", u.deployment, err)
	}
	u.base = blobs + unfinished
	if u.length > 0 && u.base+u.length > u.q.limit {
		u.refuse(u.length)
	}
	return nil
}

// refuse records the answer to an upload beyond the quota. size is the
// request's Content-Length when that alone goes beyond it, else -1.
func (u *upload) refuse(size int64) {
	u.exceeded = true
	used := u.base + u.counter.bytes.Load() - u.start - u.read
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

// finish ends the request: the upload refused over the quota is removed,
// so that its data does not count.
func (u *upload) finish(ns distribution.Namespace) {
	if u.counter == nil {
		return // nothing read: nothing counted, nothing stored
	}
	defer u.q.release(u.deployment)
	if !u.exceeded {
		return
	}
	u.counter.bytes.Add(-u.read) // removed below
	// The request's context may be done (the client went away); the
	// removal is the registry's own business.
	ctx := context.WithoutCancel(u.ctx)
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

// refusingWriter answers a request whose upload went over the quota with
// the quota's DENIED error, in place of what Distribution answers to the
// failed read (500 UNKNOWN).
type refusingWriter struct {
	http.ResponseWriter
	u        *upload
	answered bool
}

func (w *refusingWriter) WriteHeader(code int) {
	if w.u.exceeded {
		w.answer()
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *refusingWriter) Write(b []byte) (int, error) {
	if w.u.exceeded {
		w.answer()
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

func (w *refusingWriter) answer() {
	if w.answered {
		return
	}
	w.answered = true
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
