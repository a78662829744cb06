package registry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/distribution/distribution/v3"
	"github.com/distribution/distribution/v3/registry/storage"
	storagedriver "github.com/distribution/distribution/v3/registry/storage/driver"
	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
)

const (
	// DefaultCollectGrace is Options.CollectGrace's default.
	DefaultCollectGrace = time.Hour
	// DefaultCollectEvery is how often RunCollector collects by default.
	DefaultCollectEvery = 15 * time.Minute
	// KeptTags is how many of a deployment's most recently pushed tags
	// the collector keeps, with the images they point to.
	KeptTags = 10
)

// The storage layout below repositoriesRoot (Distribution's): in a
// repository <name>, _manifests/revisions/<alg>/<hex>/link is a manifest
// it holds, _manifests/tags/<tag>/current/link the manifest a tag points
// to, _layers/<alg>/<hex>/link a blob (layer or config) it links. The
// blobs' data is at blobsRoot/<alg>/<first two hex>/<hex>/data. The
// collector moves the data it removes to trashRoot first (see sweepBlobs).
const (
	blobsRoot = "/docker/registry/v2/blobs"
	trashRoot = "/docker/registry/v2/deployplane-trash"
)

// Collected is what one Collect removed.
type Collected struct {
	// Deployments is how many deleted deployments had their repositories
	// removed.
	Deployments int
	// Tags, Manifests and Layers are the tags, manifests and blob links
	// removed from the repositories of live deployments.
	Tags, Manifests, Layers int
	// Blobs and Bytes are the blobs whose data was removed from the
	// storage (no repository linked them any more) and their size.
	Blobs int
	Bytes int64
	// Unknown is how many deployments' repositories were left alone:
	// the Retention had no record of them (ErrDeploymentUnknown).
	Unknown int
}

// Collect removes what no deployment keeps any more (doc.go, "Garbage
// collection"): the repositories of deployments that are gone; in those
// of live deployments, the tags beyond the KeptTags most recent, the
// manifests neither a kept tag nor an image the deployment keeps
// (Retention.KeptImages) reaches, and the blob links no kept manifest
// references; then the data of blobs no repository links. Nothing pushed
// within Options.CollectGrace is removed. It may run while images are
// pushed, in several replicas at once over one storage. An error of one
// deployment leaves its repositories for the next round, the others are
// collected, and the errors are returned together.
func (r *Registry) Collect(ctx context.Context, kept Retention) (*Collected, error) {
	if kept == nil {
		return nil, errors.New("registry: Collect needs a Retention")
	}
	c := &collector{r: r, kept: kept, start: r.clock(), out: &Collected{}}
	c.cutoff = c.start.Add(-r.grace)
	var errs []error
	ids, err := r.deploymentDirs(ctx)
	if err != nil {
		return c.out, fmt.Errorf("registry: collect: %w", err)
	}
	for _, id := range ids {
		if err := c.deployment(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("deployment %s: %w", id, err))
		}
		if ctx.Err() != nil {
			return c.out, ctx.Err()
		}
	}
	if err := c.sweepBlobs(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return c.out, fmt.Errorf("registry: collect: %w", err)
	}
	return c.out, nil
}

// RunCollector calls Collect every interval (DefaultCollectEvery when 0 or
// less) until ctx is done, logging what it removed and its failures.
func (r *Registry) RunCollector(ctx context.Context, kept Retention, every time.Duration) {
	if every <= 0 {
		every = DefaultCollectEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		out, err := r.Collect(ctx, kept)
		switch {
		case err != nil && ctx.Err() == nil:
			r.log.Warn("registry: collecting images", "err", err)
		case out != nil && (out.Deployments > 0 || out.Manifests > 0 || out.Layers > 0 || out.Tags > 0 || out.Blobs > 0):
			r.log.Info("registry: removed images no deployment keeps", "deployments", out.Deployments, "tags", out.Tags,
				"manifests", out.Manifests, "layers", out.Layers, "blobs", out.Blobs, "bytes", out.Bytes)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// deploymentDirs lists the deployment ids that have repositories.
func (r *Registry) deploymentDirs(ctx context.Context) ([]string, error) {
	children, err := r.driver.List(ctx, path.Join(repositoriesRoot, "deployments"))
	if errors.As(err, new(storagedriver.PathNotFoundError)) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(children))
	for _, c := range children {
		ids = append(ids, path.Base(c))
	}
	slices.Sort(ids)
	return ids, nil
}

// collector is one round of Collect.
type collector struct {
	r      *Registry
	kept   Retention
	start  time.Time // the round's start, by Options.Clock
	cutoff time.Time // what is older than this is past the grace
	out    *Collected
}

// deployment collects the repositories of one deployment.
func (c *collector) deployment(ctx context.Context, id string) error {
	images, err := c.kept.KeptImages(ctx, id)
	switch {
	case errors.Is(err, ErrDeploymentUnknown):
		c.out.Unknown++
		return nil
	case errors.Is(err, ErrDeploymentGone):
		err := c.r.driver.Delete(ctx, path.Join(repositoriesRoot, Repository(id)))
		if err != nil && !errors.As(err, new(storagedriver.PathNotFoundError)) {
			return err
		}
		c.out.Deployments++
		return c.kept.ForgetDeployment(ctx, id)
	case err != nil:
		return err
	}
	repos, err := c.r.scanDeployment(ctx, id)
	if err != nil {
		return err
	}
	c.markTags(repos)
	for _, img := range images {
		c.markImage(repos, img)
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(repos)) {
		if err := c.repository(ctx, repos[name]); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// repo is what the storage holds of one repository, and what the round
// keeps of it.
type repo struct {
	name      string
	tags      map[string]time.Time        // tag -> when it was last pushed
	manifests map[digest.Digest]time.Time // manifest -> when it was last put
	layers    map[digest.Digest]time.Time // linked blob -> when it was linked

	keepTags map[string]bool
	roots    []digest.Digest // manifests kept, before their references
}

// scanDeployment reads the repositories below a deployment's prefix.
func (r *Registry) scanDeployment(ctx context.Context, id string) (map[string]*repo, error) {
	root := path.Join(repositoriesRoot, Repository(id))
	repos := map[string]*repo{}
	get := func(parts []string, i int) *repo {
		name := path.Join(append([]string{Repository(id)}, parts[:i]...)...)
		rp := repos[name]
		if rp == nil {
			rp = &repo{name: name, tags: map[string]time.Time{}, manifests: map[digest.Digest]time.Time{},
				layers: map[digest.Digest]time.Time{}, keepTags: map[string]bool{}}
			repos[name] = rp
		}
		return rp
	}
	err := walk(ctx, r.driver, root, func() { clear(repos) }, func(fi storagedriver.FileInfo) error {
		parts := strings.Split(strings.TrimPrefix(fi.Path(), root+"/"), "/")
		if fi.IsDir() {
			if last := parts[len(parts)-1]; last == "_uploads" || last == "index" && len(parts) >= 3 && parts[len(parts)-3] == "tags" {
				return storagedriver.ErrSkipDir // unfinished uploads; tag histories
			}
			return nil
		}
		for i, p := range parts {
			switch rest := parts[i+1:]; {
			case p == "_layers" && len(rest) == 3 && rest[2] == "link":
				if d := digest.NewDigestFromEncoded(digest.Algorithm(rest[0]), rest[1]); d.Validate() == nil {
					get(parts, i).layers[d] = fi.ModTime()
				}
			case p == "_manifests" && len(rest) == 4 && rest[0] == "revisions" && rest[3] == "link":
				if d := digest.NewDigestFromEncoded(digest.Algorithm(rest[1]), rest[2]); d.Validate() == nil {
					get(parts, i).manifests[d] = fi.ModTime()
				}
			case p == "_manifests" && len(rest) == 4 && rest[0] == "tags" && rest[2] == "current" && rest[3] == "link":
				get(parts, i).tags[rest[1]] = fi.ModTime()
			default:
				continue
			}
			break
		}
		return nil
	})
	return repos, err
}

// markTags keeps the deployment's KeptTags most recently pushed tags and
// every tag pushed within the grace, and the manifests they point to;
// manifests put within the grace are kept too.
func (c *collector) markTags(repos map[string]*repo) {
	type tag struct {
		rp   *repo
		name string
		at   time.Time
	}
	var tags []tag
	for _, rp := range repos {
		for name, at := range rp.tags {
			tags = append(tags, tag{rp, name, at})
		}
		for d, at := range rp.manifests {
			if at.After(c.cutoff) {
				rp.roots = append(rp.roots, d)
			}
		}
	}
	slices.SortFunc(tags, func(a, b tag) int {
		return cmp.Or(b.at.Compare(a.at), strings.Compare(a.rp.name, b.rp.name), strings.Compare(a.name, b.name))
	})
	for i, t := range tags {
		if i < KeptTags || t.at.After(c.cutoff) {
			t.rp.keepTags[t.name] = true
		}
	}
}

// markImage keeps the manifest that img names, when it is in one of the
// deployment's repositories: by digest, or the one its tag points to
// (the tag kept too).
func (c *collector) markImage(repos map[string]*repo, img string) {
	named, err := reference.ParseNormalizedNamed(img)
	if err != nil || !c.r.names.Match(reference.Domain(named)) {
		return
	}
	rp := repos[reference.Path(named)]
	if rp == nil {
		return // not one of the deployment's (or not pushed)
	}
	if d, ok := named.(reference.Digested); ok {
		rp.roots = append(rp.roots, d.Digest())
		return
	}
	tag := "latest"
	if t, ok := named.(reference.Tagged); ok {
		tag = t.Tag()
	}
	if _, ok := rp.tags[tag]; ok {
		rp.keepTags[tag] = true
	}
}

// repository collects one repository of a live deployment: it marks what
// the kept tags and roots reach, removes the rest, then repairs what a
// push that came meanwhile needs (see repair).
func (c *collector) repository(ctx context.Context, rp *repo) error {
	named, err := reference.WithName(rp.name)
	if err != nil {
		return nil // not a repository Distribution would serve
	}
	repository, err := c.r.ns.Repository(ctx, named)
	if err != nil {
		return err
	}
	ms, err := repository.Manifests(ctx)
	if err != nil {
		return err
	}
	tags := repository.Tags(ctx)
	roots := slices.Clone(rp.roots)
	for tag := range rp.keepTags {
		desc, err := tags.Get(ctx, tag)
		if errors.As(err, new(distribution.ErrTagUnknown)) {
			continue
		}
		if err != nil {
			return err
		}
		roots = append(roots, desc.Digest)
	}
	marked, err := c.r.mark(ctx, ms, rp.manifests, roots)
	if err != nil {
		return err
	}

	vacuum := storage.NewVacuum(ctx, c.r.driver)
	var keptTags []string
	for tag := range rp.tags {
		if rp.keepTags[tag] {
			keptTags = append(keptTags, tag)
			continue
		}
		err := c.r.driver.Delete(ctx, path.Join(repositoriesRoot, rp.name, "_manifests/tags", tag))
		if err != nil && !errors.As(err, new(storagedriver.PathNotFoundError)) {
			return err
		}
		c.out.Tags++
	}
	removedManifests := map[digest.Digest]bool{}
	for d := range rp.manifests {
		if marked[d] {
			continue
		}
		if err := vacuum.RemoveManifest(rp.name, d, keptTags); err != nil && !errors.As(err, new(storagedriver.PathNotFoundError)) {
			return err
		}
		removedManifests[d] = true
		c.out.Manifests++
	}
	removedLayers := map[digest.Digest]bool{}
	for d, at := range rp.layers {
		if marked[d] || at.After(c.cutoff) {
			continue
		}
		if err := vacuum.RemoveLayer(rp.name, d); err != nil && !errors.As(err, new(storagedriver.PathNotFoundError)) {
			return err
		}
		removedLayers[d] = true
		c.out.Layers++
	}
	if len(removedManifests) == 0 && len(removedLayers) == 0 {
		return nil
	}
	return c.repair(ctx, rp, ms, tags, removedManifests, removedLayers)
}

// mark returns the manifests of roots that the repository holds and
// everything they reference, manifests of an index included.
func (r *Registry) mark(ctx context.Context, ms distribution.ManifestService, held map[digest.Digest]time.Time, roots []digest.Digest) (map[digest.Digest]bool, error) {
	marked := map[digest.Digest]bool{}
	for len(roots) > 0 {
		d := roots[len(roots)-1]
		roots = roots[:len(roots)-1]
		if marked[d] {
			continue
		}
		marked[d] = true
		if _, ok := held[d]; !ok {
			continue // a blob, or a manifest this repository does not hold
		}
		m, err := ms.Get(ctx, d)
		if err != nil {
			return nil, fmt.Errorf("reading manifest %s: %w", d, err)
		}
		for _, ref := range m.References() {
			roots = append(roots, ref.Digest)
		}
	}
	return marked, nil
}

// repair puts back the links that a push racing the round needs: a
// manifest put (or a tag pushed) after the round read the repository may
// point to a manifest or blob the round then removed. It reads the
// repository again and links back whatever a tag or a manifest held now
// reaches of what was removed, as long as the blob's data is there (the
// round removes data only after every repository is done).
func (c *collector) repair(ctx context.Context, rp *repo, ms distribution.ManifestService, tags distribution.TagService,
	removedManifests, removedLayers map[digest.Digest]bool) error {
	now, err := c.r.scanRepository(ctx, rp.name)
	if err != nil {
		return err
	}
	var roots []digest.Digest
	for tag := range now.tags {
		desc, err := tags.Get(ctx, tag)
		if err == nil {
			roots = append(roots, desc.Digest)
		}
	}
	for d, at := range now.manifests {
		if _, seen := rp.manifests[d]; !seen || at.After(rp.manifests[d]) {
			roots = append(roots, d)
		}
	}
	for len(roots) > 0 {
		d := roots[len(roots)-1]
		roots = roots[:len(roots)-1]
		switch {
		case removedManifests[d]:
			delete(removedManifests, d)
			if err := c.r.relink(ctx, path.Join(repositoriesRoot, rp.name, "_manifests/revisions", string(d.Algorithm()), d.Encoded(), "link"), d); err != nil {
				return err
			}
			c.out.Manifests--
			now.manifests[d] = c.start
		case removedLayers[d]:
			delete(removedLayers, d)
			if err := c.r.relink(ctx, path.Join(repositoriesRoot, rp.name, "_layers", string(d.Algorithm()), d.Encoded(), "link"), d); err != nil {
				return err
			}
			c.out.Layers--
			continue
		}
		if _, ok := now.manifests[d]; !ok {
			continue
		}
		m, err := ms.Get(ctx, d)
		if err != nil {
			continue // gone again, or not a manifest
		}
		for _, ref := range m.References() {
			if removedManifests[ref.Digest] || removedLayers[ref.Digest] {
				roots = append(roots, ref.Digest)
			}
		}
	}
	return nil
}

// relink writes the link at p to d, when d's data is there.
func (r *Registry) relink(ctx context.Context, p string, d digest.Digest) error {
	if _, err := r.driver.Stat(ctx, blobDataPath(d)); err != nil {
		return nil // nothing to link to: the push that needs it fails, and its client pushes again
	}
	return r.driver.PutContent(ctx, p, []byte(d.String()))
}

// scanRepository reads one repository (as scanDeployment does).
func (r *Registry) scanRepository(ctx context.Context, name string) (*repo, error) {
	rp := &repo{name: name, tags: map[string]time.Time{}, manifests: map[digest.Digest]time.Time{}, layers: map[digest.Digest]time.Time{}}
	root := path.Join(repositoriesRoot, name)
	reset := func() { clear(rp.tags); clear(rp.manifests); clear(rp.layers) }
	err := walk(ctx, r.driver, root, reset, func(fi storagedriver.FileInfo) error {
		parts := strings.Split(strings.TrimPrefix(fi.Path(), root+"/"), "/")
		if fi.IsDir() {
			if len(parts) == 1 && parts[0] != "_manifests" && parts[0] != "_layers" || len(parts) == 4 && parts[3] == "index" {
				return storagedriver.ErrSkipDir // other repositories below; uploads; tag histories
			}
			return nil
		}
		switch {
		case len(parts) == 4 && parts[0] == "_layers" && parts[3] == "link":
			if d := digest.NewDigestFromEncoded(digest.Algorithm(parts[1]), parts[2]); d.Validate() == nil {
				rp.layers[d] = fi.ModTime()
			}
		case len(parts) == 5 && parts[0] == "_manifests" && parts[1] == "revisions" && parts[4] == "link":
			if d := digest.NewDigestFromEncoded(digest.Algorithm(parts[2]), parts[3]); d.Validate() == nil {
				rp.manifests[d] = fi.ModTime()
			}
		case len(parts) == 5 && parts[0] == "_manifests" && parts[1] == "tags" && parts[3] == "current" && parts[4] == "link":
			rp.tags[parts[2]] = fi.ModTime()
		}
		return nil
	})
	return rp, err
}

// blobDataPath is where the data of blob d is.
func blobDataPath(d digest.Digest) string {
	return path.Join(blobsRoot, string(d.Algorithm()), d.Encoded()[:2], d.Encoded(), "data")
}

// trashPath is where sweepBlobs moves the data of blob d before it
// removes it.
func trashPath(d digest.Digest) string {
	return path.Join(trashRoot, string(d.Algorithm()), d.Encoded())
}

// linked returns every blob a repository links: its layers and configs
// (_layers) and its manifests (_manifests/revisions).
func (r *Registry) linked(ctx context.Context) (map[digest.Digest]bool, error) {
	out := map[digest.Digest]bool{}
	err := walk(ctx, r.driver, repositoriesRoot, func() { clear(out) }, func(fi storagedriver.FileInfo) error {
		parts := strings.Split(strings.TrimPrefix(fi.Path(), repositoriesRoot+"/"), "/")
		n := len(parts)
		if fi.IsDir() {
			if last := parts[n-1]; last == "_uploads" || last == "tags" && n >= 2 && parts[n-2] == "_manifests" {
				return storagedriver.ErrSkipDir
			}
			return nil
		}
		if n < 4 || parts[n-1] != "link" {
			return nil
		}
		if parts[n-4] == "_layers" || n >= 5 && parts[n-5] == "_manifests" && parts[n-4] == "revisions" {
			if d := digest.NewDigestFromEncoded(digest.Algorithm(parts[n-3]), parts[n-2]); d.Validate() == nil {
				out[d] = true
			}
		}
		return nil
	})
	return out, err
}

// sweepBlobs removes the data of the blobs no repository links, once
// stored for longer than the grace. A push may link such a blob again
// while the round runs (an upload of the same bytes finds the data there
// and only links it), so the data is first moved aside (to trashRoot):
// from then on a push of the blob stores its own data. The repositories
// are then read again, and the data of a blob some repository linked
// meanwhile is moved back; the rest is removed.
func (c *collector) sweepBlobs(ctx context.Context) error {
	linked, err := c.r.linked(ctx)
	if err != nil {
		return err
	}
	type blob struct {
		d    digest.Digest
		size int64
	}
	var moved []blob
	err = walk(ctx, c.r.driver, blobsRoot, func() {}, func(fi storagedriver.FileInfo) error {
		if fi.IsDir() || path.Base(fi.Path()) != "data" {
			return nil
		}
		parts := strings.Split(strings.TrimPrefix(fi.Path(), blobsRoot+"/"), "/")
		if len(parts) != 4 {
			return nil
		}
		d := digest.NewDigestFromEncoded(digest.Algorithm(parts[0]), parts[2])
		if d.Validate() != nil || linked[d] || fi.ModTime().After(c.cutoff) {
			return nil
		}
		if err := c.r.driver.Move(ctx, fi.Path(), trashPath(d)); err != nil {
			if _, serr := c.r.driver.Stat(ctx, fi.Path()); errors.As(serr, new(storagedriver.PathNotFoundError)) {
				return nil // another collector moved it
			}
			return err
		}
		if !slices.ContainsFunc(moved, func(b blob) bool { return b.d == d }) {
			moved = append(moved, blob{d, fi.Size()})
		}
		return nil
	})
	// Data a round that stopped midway left aside.
	trashed, lerr := c.r.trashed(ctx)
	for _, d := range trashed {
		if !slices.ContainsFunc(moved, func(b blob) bool { return b.d == d }) {
			moved = append(moved, blob{d: d})
		}
	}
	if len(moved) == 0 {
		return errors.Join(err, lerr)
	}
	// Read again: a blob linked meanwhile gets its data back.
	linked, lerr2 := c.r.linked(ctx)
	if lerr2 != nil {
		// Unsure what is linked: put everything back.
		linked = nil
	}
	// Another collector running at once may have moved back or removed
	// what this one moved: a path not found is no error.
	notFound := func(err error) error {
		if errors.As(err, new(storagedriver.PathNotFoundError)) {
			return nil
		}
		return err
	}
	var errs []error
	for _, b := range moved {
		if linked == nil || linked[b.d] {
			if _, serr := c.r.driver.Stat(ctx, blobDataPath(b.d)); serr == nil {
				errs = append(errs, notFound(c.r.driver.Delete(ctx, trashPath(b.d)))) // pushed again meanwhile
			} else {
				errs = append(errs, notFound(c.r.driver.Move(ctx, trashPath(b.d), blobDataPath(b.d))))
			}
			continue
		}
		if derr := c.r.driver.Delete(ctx, trashPath(b.d)); derr != nil {
			errs = append(errs, notFound(derr))
			continue // removed by another collector, or not at all
		}
		c.r.removeEmptyDir(path.Dir(blobDataPath(b.d)))
		c.out.Blobs++
		c.out.Bytes += b.size
	}
	return errors.Join(err, lerr, lerr2, errors.Join(errs...))
}

// trashed lists the blobs whose data is in trashRoot.
func (r *Registry) trashed(ctx context.Context) ([]digest.Digest, error) {
	var out []digest.Digest
	err := walk(ctx, r.driver, trashRoot, func() { out = out[:0] }, func(fi storagedriver.FileInfo) error {
		if fi.IsDir() {
			return nil
		}
		parts := strings.Split(strings.TrimPrefix(fi.Path(), trashRoot+"/"), "/")
		if len(parts) == 2 {
			if d := digest.NewDigestFromEncoded(digest.Algorithm(parts[0]), parts[1]); d.Validate() == nil {
				out = append(out, d)
			}
		}
		return nil
	})
	return out, err
}

// walk is the storage's Walk from root, for a reader that may run while
// collectors and pushes remove directories: a root that is not there is
// an empty walk; a directory below it removed during the walk makes the
// walk start again (reset, then visit anew), up to walkAttempts times,
// since a walk that skipped it would miss what it holds.
func walk(ctx context.Context, d storagedriver.StorageDriver, root string, reset func(), visit storagedriver.WalkFn) error {
	for attempt := 1; ; attempt++ {
		reset()
		err := d.Walk(ctx, root, visit)
		var nf storagedriver.PathNotFoundError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &nf) && nf.Path == root:
			reset()
			return nil
		case errors.As(err, &nf) && attempt < walkAttempts:
			continue
		default:
			return err
		}
	}
}

// walkAttempts bounds the walks walk starts again.
const walkAttempts = 5

// removeEmptyDir removes the directory p of the filesystem storage (and
// its parent) if it is empty: the filesystem keeps the directories of
// removed data, which object stores do not have. A directory a push has
// written to meanwhile is not empty, and stays.
func (r *Registry) removeEmptyDir(p string) {
	if r.dir == "" {
		return
	}
	dir := filepath.Join(r.dir, filepath.FromSlash(p))
	if os.Remove(dir) == nil {
		_ = os.Remove(filepath.Dir(dir))
	}
}
