//go:build s3

package main

import _ "gocloud.dev/blob/s3blob" // -blob-url s3://
