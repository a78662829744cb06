package controlplane

import (
	"slices"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/store"
)

// Uploads of source tarballs (wire contract section 10) are kept beside
// this package (package uploads: the upload URLs, their single-use
// records, the blob store). This package keeps the rules a revision
// follows: a source_tarball_path is checked by Options.Uploads inside the
// transaction that names it, and a deployment keeps the tarballs of its
// UploadsKept newest revisions (KeptTarballs). The server's registry
// keeps the images of the same revisions and of the active one
// (KeptImages).

// UploadsKept is how many of a deployment's newest revisions keep their
// tarballs, so that redeploying them builds again, and their images in
// the server's registry, so that redeploying them pulls again.
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
	d, revs, err := cp.keptRevisions(r, tenant, deploymentID, false)
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
	for _, rev := range revs {
		add(rev.SourceRevisionConfig.SourceTarballPath)
	}
	return paths, nil
}

// KeptImages returns, inside a transaction of Store, the image_uris whose
// images the deployment keeps in the server's registry: the one it names,
// its active revision's and those of its UploadsKept newest revisions
// (duplicates possible; an internal_docker revision records its image by
// digest). Errors: *apierr.NotFoundError when the deployment is gone, or
// the store's.
func (cp *ControlPlane) KeptImages(r store.Reader, tenant, deploymentID string) ([]string, error) {
	d, revs, err := cp.keptRevisions(r, tenant, deploymentID, true)
	if err != nil {
		return nil, err
	}
	var images []string
	add := func(p *string) {
		if p != nil {
			images = append(images, *p)
		}
	}
	add(d.SourceRevisionConfig.ImageURI)
	for _, rev := range revs {
		add(rev.SourceRevisionConfig.ImageURI)
	}
	return images, nil
}

// keptRevisions reads the deployment and its UploadsKept newest
// revisions, and its active revision too when active is set.
func (cp *ControlPlane) keptRevisions(r store.Reader, tenant, deploymentID string, active bool) (*Deployment, []*revisionRecord, error) {
	d, err := cp.ReadDeployment(r, tenant, deploymentID)
	if err != nil {
		return nil, nil, err
	}
	tp, err := cp.readTenant(r, tenant)
	if err != nil {
		return nil, nil, err
	}
	prefix := deploymentKey(tp, d.ID)
	var ids []string
	err = r.Scan(colRevisionOrder, prefix, &store.ScanOptions{Reverse: true}, func(k string, _ []byte) (bool, error) {
		ids = append(ids, tailID(k[len(prefix):]))
		return len(ids) < UploadsKept, nil
	})
	if err != nil {
		return nil, nil, err
	}
	if active && d.ActiveRevisionID != nil && !slices.Contains(ids, *d.ActiveRevisionID) {
		ids = append(ids, *d.ActiveRevisionID)
	}
	revs := make([]*revisionRecord, 0, len(ids))
	for _, id := range ids {
		rev, err := cp.getRevision(r, tenant, d.ID, id)
		if err != nil {
			return nil, nil, err
		}
		revs = append(revs, rev)
	}
	return d, revs, nil
}
