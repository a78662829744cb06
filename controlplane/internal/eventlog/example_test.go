package eventlog_test

import (
	"context"
	"fmt"
	"time"

	"github.com/deployplane/deployplane/controlplane/internal/eventlog"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storemem"
)

func Example() {
	st := storemem.New()
	defer st.Close()
	ctx := context.Background()
	l := eventlog.New(st, &eventlog.Options{
		Created: eventlog.Match{Kind: "deployment", Change: "created"},
		Deleted: eventlog.Match{Kind: "deployment", Change: "deleted"},
	})
	s := l.Follow("acme", nil) // every event, from the first

	// A change appends its events in its own Update, with a Batch for
	// that Update, and reports the Batch once the Update has committed.
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	var b eventlog.Batch
	_ = st.Update(ctx, func(tx store.Tx) error {
		b = eventlog.Batch{}
		for _, e := range []eventlog.Event{
			{Kind: "deployment", Change: "created", Deployment: "d1", At: at, Payload: []byte(`{"name":"agent"}`)},
			{Kind: "revision", Change: "created", Deployment: "d1", Revision: "r1", At: at},
		} {
			if err := l.Append(tx, &b, "acme", &e); err != nil {
				return err
			}
		}
		return nil
	})
	_, _ = l.Committed(ctx, &b) // wakes the followers

	es, _ := s.Next(ctx) // numbers the outbox, then reads
	for _, e := range es {
		fmt.Println(e.N, e.Event.Kind, e.Event.Change, string(e.Event.Payload))
	}
	// Output:
	// 1 deployment created {"name":"agent"}
	// 2 revision created
}
