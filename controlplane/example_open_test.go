package controlplane_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/storemem"
)

// Open holds a store to the secret key its secrets were first sealed
// with: another key is refused before anything is served.
func ExampleOpen() {
	ctx := context.Background()
	st := storemem.New()
	defer st.Close()

	key := bytes.Repeat([]byte{1}, 32) // in production: 32 random bytes, kept safe
	if _, err := controlplane.Open(ctx, st, &controlplane.Options{SecretKey: key}); err != nil {
		fmt.Println(err)
		return
	}
	other := bytes.Repeat([]byte{2}, 32)
	_, err := controlplane.Open(ctx, st, &controlplane.Options{SecretKey: other})
	fmt.Println(errors.Is(err, controlplane.ErrSecretKey))
	_, err = controlplane.Open(ctx, st, nil)
	fmt.Println(errors.Is(err, controlplane.ErrSecretKey))
	_, err = controlplane.Open(ctx, st, &controlplane.Options{SecretKey: key})
	fmt.Println(err)
	// Output:
	// true
	// true
	// <nil>
}
