package deployk8s

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/deployplane/deployplane/controlplane"

	corev1 "k8s.io/api/core/v1"
	k8serrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
)

// Image pull secrets for the server's own registry (the built-in one, or
// an external one that trusts the server's realm): when PullSecrets gives
// a credential for a revision's image, Deploy applies the Secret
// "dp-<id>-pull" (type kubernetes.io/dockerconfigjson, owned and labelled
// like the other objects, component "pull") with a pull-only token of the
// deployment, and lists it in the pods' imagePullSecrets beside the
// resource_spec's own. Reconcile refreshes it before the token expires.

// DefaultPullRefreshBefore is PullSecrets.RefreshBefore's default.
const DefaultPullRefreshBefore = 30 * time.Minute

// Annotations of the pull Secret: what Reconcile needs to refresh it.
const (
	AnnotationPullImage   = "deployplane.dev/pull-image"
	AnnotationPullExpires = "deployplane.dev/pull-expires" // RFC 3339
)

// componentPull is the pull Secret's LabelComponent.
const componentPull = "pull"

func pullSecretName(dep string) string { return "dp-" + dep + "-pull" }

// PullCredential is a registry credential for an image pull secret.
type PullCredential struct {
	// Server is the registry's host[:port], the key of the
	// dockerconfigjson's auths.
	Server             string
	Username, Password string
	// ExpiresAt is when the credential stops working.
	ExpiresAt time.Time
}

// PullSecrets configure the image pull secrets of Options.PullSecrets.
type PullSecrets struct {
	// Credentials answers a pull-only credential of the deployment for
	// image when image is in the server's registry, nil otherwise (the
	// pods pull it as the resource_spec says). Required.
	Credentials func(ctx context.Context, tenant, deploymentID, image string) (*PullCredential, error)
	// RefreshBefore: Reconcile replaces a credential that expires within
	// this long (DefaultPullRefreshBefore). Keep it above
	// Options.ReconcileEvery.
	RefreshBefore time.Duration
	// Clock tells the time of refreshes. Default time.Now.
	Clock func() time.Time
}

func (p *PullSecrets) now() time.Time {
	if p.Clock != nil {
		return p.Clock()
	}
	return time.Now()
}

// dockerConfigJSON is the kubernetes.io/dockerconfigjson payload of c.
func dockerConfigJSON(c *PullCredential) ([]byte, error) {
	type entry struct {
		Username string `json:"username"`
		Password string `json:"password"`
		Auth     string `json:"auth"`
	}
	return json.Marshal(map[string]map[string]entry{"auths": {c.Server: {Username: c.Username, Password: c.Password,
		Auth: base64.StdEncoding.EncodeToString([]byte(c.Username + ":" + c.Password))}}})
}

// pullSecretData is the Secret's type and data, and its annotations
// besides the deployment's.
func pullSecretData(c *PullCredential, image string) (map[string][]byte, map[string]string, error) {
	b, err := dockerConfigJSON(c)
	if err != nil {
		return nil, nil, err
	}
	return map[string][]byte{corev1.DockerConfigJsonKey: b},
		map[string]string{AnnotationPullImage: image, AnnotationPullExpires: c.ExpiresAt.UTC().Format(time.RFC3339)}, nil
}

// applyPullSecret applies the pull Secret of o's image when it is in the
// server's registry and returns its name; otherwise it deletes one an
// earlier revision left and returns "".
func (d *Deployer) applyPullSecret(ctx context.Context, o *objects) (string, error) {
	p := d.o.PullSecrets
	if p == nil || p.Credentials == nil {
		return "", nil
	}
	dep := o.w.Deployment.ID
	c, err := p.Credentials(ctx, o.w.Tenant, dep, o.image)
	if err != nil {
		return "", fmt.Errorf("deployk8s: a pull credential for %s: %w", o.image, err)
	}
	if c == nil {
		err := d.cli.CoreV1().Secrets(o.ns).Delete(ctx, pullSecretName(dep), metav1.DeleteOptions{})
		if err != nil && !k8serrors.IsNotFound(err) {
			return "", err
		}
		return "", nil
	}
	data, ann, err := pullSecretData(c, o.image)
	if err != nil {
		return "", err
	}
	s := withMeta(o, corev1ac.Secret(pullSecretName(dep), o.ns), componentPull, false).
		WithAnnotations(ann).WithType(corev1.SecretTypeDockerConfigJson).WithData(data)
	if _, err := d.cli.CoreV1().Secrets(o.ns).Apply(ctx, s, d.applyOptions()); err != nil {
		return "", err
	}
	return pullSecretName(dep), nil
}

// RefreshPullSecrets replaces the credential of every pull Secret of this
// instance that expires within PullSecrets.RefreshBefore with a new one.
// Reconcile does too.
func (d *Deployer) RefreshPullSecrets(ctx context.Context) error {
	if p := d.o.PullSecrets; p == nil || p.Credentials == nil {
		return nil
	}
	sel := labels.SelectorFromSet(labels.Set{LabelInstance: d.o.Instance, LabelComponent: componentPull})
	var items []*corev1.Secret
	for _, ns := range d.scopes() {
		list, err := d.cli.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			return fmt.Errorf("deployk8s: cluster %s: listing pull secrets: %w", d.o.Cluster, err)
		}
		for i := range list.Items {
			items = append(items, &list.Items[i])
		}
	}
	return d.refreshPullSecrets(ctx, items)
}

// refreshPullSecrets refreshes those of the pull Secrets items that
// expire within PullSecrets.RefreshBefore.
func (d *Deployer) refreshPullSecrets(ctx context.Context, items []*corev1.Secret) error {
	p := d.o.PullSecrets
	if p == nil || p.Credentials == nil {
		return nil
	}
	before := p.RefreshBefore
	if before <= 0 {
		before = DefaultPullRefreshBefore
	}
	var errs []error
	for _, s := range items {
		exp, err := time.Parse(time.RFC3339, s.Annotations[AnnotationPullExpires])
		if err == nil && p.now().Add(before).Before(exp) {
			continue
		}
		errs = append(errs, d.refreshPullSecret(ctx, p, s))
	}
	return errors.Join(errs...)
}

func (d *Deployer) refreshPullSecret(ctx context.Context, p *PullSecrets, s *corev1.Secret) error {
	tenant, dep, image := s.Annotations[AnnotationTenant], s.Labels[LabelDeployment], s.Annotations[AnnotationPullImage]
	if tenant == "" || dep == "" || image == "" {
		return nil
	}
	mu := d.lock(tenant, dep)
	mu.Lock()
	defer mu.Unlock()
	c, err := p.Credentials(ctx, tenant, dep, image)
	if err != nil {
		if isNotFound(err) || controlplane.IsRefusal(err) {
			return nil // deleted or being deleted: Reconcile or Teardown removes it
		}
		return fmt.Errorf("deployk8s: refreshing the pull secret of deployment %s: %w", dep, err)
	}
	if c == nil {
		return nil
	}
	data, ann, err := pullSecretData(c, image)
	if err != nil {
		return err
	}
	// The same metadata as applied by Deploy, with the new expiry.
	a := corev1ac.Secret(s.Name, s.Namespace).WithLabels(s.Labels).WithAnnotations(s.Annotations).WithAnnotations(ann).
		WithType(corev1.SecretTypeDockerConfigJson).WithData(data)
	for _, r := range s.OwnerReferences {
		ref := metav1ac.OwnerReference().WithAPIVersion(r.APIVersion).WithKind(r.Kind).WithName(r.Name).WithUID(r.UID)
		if r.BlockOwnerDeletion != nil {
			ref.WithBlockOwnerDeletion(*r.BlockOwnerDeletion)
		}
		a.WithOwnerReferences(ref)
	}
	if _, err := d.cli.CoreV1().Secrets(s.Namespace).Apply(ctx, a, d.applyOptions()); err != nil && !k8serrors.IsNotFound(err) {
		return fmt.Errorf("deployk8s: refreshing the pull secret of deployment %s: %w", dep, err)
	}
	d.log.Info("deployk8s: refreshed a pull secret", "cluster", d.o.Cluster, "deployment", dep, "expires", c.ExpiresAt)
	return nil
}
