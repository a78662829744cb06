package deployk8s_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	k8serrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deployk8s"
	"github.com/deployplane/deployplane/storemem"
)

// gatewayAPI is the Gateway API release whose standard CRDs the HTTPRoute
// tests install, read from its Go module (sigs.k8s.io/gateway-api).
const gatewayAPI = "sigs.k8s.io/gateway-api@v1.6.3"

// installGatewayAPI applies the Gateway API's standard CRDs to the
// cluster (server-side apply: again is a no-op) and waits until they are
// established. The manifests come from the module cache, where go mod
// download puts the module (from the module proxy the first time).
func installGatewayAPI(t *testing.T, cli kubernetes.Interface) {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", gatewayAPI)
	cmd.Dir = t.TempDir() // outside this module: its go.mod stays as it is
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go mod download %s: %v\n%s%s", gatewayAPI, err, out.String(), stderr.String())
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out.Bytes(), &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download %s: %v %s\n%s", gatewayAPI, err, mod.Error, out.String())
	}
	files, err := filepath.Glob(filepath.Join(mod.Dir, "config", "crd", "standard", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs under %s: %v", mod.Dir, err)
	}
	ctx := context.Background()
	rc := cli.CoreV1().RESTClient()
	var names []string
	for _, file := range files {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewYAMLOrJSONDecoder(f, 1<<16)
		for {
			var doc unstructured.Unstructured
			if err := dec.Decode(&doc.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if doc.GetKind() != "CustomResourceDefinition" { // the standard install's admission policy
				continue
			}
			b, err := doc.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			if err := rc.Patch(types.ApplyPatchType).AbsPath("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", doc.GetName()).
				Param("fieldManager", "deployk8s-test").Param("force", "true").Body(b).Do(ctx).Error(); err != nil {
				t.Fatalf("applying the CRD %s: %v", doc.GetName(), err)
			}
			names = append(names, doc.GetName())
		}
		f.Close()
	}
	if !slices.Contains(names, "httproutes.gateway.networking.k8s.io") {
		t.Fatalf("the standard CRDs of %s have no HTTPRoute: %v", gatewayAPI, names)
	}
	for _, name := range names {
		eventually(t, "the CRD "+name+" is established", func() bool {
			var crd struct {
				Status struct {
					Conditions []struct{ Type, Status string }
				}
			}
			raw, err := rc.Get().AbsPath("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", name).Do(ctx).Raw()
			if err != nil || json.Unmarshal(raw, &crd) != nil {
				return false
			}
			return slices.ContainsFunc(crd.Status.Conditions, func(c struct{ Type, Status string }) bool {
				return c.Type == "Established" && c.Status == "True"
			})
		})
	}
}

// httpRoute gets an HTTPRoute as JSON values; nil when there is none.
func httpRoute(t *testing.T, cli kubernetes.Interface, ns, name string) map[string]any {
	t.Helper()
	raw, err := cli.CoreV1().RESTClient().Get().AbsPath("/apis/gateway.networking.k8s.io/v1/namespaces", ns, "httproutes", name).
		Do(context.Background()).Raw()
	if k8serrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// at is the value at a path of JSON values: keys of objects, indexes of
// arrays.
func at(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

// deployed creates a deployment and waits for its first revision to be
// DEPLOYED.
func (f *fixture) deployed(t *testing.T, body string) *controlplane.Deployment {
	t.Helper()
	d := f.create(body)
	if r := waitTerminal(t, f.cp, f.tenant, d.ID, *d.LatestRevisionID); r.Status != controlplane.RevisionDeployed {
		t.Fatalf("revision %s: %s", r.Status, deref(r.StatusMessage))
	}
	return d
}

// patched PATCHes a deployment and waits for its new revision to be
// DEPLOYED.
func (f *fixture) patched(t *testing.T, id, body string) {
	t.Helper()
	d := f.patch(id, body)
	if r := waitTerminal(t, f.cp, f.tenant, d.ID, *d.LatestRevisionID); r.Status != controlplane.RevisionDeployed {
		t.Fatalf("revision %s: %s", r.Status, deref(r.StatusMessage))
	}
}

// url is the deployment's url as the control plane answers it.
func (f *fixture) url(t *testing.T, id string) string {
	t.Helper()
	got, err := f.cp.GetDeployment(context.Background(), f.tenant, id)
	if err != nil {
		t.Fatal(err)
	}
	return deref(got.URL)
}

// pdb gets the API server's PodDisruptionBudget; nil when there is none.
func pdb(t *testing.T, cli kubernetes.Interface, ns, dep string) *policyv1.PodDisruptionBudget {
	t.Helper()
	p, err := cli.PolicyV1().PodDisruptionBudgets(ns).Get(context.Background(), "dp-"+dep+"-api", metav1.GetOptions{})
	if k8serrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// reconcileWith reconciles the cluster with a Deployer of the fixture's
// instance over state, its options tweaked.
func (f *fixture) reconcileWith(t *testing.T, state deployk8s.State, tweak func(*deployk8s.Options)) {
	t.Helper()
	o := deployerOptions(f.clis[contextA], contextA, f.instance, state, quiet())
	if tweak != nil {
		tweak(o)
	}
	d, err := deployk8s.New(o)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// unchangedByReconcile: a Reconcile with the same exposure finds
// nothing to repair.
func (f *fixture) unchangedByReconcile(t *testing.T, expose *deployk8s.Expose) {
	t.Helper()
	logs := &logBuffer{}
	f.reconcileWith(t, f.cp, func(o *deployk8s.Options) {
		o.Expose, o.Logger = expose, slog.New(slog.NewTextHandler(logs, nil))
	})
	if strings.Contains(logs.String(), "repaired objects") {
		t.Errorf("Reconcile repaired objects that match the active revision:\n%s", logs)
	}
}

// TestExposeIngress: with an Ingress exposure the cluster stores each
// deployment's Ingress (class, host from the template, lowercased, to its
// Service, cert-manager's annotation and TLS section, the exposure's
// annotations and not the resource_spec's, this package's labels and
// owner) and the deployment's url is its external address. min_scale 2
// adds a PodDisruptionBudget and 1 removes it again; a Reconcile without
// exposure removes the Ingress and one with it puts it back; DELETE
// leaves nothing.
func TestExposeIngress(t *testing.T) {
	expose := &deployk8s.Expose{Kind: deployk8s.ExposeIngress, IngressClassName: "nginx",
		HostTemplate: "{name}.{tenant}.agents.example.com",
		TLSIssuer:    &deployk8s.Issuer{Kind: "ClusterIssuer", Name: "letsencrypt"},
		Annotations:  map[string]string{"nginx.ingress.kubernetes.io/proxy-body-size": "8m"}}
	f := newFixture(t, nil, []string{contextA}, func(o *deployk8s.Options) { o.Expose = expose })
	cli := f.clis[contextA]
	ns := namespace(t, cli)
	l := f.listener(contextA, ns)
	ctx := context.Background()
	name := "Bot-" + uniq("ing")
	d := f.deployed(t, fmt.Sprintf(`{"name": %q, "source": "external_docker",
		"source_config": {"listener_id": %q, "resource_spec": {"min_scale": 1,
			"annotations": {"nginx.ingress.kubernetes.io/configuration-snippet": "by a tenant"}}},
		"source_revision_config": {"image_uri": "example.com/agent:v1"}}`, name, l.ID))
	host := strings.ToLower(name) + "." + f.tenant + ".agents.example.com"
	if got, want := f.url(t, d.ID), "https://"+host; got != want {
		t.Errorf("url %q, want %q", got, want)
	}
	logs := strings.Join(deployLog(t, f.cp, f.tenant, d.ID, *d.LatestRevisionID), "\n")
	if !strings.Contains(logs, "active at https://"+host) {
		t.Errorf("the deploy log does not give the external address:\n%s", logs)
	}
	in, err := cli.NetworkingV1().Ingresses(ns).Get(ctx, "dp-"+d.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owner, err := cli.CoreV1().ConfigMaps(ns).Get(ctx, "dp-"+d.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rule := in.Spec.Rules[0]
	path := rule.HTTP.Paths[0]
	checks := map[string][2]string{
		"class":               {deref(in.Spec.IngressClassName), "nginx"},
		"host":                {rule.Host, host},
		"path":                {fmt.Sprint(path.Path, " ", deref(path.PathType)), "/ Prefix"},
		"backend":             {fmt.Sprint(path.Backend.Service.Name, ":", path.Backend.Service.Port.Number), "dp-" + d.ID + ":8000"},
		"tls":                 {fmt.Sprint(in.Spec.TLS), fmt.Sprintf("[{[%s] dp-%s-tls}]", host, d.ID)},
		"issuer":              {in.Annotations["cert-manager.io/cluster-issuer"], "letsencrypt"},
		"annotation":          {in.Annotations["nginx.ingress.kubernetes.io/proxy-body-size"], "8m"},
		"tenant's annotation": {in.Annotations["nginx.ingress.kubernetes.io/configuration-snippet"], ""},
		"labels": {fmt.Sprint(in.Labels[deployk8s.LabelInstance], " ", in.Labels[deployk8s.LabelDeployment], " ", in.Labels[deployk8s.LabelTenant]),
			fmt.Sprint(f.instance, " ", d.ID, " ", f.tenant)},
		"owner": {fmt.Sprint(in.OwnerReferences[0].Kind, " ", in.OwnerReferences[0].UID), fmt.Sprint("ConfigMap ", owner.UID)},
	}
	for what, c := range checks {
		if c[0] != c[1] {
			t.Errorf("Ingress %s: %q, want %q", what, c[0], c[1])
		}
	}
	if p := pdb(t, cli, ns, d.ID); p != nil {
		t.Errorf("a PodDisruptionBudget with min_scale 1: %+v", p.Spec)
	}

	// min_scale 2: the budget keeps one of the API server's pods.
	f.patched(t, d.ID, `{"source_config": {"resource_spec": {"min_scale": 2}}}`)
	p := pdb(t, cli, ns, d.ID)
	if p == nil {
		t.Fatal("no PodDisruptionBudget with min_scale 2")
	}
	wantSel := map[string]string{deployk8s.LabelInstance: f.instance, deployk8s.LabelDeployment: d.ID, deployk8s.LabelComponent: "api"}
	if p.Spec.MinAvailable == nil || p.Spec.MinAvailable.IntValue() != 1 || p.Spec.Selector == nil ||
		!maps.Equal(p.Spec.Selector.MatchLabels, wantSel) || len(p.OwnerReferences) != 1 || p.OwnerReferences[0].UID != owner.UID {
		t.Errorf("PodDisruptionBudget minAvailable %v selector %v owners %v; want 1 of the API server's pods %v, owned by %s",
			p.Spec.MinAvailable, p.Spec.Selector, p.OwnerReferences, wantSel, owner.UID)
	}
	f.unchangedByReconcile(t, expose)
	f.patched(t, d.ID, `{"source_config": {"resource_spec": {"min_scale": 1}}}`)
	if p := pdb(t, cli, ns, d.ID); p != nil {
		t.Errorf("the PodDisruptionBudget stays with min_scale back at 1")
	}

	// Exposure turned off (a restart without it): Reconcile removes the
	// Ingress; turned on again, it puts it back.
	f.reconcileWith(t, f.cp, nil)
	if _, err := cli.NetworkingV1().Ingresses(ns).Get(ctx, "dp-"+d.ID, metav1.GetOptions{}); !k8serrors.IsNotFound(err) {
		t.Errorf("the Ingress after a Reconcile without exposure: %v, want not found", err)
	}
	f.reconcileWith(t, f.cp, func(o *deployk8s.Options) { o.Expose = expose })
	if got, err := cli.NetworkingV1().Ingresses(ns).Get(ctx, "dp-"+d.ID, metav1.GetOptions{}); err != nil || got.Spec.Rules[0].Host != host {
		t.Errorf("the Ingress after a Reconcile with exposure again: %v", err)
	}

	f.patched(t, d.ID, `{"source_config": {"resource_spec": {"min_scale": 2}}}`)
	if err := f.cp.DeleteDeployment(ctx, f.tenant, d.ID); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deployment's records are gone", func() bool {
		_, err := f.cp.GetDeployment(ctx, f.tenant, d.ID)
		return errors.Is(err, apierr.ErrNotFound)
	})
	lo := metav1.ListOptions{LabelSelector: deployk8s.LabelDeployment + "=" + d.ID}
	ins, err := cli.NetworkingV1().Ingresses(ns).List(ctx, lo)
	if err != nil {
		t.Fatal(err)
	}
	pdbs, err := cli.PolicyV1().PodDisruptionBudgets(ns).List(ctx, lo)
	if err != nil {
		t.Fatal(err)
	}
	deps, err := cli.AppsV1().Deployments(ns).List(ctx, lo)
	if err != nil {
		t.Fatal(err)
	}
	if len(ins.Items)+len(pdbs.Items)+len(deps.Items) > 0 {
		t.Errorf("left after DELETE: %d Ingresses, %d PodDisruptionBudgets, %d Deployments", len(ins.Items), len(pdbs.Items), len(deps.Items))
	}
}

// TestExposeHTTPRoute: with an HTTPRoute exposure (the Gateway API's CRDs
// installed) the cluster stores each deployment's HTTPRoute (its Gateway,
// one host for all and a path each, stripped before the server, to its
// Service, with labels and owner) and the url is the external address.
// DELETE removes the HTTPRoute; Reconcile removes the HTTPRoute of a
// deployment the store no longer has.
func TestExposeHTTPRoute(t *testing.T) {
	cli := client(t, contextA)
	installGatewayAPI(t, cli)
	expose := &deployk8s.Expose{Kind: deployk8s.ExposeHTTPRoute, HostTemplate: "agents.example.com", PathTemplate: "/{tenant}/{name}",
		Gateway: deployk8s.GatewayRef{Namespace: "gateways", Name: "public", SectionName: "https"}, HTTPS: true,
		Annotations: map[string]string{"example.com/route": "yes"}}
	f := newFixture(t, nil, []string{contextA}, func(o *deployk8s.Options) { o.Expose = expose })
	ns := namespace(t, cli)
	l := f.listener(contextA, ns)
	ctx := context.Background()
	mk := func() *controlplane.Deployment {
		return f.deployed(t, fmt.Sprintf(`{"name": %q, "source": "external_docker",
			"source_config": {"listener_id": %q}, "source_revision_config": {"image_uri": "example.com/agent:v1"}}`, uniq("route"), l.ID))
	}
	gone, kept := mk(), mk()
	for _, d := range []*controlplane.Deployment{gone, kept} {
		if got, want := f.url(t, d.ID), "https://agents.example.com/"+f.tenant+"/"+d.Name; got != want {
			t.Errorf("url %q, want %q", got, want)
		}
	}
	r := httpRoute(t, cli, ns, "dp-"+kept.ID)
	if r == nil {
		t.Fatal("no HTTPRoute")
	}
	owner, err := cli.CoreV1().ConfigMaps(ns).Get(ctx, "dp-"+kept.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rule := at(r, "spec", "rules", 0)
	checks := map[string][2]any{
		"parent": {fmt.Sprint(at(r, "spec", "parentRefs", 0, "namespace"), "/", at(r, "spec", "parentRefs", 0, "name"), "/",
			at(r, "spec", "parentRefs", 0, "sectionName"), " ", at(r, "spec", "parentRefs", 0, "kind")), "gateways/public/https Gateway"},
		"hostnames": {fmt.Sprint(at(r, "spec", "hostnames")), "[agents.example.com]"},
		"match":     {fmt.Sprint(at(rule, "matches", 0, "path")), fmt.Sprintf("map[type:PathPrefix value:/%s/%s]", f.tenant, kept.Name)},
		"rewrite":   {fmt.Sprint(at(rule, "filters", 0)), "map[type:URLRewrite urlRewrite:map[path:map[replacePrefixMatch:/ type:ReplacePrefixMatch]]]"},
		"backend":   {fmt.Sprint(at(rule, "backendRefs", 0, "name"), ":", at(rule, "backendRefs", 0, "port")), "dp-" + kept.ID + ":8000"},
		"labels": {fmt.Sprint(at(r, "metadata", "labels", deployk8s.LabelInstance), " ", at(r, "metadata", "labels", deployk8s.LabelDeployment)),
			f.instance + " " + kept.ID},
		"annotation": {at(r, "metadata", "annotations", "example.com/route"), "yes"},
		"owner":      {at(r, "metadata", "ownerReferences", 0, "uid"), string(owner.UID)},
	}
	for what, c := range checks {
		if c[0] != c[1] {
			t.Errorf("HTTPRoute %s: %v, want %v", what, c[0], c[1])
		}
	}

	f.unchangedByReconcile(t, expose)

	// DELETE removes the HTTPRoute with the rest.
	if err := f.cp.DeleteDeployment(ctx, f.tenant, gone.ID); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deleted deployment's records are gone", func() bool {
		_, err := f.cp.GetDeployment(ctx, f.tenant, gone.ID)
		return errors.Is(err, apierr.ErrNotFound)
	})
	if httpRoute(t, cli, ns, "dp-"+gone.ID) != nil {
		t.Errorf("the HTTPRoute of a deleted deployment is still there")
	}

	// A control plane that no longer has the other deployment (its store
	// lost it): Reconcile removes its objects, the HTTPRoute with them.
	f.reconcileWith(t, controlplane.New(storemem.New(), cpOptions(quiet())), func(o *deployk8s.Options) { o.Expose = expose })
	eventually(t, "Reconcile removes the HTTPRoute of a deployment the store does not have", func() bool {
		return httpRoute(t, cli, ns, "dp-"+kept.ID) == nil
	})
	eventually(t, "its Service goes with its owner", func() bool {
		_, err := cli.CoreV1().Services(ns).Get(ctx, "dp-"+kept.ID, metav1.GetOptions{})
		return k8serrors.IsNotFound(err)
	})
}

// TestExposeRefused: a host the API server refuses, an Ingress's or an
// HTTPRoute's, fails the revision with the cluster's words and the host
// and template that made it, before any other object is applied; a label
// too long for DNS (which the API server takes) is refused before
// anything is applied too; so is an HTTPRoute on a cluster without the
// Gateway API, saying so.
func TestExposeRefused(t *testing.T) {
	cliA, cliB := client(t, contextA), client(t, contextB)
	installGatewayAPI(t, cliA)
	route := deployk8s.Expose{Kind: deployk8s.ExposeHTTPRoute, HostTemplate: "{name}.agents.example.com",
		Gateway: deployk8s.GatewayRef{Name: "public"}}
	cases := []struct {
		name    string
		cluster string
		expose  deployk8s.Expose
		depName string
		want    []string
	}{
		{"ingress host", contextA, deployk8s.Expose{Kind: deployk8s.ExposeIngress, HostTemplate: "{name}.agents.example.com"}, "Bad_Name",
			[]string{"The cluster refused Ingress dp-", `(host "{lowercase name}.agents.example.com" from the host template "{name}.agents.example.com")`,
				"spec.rules[0].host", "RFC 1123 subdomain"}},
		{"route host", contextA, route, "Bad_Name",
			[]string{"The cluster refused HTTPRoute dp-", `(host "{lowercase name}.agents.example.com" from the host template "{name}.agents.example.com")`,
				"spec.hostnames[0]"}},
		{"label too long", contextA, deployk8s.Expose{Kind: deployk8s.ExposeIngress, HostTemplate: "{name}-{id}.agents.example.com"},
			"a-name-of-thirty-characters-xx",
			[]string{`The host template "{name}-{id}.agents.example.com" gives this deployment a host that is no DNS name`, "longer than 63 characters"}},
		{"no gateway api", contextB, route, "bot",
			[]string{"The cluster refused HTTPRoute dp-", "the cluster has no HTTPRoute (gateway.networking.k8s.io/v1): install the Gateway API's CRDs"}},
	}
	if httpRoutesServed(t, cliB) {
		cases = cases[:len(cases)-1]
		t.Log("kube-b has the Gateway API: its refusal for want of it is not tested")
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, nil, []string{c.cluster}, func(o *deployk8s.Options) { o.Expose = &c.expose })
			cli := f.clis[c.cluster]
			ns := namespace(t, cli)
			l := f.listener(c.cluster, ns)
			d := f.create(fmt.Sprintf(`{"name": %q, "source": "external_docker", "source_config": {"listener_id": %q},
				"source_revision_config": {"image_uri": "example.com/agent:v1"}}`, c.depName+"-"+uniq("x")[2:6], l.ID))
			r := waitTerminal(t, f.cp, f.tenant, d.ID, *d.LatestRevisionID)
			msg := deref(r.StatusMessage)
			if r.Status != controlplane.RevisionDeployFailed {
				t.Fatalf("revision %s (%s), want DEPLOY_FAILED", r.Status, msg)
			}
			for _, w := range c.want {
				w = strings.ReplaceAll(w, "{lowercase name}", strings.ToLower(d.Name))
				if !strings.Contains(msg, w) {
					t.Errorf("status_message %q has no %q", msg, w)
				}
			}
			logs := deployLog(t, f.cp, f.tenant, d.ID, r.ID)
			if len(logs) == 0 || logs[len(logs)-1] != msg {
				t.Errorf("the deploy log does not end with the failure:\n%s", strings.Join(logs, "\n"))
			}
			if _, err := cli.AppsV1().Deployments(ns).Get(context.Background(), "dp-"+d.ID+"-api", metav1.GetOptions{}); !k8serrors.IsNotFound(err) {
				t.Errorf("the API server's Deployment after the refusal: %v, want none applied", err)
			}
		})
	}
}

// httpRoutesServed says whether the cluster has the HTTPRoute kind.
func httpRoutesServed(t *testing.T, cli kubernetes.Interface) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := cli.CoreV1().RESTClient().Get().AbsPath("/apis/gateway.networking.k8s.io/v1/httproutes").Param("limit", "1").Do(ctx).Raw()
	if k8serrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}
