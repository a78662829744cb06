package controlplane

import (
	"context"
	"errors"
	"fmt"

	"github.com/deployplane/deployplane/store"
)

// ErrOldLayout is wrapped by the error of CheckLayout, and of any read
// that meets a deployment, revision or tracing project record without a
// format version, when the store was written in another storage layout
// than the current one. Such layouts are neither read nor converted:
// recreate the store.
var ErrOldLayout = errors.New("controlplane: the store was written in an earlier storage layout, which this build does not read; recreate it")

// Traces of other layouts that CheckLayout looks for: the collections of
// two other name_contains indexes (name blocks, and trigrams without
// their places), and where keys of the text layout begin
// (a tenant's name, whose first byte is printable, where a tenant prefix
// is 0x01-0x1f).
const (
	colOldNameBlocks = "cp_deployment_name_blocks"
	colOldGrams      = "cp_deployment_grams"
	oldKeyStart      = " "
)

// CheckLayout returns an error wrapping ErrOldLayout when the store was
// written in a storage layout that is not read: deployments under text
// keys, or the records of another name_contains index. Call it after
// opening a store and before serving
// from it (cmd/deployplane does so at every start, and stops on its
// error). It reads at most one key of each of three collections and
// writes nothing, so it does not find an unversioned record among current
// ones: reading such a record fails with an error wrapping ErrOldLayout.
func (cp *ControlPlane) CheckLayout(ctx context.Context) error {
	var found error
	err := cp.st.View(ctx, func(r store.Reader) error {
		found = nil
		for _, c := range []struct{ col, start, what string }{
			{colDeployments, oldKeyStart, "deployments under text keys"},
			{colOldNameBlocks, "", "name blocks (" + colOldNameBlocks + ")"},
			{colOldGrams, "", "trigrams without their places (" + colOldGrams + ")"},
		} {
			err := r.Scan(c.col, "", &store.ScanOptions{Start: c.start}, func(k string, _ []byte) (bool, error) {
				found = fmt.Errorf("controlplane: the store holds %s, key %q: %w", c.what, k, ErrOldLayout)
				return false, nil
			})
			if err != nil || found != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return cp.storeErr("check the store's layout", err)
	}
	return found
}
