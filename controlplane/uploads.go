package controlplane

import (
	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/store"
)

// Uploads of source tarballs (wire contract section 10) are kept beside
// this package (package uploads: the upload URLs, their single-use
// records, the blob store). This package keeps the rules a revision
// follows: a source_tarball_path is checked by Options.Uploads inside the
// transaction that names it, and a deployment keeps the tarballs of its
// UploadsKept newest revisions (KeptTarballs).

// UploadsKept is how many of a deployment's newest revisions keep their
// tarballs, so that redeploying them builds again.
const UploadsKept = 10

// AnyUpload is an UploadChecker that takes every source_tarball_path as
// given, for an embedder whose tarballs do not go through upload URLs and
// that checks the paths (or trusts every caller) itself.
type AnyUpload struct{}

// CheckUpload implements UploadChecker: every path is accepted.
func (AnyUpload) CheckUpload(store.Reader, string, string, string) error { return nil }

// Store returns the store cp works over, for the packages beside it that
// keep their own records there (in collections of their own) and read a
// deployment in the same transaction (ReadDeployment, KeptTarballs).
func (cp *ControlPlane) Store() store.Store { return cp.st }

// ReadDeployment reads the tenant's deployment inside a transaction of
// Store, with r, so that a record kept beside it follows the deployment
// the transaction sees. Errors: *apierr.NotFoundError, or the store's.
func (cp *ControlPlane) ReadDeployment(r store.Reader, tenant, id string) (*Deployment, error) {
	if err := apierr.CheckTenant(tenant); err != nil {
		return nil, err
	}
	did, ok := pathID(id)
	if !ok {
		return nil, &apierr.NotFoundError{Kind: apierr.KindDeployment, ID: id}
	}
	d, err := cp.getDeployment(r, tenant, did)
	if err != nil {
		return nil, err
	}
	return d.wire(), nil
}

// KeptTarballs returns, inside a transaction of Store, the
// source_tarball_paths whose tarballs the deployment keeps: the one it
// names and those of its UploadsKept newest revisions (duplicates
// possible). Errors: *apierr.NotFoundError when the deployment is gone,
// or the store's.
func (cp *ControlPlane) KeptTarballs(r store.Reader, tenant, deploymentID string) ([]string, error) {
	d, err := cp.ReadDeployment(r, tenant, deploymentID)
	if err != nil {
		return nil, err
	}
	var paths []string
	add := func(p *string) {
		if p != nil {
			paths = append(paths, *p)
		}
	}
	add(d.SourceRevisionConfig.SourceTarballPath)
	tp, err := cp.readTenant(r, tenant)
	if err != nil {
		return nil, err
	}
	prefix := deploymentKey(tp, d.ID)
	var ids []string
	err = r.Scan(colRevisionOrder, prefix, &store.ScanOptions{Reverse: true}, func(k string, _ []byte) (bool, error) {
		ids = append(ids, tailID(k[len(prefix):]))
		return len(ids) < UploadsKept, nil
	})
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		rev, err := cp.getRevision(r, tenant, d.ID, id)
		if err != nil {
			return nil, err
		}
		add(rev.SourceRevisionConfig.SourceTarballPath)
	}
	return paths, nil
}
