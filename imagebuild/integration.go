package imagebuild

import (
	"context"
	"fmt"

	"github.com/deployplane/deployplane/controlplane"
)

// InstallationIDs returns an Options.InstallationID that looks a
// deployment's integration_id up among the tenant's integrations in cp
// (controlplane.Work names the integration, not its GitHub App
// installation).
func InstallationIDs(cp *controlplane.ControlPlane) func(ctx context.Context, tenant, integrationID string) (int64, error) {
	return func(ctx context.Context, tenant, integrationID string) (int64, error) {
		ints, err := cp.ListIntegrations(ctx, tenant)
		if err != nil {
			return 0, err
		}
		for _, in := range ints {
			if in.ID == integrationID {
				return in.InstallationID, nil
			}
		}
		return 0, fmt.Errorf("integration %s is not among the tenant's", integrationID)
	}
}
