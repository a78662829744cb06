package tokens_test

import (
	"context"
	"fmt"
	"time"

	"github.com/deployplane/deployplane/controlplane/internal/tokens"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storemem"
)

func Example() {
	st := storemem.New()
	defer st.Close()
	ctx := context.Background()
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

	// The caller checks that the listener exists in the same transaction.
	var token string
	_ = st.Update(ctx, func(tx store.Tx) (err error) {
		token, err = tokens.Create(tx, "acme", "edge-1", "0190a000-0000-7000-8000-000000000001", now)
		return err
	})

	tenant, listener, err := tokens.Authenticate(ctx, st, token, now.Add(time.Second))
	fmt.Println(tenant, listener, err)
	_ = st.View(ctx, func(r store.Reader) error {
		page, err := tokens.List(r, "acme", "edge-1", 0, 10)
		for _, t := range page {
			fmt.Println(t.ID, t.Used.Sub(t.Created))
		}
		return err
	})

	_ = st.Update(ctx, func(tx store.Tx) error { return tokens.DeleteListener(tx, "acme", "edge-1") })
	_, _, err = tokens.Authenticate(ctx, st, token, now.Add(time.Hour))
	fmt.Println(err)
	// Output:
	// acme edge-1 <nil>
	// 0190a000-0000-7000-8000-000000000001 1s
	// controlplane: invalid listener token
}
