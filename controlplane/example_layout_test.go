package controlplane_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storemem"
)

// CheckLayout runs once after opening a store, before serving from it: a
// store of the current layout passes, and one written in another layout
// (here, a deployment under a text key) is refused, to be recreated.
func ExampleControlPlane_CheckLayout() {
	ctx := context.Background()
	st := storemem.New() // in production: the storebolt or storepg store
	cp := controlplane.New(st, nil)
	exampleDeployment(ctx, cp)
	fmt.Println(cp.CheckLayout(ctx))

	err := st.Update(ctx, func(tx store.Tx) error {
		return tx.Put("cp_deployments", exampleTenant+"/0190a000-0000-7000-8000-000000000001", []byte(`{"name":"old"}`))
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(errors.Is(cp.CheckLayout(ctx), controlplane.ErrOldLayout))
	// Output:
	// <nil>
	// true
}
