package keyenc_test

import (
	"context"
	"fmt"
	"time"

	"github.com/deployplane/deployplane/controlplane/internal/keyenc"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storemem"
)

func Example() {
	st := keyenc.Views(storemem.New()) // Views' Readers read committed state
	defer st.Close()
	ctx := context.Background()
	var tenants keyenc.Tenants

	// The first write of a tenant assigns its prefix; the Update's
	// Pending is cached once it has committed.
	var pending keyenc.Pending
	var tp string
	_ = st.Update(ctx, func(tx store.Tx) (err error) {
		pending = keyenc.Pending{} // the closure may run more than once
		tp, err = tenants.Assign(tx, &pending, "acme")
		if err != nil {
			return err
		}
		// A key: the tenant prefix, an id part, a time part.
		at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
		return tx.Put("records", tp+keyenc.ID("0190a000-0000-7000-8000-000000000001")+keyenc.Time(at), nil)
	})
	tenants.Commit(&pending)

	_ = st.View(ctx, func(r store.Reader) error {
		return r.Scan("records", "", nil, func(k string, _ []byte) (bool, error) {
			n := keyenc.TenantLen(k)
			id, rest, _ := keyenc.ParseID(k[n:])
			fmt.Printf("tenant %q, id %s, %d bytes of time\n", k[:n], id, len(rest))
			return true, nil
		})
	})
	tenant, _ := tenants.Tenant(ctx, st, tp)
	fmt.Println(tenant)
	// Output:
	// tenant "\x01", id 0190a000-0000-7000-8000-000000000001, 8 bytes of time
	// acme
}
