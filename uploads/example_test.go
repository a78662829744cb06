package uploads_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"

	"gocloud.dev/blob/fileblob"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/storemem"
	"github.com/deployplane/deployplane/uploads"
)

// A tarball's way in: an upload URL for an internal_source deployment, the
// PUT (once), the PATCH naming its object_path, and the build reading it.
func ExampleService() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "uploads-example-")
	defer os.RemoveAll(dir)
	bucket, _ := fileblob.OpenBucket(dir, nil)
	defer bucket.Close()

	cp := controlplane.New(storemem.New(), &controlplane.Options{Uploads: uploads.Records{}}) // checks source_tarball_path against its uploads
	srv := httptest.NewUnstartedServer(nil)
	svc, err := uploads.New(cp, &uploads.Options{Bucket: bucket, Key: uploads.SigningKey(make([]byte, 32)), PublicURL: "http://" + srv.Listener.Addr().String()})
	if err != nil {
		panic(err)
	}
	srv.Config.Handler = svc // in a server: httphandler.Options.Uploads routes the PUTs to it
	srv.Start()
	defer srv.Close()

	const tenant = "0190f0a0-0000-7000-8000-00000000000a"
	d, _ := cp.CreateDeployment(ctx, tenant, &controlplane.CreateDeploymentRequest{Name: new("agent"), Source: new(controlplane.SourceInternalSource)})
	uploadURL, objectPath, _ := svc.UploadURL(ctx, tenant, d.ID)
	for range 2 {
		req, _ := http.NewRequest(http.MethodPut, uploadURL, strings.NewReader("a tarball"))
		res, _ := http.DefaultClient.Do(req)
		res.Body.Close()
		fmt.Println("PUT:", res.StatusCode)
	}
	d, err = cp.UpdateDeployment(ctx, tenant, d.ID, &controlplane.UpdateDeploymentRequest{
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{SourceTarballPath: &objectPath}})
	fmt.Println("PATCH:", err == nil && d.LatestRevisionID != nil)
	rc, _ := svc.OpenTarball(ctx, tenant, d.ID, objectPath)
	b, _ := io.ReadAll(rc)
	rc.Close()
	fmt.Printf("the build reads %q\n", b)
	// Output:
	// PUT: 200
	// PUT: 409
	// PATCH: true
	// the build reads "a tarball"
}
