package imagebuild_test

import (
	"context"
	"testing"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/imagebuild"
	"github.com/deployplane/deployplane/storemem"
)

func TestInstallationIDs(t *testing.T) {
	ctx := context.Background()
	cp := controlplane.New(storemem.New(), nil)
	in, err := cp.CreateIntegration(ctx, "tenant-1", &controlplane.CreateIntegrationRequest{InstallationID: ptr(int64(4242)), Name: ptr("org")})
	if err != nil {
		t.Fatal(err)
	}
	lookup := imagebuild.InstallationIDs(cp)
	if id, err := lookup(ctx, "tenant-1", in.ID); err != nil || id != 4242 {
		t.Errorf("lookup = %d, %v; want 4242", id, err)
	}
	if id, err := lookup(ctx, "tenant-2", in.ID); err == nil {
		t.Errorf("another tenant's integration: %d, want an error", id)
	}
	if id, err := lookup(ctx, "tenant-1", "0190f0a0-0000-7000-8000-0000000000ff"); err == nil {
		t.Errorf("unknown integration: %d, want an error", id)
	}
}
