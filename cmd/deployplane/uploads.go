package main

import (
	"context"
	"fmt"
	"log/slog"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/fileblob" // -blob-url file:// (the default); the cloud drivers are in uploads_*.go, behind build tags

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/uploads"
)

// blobDriverTag answers the build tag that compiles in the driver of a
// -blob-url scheme (uploads_s3.go, uploads_gcs.go, uploads_azure.go), ""
// for a scheme no tag brings.
func blobDriverTag(scheme string) string {
	switch scheme {
	case "s3":
		return "s3"
	case "gs":
		return "gcs"
	case "azblob":
		return "azure"
	}
	return ""
}

// checkBlobURL says what is wrong with -blob-url, or "": a scheme whose
// driver is behind a build tag the binary was built without. Other
// mistakes are blob.OpenBucket's to report.
func checkBlobURL(blobURL string) string {
	u, err := neturl.Parse(blobURL)
	if blobURL == "" || err != nil {
		return ""
	}
	if tag := blobDriverTag(u.Scheme); tag != "" && !blob.DefaultURLMux().ValidBucketScheme(u.Scheme) {
		return fmt.Sprintf("-blob-url %s: built without %s support; build with -tags %s", redactedURL(u), tag, tag)
	}
	return ""
}

// redactedURL is u without its password and query, for messages and logs.
func redactedURL(u *neturl.URL) string {
	return strings.SplitN(u.Redacted(), "?", 2)[0]
}

// defaultBlobURL is where tarballs go without -blob-url: a directory
// beside the bbolt file (<db>.uploads), ./deployplane-uploads with a
// PostgreSQL database, or a temporary directory (removed by cleanup) with
// :memory:.
func defaultBlobURL(db string) (blobURL string, cleanup func(), err error) {
	var dir string
	cleanup = func() {}
	switch {
	case db == ":memory:":
		if dir, err = os.MkdirTemp("", "deployplane-uploads-"); err != nil {
			return "", nil, err
		}
		cleanup = func() { os.RemoveAll(dir) }
	case isPostgres(db):
		dir = "deployplane-uploads"
	default:
		dir = db + ".uploads"
	}
	if dir, err = filepath.Abs(dir); err != nil {
		cleanup()
		return "", nil, err
	}
	u := neturl.URL{Scheme: "file", Path: filepath.ToSlash(dir), RawQuery: "create_dir=true&no_tmp_dir=true"}
	return u.String(), cleanup, nil
}

// openUploads opens the blob store of -blob-url (or the default) and
// returns the uploads service over cp; stop closes the bucket (and
// removes a temporary directory).
func openUploads(ctx context.Context, c *config, cp *controlplane.ControlPlane, secretKey []byte, publicURL string,
	log *slog.Logger) (svc *uploads.Service, desc string, stop func(), err error) {
	blobURL, cleanup := c.blobURL, func() {}
	if blobURL == "" {
		if blobURL, cleanup, err = defaultBlobURL(c.db); err != nil {
			return nil, "", nil, fmt.Errorf("the uploads directory: %w", err)
		}
		if isPostgres(c.db) {
			log.Warn("source tarballs are kept in a local directory; replicas sharing the database need a shared -blob-url (s3://, gs://, azblob://)",
				"blob_url", blobURL)
		}
	}
	bucket, err := blob.OpenBucket(ctx, blobURL)
	if err != nil {
		cleanup()
		return nil, "", nil, fmt.Errorf("-blob-url: %w", err)
	}
	svc, err = uploads.New(cp, &uploads.Options{Bucket: bucket, Key: uploads.SigningKey(secretKey), PublicURL: publicURL, Logger: log,
		MaxBytes: c.uploadMaxBytes})
	if err != nil {
		bucket.Close()
		cleanup()
		return nil, "", nil, err
	}
	desc = blobURL
	if u, err := neturl.Parse(blobURL); err == nil {
		desc = redactedURL(u)
	}
	return svc, desc, func() { bucket.Close(); cleanup() }, nil
}
