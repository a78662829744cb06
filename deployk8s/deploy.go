package deployk8s

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	k8serrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
)

// Deploy drives one revision to DEPLOYED (see the package documentation).
// It implements controlplane.Deployer.
func (d *Deployer) Deploy(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
	x := &run{d: d, w: w, r: r, ns: d.Namespace(&w.Deployment, w.Listener), status: w.Revision.Status, unsubscribe: func() {}}
	if d.manages(x.ns) {
		x.unsubscribe = d.ev.subscribe(x.ns, w.Deployment.ID, x.event)
	}
	defer x.unsubscribe()
	err := x.deploy(ctx)
	switch {
	case errors.Is(context.Cause(ctx), controlplane.ErrRevisionEnded), errors.Is(err, controlplane.ErrRevisionEnded):
		// Interrupted, superseded (SKIPPED) or its deployment deleted:
		// nobody resumes this revision. Its rollout stops and the
		// active revision's pods come back, as after a failure (a
		// deployment being deleted is its Teardown's).
		x.unsubscribe()
		if err := d.restoreActive(context.WithoutCancel(ctx), x.ns, w.Tenant, w.Deployment.ID, w.Revision.ID); err != nil {
			d.log.Warn("deployk8s: restoring the active revision after an interrupted one", "deployment", w.Deployment.ID, "err", err)
		}
		return nil
	case ctx.Err() != nil, errors.Is(err, errStop):
		// Stopping, the lease lost, superseded or deleted: what was
		// applied stays; a resumed Deploy re-applies it, Reconcile or
		// Teardown removes it.
		return nil
	case errors.Is(err, errUnreachable):
		// The cluster has not answered for ProgressDeadline: the revision
		// stays where it is and the control plane calls Deploy again
		// later, which applies the same objects again.
		return nil
	}
	return err
}

// run is one call of Deploy.
type run struct {
	d      *Deployer
	w      *controlplane.Work
	r      controlplane.Reporter
	ns     string
	status controlplane.RevisionStatus
	seen   map[string]bool // progress lines written
	// present: the objects of the rollout the caches have had (absent).
	present map[string]bool
	// unsubscribe stops the cluster's Events going to the deploy log.
	unsubscribe func()
	// o is the revision's objects, once applied.
	o *objects
	// outage follows the cluster's transient errors (transient.go).
	outage outage
}

func (x *run) logf(ctx context.Context, level controlplane.LogLevel, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	x.d.log.Info("deployk8s: "+msg, "cluster", x.d.o.Cluster, "deployment", x.w.Deployment.ID, "revision", x.w.Revision.ID)
	if err := x.r.Log(ctx, controlplane.LogLine{Type: controlplane.LogDeploy, Level: level, Message: msg, Time: time.Now()}); err != nil &&
		ctx.Err() == nil && !controlplane.IsRefusal(err) {
		x.d.log.Warn("deployk8s: writing the deploy log", "revision", x.w.Revision.ID, "err", err)
	}
}

// event writes a cluster Event about one of the deployment's objects to
// the deploy log.
func (x *run) event(e *corev1.Event) {
	level := controlplane.LevelInfo
	if e.Type == corev1.EventTypeWarning {
		level = controlplane.LevelWarning
	}
	x.logf(context.Background(), level, "event %s/%s: %s: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
}

// advance reports the happy path's statuses after the current one up to
// and including to, with extra's fields on the last.
func (x *run) advance(ctx context.Context, to controlplane.RevisionStatus, extra controlplane.Step) error {
	var err error
	x.status, err = controlplane.Advance(ctx, x.r, x.w.Revision.Source, x.status, to, extra)
	return stopOnRefusal(err)
}

// fail ends the revision with its phase's failure and the message, then
// puts the active revision's pods back (the failed ones never took
// traffic from them: maxUnavailable is 0).
func (x *run) fail(ctx context.Context, msg string) error {
	x.unsubscribe() // the failure is the deploy log's last line
	x.logf(ctx, controlplane.LevelError, "%s", msg)
	if err := report(ctx, x.r, controlplane.Step{Status: controlplane.FailureOf(x.status), Message: msg}); err != nil {
		return err
	}
	if !x.d.manages(x.ns) {
		return nil // nothing of it was applied
	}
	if err := x.d.restoreActive(context.WithoutCancel(ctx), x.ns, x.w.Tenant, x.w.Deployment.ID, x.w.Revision.ID); err != nil {
		x.d.log.Warn("deployk8s: restoring the active revision", "deployment", x.w.Deployment.ID, "err", err)
	}
	return nil
}

func (x *run) deploy(ctx context.Context) error {
	w := x.w
	path := controlplane.HappyPath(w.Revision.Source)
	if path == nil {
		return fmt.Errorf("deployk8s: revisions of source %q are not supported", w.Revision.Source)
	}
	if err := x.advance(ctx, controlplane.RevisionQueued, controlplane.Step{}); err != nil {
		return err
	}
	image := ""
	if slices.Contains(path, controlplane.RevisionBuilding) {
		if w.ImageVersion == nil || *w.ImageVersion == "" {
			if err := x.advance(ctx, controlplane.RevisionAwaitingBuild, controlplane.Step{}); err != nil {
				return err
			}
			return x.fail(ctx, "The Kubernetes deployer builds no images: give the revision an image_uri (external_docker).")
		}
		image = *w.ImageVersion
	} else if u := w.Revision.SourceRevisionConfig.ImageURI; u != nil {
		image = *u
	}
	if image == "" {
		return x.fail(ctx, "The revision has no image_uri.")
	}
	if err := x.advance(ctx, controlplane.RevisionDeploying, controlplane.Step{}); err != nil {
		return err
	}
	if by, err := x.d.supersededBy(ctx, w.Tenant, w.Deployment.ID, &w.Revision); err != nil {
		return err
	} else if by != "" {
		return x.fail(ctx, fmt.Sprintf("Superseded by revision %s, which became active first.", by))
	}
	if !x.d.manages(x.ns) {
		return x.fail(ctx, fmt.Sprintf("The deployer of cluster %s works in namespaces %s only, not in %s: give the deployment a "+
			"listener_config.k8s_namespace, or its listener k8s_namespaces, among them.", x.d.o.Cluster, strings.Join(x.d.o.Namespaces, ", "), x.ns))
	}
	x.logf(ctx, controlplane.LevelInfo, "applying the revision's objects in namespace %s of cluster %s", x.ns, x.d.o.Cluster)
	var msg string
	if err := x.retry(ctx, "applying the revision's objects", func(ctx context.Context) (err error) {
		msg, err = x.d.apply(ctx, x, image)
		return err
	}); err != nil {
		return err
	} else if msg != "" {
		return x.fail(ctx, msg)
	}
	x.logf(ctx, controlplane.LevelInfo, "applied; waiting for the rollout of %s", apiName(w.Deployment.ID))
	if msg, err := x.wait(ctx); err != nil {
		return err
	} else if msg != "" {
		return x.fail(ctx, msg)
	}
	mu := x.d.lock(w.Tenant, w.Deployment.ID)
	mu.Lock()
	if by, err := x.d.supersededBy(ctx, w.Tenant, w.Deployment.ID, &w.Revision); err != nil || by != "" {
		mu.Unlock() // fail puts the active revision back, under the lock
		if err != nil {
			return err
		}
		return x.fail(ctx, fmt.Sprintf("Superseded by revision %s, which became active first.", by))
	}
	defer mu.Unlock()
	// The record of the active revision, from which a failed revision
	// puts its objects back and Reconcile repairs them.
	if err := x.retry(ctx, "recording the active revision", func(ctx context.Context) error {
		return x.d.recordActive(ctx, x.o)
	}); err != nil {
		return err
	}
	// Older revisions' Secrets: the rollout is complete, their pods are
	// gone. Removed before DEPLOYED is reported, so that whoever sees the
	// revision DEPLOYED sees them gone.
	if err := x.d.deleteOlderSecrets(context.WithoutCancel(ctx), x.ns, w.Tenant, w.Deployment.ID, &w.Revision); err != nil {
		x.d.log.Warn("deployk8s: removing older revisions' secrets", "deployment", w.Deployment.ID, "err", err)
	}
	url := x.d.Address(w.Tenant, x.ns, &w.Deployment) // the custom_url instead, when set (controlplane)
	// The log's last line goes before DEPLOYED is reported, so that whoever
	// sees the revision DEPLOYED reads its whole deploy log.
	x.unsubscribe()
	x.logf(ctx, controlplane.LevelInfo, "rolled out, active at %s", url)
	if err := x.advance(ctx, controlplane.RevisionDeployed, controlplane.Step{ImageVersion: &image, URL: &url}); err != nil {
		return err
	}
	x.d.watchHealth(w, x.ns) // health.go
	return nil
}

// supersededBy returns the id of a newer revision of the deployment that
// is active already, or "".
func (d *Deployer) supersededBy(ctx context.Context, tenant, dep string, rev *controlplane.Revision) (string, error) {
	if d.o.State == nil {
		return "", nil
	}
	cur, err := d.o.State.GetDeployment(ctx, tenant, dep)
	if err != nil {
		if controlplane.IsRefusal(err) || isNotFound(err) {
			return "", fmt.Errorf("%w: %w", errStop, err)
		}
		return "", err
	}
	if cur.ActiveRevisionID == nil || *cur.ActiveRevisionID == rev.ID {
		return "", nil
	}
	act, err := d.o.State.GetRevision(ctx, tenant, dep, *cur.ActiveRevisionID)
	if err != nil {
		return "", err
	}
	if c := act.CreatedAt.Time().Compare(rev.CreatedAt.Time()); c > 0 || (c == 0 && act.ID > rev.ID) {
		return act.ID, nil
	}
	return "", nil
}

func isNotFound(err error) bool { return errors.Is(err, apierr.ErrNotFound) }

// applyOptions: one field manager, which takes over fields it is given.
func (d *Deployer) applyOptions() metav1.ApplyOptions {
	return metav1.ApplyOptions{FieldManager: d.o.FieldManager, Force: true}
}

// apply applies every object of the revision. A rejection by the API
// server (an invalid object, a missing namespace) returns its message,
// to end the revision DEPLOY_FAILED; other errors are returned (the
// caller retries transient ones: apply is idempotent).
func (d *Deployer) apply(ctx context.Context, x *run, image string) (string, error) {
	w, ns := x.w, x.ns
	mu := d.lock(w.Tenant, w.Deployment.ID)
	mu.Lock()
	defer mu.Unlock()
	o := d.newObjects(ns, w, image)
	if msg := o.exposeProblem(); msg != "" {
		return msg, nil
	}
	dep := w.Deployment.ID
	rejected := func(what string, err error) (string, error) {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if msg := refusal(err); msg != "" {
			return fmt.Sprintf("The cluster refused %s: %s", what, msg), nil
		}
		return "", fmt.Errorf("deployk8s: applying %s: %w", what, err)
	}
	if err := d.applyOwner(ctx, o); err != nil {
		return rejected("ConfigMap "+ownerName(dep), err)
	}
	// A newer revision applied already: this one must not replace it.
	if cur, err := d.cli.AppsV1().Deployments(ns).Get(ctx, apiName(dep), metav1.GetOptions{}); err == nil {
		if other := cur.Spec.Template.Labels[LabelRevision]; other != "" && other != w.Revision.ID && d.o.State != nil {
			if rev, err := d.o.State.GetRevision(ctx, w.Tenant, dep, other); err == nil &&
				!controlplane.IsTerminal(rev.Status) && rev.CreatedAt.Time().After(w.Revision.CreatedAt.Time()) {
				return fmt.Sprintf("Superseded by revision %s, which is deploying.", other), nil
			}
		}
	} else if !k8serrors.IsNotFound(err) {
		return rejected("Deployment "+apiName(dep), err)
	}
	if err := d.current(ctx, o); err != nil {
		return rejected("the deployment's objects", err)
	}
	if o.dbEnabled {
		if o.password == "" {
			b := make([]byte, 18)
			rand.Read(b)
			o.password = hex.EncodeToString(b)
		}
		if msg, err := d.resizeDatabase(ctx, x, o); err != nil || msg != "" {
			return msg, err
		}
	}
	var err error
	if o.pullSecret, err = d.applyPullSecret(ctx, o); err != nil {
		return rejected("Secret "+pullSecretName(dep), err)
	}
	items, err := o.items()
	if err != nil {
		return fmt.Sprintf("The resource_spec cannot become a pod: %v", err), nil
	}
	for _, it := range items {
		if err := it.apply(ctx); err != nil {
			return rejected(it.kind+" "+it.name+it.note, err)
		}
	}
	x.o = o
	return "", nil
}

// refusal is the API server's message when err is its refusal of a
// request (400, 403, 404, 409, 422), else "".
func refusal(err error) string {
	var st k8serrors.APIStatus
	if errors.As(err, &st) {
		switch st.Status().Code {
		case 400, 403, 404, 409, 422:
			return st.Status().Message
		}
	}
	return ""
}

// AnnotationStorageRefused is set on a deployment's database claim to
// the size (a quantity, "20Gi") db_storage_gi asked for and the cluster
// refused to give the claim (a shrink, or a StorageClass without volume
// expansion). A later revision asking for that same size keeps the claim
// as it is and says so in its deploy log; one asking for another size
// tries again.
const AnnotationStorageRefused = "deployplane.dev/storage-refused"

// dbClaimName is the claim of the database StatefulSet's only pod.
func dbClaimName(dep string) string { return "data-" + dbName(dep) + "-0" }

// resizeDatabase gives the database's claim the size db_storage_gi asks
// for, when its StatefulSet exists already (whose claim template cannot
// change, and keeps the size it was created with): the claim is resized
// (volume expansion). A refusal ends the revision with a message saying
// the database keeps its size, and is recorded on the claim
// (AnnotationStorageRefused) so that later revisions with the same
// db_storage_gi are not refused again.
func (d *Deployer) resizeDatabase(ctx context.Context, x *run, o *objects) (string, error) {
	if o.dbClaim == nil {
		return "", nil // a new StatefulSet: its claim template has the size
	}
	claims := d.cli.CoreV1().PersistentVolumeClaims(o.ns)
	name := dbClaimName(o.w.Deployment.ID)
	pvc, err := getOrNil(claims.Get(ctx, name, metav1.GetOptions{}))
	if err != nil || pvc == nil {
		return "", err // none yet: the StatefulSet makes it from its template
	}
	cur, want := pvc.Spec.Resources.Requests[corev1.ResourceStorage], o.dbStorage()
	if want.Cmp(cur) == 0 {
		return "", nil
	}
	if pvc.Annotations[AnnotationStorageRefused] == want.String() {
		x.logf(ctx, controlplane.LevelWarning, "db_storage_gi asks for %s; the database's volume keeps %s, which the cluster refused to change to %s before",
			want.String(), cur.String(), want.String())
		return "", nil
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"resources": map[string]any{"requests": map[string]any{
		"storage": want.String()}}}})
	if err != nil {
		return "", err
	}
	_, err = claims.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: d.o.FieldManager})
	if err == nil {
		x.logf(ctx, controlplane.LevelInfo, "the database's volume grows from %s to %s", cur.String(), want.String())
		return "", nil
	}
	msg := refusal(err)
	if msg == "" {
		return "", fmt.Errorf("deployk8s: resizing PersistentVolumeClaim %s: %w", name, err)
	}
	mark, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		AnnotationStorageRefused: want.String()}}})
	if err != nil {
		return "", err
	}
	if _, err := claims.Patch(ctx, name, types.MergePatchType, mark, metav1.PatchOptions{FieldManager: d.o.FieldManager}); err != nil {
		return "", fmt.Errorf("deployk8s: annotating PersistentVolumeClaim %s: %w", name, err)
	}
	return fmt.Sprintf("The cluster refused to change the database's volume from %s to %s (db_storage_gi): %s. The database keeps %s; "+
		"later revisions with this db_storage_gi deploy without changing it.", cur.String(), want.String(), msg, cur.String()), nil
}

// wait watches the rollout until it completes ("") or fails (a message).
// It reads the caches (watch.go) and looks again when they say that an
// object of the deployment changed; while they cannot be trusted it reads
// the API server every Options.PollInterval instead.
func (x *run) wait(ctx context.Context) (string, error) {
	c := x.d.cache
	c.start()
	wake, cancel := c.subscribe(x.ns, x.w.Deployment.ID)
	defer cancel()
	for {
		var msg string
		var done bool
		var err error
		var again time.Duration // 0: when woken
		if r := c.reader(x.ns); r == nil {
			err = x.retry(ctx, "watching the rollout", func(ctx context.Context) (err error) {
				msg, done, err = x.look(ctx, liveReader{x.d})
				return err
			})
			again = x.d.o.PollInterval
		} else if since, cause := c.unanswered(); !since.IsZero() {
			// The watches get no answer: the caches stand still until
			// the API server answers again, which wakes this wait.
			if err := x.noAnswer(ctx, "watching the rollout", cause, since); err != nil {
				return "", err
			}
			again = max(time.Until(x.outage.since.Add(x.d.o.ProgressDeadline)), time.Millisecond)
		} else {
			x.answered(ctx)
			msg, done, err = x.look(ctx, r)
		}
		if err != nil || msg != "" || done {
			return msg, err
		}
		if err := sleep(ctx, wake, again); err != nil {
			return "", err
		}
	}
}

// sleep waits until wake receives, or for d when d is not 0, or until
// ctx ends (its error).
func sleep(ctx context.Context, wake <-chan struct{}, d time.Duration) error {
	var after <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		after = t.C
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-wake:
	case <-after:
	}
	return nil
}

// look looks at the rollout once, through r.
func (x *run) look(ctx context.Context, r reader) (msg string, done bool, err error) {
	ns, dep, rev := x.ns, x.w.Deployment.ID, x.w.Revision.ID
	done = true
	for _, c := range []string{componentAPI, componentQueue} {
		name := apiName(dep)
		if c == componentQueue {
			name = queueName(dep)
		}
		dp, err := r.deployment(ctx, ns, name)
		if pending, err := x.absent(r, name, err); err != nil {
			if k8serrors.IsNotFound(err) {
				return "", false, fmt.Errorf("%w: Deployment %s is gone", errStop, name)
			}
			return "", false, err
		} else if pending || dp.Generation < x.o.generation(name) {
			done = false // applied, not yet in the cache
			continue
		}
		if other := dp.Spec.Template.Labels[LabelRevision]; other != rev {
			return fmt.Sprintf("Superseded by revision %s, which was applied after this one.", other), false, nil
		}
		if m := x.d.podFailure(ctx, r, ns, dep, rev, c); m != "" {
			return m, false, nil
		}
		for _, cond := range dp.Status.Conditions {
			if cond.Type == appsv1.DeploymentProgressing && cond.Reason == "ProgressDeadlineExceeded" && dp.Status.ObservedGeneration >= dp.Generation {
				return fmt.Sprintf("Deployment %s made no progress for %s: %s", name, x.d.o.ProgressDeadline, cond.Message), false, nil
			}
		}
		lo, _ := x.o.scale(c)
		ok, progress := rolledOut(dp, lo)
		x.progress(ctx, fmt.Sprintf("%s: %s", name, progress))
		done = done && ok
	}
	if !x.d.o.NoServices {
		ok, progress, err := x.servicesReady(ctx, r)
		if err != nil {
			return "", false, err
		}
		if progress != "" {
			x.progress(ctx, progress)
		}
		done = done && ok
	}
	return "", done, nil
}

// absent reads the answer err of r for the object name: pending when the
// caches have not yet seen it (it was applied, and they have never had
// it: what the API server answered meanwhile says nothing of them), else
// err (a NotFound error: it is gone).
func (x *run) absent(r reader, name string, err error) (pending bool, _ error) {
	_, cached := r.(cacheReader)
	switch {
	case err == nil:
		if cached {
			if x.present == nil {
				x.present = map[string]bool{}
			}
			x.present[name] = true
		}
		return false, nil
	case !k8serrors.IsNotFound(err):
		return false, err
	}
	if cached && !x.present[name] {
		return true, nil
	}
	return false, err
}

// progress writes a progress line once.
func (x *run) progress(ctx context.Context, line string) {
	if x.seen == nil {
		x.seen = map[string]bool{}
	}
	if !x.seen[line] {
		x.seen[line] = true
		x.logf(ctx, controlplane.LevelInfo, "%s", line)
	}
}

// rolledOut: the Deployment's rollout of its current template completed:
// observed, every replica updated, ready and available, none old, and at
// least least of them.
func rolledOut(dp *appsv1.Deployment, least int32) (bool, string) {
	want := int32(1)
	if dp.Spec.Replicas != nil {
		want = *dp.Spec.Replicas
	}
	s := dp.Status
	ok := s.ObservedGeneration >= dp.Generation && s.UpdatedReplicas == want && s.Replicas == want &&
		s.ReadyReplicas == want && s.AvailableReplicas == want && want >= least
	return ok, fmt.Sprintf("%d/%d updated, %d ready, %d available, %d in all", s.UpdatedReplicas, want, s.ReadyReplicas, s.AvailableReplicas, s.Replicas)
}

// servicesReady: the database and Redis are ready, through r. The
// progress line is "" while the caches have not yet seen what was
// applied.
func (x *run) servicesReady(ctx context.Context, r reader) (bool, string, error) {
	ns, dep := x.ns, x.w.Deployment.ID
	st, err := r.statefulSet(ctx, ns, dbName(dep))
	if pending, err := x.absent(r, dbName(dep), err); err != nil || pending || st.Generation < x.o.generation(dbName(dep)) {
		return false, "", err
	}
	rd, err := r.deployment(ctx, ns, redisName(dep))
	if pending, err := x.absent(r, redisName(dep), err); err != nil || pending || rd.Generation < x.o.generation(redisName(dep)) {
		return false, "", err
	}
	dbOK := st.Status.ObservedGeneration >= st.Generation && st.Status.ReadyReplicas >= 1
	redisOK, _ := rolledOut(rd, 1)
	return dbOK && redisOK, fmt.Sprintf("database ready: %t, redis ready: %t", dbOK, redisOK), nil
}

// failingWaits are the waiting reasons that will not resolve by waiting.
var failingWaits = map[string]bool{"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true,
	"CrashLoopBackOff": true, "CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true}

// podFailure reads the revision's pods of a component through r and says
// how one of their containers failed, or "".
func (d *Deployer) podFailure(ctx context.Context, r reader, ns, dep, rev, component string) string {
	sel := labels.SelectorFromSet(labels.Set{LabelInstance: d.o.Instance, LabelDeployment: dep, LabelRevision: rev, LabelComponent: component})
	for _, p := range r.pods(ctx, ns, dep, sel) {
		if m := podFailure(p); m != "" {
			return m
		}
	}
	return ""
}

func podFailure(p *corev1.Pod) string {
	for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		if w := cs.State.Waiting; w != nil && failingWaits[w.Reason] {
			return fmt.Sprintf("Container %s of pod %s cannot run: %s: %s", cs.Name, p.Name, w.Reason, w.Message)
		}
		for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
			if t != nil && t.ExitCode != 0 {
				return fmt.Sprintf("Container %s of pod %s failed: %s (exit code %d)%s", cs.Name, p.Name, t.Reason, t.ExitCode, suffix(t.Message))
			}
		}
	}
	if p.Status.Phase == corev1.PodFailed {
		return fmt.Sprintf("Pod %s failed: %s%s", p.Name, p.Status.Reason, suffix(p.Status.Message))
	}
	return ""
}

func suffix(m string) string {
	if m = strings.TrimSpace(m); m != "" {
		return ": " + m
	}
	return ""
}

// deleteOlderSecrets deletes the revision Secrets of the deployment's
// revisions created before keep. A newer revision being deployed at the
// same time keeps its Secret: the order is the revisions' created_at in
// the control plane (State), or, without State, their ids (UUIDv7, in the
// order they were made). A Secret whose revision no longer exists goes.
func (d *Deployer) deleteOlderSecrets(ctx context.Context, ns, tenant, dep string, keep *controlplane.Revision) error {
	sel := labels.SelectorFromSet(labels.Set{LabelInstance: d.o.Instance, LabelDeployment: dep, LabelComponent: componentSecrets})
	list, err := d.cli.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return err
	}
	var errs []error
	for _, s := range list.Items {
		rev := s.Labels[LabelRevision]
		if rev == "" || rev == keep.ID {
			continue
		}
		older := rev < keep.ID
		if d.o.State != nil {
			r, err := d.o.State.GetRevision(ctx, tenant, dep, rev)
			switch {
			case err == nil:
				older = r.CreatedAt.Before(keep.CreatedAt) || (r.CreatedAt.Equal(keep.CreatedAt) && rev < keep.ID)
			case errors.Is(err, apierr.ErrNotFound):
				older = true
			default:
				errs = append(errs, err)
				continue
			}
		}
		if older {
			if err := d.cli.CoreV1().Secrets(ns).Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !k8serrors.IsNotFound(err) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
