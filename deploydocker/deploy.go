package deploydocker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/deployplane/deployplane/controlplane"
)

// Deploy drives one revision to DEPLOYED (see the package documentation
// for the steps). It implements controlplane.Deployer.
func (d *Deployer) Deploy(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
	if d.o.ProxyURL == "" {
		return errors.New("deploydocker: Options.ProxyURL is not set")
	}
	rl := &revLog{d: d, w: w, r: r}
	ctx = context.WithValue(ctx, revLogKey{}, rl)
	run := &run{d: d, w: w, r: r, log: rl, status: w.Revision.Status}
	if w.Revision.Status != controlplane.RevisionCreating {
		run.resume = d.resumeFrom(ctx, w) // resumed: before this Deploy writes a line
	}
	err := run.deploy(ctx)
	switch {
	case errors.Is(context.Cause(ctx), controlplane.ErrRevisionEnded), errors.Is(err, controlplane.ErrRevisionEnded),
		ctx.Err() == nil && errors.Is(err, errStop):
		// Interrupted, superseded (SKIPPED) or its deployment deleted:
		// nobody resumes this revision, whose build (cancelled with
		// ctx) and containers have no future; the active revision's
		// containers serve on, behind the proxy.
		d.logLine(context.WithoutCancel(ctx), w, controlplane.LogDeploy, controlplane.LevelInfo, "revision ended elsewhere; removing its containers")
		return d.removeRevision(context.WithoutCancel(ctx), w.Tenant, w.Deployment.ID, w.Revision.ID)
	case ctx.Err() != nil:
		// Stopping or the lease was lost: what was started stays, and
		// the next Deploy of this revision adopts it.
		return nil
	case errors.Is(err, controlplane.ErrLeaseLost):
		return nil
	case err != nil:
		// The control plane records the failure of the phase (a store
		// error, say): its containers would serve nothing.
		if rmErr := d.removeRevision(context.WithoutCancel(ctx), w.Tenant, w.Deployment.ID, w.Revision.ID); rmErr != nil {
			d.log.Warn("deploydocker: removing the containers of a failed revision", "revision", w.Revision.ID, "err", rmErr)
		}
	}
	return err
}

// run is one call of Deploy.
type run struct {
	d      *Deployer
	w      *controlplane.Work
	r      controlplane.Reporter
	log    *revLog
	status controlplane.RevisionStatus
	resume time.Time // where the deploy log ended when a resumed Deploy began
	early  *early    // containers made while the image is pulled; nil: none
}

// advance reports the statuses of the happy path after the current one up
// to and including to, each with extra's other fields on the last.
func (x *run) advance(ctx context.Context, to controlplane.RevisionStatus, extra controlplane.Step) error {
	var err error
	x.status, err = controlplane.Advance(ctx, x.r, x.w.Revision.Source, x.status, to, extra)
	return stopOnRefusal(err)
}

// failf ends the revision with its phase's failure and a message, after
// removing its containers. The message is the last line of the phase's
// log (the build log while building), at ERROR.
func (x *run) failf(ctx context.Context, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	typ := controlplane.LogDeploy
	if x.status == controlplane.RevisionAwaitingBuild || x.status == controlplane.RevisionBuilding {
		typ = controlplane.LogBuild
	}
	x.early.stop() // what it makes is removed too, and its lines come first
	x.d.logLine(ctx, x.w, typ, controlplane.LevelError, msg)
	rctx := context.WithoutCancel(ctx)
	rmErr := x.d.removeRevision(rctx, x.w.Tenant, x.w.Deployment.ID, x.w.Revision.ID)
	if rmErr != nil {
		x.d.log.Warn("deploydocker: removing the containers of a failed revision", "revision", x.w.Revision.ID, "err", rmErr)
	}
	return report(ctx, x.r, controlplane.Step{Status: controlplane.FailureOf(x.status), Message: msg})
}

func (x *run) deploy(ctx context.Context) error {
	w := x.w
	path := controlplane.HappyPath(w.Revision.Source)
	if path == nil {
		return fmt.Errorf("deploydocker: revisions of source %q are not supported", w.Revision.Source)
	}
	// With no database to wait for (whose URIs the containers'
	// environment holds), a revision that builds nothing pulls its image
	// from the start, beside its first reports, and creates its
	// containers meanwhile: a pull of an image the daemon has still asks
	// the registry, and a create takes longer. They start only once the
	// pull has succeeded, from the image it left (startContainers).
	if uri := w.Revision.SourceRevisionConfig.ImageURI; x.d.dbs == nil && uri != nil && *uri != "" &&
		!slices.Contains(path, controlplane.RevisionBuilding) {
		x.early = x.startEarly(ctx, *uri)
		defer x.early.stop() // failf waits too, before it removes the containers
	}
	if err := x.advance(ctx, controlplane.RevisionQueued, controlplane.Step{}); err != nil {
		return err
	}
	image, built, err := x.image(ctx)
	if err != nil || image == "" {
		return err // reported (BUILD_FAILED) or a stop
	}
	if err := x.advance(ctx, controlplane.RevisionAwaitingDeploy, controlplane.Step{}); err != nil {
		return err
	}
	logInfo := func(line string) { x.d.logLine(ctx, w, controlplane.LogDeploy, controlplane.LevelInfo, line) }
	logInfo("pulling " + image)
	var pullErr error
	if x.early != nil {
		pullErr = x.early.pull()
	} else {
		pullErr = x.d.pull(ctx, w, image, built, logInfo)
	}
	if pullErr != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return x.failf(ctx, "Pulling image %s failed: %v", image, pullErr)
	}
	if err := x.advance(ctx, controlplane.RevisionDeploying, controlplane.Step{}); err != nil {
		return err
	}
	if by, err := x.d.supersededBy(ctx, w); err != nil {
		return err
	} else if by != "" {
		return x.failf(ctx, "Superseded by revision %s, which became active first.", by)
	}
	env, err := x.databases(ctx)
	cs, pulled, earlyErr := x.early.wait()
	if err == nil && (x.early == nil || earlyErr != nil) {
		// Not made early, or that failed (the daemon lacked the image
		// until the pull): now, finding what the early try made.
		cs, err = x.d.prepareContainers(ctx, w, image, env, false)
	}
	if err == nil {
		cs, err = x.startContainers(ctx, image, pulled, cs, env)
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, errTornDown) {
			return fmt.Errorf("%w: %w", errStop, err)
		}
		return x.failf(ctx, "%v", err)
	}
	for _, c := range cs {
		// The container's output goes to the deploy log from its start
		// (an adopted one's from where the log ended when this Deploy
		// began: an earlier run of the control plane wrote what it had
		// read).
		var since time.Time
		if c.adopted {
			since = x.resume
		}
		x.d.follow(x.log, c, since)
	}
	for _, c := range cs {
		if err := x.d.waitHealthy(ctx, c); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if by, serr := x.d.supersededBy(ctx, w); serr == nil && by != "" {
				return x.failf(ctx, "Superseded by revision %s, which became active first.", by)
			}
			return x.failf(ctx, "%v", err)
		}
	}
	x.d.logLine(ctx, w, controlplane.LogDeploy, controlplane.LevelInfo, fmt.Sprintf("%d container(s) healthy", len(cs)))
	return x.d.activate(ctx, x, cs, image)
}

// early is what a Deploy of a revision that builds nothing does from its
// start, beside its first reports: the revision's containers made
// (prepareContainers) and its image pulled, then the ID of the image the
// pull left looked up. A nil *early is none.
type early struct {
	done    chan struct{} // closed once cs and err are set
	cs      []*ctr
	err     error
	gate    chan struct{} // closed once the "pulling" line is written: the pull's own lines follow it
	opened  bool
	pulled  chan struct{} // closed once pullErr is set
	pullErr error
	looked  chan struct{} // closed once imageID is known, or not
	imageID string
	cancel  context.CancelFunc // ends the pull
}

// earlyTimeout bounds the making of the containers of an early.
const earlyTimeout = time.Minute

// startEarly starts making the revision's containers and pulling image.
func (x *run) startEarly(ctx context.Context, image string) *early {
	e := &early{done: make(chan struct{}), gate: make(chan struct{}), pulled: make(chan struct{}), looked: make(chan struct{})}
	// Not cut short by the end of ctx (the revision ended, say): a
	// create the daemon finishes after the client gave up would make a
	// container after the Deploy removed the revision's.
	mctx, cancelMake := context.WithTimeout(context.WithoutCancel(ctx), earlyTimeout)
	pctx, cancel := context.WithCancel(ctx)
	e.cancel = cancel
	go func() {
		defer close(e.done)
		defer cancelMake()
		e.cs, e.err = x.d.prepareContainers(mctx, x.w, image, nil, true)
		if e.err != nil {
			return
		}
		// What it made goes to the deploy log after the "pulling" line,
		// beside the pull: not a write more before the containers start.
		select {
		case <-e.gate:
			x.d.logLines(ctx, x.w, containerLines(e.cs)...)
			for _, c := range e.cs {
				c.logged = true
			}
		case <-pctx.Done():
		}
	}()
	go func() {
		defer close(e.looked)
		e.pullErr = x.d.pull(pctx, x.w, image, false, func(line string) {
			select {
			case <-e.gate:
				x.d.logLine(ctx, x.w, controlplane.LogDeploy, controlplane.LevelInfo, line)
			case <-pctx.Done():
			}
		})
		close(e.pulled)
		if e.pullErr != nil {
			return
		}
		if res, err := x.d.cli.ImageInspect(pctx, image); err == nil {
			e.imageID = res.ID
		}
	}()
	return e
}

// pull returns what the pull answered, once the caller has written the
// "pulling" line: the pull's own lines (its retries) come after it.
func (e *early) pull() error {
	if !e.opened {
		e.opened = true
		close(e.gate)
	}
	<-e.pulled
	return e.pullErr
}

// wait returns the containers made, the ID of the pulled image ("" when
// not known) and the error that stopped the making, once all is done.
func (e *early) wait() ([]*ctr, string, error) {
	if e == nil {
		return nil, "", nil
	}
	<-e.done
	<-e.looked
	return e.cs, e.imageID, e.err
}

// stop ends the pull, if it still runs, and waits for all.
func (e *early) stop() {
	if e == nil {
		return
	}
	e.cancel()
	e.wait()
}

// image returns the image to run: image_uri for external_docker, the
// Builder's output for the sources that build (reporting AWAITING_BUILD,
// BUILDING and the commit). A failed build is reported and returns "".
func (x *run) image(ctx context.Context) (image string, built bool, err error) {
	w := x.w
	path := controlplane.HappyPath(w.Revision.Source)
	if !slices.Contains(path, controlplane.RevisionBuilding) {
		if w.Revision.SourceRevisionConfig.ImageURI == nil || *w.Revision.SourceRevisionConfig.ImageURI == "" {
			return "", false, x.failf(ctx, "The revision has no image_uri.")
		}
		return *w.Revision.SourceRevisionConfig.ImageURI, false, nil
	}
	if slices.Index(path, x.status) > slices.Index(path, controlplane.RevisionBuilding) {
		// Resumed after the build: its output was reported.
		if w.ImageVersion == nil || *w.ImageVersion == "" {
			return "", true, x.failf(ctx, "The image of the revision's build is not known.")
		}
		return *w.ImageVersion, true, nil
	}
	if err := x.advance(ctx, controlplane.RevisionAwaitingBuild, controlplane.Step{}); err != nil {
		return "", true, err
	}
	if x.d.o.Builder == nil {
		return "", true, x.failf(ctx, "This server builds no images: no image builder is configured for %s revisions.", w.Revision.Source)
	}
	if err := x.advance(ctx, controlplane.RevisionBuilding, controlplane.Step{}); err != nil {
		return "", true, err
	}
	img, sha, err := x.build(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return "", true, ctx.Err()
		}
		// The builder's error says what failed ("build failed: ...").
		return "", true, x.failf(ctx, "%v", err)
	}
	step := controlplane.Step{ImageVersion: &img}
	if sha != "" {
		step.RepoCommitSHA = &sha
	}
	if err := x.advance(ctx, controlplane.RevisionAwaitingDeploy, step); err != nil {
		return "", true, err
	}
	return img, true, nil
}

// build runs the Builder, its output going to the build log in batches
// (see batch), every line written before build returns.
func (x *run) build(ctx context.Context) (image, commitSHA string, err error) {
	w := x.w
	b := newBatch(x.log.write)
	stop := b.tick(ctx)
	defer func() {
		stop()
		b.flush(ctx) // write outlives a cancelled ctx
	}()
	return x.d.o.Builder.Build(ctx, w, func(line string) {
		x.d.log.Debug("deploydocker: build: "+line, "deployment", w.Deployment.ID, "revision", w.Revision.ID)
		b.add(ctx, controlplane.LogLine{Type: controlplane.LogBuild, Level: LevelOf(line, controlplane.LevelInfo), Message: line, Time: time.Now()})
	})
}

// supersededBy returns the id of a newer revision of the deployment that
// is active already, or "" (also without Options.State).
func (d *Deployer) supersededBy(ctx context.Context, w *controlplane.Work) (string, error) {
	if d.o.State == nil {
		return "", nil
	}
	dep, err := d.o.State.GetDeployment(ctx, w.Tenant, w.Deployment.ID)
	if err != nil {
		if controlplane.IsRefusal(err) || isNotFound(err) {
			return "", fmt.Errorf("%w: %w", errStop, err)
		}
		return "", err
	}
	if dep.ActiveRevisionID == nil || *dep.ActiveRevisionID == w.Revision.ID {
		return "", nil
	}
	act, err := d.o.State.GetRevision(ctx, w.Tenant, w.Deployment.ID, *dep.ActiveRevisionID)
	if err != nil {
		return "", err
	}
	if newer(act, &w.Revision) {
		return act.ID, nil
	}
	return "", nil
}

// newer reports whether revision a was created after b.
func newer(a, b *controlplane.Revision) bool {
	if c := a.CreatedAt.Time().Compare(b.CreatedAt.Time()); c != 0 {
		return c > 0
	}
	return a.ID > b.ID
}

// activate makes the revision's healthy containers the deployment's:
// under the deployment's lock it checks that no newer revision is active,
// reports DEPLOYED with the url and switches the proxy; then it drains and
// removes the containers of older revisions.
func (d *Deployer) activate(ctx context.Context, x *run, cs []*ctr, image string) error {
	w := x.w
	mu := d.lock(w.Tenant, w.Deployment.ID)
	mu.Lock()
	by, err := d.supersededBy(ctx, w)
	if err != nil {
		mu.Unlock()
		return err
	}
	if by != "" {
		mu.Unlock()
		return x.failf(ctx, "Superseded by revision %s, which became active first.", by)
	}
	url := d.URL(w.Deployment.ID) // the deployment answers its custom_url instead, when set (controlplane)
	step := controlplane.Step{ImageVersion: &image, URL: &url}
	zero := ScalesToZero(&w.Deployment)
	if zero || w.Deployment.Status == controlplane.StatusUnused {
		// It may have been scaled to zero (UNUSED) while this revision
		// was on its way: its containers serve now.
		step.DeploymentStatus = controlplane.StatusReady
	}
	if err := x.advance(ctx, controlplane.RevisionDeployed, step); err != nil {
		mu.Unlock()
		return err
	}
	x.log.deployed.Store(true) // the containers' output now goes through State
	old := d.proxy.put(w.Deployment.ID, newRoute(w.Tenant, w.Revision.ID, zero, backendsOf(cs)))
	mu.Unlock()
	d.logLine(ctx, w, controlplane.LogDeploy, controlplane.LevelInfo, "active at "+url)
	d.watch(w, cs) // watch.go

	// The old revision's containers stop only now that the new ones serve:
	// wait for the requests they still answer, then remove them.
	rctx := context.WithoutCancel(ctx)
	dctx, cancel := context.WithTimeout(rctx, d.o.DrainTimeout)
	drain(dctx, old)
	cancel()
	if err := d.removeOlder(rctx, w); err != nil {
		d.log.Warn("deploydocker: removing the containers of older revisions", "deployment", w.Deployment.ID, "err", err)
	}
	return nil
}

// drain waits until no request is in flight to any of bs, or ctx is done.
func drain(ctx context.Context, bs []*backend) {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		busy := false
		for _, b := range bs {
			if b.inflight.Load() > 0 {
				busy = true
			}
		}
		if !busy {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
