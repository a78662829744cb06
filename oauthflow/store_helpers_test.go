package oauthflow_test

import (
	"context"
	"testing"

	"github.com/deployplane/deployplane/store"
)

// collections are the ones package oauthflow documents as its own.
var collections = []string{"oauthflow.providers", "oauthflow.tokens", "oauthflow.flows", "oauthflow.states", "oauthflow.flow_expiry"}

func countRecords(t testing.TB, st store.Store, coll string) int {
	t.Helper()
	n := 0
	err := st.View(context.Background(), func(r store.Reader) error {
		n = 0
		return r.Scan(coll, "", nil, func(string, []byte) (bool, error) { n++; return true, nil })
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// dump returns every key and value of the package's collections.
func dump(t testing.TB, st store.Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := st.View(context.Background(), func(r store.Reader) error {
		clear(out)
		for _, coll := range collections {
			err := r.Scan(coll, "", nil, func(k string, v []byte) (bool, error) {
				out[coll+"/"+k] = string(v)
				return true, nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
