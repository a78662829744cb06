package revlog_test

import (
	"context"
	"fmt"
	"time"

	"github.com/deployplane/deployplane/controlplane/internal/revlog"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storemem"
)

func Example() {
	st := storemem.New()
	defer st.Close()
	logs := revlog.New(&revlog.Options{MaxLines: 2})
	// "\x01": the tenant's prefix in the compact key encoding (keyenc).
	k := revlog.Key{Tenant: "acme", TenantPrefix: "\x01", Deployment: "d1", Revision: "r1", Kind: revlog.Build}
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	ctx := context.Background()
	_ = st.Update(ctx, func(tx store.Tx) error {
		stored, err := logs.Append(tx, k, []revlog.Line{
			{Time: at, Level: revlog.Info, Message: "cloning"},
			{Time: at, Level: revlog.Info, Message: "building"},
			{Time: at, Level: revlog.Error, Message: "no Dockerfile"},
		})
		fmt.Println("stored", len(stored), "from place", stored[0].Seq)
		return err
	})
	_ = st.View(ctx, func(r store.Reader) error {
		page, err := logs.List(r, k, &revlog.Filter{Limit: 10})
		for _, e := range page {
			fmt.Println(e.Seq, e.Level, e.Message)
		}
		return err
	})
	// Output:
	// stored 2 from place 2
	// 1 WARNING 1 earlier lines dropped: this log keeps its last 2 lines and 5242880 bytes of messages
	// 2 INFO building
	// 3 ERROR no Dockerfile
}
