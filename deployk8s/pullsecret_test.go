package deployk8s_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/distribution/reference"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deployk8s"
	"github.com/deployplane/deployplane/registry"
	"github.com/deployplane/deployplane/storemem"
)

// lateTokens lets the registry check tokens of a control plane made after
// it.
type lateTokens struct {
	mu     sync.Mutex
	tokens *registry.TokenStore
}

func (l *lateTokens) CheckRegistryToken(ctx context.Context, token string) (*registry.Grant, error) {
	l.mu.Lock()
	tokens := l.tokens
	l.mu.Unlock()
	return tokens.CheckRegistryToken(ctx, token)
}

// TestPullSecret: a revision whose image is in the server's registry gets
// a kubernetes.io/dockerconfigjson Secret, owned like the other objects,
// listed in the pods' imagePullSecrets before the resource_spec's own,
// whose pull token works at the registry (it pulls the image) and at the
// realm of an external registry, and which no other object shows;
// Reconcile's refresh replaces the token only once it nears its expiry
// (the deployer's clock); an image of another registry gets none.
func TestPullSecret(t *testing.T) {
	ctx := context.Background()
	tokens := &lateTokens{}
	srv := httptest.NewUnstartedServer(nil)
	host := srv.Listener.Addr().String()
	reg, err := registry.New(ctx, tokens, &registry.Options{Host: host, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	srv.Config.Handler = reg
	srv.Start()
	t.Cleanup(srv.Close)

	var mu sync.Mutex
	clock := time.Now()
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	// internal_docker deployments have no listener: they run on the
	// server's default deployer, here this cluster's, in namespace ns.
	cli := client(t, contextA)
	ns := namespace(t, cli)
	f := &fixture{t: t, tenant: uniq("tenant"), instance: uniq("inst"), clusters: map[string]*deployk8s.Deployer{},
		clis: map[string]kubernetes.Interface{contextA: cli}}
	f.cp = controlplane.New(storemem.New(), cpOptions(quiet()))
	tokenStore := registry.NewTokenStore(f.cp, nil)
	tokens.mu.Lock()
	tokens.tokens = tokenStore
	tokens.mu.Unlock()
	// As cmd/deployplane wires it: a pull token of the deployment for an
	// image of the registry's host, nothing for others.
	creds := func(ctx context.Context, tenant, dep, image string) (*deployk8s.PullCredential, error) {
		named, err := reference.ParseNormalizedNamed(image)
		if err != nil || reference.Domain(named) != host {
			return nil, nil
		}
		tok, err := tokenStore.IssuePullToken(ctx, tenant, dep)
		if err != nil {
			return nil, err
		}
		return &deployk8s.PullCredential{Server: host, Username: "deployplane", Password: tok.Token, ExpiresAt: tok.ExpiresAt}, nil
	}
	o := deployerOptions(cli, contextA, f.instance, f.cp, quiet())
	o.Namespace = ns
	o.PullSecrets = &deployk8s.PullSecrets{Credentials: creds, Clock: now}
	dep, err := deployk8s.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dep.Close() })
	f.clusters[contextA] = dep
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); f.cp.Run(runCtx, dep) }()
	t.Cleanup(func() { cancel(); <-done })

	d := f.create(fmt.Sprintf(`{"name": %q, "source": "internal_docker",
		"source_config": {"resource_spec": {"image_pull_secrets": [{"name": "regcred"}]}}}`, uniq("pull")))
	push, err := tokenStore.IssuePushToken(ctx, f.tenant, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	img, _ := random.Image(256, 1)
	image := reg.URL(d.ID) + "/agent:v1"
	ref, err := name.ParseReference(image, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithAuth(&authn.Basic{Username: "u", Password: push.Token})); err != nil {
		t.Fatal(err)
	}
	d = f.patch(d.ID, fmt.Sprintf(`{"source_revision_config": {"image_uri": %q}}`, image))
	rev := waitTerminal(t, f.cp, f.tenant, d.ID, *d.LatestRevisionID)
	if rev.Status != controlplane.RevisionDeployed {
		t.Fatalf("revision %s: %s", rev.Status, deref(rev.StatusMessage))
	}

	secretName := "dp-" + d.ID + "-pull"
	sec, err := cli.CoreV1().Secrets(ns).Get(ctx, secretName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the pull secret: %v", err)
	}
	if sec.Type != corev1.SecretTypeDockerConfigJson || sec.Labels[deployk8s.LabelDeployment] != d.ID ||
		len(sec.OwnerReferences) != 1 || sec.OwnerReferences[0].Name != "dp-"+d.ID {
		t.Errorf("pull secret type %s labels %v owners %v", sec.Type, sec.Labels, sec.OwnerReferences)
	}
	password := func(s *corev1.Secret) string {
		t.Helper()
		var cfg struct {
			Auths map[string]struct{ Username, Password, Auth string } `json:"auths"`
		}
		if err := json.Unmarshal(s.Data[corev1.DockerConfigJsonKey], &cfg); err != nil {
			t.Fatal(err)
		}
		a, ok := cfg.Auths[host]
		if !ok || a.Password == "" || a.Auth == "" {
			t.Fatalf("dockerconfigjson auths %v, want %s", cfg.Auths, host)
		}
		return a.Password
	}
	// The token works: it pulls the image from the registry, and the
	// realm of an external registry grants it pull on the deployment.
	works := func(token string) {
		t.Helper()
		got, err := remote.Image(ref, remote.WithAuth(&authn.Basic{Username: "deployplane", Password: token}))
		if err != nil {
			t.Fatalf("pulling with the pull secret's token: %v", err)
		}
		gd, _ := got.Digest()
		wd, _ := img.Digest()
		if gd != wd {
			t.Errorf("pulled %s, pushed %s", gd, wd)
		}
		ts, err := registry.NewTokenServer(tokenStore, &registry.TokenOptions{Key: registry.SigningKey([]byte("k")), Service: "ext"})
		if err != nil {
			t.Fatal(err)
		}
		b, err := ts.Issue(ctx, token, "ext", []string{"repository:deployments/" + d.ID + "/agent:pull,push"})
		if err != nil || len(b.Access) != 1 || !slices.Equal(b.Access[0].Actions, []string{"pull"}) {
			t.Errorf("the realm: %+v, %v; want pull on the deployment's repository", b, err)
		}
	}
	first := password(sec)
	works(first)
	for _, c := range []string{"api", "queue"} {
		dep, err := cli.AppsV1().Deployments(ns).Get(ctx, "dp-"+d.ID+"-"+c, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(dep.Spec.Template.Spec.ImagePullSecrets); got != "[{"+secretName+"} {regcred}]" {
			t.Errorf("%s imagePullSecrets %s, want ours and the resource_spec's", c, got)
		}
	}
	noSecretOutsideSecrets(t, f, cli, ns, d.ID, first)

	// Refresh: far from the expiry nothing changes; within
	// RefreshBefore of it, a new token replaces the old.
	if err := f.clusters[contextA].RefreshPullSecrets(ctx); err != nil {
		t.Fatal(err)
	}
	sec, err = cli.CoreV1().Secrets(ns).Get(ctx, secretName, metav1.GetOptions{})
	if err != nil || password(sec) != first {
		t.Fatalf("refreshed an hour before its expiry: %v", err)
	}
	mu.Lock()
	clock = clock.Add(registry.TokenTTL - deployk8s.DefaultPullRefreshBefore/2)
	mu.Unlock()
	if err := f.clusters[contextA].Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	sec, err = cli.CoreV1().Secrets(ns).Get(ctx, secretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	second := password(sec)
	if second == first || sec.Annotations[deployk8s.AnnotationPullImage] != image ||
		len(sec.OwnerReferences) != 1 || sec.Labels[deployk8s.LabelDeployment] != d.ID {
		t.Errorf("after the refresh: same token %v, annotations %v, owners %v", second == first, sec.Annotations, sec.OwnerReferences)
	}
	works(second)
	noSecretOutsideSecrets(t, f, cli, ns, d.ID, second)

	// A revision of another registry's image: the pull secret goes, the
	// pods list only the resource_spec's.
	d = f.patch(d.ID, `{"source_revision_config": {"image_uri": "example.com/agent:v2"}}`)
	rev = waitTerminal(t, f.cp, f.tenant, d.ID, *d.LatestRevisionID)
	if rev.Status != controlplane.RevisionDeployed {
		t.Fatalf("revision %s: %s", rev.Status, deref(rev.StatusMessage))
	}
	if _, err := cli.CoreV1().Secrets(ns).Get(ctx, secretName, metav1.GetOptions{}); err == nil {
		t.Error("the pull secret outlived the last image of the registry")
	}
	api, err := cli.AppsV1().Deployments(ns).Get(ctx, "dp-"+d.ID+"-api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(api.Spec.Template.Spec.ImagePullSecrets); got != "[{regcred}]" {
		t.Errorf("imagePullSecrets %s, want the resource_spec's only", got)
	}
}
