package workqueue_test

import (
	"context"
	"fmt"
	"time"

	"github.com/deployplane/deployplane/controlplane/internal/workqueue"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storemem"
)

func Example() {
	st := storemem.New()
	defer st.Close()
	ctx := context.Background()
	q := workqueue.New(st, &workqueue.Options{Lease: 30 * time.Second, TenantShare: 1,
		NewID: func() string { return "replica-1" }})
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

	// A tenant's work for the server: a deployment to tear down (the
	// caller's id parts, here of ids that are no UUIDs).
	server := workqueue.Range{Tenant: "\x01"}
	_ = st.Update(ctx, func(tx store.Tx) error {
		return workqueue.Add(tx, workqueue.Unit{Range: server, Deployment: "\x02\x02d1"})
	})

	l, _ := q.Claim(ctx, now)
	fmt.Println("claimed", l.Token, "teardown:", l.Revision == "")
	_ = st.Update(ctx, func(tx store.Tx) error {
		// The caller's change and the lease's check in one transaction.
		cur, err := workqueue.Own(tx, l)
		if err != nil || cur == nil {
			return err
		}
		back := *cur
		back.Failures++ // the teardown failed: try again in a minute
		return workqueue.Requeue(tx, &back, now.Add(time.Minute))
	})
	q.Done(l)
	l, _ = q.Claim(ctx, now)
	fmt.Println("before the retry time:", l)
	l, _ = q.Claim(ctx, now.Add(time.Minute))
	fmt.Println("claimed", l.Token, "failures:", l.Failures, "takeover:", l.Takeover)
	_ = st.Update(ctx, func(tx store.Tx) error { return workqueue.Remove(tx, l.Unit) }) // done
	fmt.Println(q.Renew(ctx, l, now.Add(time.Minute)))
	q.Done(l)
	// Output:
	// claimed replica-1:1 teardown: true
	// before the retry time: <nil>
	// claimed replica-1:2 failures: 1 takeover: false
	// controlplane: lease lost
}
