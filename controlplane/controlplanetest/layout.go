package controlplanetest

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"testing"

	"github.com/deployplane/deployplane/store"
)

// layoutV0 is a store of the key layout before ControlPlane.Migrate (the
// text keys of commit 7465e74): one JSON object per record, {"c":
// collection, "k": key, "v": value}. controlplane's layoutfixture_test.go
// says how it was written and what it holds (tenants "zeta" and "alpha",
// their deployments, revisions, listeners, integrations and pending work).
//
//go:embed testdata/layout-v0-records.jsonl
var layoutV0 []byte

// LoadLayoutV0 writes the records of the old-layout fixture into st, in
// one Update, and returns how many it wrote: the starting point of a
// migration test over any store.
func LoadLayoutV0(tb testing.TB, st store.Store) int {
	tb.Helper()
	type record struct {
		Collection string `json:"c"`
		Key        string `json:"k"`
		Value      string `json:"v"` // every value of that layout is text
	}
	var recs []record
	sc := bufio.NewScanner(bytes.NewReader(layoutV0))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			tb.Fatal(err)
		}
		recs = append(recs, r)
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	err := st.Update(context.Background(), func(tx store.Tx) error {
		for _, r := range recs {
			if err := tx.Put(r.Collection, r.Key, []byte(r.Value)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return len(recs)
}
