package controlplane

import "errors"

// ErrOldLayout is wrapped by the error of any read that meets a
// deployment, revision or tracing project record without a format
// version, when the store was written in a storage layout of an earlier
// build. This build neither reads nor converts those layouts:
// recreate the store.
var ErrOldLayout = errors.New("controlplane: the store was written in an earlier storage layout, which this build does not read; recreate it")
