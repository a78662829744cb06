package controlplane

import (
	"context"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane/internal/index"
	"github.com/deployplane/deployplane/store"
)

// freeDeploymentTypes are the deployment types of the free tier, those
// GET /v2/deployments/free-count counts (wire contract section 11):
// dev_free and dev_free_zero.
var freeDeploymentTypes = []DeploymentType{DeploymentTypeDevFree, DeploymentTypeDevFreeZero}

// CountFreeDeployments returns how many deployments of the tenant are of
// a free type (source_config.deployment_type dev_free or dev_free_zero):
// every one whose records exist, those AWAITING_DELETE included (their
// names are taken, and they run until torn down). It reads the type
// index, a key per such deployment, none of the others.
func (cp *ControlPlane) CountFreeDeployments(ctx context.Context, tenant string) (int, error) {
	if err := apierr.CheckTenant(tenant); err != nil {
		return 0, err
	}
	n := 0
	err := cp.st.View(ctx, func(r store.Reader) error {
		n = 0
		tp, err := cp.readTenant(r, tenant)
		if err != nil {
			return err
		}
		for _, t := range freeDeploymentTypes {
			err := index.ScanTerm(r, tp, indexTerm(idxType, string(t)), "", func(string) (bool, error) {
				n++
				return true, nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, cp.storeErr("count free deployments", err)
	}
	return n, nil
}
