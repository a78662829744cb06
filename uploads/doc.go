// Package uploads receives the source tarballs of internal_source
// deployments, the uploads of `langgraph deploy --remote` (wire contract
// section 10): it signs upload URLs, serves their PUTs into a blob store
// (gocloud.dev/blob), hands the tarballs to image builds, and removes
// those no revision needs. The rules (single use, 15 minutes, 200 MiB,
// which tarballs a deployment keeps) are enforced across replicas by
// records this package keeps in the control plane's store
// (controlplane.ControlPlane.Store); Records checks them, inside the
// control plane's transaction, when a revision names a tarball.
//
//	cp := controlplane.New(st, &controlplane.Options{Uploads: uploads.Records{}, ...})
//	svc, _ := uploads.New(cp, &uploads.Options{Bucket: bucket, Key: uploads.SigningKey(secretKey), PublicURL: "https://deploy.example.com"})
//	api := httphandler.New(cp, &httphandler.Options{Uploads: svc, ...})   // POST .../upload-url and the PUTs
//	builder, _ := imagebuild.New(docker, &imagebuild.Options{Tarballs: svc}) // builds read the tarballs
//	go svc.Run(ctx, 0)                                                     // removes tarballs no revision needs
//
// # Upload URLs
//
// UploadURL answers POST /v2/deployments/{id}/upload-url: an absolute URL
// on this server, Options.PublicURL + PathPrefix +
// "/<tenant>/<deployment id>/<upload id>?expires=<unix seconds>&signature=<sig>",
// and the object_path "uploads/<deployment id>/<upload id>.tar.gz" that a
// PATCH then names as source_revision_config.source_tarball_path. The
// signature is the HMAC-SHA256, under Options.Key, of the tenant, the
// deployment, the upload and the expiry: a URL cannot be moved to another
// deployment, tenant or upload, nor its expiry changed. SigningKey derives
// the key from the server's secret key (the one that seals secrets at
// rest), so replicas that share that key accept each other's URLs.
//
// # The PUT
//
// ServeHTTP takes no API key: the signature is the proof. It answers 403
// for a bad signature or an expired URL; 409 when the upload was used
// already, or while another PUT of it streams (the claim is a record in
// the control plane's store, so this holds across replicas); 413 for a
// body larger than Options.MaxBytes (200 MiB) or than the maximum of an
// X-Goog-Content-Length-Range header ("min,max", as Google Cloud Storage's
// signed URLs take and langgraph deploy sends), refused at once from
// Content-Length or as soon as the body passes the limit; 400 for a body
// smaller than the header's minimum or cut off. Errors are JSON
// {"detail": "..."}; success is 200 with an empty body. The body is
// streamed into the bucket (never held whole in memory), and written
// atomically: a PUT that fails leaves nothing, and gives the URL back to
// be used again until it expires. The server's read and write deadlines
// are extended to the URL's expiry for the PUT.
//
// # Blob store
//
// Tarballs are stored under "<tenant>/<deployment id>/<upload id>.tar.gz"
// in Options.Bucket, any gocloud.dev/blob bucket (cmd/deployplane's
// -blob-url: file:// under its data directory by default; s3://, gs:// or
// azblob:// when several replicas share the work).
//
// # Removal
//
// Sweep (and Run, every minute) removes the tarballs that may go, then
// their records: every tarball of a deployment that is gone, and those
// that none of a deployment's newest controlplane.UploadsKept (10)
// revisions names (controlplane.ControlPlane.KeptTarballs), once Grace (an
// hour) has passed since their URL expired.
// Redeploying an older revision whose tarball went is a 400 saying so; a
// build that finds no tarball fails with OpenTarball's ErrTarballGone.
// Design notes: docs/design-notes.md, "uploads".
package uploads
