package registry

import (
	"context"
	"errors"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/store"
)

// Retention tells the collector (Collect) what a deployment keeps.
// *TokenStore implements it over the control plane's store.
type Retention interface {
	// KeptImages returns the image references whose images the
	// deployment keeps (controlplane.ControlPlane.KeptImages): those of
	// this registry in its repositories count, by digest or by tag.
	// Errors: ErrDeploymentGone once the deployment is deleted;
	// ErrDeploymentUnknown when nothing says whose it is.
	KeptImages(ctx context.Context, deploymentID string) ([]string, error)
	// ForgetDeployment drops what is kept about a deployment that is
	// gone, once its repositories are removed.
	ForgetDeployment(ctx context.Context, deploymentID string) error
}

var (
	// ErrDeploymentGone is Retention's answer for a deleted deployment:
	// its repositories are removed.
	ErrDeploymentGone = errors.New("registry: the deployment is gone")
	// ErrDeploymentUnknown is Retention's answer for a deployment it has
	// no record of: its repositories are left alone.
	ErrDeploymentUnknown = errors.New("registry: no record of whose deployment this is")
)

// ownerKey is the key of the record of a deployment's tenant, written
// with each push token.
func ownerKey(deploymentID string) string { return "o/" + deploymentID }

// KeptImages implements Retention: the deployment's tenant is the one its
// push tokens recorded, and its images are those the control plane says
// it keeps, read in one transaction.
func (s *TokenStore) KeptImages(ctx context.Context, deploymentID string) ([]string, error) {
	var images []string
	err := s.st.View(ctx, func(r store.Reader) error {
		images = nil
		tenant, err := r.Get(TokenCollection, ownerKey(deploymentID))
		if errors.Is(err, store.ErrNotFound) {
			return ErrDeploymentUnknown
		}
		if err != nil {
			return err
		}
		images, err = s.cp.KeptImages(r, string(tenant), deploymentID)
		if errors.Is(err, apierr.ErrNotFound) {
			return ErrDeploymentGone
		}
		return err
	})
	if errors.Is(err, ErrDeploymentGone) || errors.Is(err, ErrDeploymentUnknown) {
		return nil, err
	}
	if err != nil {
		return nil, storeErr("kept images", err)
	}
	return images, nil
}

// ForgetDeployment implements Retention: the record of the deployment's
// tenant and the counts of its unfinished uploads are removed, if the
// deployment is gone.
func (s *TokenStore) ForgetDeployment(ctx context.Context, deploymentID string) error {
	err := s.st.Update(ctx, func(tx store.Tx) error {
		tenant, err := tx.Get(TokenCollection, ownerKey(deploymentID))
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		_, err = s.cp.ReadDeployment(tx, string(tenant), deploymentID)
		if !errors.Is(err, apierr.ErrNotFound) {
			return err // still there: kept
		}
		var counts []string
		err = tx.Scan(TokenCollection, "q/"+deploymentID+"/", nil, func(k string, _ []byte) (bool, error) {
			counts = append(counts, k)
			return true, nil
		})
		if err != nil {
			return err
		}
		for _, k := range counts {
			if err := tx.Delete(TokenCollection, k); err != nil {
				return err
			}
		}
		return tx.Delete(TokenCollection, ownerKey(deploymentID))
	})
	if err != nil {
		return storeErr("forget deployment", err)
	}
	return nil
}
