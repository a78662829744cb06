package controlplane

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/store"
)

// Uploads of source tarballs (wire contract section 10): the records that
// make an upload URL single use across replicas, and the rules of which
// tarballs a deployment keeps. The bytes live elsewhere (package uploads
// keeps them in a blob store); this file only records what was issued,
// what was received, and what may go.
//
//	cp_uploads  u/tenant/deployment id/upload id -> uploadRecord JSON
//
// A record is issued (IssueUpload), then uploading while one PUT streams
// (StartUpload; a second PUT meanwhile or later is refused), then uploaded
// (FinishUpload), or issued again when the PUT failed (AbandonUpload).
// CollectUploads marks removing the records whose tarballs may go, and
// ForgetUploads deletes them once the tarballs are gone. The records are
// not removed with their deployment (removeDeployment does not know
// them): CollectUploads finds the deployment gone and collects them.
const colUploads = "cp_uploads"

// Limits of uploads (wire contract section 10).
const (
	// UploadURLTTL is how long an upload URL is valid.
	UploadURLTTL = 15 * time.Minute
	// MaxUploadBytes is the largest tarball an upload accepts (200 MiB).
	MaxUploadBytes = 200 << 20
	// UploadsKept is how many of a deployment's newest revisions keep
	// their tarballs, so that redeploying them builds again.
	UploadsKept = 10
	// UploadGrace is how long after its URL expired an upload that no
	// revision names is kept: the time a client has, after the PUT, to
	// name it in a PATCH or POST .../revisions.
	UploadGrace = time.Hour
)

// The states of an upload record.
const (
	uploadIssued    = "issued"
	uploadUploading = "uploading"
	uploadUploaded  = "uploaded"
	uploadRemoving  = "removing"
)

// Errors of StartUpload and FinishUpload, each returned as an
// *apierr.DetailError carrying its sentence.
var (
	// ErrUploadUsed: the upload URL was used already (or is being used
	// by another request). HTTP 409.
	ErrUploadUsed = errors.New("upload URL already used")
	// ErrUploadExpired: the upload URL is past its expiry, or names an
	// upload this control plane no longer knows. HTTP 403.
	ErrUploadExpired = errors.New("upload URL expired")
)

var (
	errUploadUsed    = &apierr.DetailError{Kind: ErrUploadUsed, Detail: "This upload URL was already used."}
	errUploadExpired = &apierr.DetailError{Kind: ErrUploadExpired, Detail: "This upload URL has expired."}
)

// Upload is one upload of a source tarball: the deployment it was issued
// to, its id, and when its URL expires.
type Upload struct {
	Tenant       string
	DeploymentID string
	ID           string
	ExpiresAt    time.Time
}

// uploadPathPrefix starts every object_path.
const uploadPathPrefix = "uploads/"

// ObjectPath is the upload's object_path, the source_tarball_path a PATCH
// names: uploads/<deployment id>/<upload id>.tar.gz.
func (u *Upload) ObjectPath() string {
	return uploadPathPrefix + u.DeploymentID + "/" + u.ID + ".tar.gz"
}

// ParseObjectPath returns the deployment and upload ids of an object_path
// ObjectPath wrote; ok is false for any other string.
func ParseObjectPath(objectPath string) (deploymentID, uploadID string, ok bool) {
	rest, found := strings.CutPrefix(objectPath, uploadPathPrefix)
	if !found {
		return "", "", false
	}
	d, file, found := strings.Cut(rest, "/")
	id, isTar := strings.CutSuffix(file, ".tar.gz")
	if !found || !isTar {
		return "", "", false
	}
	if cd, ok := pathID(d); !ok || cd != d {
		return "", "", false
	}
	if cid, ok := pathID(id); !ok || cid != id {
		return "", "", false
	}
	return d, id, true
}

// uploadRecord is what cp_uploads holds: the state, the URL's expiry and
// the upload's lease (Unix microseconds), the size received and when.
type uploadRecord struct {
	State   string `json:"s"`
	Expires int64  `json:"x"`
	Lease   string `json:"l,omitempty"`
	Size    int64  `json:"n,omitempty"`
	Done    int64  `json:"d,omitempty"`
}

func uploadKey(tenant, deploymentID, id string) string {
	return "u/" + tenant + "/" + deploymentID + "/" + id
}

func getUpload(r store.Reader, k string) (*uploadRecord, error) {
	b, err := r.Get(colUploads, k)
	if err != nil {
		return nil, err
	}
	var rec uploadRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("controlplane: decoding upload %s: %w", k, err)
	}
	return &rec, nil
}

func putUpload(tx store.Tx, k string, rec *uploadRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return tx.Put(colUploads, k, b)
}

// IssueUpload records a new upload for an internal_source deployment,
// valid UploadURLTTL (POST /v2/deployments/{id}/upload-url; the signed URL
// is package uploads' work). Errors: *apierr.NotFoundError;
// apierr.ErrInvalidState for a deployment of another source ("upload URL
// is only available for 'internal_source' source deployments") or one
// being deleted.
func (cp *ControlPlane) IssueUpload(ctx context.Context, tenant, deploymentID string) (*Upload, error) {
	if err := apierr.CheckTenant(tenant); err != nil {
		return nil, err
	}
	did, ok := pathID(deploymentID)
	if !ok {
		return nil, &apierr.NotFoundError{Kind: apierr.KindDeployment, ID: deploymentID}
	}
	now := cp.now()
	u := &Upload{Tenant: tenant, DeploymentID: did, ID: cp.newID(), ExpiresAt: now.Add(UploadURLTTL)}
	err := cp.st.Update(ctx, func(tx store.Tx) error {
		d, err := cp.getDeployment(tx, tenant, did)
		if err != nil {
			return err
		}
		if d.Source != SourceInternalSource {
			return apierr.InvalidStatef("upload URL is only available for '%s' source deployments", SourceInternalSource)
		}
		if d.Status == StatusAwaitingDelete {
			return apierr.InvalidStatef("Deployment ID %s is being deleted.", did)
		}
		b, err := json.Marshal(&uploadRecord{State: uploadIssued, Expires: u.ExpiresAt.UnixMicro()})
		if err != nil {
			return err
		}
		return tx.Create(colUploads, uploadKey(tenant, did, u.ID), b)
	})
	if err != nil {
		return nil, cp.storeErr("issue upload", err)
	}
	return u, nil
}

// StartUpload claims an issued upload for one PUT and returns the lease
// that FinishUpload or AbandonUpload take. It is what makes an upload URL
// single use, across every replica sharing the store. Errors:
// ErrUploadUsed (uploaded already, or another PUT is streaming),
// ErrUploadExpired (past u.ExpiresAt, or unknown), *apierr.NotFoundError
// (the deployment is gone), apierr.ErrInvalidState (being deleted).
func (cp *ControlPlane) StartUpload(ctx context.Context, u *Upload) (lease string, err error) {
	if err := apierr.CheckTenant(u.Tenant); err != nil {
		return "", err
	}
	now := cp.now()
	if !now.Before(u.ExpiresAt) {
		return "", errUploadExpired
	}
	lease = rand.Text()
	err = cp.st.Update(ctx, func(tx store.Tx) error {
		d, err := cp.getDeployment(tx, u.Tenant, u.DeploymentID)
		if err != nil {
			return err
		}
		if d.Status == StatusAwaitingDelete {
			return apierr.InvalidStatef("Deployment ID %s is being deleted.", u.DeploymentID)
		}
		k := uploadKey(u.Tenant, u.DeploymentID, u.ID)
		rec, err := getUpload(tx, k)
		if errors.Is(err, store.ErrNotFound) {
			return errUploadExpired
		}
		if err != nil {
			return err
		}
		if rec.State != uploadIssued {
			return errUploadUsed
		}
		if rec.Expires <= now.UnixMicro() {
			return errUploadExpired
		}
		rec.State, rec.Lease = uploadUploading, lease
		return putUpload(tx, k, rec)
	})
	if err != nil {
		return "", cp.storeErr("start upload", err)
	}
	return lease, nil
}

// FinishUpload records that the PUT holding lease stored size bytes: the
// upload's object_path may now be named by a revision. Errors:
// ErrUploadUsed when lease is not the upload's (a lost claim).
func (cp *ControlPlane) FinishUpload(ctx context.Context, u *Upload, lease string, size int64) error {
	now := cp.now()
	err := cp.st.Update(ctx, func(tx store.Tx) error {
		k := uploadKey(u.Tenant, u.DeploymentID, u.ID)
		rec, err := getUpload(tx, k)
		if errors.Is(err, store.ErrNotFound) {
			return errUploadExpired
		}
		if err != nil {
			return err
		}
		if rec.State != uploadUploading || rec.Lease != lease {
			return errUploadUsed
		}
		rec.State, rec.Lease, rec.Size, rec.Done = uploadUploaded, "", size, now.UnixMicro()
		return putUpload(tx, k, rec)
	})
	return cp.storeErr("finish upload", err)
}

// AbandonUpload gives back the claim of a PUT that failed (too large, cut
// off): the URL may be used again until it expires. A lease that is not
// the upload's changes nothing.
func (cp *ControlPlane) AbandonUpload(ctx context.Context, u *Upload, lease string) error {
	err := cp.st.Update(ctx, func(tx store.Tx) error {
		k := uploadKey(u.Tenant, u.DeploymentID, u.ID)
		rec, err := getUpload(tx, k)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if rec.State != uploadUploading || rec.Lease != lease {
			return nil
		}
		rec.State, rec.Lease = uploadIssued, ""
		return putUpload(tx, k, rec)
	})
	return cp.storeErr("abandon upload", err)
}

// UploadRecords is the UploadChecker of the upload records this package
// keeps, and Options.Uploads's default: a source_tarball_path must be the
// object_path of an upload IssueUpload gave the deployment whose PUT
// completed (FinishUpload) and that CollectUploads has not collected.
type UploadRecords struct{}

// AnyUpload is an UploadChecker that takes every source_tarball_path as
// given, for an embedder whose tarballs do not go through IssueUpload and
// that checks the paths (or trusts every caller) itself.
type AnyUpload struct{}

// CheckUpload implements UploadChecker: every path is accepted.
func (AnyUpload) CheckUpload(store.Reader, string, string, string) error { return nil }

// CheckUpload implements UploadChecker.
func (UploadRecords) CheckUpload(r store.Reader, tenant, deploymentID, objectPath string) error {
	did, id, ok := ParseObjectPath(objectPath)
	if !ok || did != deploymentID {
		return fmt.Errorf("%w: %q was not issued to this deployment by POST /v2/deployments/%s/upload-url",
			ErrUploadNotFound, objectPath, deploymentID)
	}
	rec, err := getUpload(r, uploadKey(tenant, did, id))
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: %q was not issued to this deployment, or is no longer kept", ErrUploadNotFound, objectPath)
	}
	if err != nil {
		return err
	}
	if rec.State != uploadUploaded {
		return fmt.Errorf("%w: the upload of %q has not completed", ErrUploadNotFound, objectPath)
	}
	return nil
}

// CollectUploads returns up to limit uploads whose tarballs may be
// removed, and marks them so that no revision may name them any more:
// every upload of a deployment that is gone, and, of a deployment that
// exists, every upload that none of its UploadsKept newest revisions
// names once UploadGrace has passed since its URL expired. The caller
// removes the tarballs, then calls ForgetUploads; uploads returned and
// not forgotten (a crash, a failed removal) are returned again. A
// redeploy of a revision older than the newest UploadsKept may find its
// tarball gone: its build fails saying so.
func (cp *ControlPlane) CollectUploads(ctx context.Context, limit int) ([]Upload, error) {
	if limit <= 0 {
		return nil, nil
	}
	now := cp.now().UnixMicro()
	type found struct {
		u   Upload
		was []byte
	}
	var out []found
	err := cp.st.View(ctx, func(r store.Reader) error {
		out = out[:0]
		kept := map[string]map[string]bool{} // tenant/deployment -> upload ids named; nil: the deployment is gone
		return r.Scan(colUploads, "u/", nil, func(k string, v []byte) (bool, error) {
			parts := strings.Split(k, "/")
			if len(parts) != 4 {
				return true, nil
			}
			tenant, did, id := parts[1], parts[2], parts[3]
			var rec uploadRecord
			if err := json.Unmarshal(v, &rec); err != nil {
				return false, fmt.Errorf("controlplane: decoding upload %s: %w", k, err)
			}
			dk := tenant + "/" + did
			names, seen := kept[dk]
			if !seen {
				var err error
				if names, err = cp.namedUploads(r, tenant, did); err != nil {
					return false, err
				}
				kept[dk] = names
			}
			garbage := names == nil || rec.State == uploadRemoving ||
				(!names[id] && now > rec.Expires+UploadGrace.Microseconds())
			if garbage {
				out = append(out, found{Upload{Tenant: tenant, DeploymentID: did, ID: id, ExpiresAt: time.UnixMicro(rec.Expires).UTC()}, v})
			}
			return len(out) < limit, nil
		})
	})
	if err != nil {
		return nil, cp.storeErr("collect uploads", err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	var ups []Upload
	err = cp.st.Update(ctx, func(tx store.Tx) error {
		ups = ups[:0]
		for _, f := range out {
			k := uploadKey(f.u.Tenant, f.u.DeploymentID, f.u.ID)
			rec, err := getUpload(tx, k)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			b, _ := json.Marshal(rec)
			if string(b) != string(f.was) && rec.State != uploadRemoving {
				continue // changed since the View: looked at again next time
			}
			rec.State, rec.Lease = uploadRemoving, ""
			if err := putUpload(tx, k, rec); err != nil {
				return err
			}
			ups = append(ups, f.u)
		}
		return nil
	})
	if err != nil {
		return nil, cp.storeErr("collect uploads", err)
	}
	return ups, nil
}

// namedUploads returns the ids of the uploads that the deployment's
// UploadsKept newest revisions name, or nil when the deployment is gone.
func (cp *ControlPlane) namedUploads(r store.Reader, tenant, deploymentID string) (map[string]bool, error) {
	d, err := cp.getDeployment(r, tenant, deploymentID)
	if errors.Is(err, apierr.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	name := func(p *string) {
		if p == nil {
			return
		}
		if did, id, ok := ParseObjectPath(*p); ok && did == deploymentID {
			names[id] = true
		}
	}
	name(d.SourceRevisionConfig.SourceTarballPath)
	tp, err := cp.readTenant(r, tenant)
	if err != nil {
		return nil, err
	}
	var ids []string
	err = r.Scan(colRevisionOrder, deploymentKey(tp, deploymentID), &store.ScanOptions{Reverse: true}, func(k string, _ []byte) (bool, error) {
		ids = append(ids, tailID(k[len(deploymentKey(tp, deploymentID)):]))
		return len(ids) < UploadsKept, nil
	})
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		rev, err := cp.getRevision(r, tenant, deploymentID, id)
		if err != nil {
			return nil, err
		}
		name(rev.SourceRevisionConfig.SourceTarballPath)
	}
	return names, nil
}

// ForgetUploads deletes the records of uploads CollectUploads returned,
// once their tarballs are gone. Records not marked removing are left.
func (cp *ControlPlane) ForgetUploads(ctx context.Context, ups []Upload) error {
	err := cp.st.Update(ctx, func(tx store.Tx) error {
		for _, u := range ups {
			k := uploadKey(u.Tenant, u.DeploymentID, u.ID)
			rec, err := getUpload(tx, k)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if rec.State != uploadRemoving {
				continue
			}
			if err := tx.Delete(colUploads, k); err != nil {
				return err
			}
		}
		return nil
	})
	return cp.storeErr("forget uploads", err)
}
