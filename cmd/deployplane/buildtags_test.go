package main

import (
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gocloud.dev/blob"

	"github.com/deployplane/deployplane/registry"
)

// storageTags are the build tags of every cloud storage driver, as the
// container image builds the server.
const storageTags = "s3,gcs,azure"

// TestStorageDriversNeedTheirTags: a flag naming a storage driver that is
// not in the binary (its build tag was not given) is a usage error naming
// the tag to build with; with the tag (go test -tags s3,gcs,azure) the
// same flags are accepted.
func TestStorageDriversNeedTheirTags(t *testing.T) {
	mux := blob.DefaultURLMux()
	for _, c := range []struct {
		flag, url, shown, tag string
		built                 bool
	}{
		{"-blob-url", "s3://uploads?region=eu-west-1", "s3://uploads", "s3", mux.ValidBucketScheme("s3")},
		{"-blob-url", "gs://uploads", "gs://uploads", "gcs", mux.ValidBucketScheme("gs")},
		{"-blob-url", "azblob://uploads", "azblob://uploads", "azure", mux.ValidBucketScheme("azblob")},
		{"-registry-storage", "s3://images/prod?region=eu-west-1&endpoint=http://127.0.0.1:9000", "s3://images/prod", "s3", registry.S3Built},
	} {
		var stderr bytes.Buffer
		_, err := parseFlags([]string{c.flag, c.url}, func(string) string { return "" }, &stderr)
		if c.built {
			if err != nil {
				t.Errorf("%s %s, built with -tags %s: %v\n%s", c.flag, c.url, c.tag, err, &stderr)
			}
			continue
		}
		want := "deployplane: " + c.flag + " " + c.shown + ": built without " + c.tag + " support; build with -tags " + c.tag + "\n"
		if !errors.Is(err, errUsage) || stderr.String() != want {
			t.Errorf("%s %s: %v, %q; want a usage error, %q", c.flag, c.url, err, &stderr, want)
		}
	}
	// file:// is always there (the default), and a scheme no tag brings
	// is left to the blob store's own error.
	for _, u := range []string{"file:///tmp/uploads", "mem://", "ftp://host"} {
		if msg := checkBlobURL(u); msg != "" {
			t.Errorf("checkBlobURL(%s) = %q", u, msg)
		}
	}
}

// TestDefaultBuildLeavesOutCloudSDKs: the packages of the default build
// (go list -deps, no tags) hold no cloud storage driver and none of the
// SDKs under them.
func TestDefaultBuildLeavesOutCloudSDKs(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		for _, prefix := range []string{"github.com/aws/", "cloud.google.com/", "github.com/Azure/", "github.com/AzureAD/",
			"gocloud.dev/blob/s3blob", "gocloud.dev/blob/gcsblob", "gocloud.dev/blob/azureblob",
			"github.com/distribution/distribution/v3/registry/storage/driver/s3-aws"} {
			if strings.HasPrefix(p, prefix) {
				t.Errorf("the default build links %s", p)
			}
		}
	}
}

// TestDefaultBinaryRefusesCloudStorage: the server as go build builds it
// (no tags) stops at once, with status 2, on -blob-url s3://..., saying
// which tag to build with; it never listens.
func TestDefaultBinaryRefusesCloudStorage(t *testing.T) {
	p := startProc(t, binary(t), processEnv(t.TempDir()), "-addr", "127.0.0.1:0", "-db", ":memory:",
		"-blob-url", "s3://uploads?region=eu-west-1")
	if code := p.exitCode(t); code != 2 {
		t.Errorf("exit status %d, want 2\n%s", code, p.log)
	}
	if want := "deployplane: -blob-url s3://uploads: built without s3 support; build with -tags s3\n"; p.log.String() != want {
		t.Errorf("the server said %q, want %q", p.log, want)
	}
}

// TestTaggedBuild builds the server with every storage driver's tag, as
// the container image does, vets the tagged files (this package's and the
// registry's), and starts the binary over S3: the tarballs' bucket and the
// registry's (neither is reached at start) are accepted and the server
// serves. It compiles the cloud SDKs the default build leaves out (about
// 2 minutes of CPU with a cold build cache), so -short skips it.
func TestTaggedBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the cloud storage SDKs; not with -short")
	}
	bin := filepath.Join(t.TempDir(), "deployplane")
	for _, args := range [][]string{
		{"build", "-tags", storageTags, "-o", bin, "."},
		{"vet", "-tags", storageTags, ".", "../../registry"},
	} {
		if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	env := processEnv(t.TempDir(), "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_EC2_METADATA_DISABLED=true")
	p := startProc(t, bin, env, "-addr", "127.0.0.1:0", "-db", ":memory:",
		"-blob-url", "s3://uploads?region=eu-west-1&endpoint=http://127.0.0.1:1",
		"-registry-addr", "127.0.0.1:0", "-registry-storage", "s3://images/prod?region=eu-west-1&endpoint=http://127.0.0.1:1")
	p.log.wait(t)
	p.log.await(t, regexp.MustCompile(`blob_url=s3://uploads\b`))
	p.stop(t)
}
