package registry_test

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/opencontainers/go-digest"
	"pgregory.net/rapid"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/registry"
)

// past is how far a test moves the registry's clock to put what it
// pushed beyond the grace.
const past = registry.DefaultCollectGrace + time.Minute

// collect runs one Collect over the env's deployments.
func (e *env) collect(t *testing.T) *registry.Collected {
	t.Helper()
	out, err := e.reg.Collect(e.ctx, e.tokens)
	if err != nil {
		t.Fatalf("Collect: %v", err)
	}
	return out
}

// blobStatus is the status of HEAD of blob d in repo, with a pull token
// of the deployment.
func (e *env) blobStatus(t *testing.T, tenant, dep, repo string, d v1.Hash) int {
	t.Helper()
	tok, err := e.tokens.IssuePullToken(e.ctx, tenant, dep)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("HEAD", "http://"+e.host+"/v2/"+repo+"/blobs/"+d.String(), nil)
	req.SetBasicAuth("any", tok.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// layerOf is the digest of img's first layer.
func layerOf(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	ls, err := img.Layers()
	if err != nil || len(ls) == 0 {
		t.Fatal(err)
	}
	d, err := ls[0].Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// pullable reports whether repo@img's digest pulls whole: manifest,
// config and layers.
func (e *env) pullable(t *testing.T, tenant, dep, repo string, img v1.Image) bool {
	t.Helper()
	tok, err := e.tokens.IssuePullToken(e.ctx, tenant, dep)
	if err != nil {
		t.Fatal(err)
	}
	dg, _ := img.Digest()
	got, err := e.pull(repo+"@"+dg.String(), tok.Token)
	if err != nil {
		return false
	}
	ls, err := got.Layers()
	if err != nil {
		return false
	}
	for _, l := range ls {
		rc, err := l.Compressed()
		if err != nil {
			return false
		}
		var buf bytes.Buffer
		_, err = buf.ReadFrom(rc)
		rc.Close()
		if err != nil {
			return false
		}
	}
	_, err = got.RawConfigFile()
	return err == nil
}

// TestCollectRetagged: a deployment at its quota pushes a new image over
// the same tag; once the old one is past the grace, Collect removes it
// (its manifest and its blobs), the new one pulls whole, and the space it
// freed takes a push that was refused before.
func TestCollectRetagged(t *testing.T) {
	e := newEnvWith(t, &registry.Options{Quota: 1 << 20})
	a, tok := e.pushToken(t, "a")
	repo := "deployments/" + a + "/agent"
	imgA, imgB, imgC := image(t, 400*kib), image(t, 400*kib), image(t, 400*kib)
	for _, img := range []v1.Image{imgA, imgB} {
		if err := e.push(img, repo+":v1", tok); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.push(imgC, repo+":v2", tok); !overQuota(t, err, a) {
		t.Fatalf("a third image of 400 KiB under a quota of 1 MiB: %v, want DENIED", err)
	}

	// Within the grace nothing goes.
	if out := e.collect(t); out.Manifests+out.Layers+out.Blobs != 0 {
		t.Fatalf("Collect within the grace removed %+v", out)
	}
	e.later = past
	out := e.collect(t)
	// Image A, and what the refused push of C left (its config, when it
	// went up before the layer was refused).
	if out.Manifests != 1 || out.Layers < 2 || out.Blobs < 3 || out.Bytes < 400*kib {
		t.Errorf("Collect removed %+v, want image A: 1 manifest, its config and layer (3 blobs, 400 KiB and more)", out)
	}
	if e.pullable(t, tenantA, a, repo, imgA) {
		t.Errorf("image A, untagged, still pulls")
	}
	if st := e.blobStatus(t, tenantA, a, repo, layerOf(t, imgA)); st != http.StatusNotFound {
		t.Errorf("A's layer: HEAD %d, want 404", st)
	}
	if !e.pullable(t, tenantA, a, repo, imgB) {
		t.Errorf("image B, tagged v1, does not pull whole")
	}
	if err := e.push(imgC, repo+":v2", tok); err != nil {
		t.Errorf("the push refused before the collection: %v", err)
	}
	// A second round finds nothing more.
	if out := e.collect(t); out.Manifests+out.Layers+out.Blobs+out.Tags != 0 {
		t.Errorf("a second Collect removed %+v", out)
	}
}

// TestCollectKeepsRevisionImages: an image a revision of the deployment
// names (by digest, as image_uri is recorded) stays when its tag moves
// on; once the deployment's newest revisions no longer name it, it goes.
func TestCollectKeepsRevisionImages(t *testing.T) {
	e := newEnv(t)
	a, tok := e.pushToken(t, "a")
	repo := "deployments/" + a + "/agent"
	imgA := image(t, 4*kib)
	if err := e.push(imgA, repo+":latest", tok); err != nil {
		t.Fatal(err)
	}
	e.setImage(t, a, e.host+"/"+repo+":latest")
	imgB := image(t, 4*kib)
	if err := e.push(imgB, repo+":latest", tok); err != nil {
		t.Fatal(err)
	}
	e.later = past
	if out := e.collect(t); out.Manifests != 0 {
		t.Fatalf("Collect removed %+v while a revision names image A", out)
	}
	if !e.pullable(t, tenantA, a, repo, imgA) || !e.pullable(t, tenantA, a, repo, imgB) {
		t.Fatalf("A (named by the revision) and B (tagged) do not both pull")
	}
	// The deployment moves on: UploadsKept newer revisions of image B.
	for range controlplane.UploadsKept {
		e.setImage(t, a, e.host+"/"+repo+":latest")
	}
	if out := e.collect(t); out.Manifests != 1 {
		t.Errorf("Collect removed %+v, want image A's manifest", out)
	}
	if e.pullable(t, tenantA, a, repo, imgA) || !e.pullable(t, tenantA, a, repo, imgB) {
		t.Errorf("after the revisions moved on: A must be gone and B pull")
	}
}

// setImage creates a revision of deployment dep with image_uri image.
func (e *env) setImage(t *testing.T, dep, image string) {
	t.Helper()
	var req controlplane.UpdateDeploymentRequest
	if err := json.Unmarshal([]byte(`{"source_revision_config": {"image_uri": "`+image+`"}}`), &req); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cp.UpdateDeployment(e.ctx, tenantA, dep, &req); err != nil {
		t.Fatalf("PATCH image_uri %s: %v", image, err)
	}
}

// TestCollectGraceKeepsUploads: a blob uploaded moments ago whose
// manifest is not pushed yet survives Collect; past the grace it goes.
func TestCollectGraceKeepsUploads(t *testing.T) {
	e := newEnv(t)
	a, tok := e.pushToken(t, "a")
	repo := "deployments/" + a + "/agent"
	blob := make([]byte, 2*kib)
	_, _ = rand.Read(blob)
	d := v1.Hash{Algorithm: "sha256", Hex: digest.FromBytes(blob).Encoded()}
	loc := e.startUpload(t, repo, tok)
	req, _ := http.NewRequest("PUT", loc+"&digest="+d.String(), bytes.NewReader(blob))
	if !bytes.Contains([]byte(loc), []byte("?")) {
		req, _ = http.NewRequest("PUT", loc+"?digest="+d.String(), bytes.NewReader(blob))
	}
	req.SetBasicAuth("any", tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("the blob's upload: %d", resp.StatusCode)
	}
	if out := e.collect(t); out.Layers != 0 || out.Blobs != 0 {
		t.Fatalf("Collect removed %+v", out)
	}
	if st := e.blobStatus(t, tenantA, a, repo, d); st != http.StatusOK {
		t.Fatalf("the blob uploaded moments ago: HEAD %d, want 200", st)
	}
	e.later = past
	if out := e.collect(t); out.Layers != 1 || out.Blobs != 1 {
		t.Errorf("Collect past the grace removed %+v, want the blob", out)
	}
	if st := e.blobStatus(t, tenantA, a, repo, d); st != http.StatusNotFound {
		t.Errorf("the blob past the grace: HEAD %d, want 404", st)
	}
}

// TestCollectDeletedDeployment: once a deployment is deleted, Collect
// removes its repositories and the blobs only they held; a layer another
// deployment pushed too stays, and that deployment's image pulls whole.
func TestCollectDeletedDeployment(t *testing.T) {
	e := newEnv(t)
	a, tokA := e.pushToken(t, "a")
	b, tokB := e.pushToken(t, "b")
	shared := image(t, 8*kib)
	own := image(t, 8*kib)
	// B's image has the shared layer under another config.
	onB, err := mutate.Config(shared, v1.Config{Env: []string{"B=1"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct {
		img       v1.Image
		repo, tok string
	}{{shared, "deployments/" + a + "/agent:v1", tokA}, {own, "deployments/" + a + "/other:v1", tokA}, {onB, "deployments/" + b + "/agent:v1", tokB}} {
		if err := e.push(p.img, p.repo, p.tok); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.cp.DeleteDeployment(e.ctx, tenantA, a); err != nil {
		t.Fatal(err)
	}
	e.later = past
	out := e.collect(t)
	// A's: two manifests, two configs, its own layer; the shared layer
	// stays.
	if out.Deployments != 1 || out.Blobs != 5 {
		t.Errorf("Collect removed %+v, want deployment a and 5 blobs", out)
	}
	if st := e.blobStatus(t, tenantA, b, "deployments/"+b+"/agent", layerOf(t, shared)); st != http.StatusOK {
		t.Errorf("the shared layer in b: HEAD %d, want 200", st)
	}
	if !e.pullable(t, tenantA, b, "deployments/"+b+"/agent", onB) {
		t.Errorf("b's image does not pull whole")
	}
	// A new deployment pushing a's own layer stores it anew.
	c, tokC := e.pushToken(t, "c")
	if err := e.push(own, "deployments/"+c+"/agent:v1", tokC); err != nil || !e.pullable(t, tenantA, c, "deployments/"+c+"/agent", own) {
		t.Errorf("pushing a's image again into c: %v", err)
	}
	if out := e.collect(t); out.Deployments != 0 || out.Blobs != 0 {
		t.Errorf("a second Collect removed %+v", out)
	}
}

// TestCollectProperty: after random pushes (layers shared between images
// and deployments, tags pushed over), revisions and deletions, and a
// Collect past the grace, every image a live deployment keeps (a tag
// points to it, or one of its newest revisions names it) pulls whole,
// every other image it pushed is gone, and a second Collect finds
// nothing more.
func TestCollectProperty(t *testing.T) {
	// Each case pushes real images over HTTP: 20 cases unless
	// -rapid.checks asks for another number.
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == f.DefValue {
		_ = f.Value.Set("20")
		t.Cleanup(func() { _ = f.Value.Set(f.DefValue) })
	}
	e := newEnv(t)
	e.later = past
	var pool []v1.Layer
	for range 4 {
		l, err := random.Layer(kib, types.DockerLayer)
		if err != nil {
			t.Fatal(err)
		}
		pool = append(pool, l)
	}
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		type dep struct {
			id, tok string
			deleted bool
			tags    map[string]v1.Image // repo:tag -> image
			pushed  map[string]v1.Image // repo@digest -> image
			revs    []string            // repo@digest, oldest first
		}
		deps := make([]*dep, 2)
		for i := range deps {
			n++
			id, tok := e.pushToken(t, fmt.Sprintf("p%d", n))
			deps[i] = &dep{id: id, tok: tok, tags: map[string]v1.Image{}, pushed: map[string]v1.Image{}}
		}
		steps := rapid.IntRange(1, 10).Draw(rt, "steps")
		for range steps {
			d := deps[rapid.IntRange(0, len(deps)-1).Draw(rt, "deployment")]
			if d.deleted {
				continue
			}
			repo := "deployments/" + d.id + "/" + rapid.SampledFrom([]string{"agent", "other"}).Draw(rt, "repo")
			tag := rapid.SampledFrom([]string{"v1", "v2", "latest"}).Draw(rt, "tag")
			switch rapid.SampledFrom([]string{"push", "push", "revision", "delete"}).Draw(rt, "action") {
			case "push":
				var layers []v1.Layer
				for i, l := range pool {
					if rapid.Bool().Draw(rt, fmt.Sprintf("layer%d", i)) {
						layers = append(layers, l)
					}
				}
				img, err := mutate.AppendLayers(empty.Image, layers...)
				if err != nil {
					rt.Fatal(err)
				}
				if img, err = mutate.Config(img, v1.Config{Env: []string{fmt.Sprintf("N=%d", rapid.IntRange(0, 3).Draw(rt, "config"))}}); err != nil {
					rt.Fatal(err)
				}
				if err := e.push(img, repo+":"+tag, d.tok); err != nil {
					rt.Fatalf("push %s:%s: %v", repo, tag, err)
				}
				dg, _ := img.Digest()
				d.tags[repo+":"+tag], d.pushed[repo+"@"+dg.String()] = img, img
			case "revision":
				img, ok := d.tags[repo+":"+tag]
				if !ok {
					continue
				}
				e.setImage(t, d.id, e.host+"/"+repo+":"+tag)
				dg, _ := img.Digest()
				d.revs = append(d.revs, repo+"@"+dg.String())
			case "delete":
				if err := e.cp.DeleteDeployment(e.ctx, tenantA, d.id); err != nil {
					rt.Fatal(err)
				}
				d.deleted = true
			}
		}
		e.collect(t)
		for _, d := range deps {
			if d.deleted {
				continue
			}
			kept := map[string]bool{}
			for rt, img := range d.tags {
				dg, _ := img.Digest()
				kept[rt[:strings.LastIndex(rt, ":")]+"@"+dg.String()] = true
			}
			for _, r := range d.revs[max(0, len(d.revs)-controlplane.UploadsKept):] {
				kept[r] = true
			}
			for ref, img := range d.pushed {
				repo := ref[:strings.Index(ref, "@")]
				if got := e.pullable(t, tenantA, d.id, repo, img); got != kept[ref] {
					rt.Errorf("%s: pulls %v, kept %v", ref, got, kept[ref])
				}
			}
		}
		if out := e.collect(t); out.Deployments+out.Manifests+out.Layers+out.Tags+out.Blobs != 0 {
			rt.Errorf("a second Collect removed %+v", out)
		}
	})
}

// TestCollectTwoReplicasAtOnce: two replicas' collectors running at once
// over one storage remove an image pushed over, without an error, and
// keep the one its tag points to whole.
func TestCollectTwoReplicasAtOnce(t *testing.T) {
	e := newEnv(t)
	e.later = past
	other := e.replica(t, &registry.Options{Clock: func() time.Time { return time.Now().Add(past) }})
	a, tok := e.pushToken(t, "a")
	repo := "deployments/" + a + "/agent"
	imgA, imgB := image(t, 4*kib), image(t, 4*kib)
	for _, img := range []v1.Image{imgA, imgB} {
		if err := e.push(img, repo+":v1", tok); err != nil {
			t.Fatal(err)
		}
	}
	errs := make(chan error, 2)
	for _, r := range []*registry.Registry{e.reg, other.reg} {
		go func() {
			_, err := r.Collect(e.ctx, e.tokens)
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("Collect: %v", err)
		}
	}
	if e.pullable(t, tenantA, a, repo, imgA) || !e.pullable(t, tenantA, a, repo, imgB) {
		t.Errorf("after two collectors at once: A must be gone and B pull whole")
	}
}
