//go:build gcs

package main

import _ "gocloud.dev/blob/gcsblob" // -blob-url gs://
