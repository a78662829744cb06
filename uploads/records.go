package uploads

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/internal/uuidtext"
	"github.com/deployplane/deployplane/store"
)

// The records of uploads (wire contract section 10), kept in the control
// plane's store (controlplane.ControlPlane.Store) so that an upload URL is
// single use across replicas, and read by Records inside the transaction
// that creates a revision naming a tarball:
//
//	cp_uploads  u/tenant/deployment id/upload id -> uploadRecord JSON
//
// A record is issued (Service.UploadURL), then uploading while one PUT
// streams (a second PUT meanwhile or later is refused), then uploaded, or
// issued again when the PUT failed. A sweep marks removing the records
// whose tarballs may go, and deletes them once the tarballs are gone. The
// records are not removed with their deployment (the control plane does
// not know them): the sweep finds the deployment gone and collects them.

// Collection is the store collection of the upload records, for tools
// that back up, copy or inspect a store (beside
// controlplane.Collections).
const Collection = "cp_uploads"

// Limits of uploads (wire contract section 10). How many revisions keep
// their tarballs is controlplane.UploadsKept.
const (
	// URLTTL is how long an upload URL is valid.
	URLTTL = 15 * time.Minute
	// MaxBytes is the largest tarball an upload accepts (200 MiB), the
	// default of Options.MaxBytes.
	MaxBytes = 200 << 20
	// Grace is how long after its URL expired an upload that no revision
	// names is kept: the time a client has, after the PUT, to name it in
	// a PATCH or POST .../revisions.
	Grace = time.Hour
)

// The states of an upload record.
const (
	stateIssued    = "issued"
	stateUploading = "uploading"
	stateUploaded  = "uploaded"
	stateRemoving  = "removing"
)

// Errors of a PUT's claim, each an *apierr.DetailError carrying its
// sentence.
var (
	// ErrUsed: the upload URL was used already (or is being used by
	// another request). HTTP 409.
	ErrUsed = errors.New("upload URL already used")
	// ErrExpired: the upload URL is past its expiry, or names an upload
	// the records no longer hold. HTTP 403.
	ErrExpired = errors.New("upload URL expired")
)

var (
	errUsed    = &apierr.DetailError{Kind: ErrUsed, Detail: "This upload URL was already used."}
	errExpired = &apierr.DetailError{Kind: ErrExpired, Detail: "This upload URL has expired."}
)

// Upload is one upload of a source tarball: the deployment it was issued
// to, its id, and when its URL expires.
type Upload struct {
	Tenant       string
	DeploymentID string
	ID           string
	ExpiresAt    time.Time
}

// objectPathPrefix starts every object_path.
const objectPathPrefix = "uploads/"

// ObjectPath is the upload's object_path, the source_tarball_path a PATCH
// names: uploads/<deployment id>/<upload id>.tar.gz.
func (u *Upload) ObjectPath() string {
	return objectPathPrefix + u.DeploymentID + "/" + u.ID + ".tar.gz"
}

// ParseObjectPath returns the deployment and upload ids of an object_path
// ObjectPath wrote; ok is false for any other string.
func ParseObjectPath(objectPath string) (deploymentID, uploadID string, ok bool) {
	rest, found := strings.CutPrefix(objectPath, objectPathPrefix)
	if !found {
		return "", "", false
	}
	d, file, found := strings.Cut(rest, "/")
	id, isTar := strings.CutSuffix(file, ".tar.gz")
	if !found || !isTar {
		return "", "", false
	}
	if cd, ok := uuidtext.Canonical(d); !ok || cd != d {
		return "", "", false
	}
	if cid, ok := uuidtext.Canonical(id); !ok || cid != id {
		return "", "", false
	}
	return d, id, true
}

// record is what Collection holds: the state, the URL's expiry and the
// upload's lease (Unix microseconds), the size received and when.
type record struct {
	State   string `json:"s"`
	Expires int64  `json:"x"`
	Lease   string `json:"l,omitempty"`
	Size    int64  `json:"n,omitempty"`
	Done    int64  `json:"d,omitempty"`
}

func recordKey(tenant, deploymentID, id string) string {
	return "u/" + tenant + "/" + deploymentID + "/" + id
}

func getRecord(r store.Reader, k string) (*record, error) {
	b, err := r.Get(Collection, k)
	if err != nil {
		return nil, err
	}
	var rec record
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("uploads: decoding upload %s: %w", k, err)
	}
	return &rec, nil
}

func putRecord(tx store.Tx, k string, rec *record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return tx.Put(Collection, k, b)
}

// Records is the controlplane.UploadChecker of the upload records, to be
// given as controlplane.Options.Uploads wherever a Service issues upload
// URLs: a source_tarball_path must be the object_path of an upload issued
// to the deployment (Service.UploadURL) whose PUT completed, and that no
// sweep has collected, so that no deployment can name another's tarball.
type Records struct{}

// CheckUpload implements controlplane.UploadChecker.
func (Records) CheckUpload(r store.Reader, tenant, deploymentID, objectPath string) error {
	did, id, ok := ParseObjectPath(objectPath)
	if !ok || did != deploymentID {
		return fmt.Errorf("%w: %q was not issued to this deployment by POST /v2/deployments/%s/upload-url",
			controlplane.ErrUploadNotFound, objectPath, deploymentID)
	}
	rec, err := getRecord(r, recordKey(tenant, did, id))
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: %q was not issued to this deployment, or is no longer kept", controlplane.ErrUploadNotFound, objectPath)
	}
	if err != nil {
		return err
	}
	if rec.State != stateUploaded {
		return fmt.Errorf("%w: the upload of %q has not completed", controlplane.ErrUploadNotFound, objectPath)
	}
	return nil
}

// now is the records' time: the Service's clock, in UTC microseconds.
func (s *Service) now() time.Time {
	return s.clock().UTC().Truncate(time.Microsecond)
}

// storeErr keeps store sentinels from leaking out of the records: an error
// that matches one is returned as plain text. Domain errors pass through.
func storeErr(op string, err error) error {
	if err == nil {
		return nil
	}
	for _, sentinel := range []error{store.ErrNotFound, store.ErrAlreadyExists, store.ErrClosed, store.ErrInvalidKey} {
		if errors.Is(err, sentinel) {
			return fmt.Errorf("uploads: %s: %s", op, err.Error())
		}
	}
	var nf *apierr.NotFoundError
	var de *apierr.DetailError
	if errors.As(err, &nf) || errors.As(err, &de) {
		return err
	}
	return fmt.Errorf("uploads: %s: %w", op, err)
}

// issue records a new upload for an internal_source deployment, valid
// URLTTL. Errors: *apierr.NotFoundError; apierr.ErrInvalidState for a
// deployment of another source or one being deleted.
func (s *Service) issue(ctx context.Context, tenant, deploymentID string) (*Upload, error) {
	now := s.now()
	id, err := uuid.NewV7()
	if err != nil {
		return nil, err
	}
	var u *Upload
	err = s.st.Update(ctx, func(tx store.Tx) error {
		d, err := s.cp.ReadDeployment(tx, tenant, deploymentID)
		if err != nil {
			return err
		}
		if d.Source != controlplane.SourceInternalSource {
			return apierr.InvalidStatef("upload URL is only available for '%s' source deployments", controlplane.SourceInternalSource)
		}
		if d.Status == controlplane.StatusAwaitingDelete {
			return apierr.InvalidStatef("Deployment ID %s is being deleted.", d.ID)
		}
		u = &Upload{Tenant: tenant, DeploymentID: d.ID, ID: id.String(), ExpiresAt: now.Add(URLTTL)}
		b, err := json.Marshal(&record{State: stateIssued, Expires: u.ExpiresAt.UnixMicro()})
		if err != nil {
			return err
		}
		return tx.Create(Collection, recordKey(tenant, u.DeploymentID, u.ID), b)
	})
	if err != nil {
		return nil, storeErr("issue upload", err)
	}
	return u, nil
}

// start claims an issued upload for one PUT and returns the lease that
// finish or abandon take. It is what makes an upload URL single use,
// across every replica sharing the store. Errors: ErrUsed (uploaded
// already, or another PUT is streaming), ErrExpired (past u.ExpiresAt, or
// unknown), *apierr.NotFoundError (the deployment is gone),
// apierr.ErrInvalidState (being deleted).
func (s *Service) start(ctx context.Context, u *Upload) (lease string, err error) {
	now := s.now()
	if !now.Before(u.ExpiresAt) {
		return "", errExpired
	}
	lease = rand.Text()
	err = s.st.Update(ctx, func(tx store.Tx) error {
		d, err := s.cp.ReadDeployment(tx, u.Tenant, u.DeploymentID)
		if err != nil {
			return err
		}
		if d.Status == controlplane.StatusAwaitingDelete {
			return apierr.InvalidStatef("Deployment ID %s is being deleted.", u.DeploymentID)
		}
		k := recordKey(u.Tenant, u.DeploymentID, u.ID)
		rec, err := getRecord(tx, k)
		if errors.Is(err, store.ErrNotFound) {
			return errExpired
		}
		if err != nil {
			return err
		}
		if rec.State != stateIssued {
			return errUsed
		}
		if rec.Expires <= now.UnixMicro() {
			return errExpired
		}
		rec.State, rec.Lease = stateUploading, lease
		return putRecord(tx, k, rec)
	})
	if err != nil {
		return "", storeErr("start upload", err)
	}
	return lease, nil
}

// finish records that the PUT holding lease stored size bytes: the
// upload's object_path may now be named by a revision. Errors: ErrUsed
// when lease is not the upload's (a lost claim).
func (s *Service) finish(ctx context.Context, u *Upload, lease string, size int64) error {
	now := s.now()
	return s.withLease(ctx, "finish upload", u, lease, errExpired, errUsed, func(rec *record) {
		rec.State, rec.Lease, rec.Size, rec.Done = stateUploaded, "", size, now.UnixMicro()
	})
}

// abandon gives back the claim of a PUT that failed (too large, cut off):
// the URL may be used again until it expires. A lease that is not the
// upload's changes nothing.
func (s *Service) abandon(ctx context.Context, u *Upload, lease string) error {
	return s.withLease(ctx, "abandon upload", u, lease, nil, nil, func(rec *record) {
		rec.State, rec.Lease = stateIssued, ""
	})
}

// withLease applies change to u's record in one Update when the PUT
// holding lease still holds it. An upload whose record is gone answers
// gone, one held by no PUT or by another answers notHeld (nil: nothing
// changes, no error).
func (s *Service) withLease(ctx context.Context, op string, u *Upload, lease string, gone, notHeld error, change func(*record)) error {
	err := s.st.Update(ctx, func(tx store.Tx) error {
		k := recordKey(u.Tenant, u.DeploymentID, u.ID)
		rec, err := getRecord(tx, k)
		if errors.Is(err, store.ErrNotFound) {
			return gone
		}
		if err != nil {
			return err
		}
		if rec.State != stateUploading || rec.Lease != lease {
			return notHeld
		}
		change(rec)
		return putRecord(tx, k, rec)
	})
	return storeErr(op, err)
}

// collect returns up to limit uploads whose tarballs may be removed, and
// marks them so that no revision may name them any more: every upload of
// a deployment that is gone, and, of a deployment that exists, every
// upload that none of its controlplane.UploadsKept newest revisions names
// (controlplane.ControlPlane.KeptTarballs) once Grace has passed since its
// URL expired. The caller removes the tarballs, then calls forget;
// uploads returned and not forgotten (a crash, a failed removal) are
// returned again.
func (s *Service) collect(ctx context.Context, limit int) ([]Upload, error) {
	if limit <= 0 {
		return nil, nil
	}
	now := s.now().UnixMicro()
	type found struct {
		u   Upload
		was []byte
	}
	var out []found
	err := s.st.View(ctx, func(r store.Reader) error {
		out = out[:0]
		kept := map[string]map[string]bool{} // tenant/deployment -> upload ids named; nil: the deployment is gone
		return r.Scan(Collection, "u/", nil, func(k string, v []byte) (bool, error) {
			parts := strings.Split(k, "/")
			if len(parts) != 4 {
				return true, nil
			}
			tenant, did, id := parts[1], parts[2], parts[3]
			var rec record
			if err := json.Unmarshal(v, &rec); err != nil {
				return false, fmt.Errorf("uploads: decoding upload %s: %w", k, err)
			}
			dk := tenant + "/" + did
			names, seen := kept[dk]
			if !seen {
				var err error
				if names, err = s.named(r, tenant, did); err != nil {
					return false, err
				}
				kept[dk] = names
			}
			garbage := names == nil || rec.State == stateRemoving ||
				(!names[id] && now > rec.Expires+Grace.Microseconds())
			if garbage {
				out = append(out, found{Upload{Tenant: tenant, DeploymentID: did, ID: id, ExpiresAt: time.UnixMicro(rec.Expires).UTC()}, v})
			}
			return len(out) < limit, nil
		})
	})
	if err != nil {
		return nil, storeErr("collect uploads", err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	var ups []Upload
	err = s.st.Update(ctx, func(tx store.Tx) error {
		ups = ups[:0]
		for _, f := range out {
			k := recordKey(f.u.Tenant, f.u.DeploymentID, f.u.ID)
			rec, err := getRecord(tx, k)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			b, _ := json.Marshal(rec)
			if string(b) != string(f.was) && rec.State != stateRemoving {
				continue // changed since the View: looked at again next time
			}
			rec.State, rec.Lease = stateRemoving, ""
			if err := putRecord(tx, k, rec); err != nil {
				return err
			}
			ups = append(ups, f.u)
		}
		return nil
	})
	if err != nil {
		return nil, storeErr("collect uploads", err)
	}
	return ups, nil
}

// named returns the ids of the uploads of the deployment that it and its
// controlplane.UploadsKept newest revisions name, or nil when the
// deployment is gone.
func (s *Service) named(r store.Reader, tenant, deploymentID string) (map[string]bool, error) {
	paths, err := s.cp.KeptTarballs(r, tenant, deploymentID)
	if errors.Is(err, apierr.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, p := range paths {
		if did, id, ok := ParseObjectPath(p); ok && did == deploymentID {
			names[id] = true
		}
	}
	return names, nil
}

// forget deletes the records of uploads collect returned, once their
// tarballs are gone. Records not marked removing are left.
func (s *Service) forget(ctx context.Context, ups []Upload) error {
	err := s.st.Update(ctx, func(tx store.Tx) error {
		for _, u := range ups {
			k := recordKey(u.Tenant, u.DeploymentID, u.ID)
			rec, err := getRecord(tx, k)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if rec.State != stateRemoving {
				continue
			}
			if err := tx.Delete(Collection, k); err != nil {
				return err
			}
		}
		return nil
	})
	return storeErr("forget uploads", err)
}
