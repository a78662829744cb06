package controlplane_test

import (
	"context"
	"fmt"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/storemem"
)

// Migrate runs once after opening a store, before serving from it: it
// moves what earlier builds wrote to the current key layout, and on a new
// or migrated store it only looks.
func ExampleControlPlane_Migrate() {
	ctx := context.Background()
	cp := controlplane.New(storemem.New(), nil) // in production: the storebolt or storepg store
	if err := cp.Migrate(ctx); err != nil {
		panic(err)
	}
	d := exampleDeployment(ctx, cp)
	page, err := cp.ListDeployments(ctx, exampleTenant, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(len(page.Resources), page.Resources[0].Name == d.Name)
	// Output: 1 true
}
