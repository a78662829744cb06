//go:build s3

package registry

import _ "github.com/distribution/distribution/v3/registry/storage/driver/s3-aws" // Options.S3

// S3Built says whether the S3 storage driver of Options.S3 is in the
// program: it is with the s3 build tag (go build -tags s3).
const S3Built = true
