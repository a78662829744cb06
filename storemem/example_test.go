package storemem_test

import (
	"context"
	"fmt"

	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storemem"
)

// A store is written in Update closures and read in View closures; a Scan
// walks one key prefix in byte order, here newest first.
func Example() {
	ctx := context.Background()
	st := storemem.New()
	defer st.Close()

	err := st.Update(ctx, func(tx store.Tx) error {
		for _, k := range []string{"team-a/1", "team-a/2", "team-a/3", "team-b/1"} {
			if err := tx.Put("deployments", k, []byte("record "+k)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	_ = st.View(ctx, func(r store.Reader) error {
		return r.Scan("deployments", "team-a/", &store.ScanOptions{Reverse: true},
			func(key string, value []byte) (bool, error) {
				fmt.Println(key, "=>", string(value))
				return true, nil
			})
	})
	// Output:
	// team-a/3 => record team-a/3
	// team-a/2 => record team-a/2
	// team-a/1 => record team-a/1
}
