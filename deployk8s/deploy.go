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
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
)

// Deploy drives one revision to DEPLOYED (see the package documentation).
// It implements controlplane.Deployer.
func (d *Deployer) Deploy(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
	x := &run{d: d, w: w, r: r, ns: d.Namespace(&w.Deployment, w.Listener), status: w.Revision.Status}
	x.unsubscribe = d.ev.subscribe(x.ns, w.Deployment.ID, x.event)
	defer x.unsubscribe()
	err := x.deploy(ctx)
	switch {
	case ctx.Err() != nil, errors.Is(err, errStop):
		// Stopping, the lease lost, superseded or deleted: what was
		// applied stays; a resumed Deploy re-applies it, Reconcile or
		// Teardown removes it.
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
	// unsubscribe stops the cluster's Events going to the deploy log.
	unsubscribe func()
}

func (x *run) logf(ctx context.Context, level controlplane.LogLevel, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	x.d.log.Info("deployk8s: "+msg, "cluster", x.d.o.Cluster, "deployment", x.w.Deployment.ID, "revision", x.w.Revision.ID)
	if err := x.r.Log(ctx, controlplane.LogLine{Type: controlplane.LogDeploy, Level: level, Message: msg, Time: time.Now()}); err != nil &&
		ctx.Err() == nil && !isRefusal(err) {
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
	x.logf(ctx, controlplane.LevelInfo, "applying the revision's objects in namespace %s of cluster %s", x.ns, x.d.o.Cluster)
	if msg, err := x.d.apply(ctx, x.ns, w, image); err != nil {
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
	defer mu.Unlock()
	if by, err := x.d.supersededBy(ctx, w.Tenant, w.Deployment.ID, &w.Revision); err != nil {
		return err
	} else if by != "" {
		return x.fail(ctx, fmt.Sprintf("Superseded by revision %s, which became active first.", by))
	}
	// Older revisions' Secrets: the rollout is complete, their pods are
	// gone. Removed before DEPLOYED is reported, so that whoever sees the
	// revision DEPLOYED sees them gone.
	if err := x.d.deleteOlderSecrets(context.WithoutCancel(ctx), x.ns, w.Tenant, w.Deployment.ID, &w.Revision); err != nil {
		x.d.log.Warn("deployk8s: removing older revisions' secrets", "deployment", w.Deployment.ID, "err", err)
	}
	url := x.d.URL(x.ns, w.Deployment.ID) // the custom_url instead, when set (controlplane)
	// The log's last line goes before DEPLOYED is reported, so that whoever
	// sees the revision DEPLOYED reads its whole deploy log.
	x.unsubscribe()
	x.logf(ctx, controlplane.LevelInfo, "rolled out, active at %s", url)
	return x.advance(ctx, controlplane.RevisionDeployed, controlplane.Step{ImageVersion: &image, URL: &url})
}

// supersededBy returns the id of a newer revision of the deployment that
// is active already, or "".
func (d *Deployer) supersededBy(ctx context.Context, tenant, dep string, rev *controlplane.Revision) (string, error) {
	if d.o.State == nil {
		return "", nil
	}
	cur, err := d.o.State.GetDeployment(ctx, tenant, dep)
	if err != nil {
		if isRefusal(err) || isNotFound(err) {
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
// to end the revision DEPLOY_FAILED; other errors are returned.
func (d *Deployer) apply(ctx context.Context, ns string, w *controlplane.Work, image string) (string, error) {
	mu := d.lock(w.Tenant, w.Deployment.ID)
	mu.Lock()
	defer mu.Unlock()
	spec := controlplane.ResourceSpec{}
	if w.ResourceSpec != nil {
		spec = *w.ResourceSpec
	}
	o := &objects{d: d, w: w, ns: ns, spec: spec.WithDefaults(), image: image, dbEnabled: !d.o.NoServices}
	dep := w.Deployment.ID
	rejected := func(what string, err error) (string, error) {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		var st k8serrors.APIStatus
		if errors.As(err, &st) {
			switch st.Status().Code {
			case 400, 403, 404, 409, 422:
				return fmt.Sprintf("The cluster refused %s: %s", what, st.Status().Message), nil
			}
		}
		return "", fmt.Errorf("deployk8s: applying %s: %w", what, err)
	}
	owner, err := d.cli.CoreV1().ConfigMaps(ns).Apply(ctx, o.ownerConfigMap(), d.applyOptions())
	if err != nil {
		return rejected("ConfigMap "+ownerName(dep), err)
	}
	o.owner = owner.UID
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
	if _, err := d.cli.CoreV1().Secrets(ns).Apply(ctx, o.secret(), d.applyOptions()); err != nil {
		return rejected("the revision's Secret", err)
	}
	if o.dbEnabled {
		pw, err := d.password(ctx, ns, dep)
		if err != nil {
			return rejected("Secret "+servicesName(dep), err)
		}
		if _, err := d.cli.CoreV1().Secrets(ns).Apply(ctx, o.servicesSecret(pw), d.applyOptions()); err != nil {
			return rejected("Secret "+servicesName(dep), err)
		}
		st, sv := o.database()
		if _, err := d.cli.AppsV1().StatefulSets(ns).Apply(ctx, st, d.applyOptions()); err != nil {
			return rejected("StatefulSet "+dbName(dep), err)
		}
		if _, err := d.cli.CoreV1().Services(ns).Apply(ctx, sv, d.applyOptions()); err != nil {
			return rejected("Service "+dbName(dep), err)
		}
		rd, rsv := o.redis()
		if _, err := d.cli.AppsV1().Deployments(ns).Apply(ctx, rd, d.applyOptions()); err != nil {
			return rejected("Deployment "+redisName(dep), err)
		}
		if _, err := d.cli.CoreV1().Services(ns).Apply(ctx, rsv, d.applyOptions()); err != nil {
			return rejected("Service "+redisName(dep), err)
		}
	}
	if o.pullSecret, err = d.applyPullSecret(ctx, o); err != nil {
		return rejected("Secret "+pullSecretName(dep), err)
	}
	for _, c := range []string{componentAPI, componentQueue} {
		dp, err := o.deployment(c)
		if err != nil {
			return fmt.Sprintf("The resource_spec cannot become a pod: %v", err), nil
		}
		if _, err := d.cli.AppsV1().Deployments(ns).Apply(ctx, dp, d.applyOptions()); err != nil {
			return rejected("Deployment "+*dp.Name, err)
		}
		name := *dp.Name
		if o.autoscaled(c) {
			if _, err := d.cli.AutoscalingV2().HorizontalPodAutoscalers(ns).Apply(ctx, o.hpa(c), d.applyOptions()); err != nil {
				return rejected("HorizontalPodAutoscaler "+name, err)
			}
		} else if err := d.cli.AutoscalingV2().HorizontalPodAutoscalers(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !k8serrors.IsNotFound(err) {
			return rejected("HorizontalPodAutoscaler "+name, err)
		}
	}
	if _, err := d.cli.CoreV1().Services(ns).Apply(ctx, o.service(), d.applyOptions()); err != nil {
		return rejected("Service "+serviceName(dep), err)
	}
	return "", nil
}

// password is the database's password: the one stored in the services
// Secret, or a new random one.
func (d *Deployer) password(ctx context.Context, ns, dep string) (string, error) {
	s, err := d.cli.CoreV1().Secrets(ns).Get(ctx, servicesName(dep), metav1.GetOptions{})
	if err == nil && len(s.Data["POSTGRES_PASSWORD"]) > 0 {
		return string(s.Data["POSTGRES_PASSWORD"]), nil
	}
	if err != nil && !k8serrors.IsNotFound(err) {
		return "", err
	}
	b := make([]byte, 18)
	rand.Read(b)
	return hex.EncodeToString(b), nil
}

// wait watches the rollout until it completes ("") or fails (a message).
func (x *run) wait(ctx context.Context) (string, error) {
	t := time.NewTicker(x.d.o.PollInterval)
	defer t.Stop()
	for {
		msg, done, err := x.look(ctx)
		if err != nil || msg != "" || done {
			return msg, err
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-t.C:
		}
	}
}

// look looks at the rollout once.
func (x *run) look(ctx context.Context) (msg string, done bool, err error) {
	ns, dep, rev := x.ns, x.w.Deployment.ID, x.w.Revision.ID
	done = true
	for _, c := range []string{componentAPI, componentQueue} {
		name := apiName(dep)
		if c == componentQueue {
			name = queueName(dep)
		}
		dp, err := x.d.cli.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			if k8serrors.IsNotFound(err) {
				return "", false, fmt.Errorf("%w: Deployment %s is gone", errStop, name)
			}
			return "", false, err
		}
		if other := dp.Spec.Template.Labels[LabelRevision]; other != rev {
			return fmt.Sprintf("Superseded by revision %s, which was applied after this one.", other), false, nil
		}
		if m := x.d.podFailure(ctx, ns, dep, rev, c); m != "" {
			return m, false, nil
		}
		for _, cond := range dp.Status.Conditions {
			if cond.Type == appsv1.DeploymentProgressing && cond.Reason == "ProgressDeadlineExceeded" && dp.Status.ObservedGeneration >= dp.Generation {
				return fmt.Sprintf("Deployment %s made no progress for %s: %s", name, x.d.o.ProgressDeadline, cond.Message), false, nil
			}
		}
		ok, progress := rolledOut(dp)
		x.progress(ctx, fmt.Sprintf("%s: %s", name, progress))
		done = done && ok
	}
	if !x.d.o.NoServices {
		ok, progress, err := x.d.servicesReady(ctx, ns, dep)
		if err != nil {
			return "", false, err
		}
		x.progress(ctx, progress)
		done = done && ok
	}
	return "", done, nil
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
// observed, every replica updated, ready and available, none old.
func rolledOut(dp *appsv1.Deployment) (bool, string) {
	want := int32(1)
	if dp.Spec.Replicas != nil {
		want = *dp.Spec.Replicas
	}
	s := dp.Status
	ok := s.ObservedGeneration >= dp.Generation && s.UpdatedReplicas == want && s.Replicas == want &&
		s.ReadyReplicas == want && s.AvailableReplicas == want
	return ok, fmt.Sprintf("%d/%d updated, %d ready, %d available, %d in all", s.UpdatedReplicas, want, s.ReadyReplicas, s.AvailableReplicas, s.Replicas)
}

// servicesReady: the database and Redis are ready.
func (d *Deployer) servicesReady(ctx context.Context, ns, dep string) (bool, string, error) {
	st, err := d.cli.AppsV1().StatefulSets(ns).Get(ctx, dbName(dep), metav1.GetOptions{})
	if err != nil {
		return false, "", err
	}
	rd, err := d.cli.AppsV1().Deployments(ns).Get(ctx, redisName(dep), metav1.GetOptions{})
	if err != nil {
		return false, "", err
	}
	dbOK := st.Status.ObservedGeneration >= st.Generation && st.Status.ReadyReplicas >= 1
	redisOK, _ := rolledOut(rd)
	return dbOK && redisOK, fmt.Sprintf("database ready: %t, redis ready: %t", dbOK, redisOK), nil
}

// failingWaits are the waiting reasons that will not resolve by waiting.
var failingWaits = map[string]bool{"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true,
	"CrashLoopBackOff": true, "CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true}

// podFailure reads the revision's pods of a component and says how one of
// their containers failed, or "".
func (d *Deployer) podFailure(ctx context.Context, ns, dep, rev, component string) string {
	sel := labels.SelectorFromSet(labels.Set{LabelInstance: d.o.Instance, LabelDeployment: dep, LabelRevision: rev, LabelComponent: component})
	pods, err := d.cli.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return ""
	}
	for i := range pods.Items {
		if m := podFailure(&pods.Items[i]); m != "" {
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

// restoreActive puts the deployment's active revision back in its API
// server and queue Deployments after revision failed (or was left behind
// by a crash): the template of the active revision's newest ReplicaSet,
// as `kubectl rollout undo` does. Without an active revision it does
// nothing.
func (d *Deployer) restoreActive(ctx context.Context, ns, tenant, dep, failed string) error {
	if d.o.State == nil {
		return nil
	}
	cur, err := d.o.State.GetDeployment(ctx, tenant, dep)
	if err != nil || cur.ActiveRevisionID == nil || *cur.ActiveRevisionID == failed {
		return nil
	}
	active := *cur.ActiveRevisionID
	mu := d.lock(tenant, dep)
	mu.Lock()
	defer mu.Unlock()
	var errs []error
	for _, c := range []string{componentAPI, componentQueue} {
		errs = append(errs, d.restore(ctx, ns, dep, active, c))
	}
	return errors.Join(errs...)
}

func (d *Deployer) restore(ctx context.Context, ns, dep, active, component string) error {
	name := apiName(dep)
	if component == componentQueue {
		name = queueName(dep)
	}
	cur, err := d.cli.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil || cur.Spec.Template.Labels[LabelRevision] == active {
		return nil
	}
	sel := labels.SelectorFromSet(labels.Set{LabelInstance: d.o.Instance, LabelDeployment: dep, LabelRevision: active, LabelComponent: component})
	rss, err := d.cli.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil || len(rss.Items) == 0 {
		return err
	}
	rs := slices.MaxFunc(rss.Items, func(a, b appsv1.ReplicaSet) int {
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	tmpl := rs.Spec.Template.DeepCopy()
	delete(tmpl.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	b, err := json.Marshal(tmpl)
	if err != nil {
		return err
	}
	t := &corev1ac.PodTemplateSpecApplyConfiguration{}
	if err := json.Unmarshal(b, t); err != nil {
		return err
	}
	ac, err := appsv1ac.ExtractDeployment(cur, d.o.FieldManager)
	if err != nil {
		return err
	}
	if ac.Spec == nil {
		ac.WithSpec(appsv1ac.DeploymentSpec())
	}
	ac.Spec.Template = t
	ac.WithLabels(map[string]string{LabelRevision: active})
	_, err = d.cli.AppsV1().Deployments(ns).Apply(ctx, ac, d.applyOptions())
	return err
}
