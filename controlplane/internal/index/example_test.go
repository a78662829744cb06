package index_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/deployplane/deployplane/controlplane/internal/index"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storemem"
)

func Example() {
	st := storemem.New()
	defer st.Close()
	ctx := context.Background()
	const tenant = "\x01" // the tenant's key prefix
	// A tail: the time key of the creation, then the caller's id part
	// (here one byte, 0x01, and a number).
	tailOf := func(at time.Time, id byte) string {
		b := binary.BigEndian.AppendUint64(nil, uint64(at.UnixMicro())^(1<<63))
		return string(append(b, 0x01, id))
	}
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	_ = st.Update(ctx, func(tx store.Tx) error {
		for i, name := range []string{"agent-red", "agent-blue", "Batch-red"} {
			e := &index.Entry{
				Tail:    tailOf(at.Add(time.Duration(i)*time.Second), byte(i)),
				Name:    name,
				Summary: strings.ToLower(name) + "\x00" + "READY", // the name, then what Keep looks at
				Terms:   []string{"s" + "READY"},
			}
			if err := index.Put(tx, tenant, nil, e); err != nil {
				return err
			}
		}
		return nil
	})
	x := index.New(nil)
	_ = st.View(ctx, func(r store.Reader) error {
		for _, q := range []*index.Query{
			{Name: "RED", Limit: 10},                              // the gram index
			{Limit: 2, Offset: 1},                                 // the order records, the offset skipped over the counts
			{Terms: []string{"sREADY"}, Name: "agent", Limit: 10}, // a term's records, the name checked on summaries
		} {
			tails, err := x.List(r, tenant, q)
			if err != nil {
				return err
			}
			var ids []byte
			for _, t := range tails {
				ids = append(ids, t[len(t)-1])
			}
			fmt.Println(ids)
		}
		return nil
	})
	// Output:
	// [2 0]
	// [1 0]
	// [1 0]
}
