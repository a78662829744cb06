package answercache_test

import (
	"fmt"

	"github.com/deployplane/deployplane/controlplane/internal/answercache"
)

func Example() {
	c := answercache.New(1 << 20)
	// answer reads a record as the store holds it, and serves the kept
	// answer while the record is the very one it was made from.
	answer := func(tenant, id string, stored []byte) string {
		if a := c.Get(tenant, id, stored); a != nil {
			return "kept: " + string(a)
		}
		a := []byte("made of " + string(stored)) // the expensive part
		c.Put(tenant, id, stored, a)
		return string(a)
	}
	fmt.Println(answer("acme", "d1", []byte("v1")))
	fmt.Println(answer("acme", "d1", []byte("v1")))
	fmt.Println(answer("acme", "d1", []byte("v2"))) // the record was rewritten
	// Output:
	// made of v1
	// kept: made of v1
	// made of v2
}
