package uploads

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/store"
)

// PathPrefix is the path below which Service serves the PUTs of its upload
// URLs: PathPrefix + "/<tenant>/<deployment id>/<upload id>". A program
// mounts Service there (package httphandler does, with
// httphandler.Options.Uploads).
const PathPrefix = "/v2/uploads"

// The query parameters of an upload URL.
const (
	paramExpires   = "expires"
	paramSignature = "signature"
)

// HeaderContentLengthRange is the header of Google Cloud Storage's signed
// URLs that bounds the size of the body, "min,max" in bytes; langgraph
// deploy sends "0,209715200". When sent, the PUT refuses a body outside
// it (and beyond the Service's own limit in any case).
const HeaderContentLengthRange = "X-Goog-Content-Length-Range"

// DefaultSweepInterval is how often Run removes the tarballs no revision
// needs.
const DefaultSweepInterval = time.Minute

// ErrTarballGone is matched (errors.Is) by OpenTarball's error for an
// object_path whose tarball is not (or no longer) stored.
var ErrTarballGone = errors.New("source tarball not found")

// Options configure a Service. Bucket, Key and PublicURL are required.
type Options struct {
	// Bucket stores the tarballs, under
	// <tenant>/<deployment id>/<upload id>.tar.gz. The Service does not
	// close it.
	Bucket *blob.Bucket
	// Key signs the upload URLs (HMAC-SHA256), at least 32 bytes;
	// SigningKey derives one from the server's secret key. Replicas
	// behind one address need the same key.
	Key []byte
	// PublicURL is the base URL clients reach the server at (e.g.
	// https://deploy.example.com, or http://127.0.0.1:8124): upload URLs
	// are PublicURL + PathPrefix + ...
	PublicURL string
	// MaxBytes bounds a tarball; default MaxBytes (200 MiB).
	MaxBytes int64
	// Clock tells the time of signatures' expiry and of the upload
	// records; default time.Now.
	Clock func() time.Time
	// Logger receives the failures of the blob store and of sweeps.
	// Default: discard.
	Logger *slog.Logger
}

// Service issues signed upload URLs, receives their PUTs into the blob
// store, hands the tarballs to builds, and removes those no revision
// needs. It is safe for concurrent use.
type Service struct {
	cp        *controlplane.ControlPlane
	st        store.Store // cp's, where the records are
	bucket    *blob.Bucket
	key       []byte
	publicURL string
	max       int64
	clock     func() time.Time
	log       *slog.Logger
}

// New returns a Service that keeps its upload records in cp's store
// (cp.Store). Revisions may name its uploads when cp was given Records{}
// as controlplane.Options.Uploads.
func New(cp *controlplane.ControlPlane, o *Options) (*Service, error) {
	if o == nil || o.Bucket == nil {
		return nil, errors.New("uploads: Options.Bucket is required")
	}
	if len(o.Key) < 32 {
		return nil, errors.New("uploads: Options.Key must be at least 32 bytes")
	}
	u, err := url.Parse(o.PublicURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("uploads: Options.PublicURL %q is not an http(s) URL", o.PublicURL)
	}
	s := &Service{cp: cp, st: cp.Store(), bucket: o.Bucket, key: append([]byte(nil), o.Key...), publicURL: strings.TrimRight(o.PublicURL, "/"),
		max: o.MaxBytes, clock: o.Clock, log: o.Logger}
	if s.max <= 0 {
		s.max = MaxBytes
	}
	if s.clock == nil {
		s.clock = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s, nil
}

// SigningKey derives the key that signs upload URLs from the server's
// secret key (the 32 bytes that seal secrets at rest), so that the two
// uses never share a key.
func SigningKey(secretKey []byte) []byte {
	m := hmac.New(sha256.New, secretKey)
	m.Write([]byte("deployplane upload URL signing key v1"))
	return m.Sum(nil)
}

// UploadURL issues an upload for an internal_source deployment and
// returns its signed URL (single use, valid URLTTL) and its object_path,
// the answer of POST /v2/deployments/{id}/upload-url. Errors:
// *apierr.NotFoundError; apierr.ErrInvalidState for a deployment of
// another source ("upload URL is only available for 'internal_source'
// source deployments") or one being deleted.
func (s *Service) UploadURL(ctx context.Context, tenant, deploymentID string) (uploadURL, objectPath string, err error) {
	u, err := s.issue(ctx, tenant, deploymentID)
	if err != nil {
		return "", "", err
	}
	exp := strconv.FormatInt(u.ExpiresAt.Unix(), 10)
	q := url.Values{paramExpires: {exp}, paramSignature: {s.sign(u.Tenant, u.DeploymentID, u.ID, exp)}}
	return s.publicURL + PathPrefix + "/" + u.Tenant + "/" + u.DeploymentID + "/" + u.ID + "?" + q.Encode(), u.ObjectPath(), nil
}

// sign is the URL-safe base64 HMAC-SHA256 of an upload's identity and
// expiry.
func (s *Service) sign(tenant, deploymentID, id, expires string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("v1\n" + tenant + "\n" + deploymentID + "\n" + id + "\n" + expires))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// blobKey is where an upload's tarball is stored.
func blobKey(tenant, deploymentID, id string) string {
	return tenant + "/" + deploymentID + "/" + id + ".tar.gz"
}

// errorBody is the JSON of an error answer.
type errorBody struct {
	Detail string `json:"detail"`
}

func reply(w http.ResponseWriter, status int, detail string) {
	b, _ := json.Marshal(errorBody{detail})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	if status == http.StatusConflict {
		// Wire contract section 9: repeating the PUT cannot succeed.
		w.Header().Set("X-Should-Retry", "false")
	}
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// ServeHTTP receives the PUT of an upload URL: it checks the signature
// and the expiry (403), claims the upload (409 when used already, or
// while another PUT of it streams), streams the body into the bucket,
// at most Options.MaxBytes and within X-Goog-Content-Length-Range when
// sent (413 beyond), and answers 200 with an empty body once the tarball
// is stored. A PUT that fails gives the URL back, to be used again until
// it expires. Errors are JSON {"detail": "..."}.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPut {
		w.Header().Set("Allow", http.MethodPut)
		reply(w, http.StatusMethodNotAllowed, "Method Not Allowed")
		return
	}
	u, status, detail := s.verify(r)
	if status != 0 {
		reply(w, status, detail)
		return
	}
	limit, least, status, detail := s.limit(r)
	if status != 0 {
		reply(w, status, detail)
		return
	}
	// The server's read and write timeouts are for API calls; an upload
	// may take until its URL expires.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(u.ExpiresAt.Add(time.Minute))
	_ = rc.SetWriteDeadline(u.ExpiresAt.Add(2 * time.Minute))

	ctx := r.Context()
	lease, err := s.start(ctx, u)
	if err != nil {
		s.replyErr(w, r, err)
		return
	}
	size, status, detail := s.store(ctx, u, r.Body, limit)
	if status == 0 && size < least { // a chunked body under the range's minimum
		s.remove(ctx, u)
		status, detail = http.StatusBadRequest, s.tooSmall(least)
	}
	if status != 0 {
		if err := s.abandon(context.WithoutCancel(ctx), u, lease); err != nil {
			s.log.Error("uploads: giving back a failed upload", "deployment", u.DeploymentID, "upload", u.ID, "err", err)
		}
		reply(w, status, detail)
		return
	}
	if err := s.finish(context.WithoutCancel(ctx), u, lease, size); err != nil {
		s.remove(ctx, u)
		s.replyErr(w, r, err)
		return
	}
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusOK)
}

// remove deletes the tarball of a PUT that did not complete.
func (s *Service) remove(ctx context.Context, u *Upload) {
	err := s.bucket.Delete(context.WithoutCancel(ctx), blobKey(u.Tenant, u.DeploymentID, u.ID))
	if err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		s.log.Error("uploads: removing the tarball of a failed upload", "deployment", u.DeploymentID, "upload", u.ID, "err", err)
	}
}

// verify checks the URL's signature and expiry, and returns the upload it
// names, or the status and detail of a refusal.
func (s *Service) verify(r *http.Request) (*Upload, int, string) {
	const bad = "The upload URL's signature is not valid."
	rest, ok := strings.CutPrefix(r.URL.Path, PathPrefix+"/")
	parts := strings.Split(rest, "/")
	if !ok || len(parts) != 3 || apierr.CheckTenant(parts[0]) != nil {
		return nil, http.StatusForbidden, bad
	}
	q := r.URL.Query()
	exp, sig := q.Get(paramExpires), q.Get(paramSignature)
	want := s.sign(parts[0], parts[1], parts[2], exp)
	if !hmac.Equal([]byte(sig), []byte(want)) {
		return nil, http.StatusForbidden, bad
	}
	secs, err := strconv.ParseInt(exp, 10, 64)
	if err != nil {
		return nil, http.StatusForbidden, bad
	}
	expires := time.Unix(secs, 0).UTC()
	if !s.clock().Before(expires) {
		return nil, http.StatusForbidden, "The upload URL has expired."
	}
	return &Upload{Tenant: parts[0], DeploymentID: parts[1], ID: parts[2], ExpiresAt: expires}, 0, ""
}

// limit is the most bytes the PUT may send: Options.MaxBytes, lowered by
// X-Goog-Content-Length-Range; a Content-Length beyond it is refused at
// once.
func (s *Service) limit(r *http.Request) (limit, least int64, status int, detail string) {
	limit = s.max
	if h := r.Header.Get(HeaderContentLengthRange); h != "" {
		lo, hi, ok := strings.Cut(h, ",")
		a, err1 := strconv.ParseInt(strings.TrimSpace(lo), 10, 64)
		b, err2 := strconv.ParseInt(strings.TrimSpace(hi), 10, 64)
		if !ok || err1 != nil || err2 != nil || a < 0 || b < a {
			return 0, 0, http.StatusBadRequest, HeaderContentLengthRange + " must be \"min,max\" in bytes."
		}
		least, limit = a, min(limit, b)
	}
	if r.ContentLength > limit {
		return 0, 0, http.StatusRequestEntityTooLarge, s.tooLarge(limit)
	}
	if r.ContentLength >= 0 && r.ContentLength < least {
		return 0, 0, http.StatusBadRequest, s.tooSmall(least)
	}
	return limit, least, 0, ""
}

func (s *Service) tooSmall(least int64) string {
	return fmt.Sprintf("The upload is smaller than the %d bytes %s asks for.", least, HeaderContentLengthRange)
}

func (s *Service) tooLarge(limit int64) string {
	return fmt.Sprintf("The upload is larger than the limit of %d bytes.", limit)
}

// store streams body into the bucket, at most limit bytes; on failure
// nothing is stored.
func (s *Service) store(ctx context.Context, u *Upload, body io.Reader, limit int64) (int64, int, string) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	bw, err := s.bucket.NewWriter(wctx, blobKey(u.Tenant, u.DeploymentID, u.ID), &blob.WriterOptions{ContentType: "application/gzip"})
	if err != nil {
		s.log.Error("uploads: opening the blob store", "err", err)
		return 0, http.StatusInternalServerError, "Internal Server Error"
	}
	n, err := io.Copy(bw, io.LimitReader(body, limit+1))
	switch {
	case err == nil && n > limit:
		cancel() // the writer discards what it has
		_ = bw.Close()
		return 0, http.StatusRequestEntityTooLarge, s.tooLarge(limit)
	case err != nil:
		cancel()
		_ = bw.Close()
		if ctx.Err() != nil {
			return 0, http.StatusBadRequest, "The upload was cut off."
		}
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return 0, http.StatusRequestEntityTooLarge, s.tooLarge(limit)
		}
		return 0, http.StatusBadRequest, "The upload was cut off: " + err.Error()
	}
	if err := bw.Close(); err != nil {
		s.log.Error("uploads: storing a tarball", "deployment", u.DeploymentID, "upload", u.ID, "err", err)
		return 0, http.StatusInternalServerError, "Internal Server Error"
	}
	return n, 0, ""
}

// replyErr answers an error of the upload records.
func (s *Service) replyErr(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, ErrUsed):
		reply(w, http.StatusConflict, err.Error())
	case errors.Is(err, ErrExpired):
		reply(w, http.StatusForbidden, err.Error())
	case errors.Is(err, apierr.ErrNotFound):
		reply(w, http.StatusNotFound, err.Error())
	case errors.Is(err, apierr.ErrInvalidState):
		reply(w, http.StatusBadRequest, err.Error())
	default:
		s.log.Error("uploads: the upload records", "path", r.URL.Path, "err", err)
		reply(w, http.StatusInternalServerError, "Internal Server Error")
	}
}

// OpenTarball opens the tarball of objectPath, an upload of the tenant's
// deployment (a revision's source_tarball_path), for a build. Errors:
// ErrTarballGone (not stored, or no longer kept), or the blob store's.
func (s *Service) OpenTarball(ctx context.Context, tenant, deploymentID, objectPath string) (io.ReadCloser, error) {
	did, id, ok := ParseObjectPath(objectPath)
	if !ok || did != deploymentID {
		return nil, fmt.Errorf("%w: %q is not an upload of deployment %s", ErrTarballGone, objectPath, deploymentID)
	}
	rd, err := s.bucket.NewReader(ctx, blobKey(tenant, did, id), nil)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, fmt.Errorf("%w: %s is no longer kept (only the newest %d revisions keep their tarballs)",
			ErrTarballGone, objectPath, controlplane.UploadsKept)
	}
	if err != nil {
		return nil, fmt.Errorf("uploads: reading %s: %w", objectPath, err)
	}
	return rd, nil
}

// sweepBatch is how many uploads one round of Sweep collects.
const sweepBatch = 100

// Sweep removes the tarballs that may go (those of deployments that are
// gone, and those no recent revision names, once Grace has passed since
// their URL expired), then their records, and returns how many it
// removed.
func (s *Service) Sweep(ctx context.Context) (int, error) {
	removed := 0
	for {
		ups, err := s.collect(ctx, sweepBatch)
		if err != nil || len(ups) == 0 {
			return removed, err
		}
		gone := ups[:0:0]
		var errs []error
		for _, u := range ups {
			err := s.bucket.Delete(ctx, blobKey(u.Tenant, u.DeploymentID, u.ID))
			if err != nil && gcerrors.Code(err) != gcerrors.NotFound {
				errs = append(errs, err)
				continue
			}
			gone = append(gone, u)
		}
		if err := s.forget(ctx, gone); err != nil {
			return removed, err
		}
		removed += len(gone)
		if err := errors.Join(errs...); err != nil {
			return removed, fmt.Errorf("uploads: removing tarballs: %w", err)
		}
		if len(ups) < sweepBatch {
			return removed, nil
		}
	}
}

// Run calls Sweep every interval (DefaultSweepInterval when 0 or less)
// until ctx is done, logging its failures.
func (s *Service) Run(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = DefaultSweepInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if n, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("uploads: sweeping tarballs", "removed", n, "err", err)
		} else if n > 0 {
			s.log.Info("uploads: removed tarballs no revision needs", "removed", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
