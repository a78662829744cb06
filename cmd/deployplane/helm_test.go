package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	k8serrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The Helm chart (deploy/helm/deployplane): its values documented, its
// templates rendered with a matrix of values, installed on the test
// cluster, and its RBAC proven (helmrbac_test.go). helm is the binary
// DEPLOYPLANE_TEST_HELM names (.ci/helm.sh builds it from its Go module);
// without it the tests that need it skip.

// chartDir is the chart, from this package's directory.
const chartDir = "../../deploy/helm/deployplane"

// helmCmd is the helm binary and the environment it runs in (its cache,
// configuration and data in a directory of the test's), or skips the
// test.
type helmCmd struct {
	bin string
	env []string
}

func newHelm(t *testing.T) *helmCmd {
	t.Helper()
	bin := os.Getenv("DEPLOYPLANE_TEST_HELM")
	if bin == "" {
		t.Skip("DEPLOYPLANE_TEST_HELM is not set: no helm to lint, render and install the chart with (.ci/helm.sh builds one)")
	}
	dir := t.TempDir()
	env := processEnv(dir, "HELM_CACHE_HOME="+filepath.Join(dir, "cache"), "HELM_CONFIG_HOME="+filepath.Join(dir, "config"),
		"HELM_DATA_HOME="+filepath.Join(dir, "data"))
	return &helmCmd{bin: bin, env: env}
}

// run runs helm with args and answers its standard output, or its error
// with what it said.
func (h *helmCmd) run(args ...string) (string, error) {
	cmd := exec.Command(h.bin, args...)
	cmd.Env = h.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// valuesFile writes values (YAML) to a file of the test's and answers
// its path.
func valuesFile(t *testing.T, values string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(p, []byte(values), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// rendered are the objects of a helm template, by "Kind namespace/name".
type rendered map[string]json.RawMessage

// template renders the chart with values as release name in namespace
// ns.
func (h *helmCmd) template(t *testing.T, name, ns, values string) (rendered, error) {
	t.Helper()
	out, err := h.run("template", name, chartDir, "--namespace", ns, "-f", valuesFile(t, values))
	if err != nil {
		return nil, err
	}
	objs := rendered{}
	for doc := range strings.SplitSeq(out, "\n---\n") {
		j, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatalf("a rendered document is no YAML: %v\n%s", err, doc)
		}
		var m struct {
			Kind     string
			Metadata struct{ Name, Namespace string }
		}
		if err := json.Unmarshal(j, &m); err != nil || m.Kind == "" {
			continue // a comment only
		}
		k := m.Kind + " " + m.Metadata.Namespace + "/" + m.Metadata.Name
		if _, dup := objs[k]; dup {
			t.Fatalf("%s rendered twice", k)
		}
		objs[k] = j
	}
	return objs, nil
}

// object decodes the rendered object key into v, failing the test when
// it was not rendered.
func (r rendered) object(t *testing.T, key string, v any) {
	t.Helper()
	j, ok := r[key]
	if !ok {
		t.Fatalf("no %s among %v", key, slices.Sorted(maps.Keys(r)))
	}
	if err := json.Unmarshal(j, v); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
}

// kinds are the rendered objects' keys of kind.
func (r rendered) kinds(kind string) []string {
	var out []string
	for k := range r {
		if strings.HasPrefix(k, kind+" ") {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// TestChartValuesDocumented: every value of values.yaml is in the
// README's table with its default, and the table names no other.
func TestChartValuesDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{} // key -> default, from the table
	for _, m := range regexp.MustCompile("(?m)^\\| `([A-Za-z0-9.]+)` \\| `([^`]*)` \\|").FindAllStringSubmatch(string(readme), -1) {
		rows[m[1]] = m[2]
	}
	leaves := map[string]string{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		if m, ok := v.(map[string]any); ok && len(m) > 0 {
			for k, c := range m {
				walk(strings.TrimPrefix(prefix+"."+k, "."), c)
			}
			return
		}
		j, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		s := string(j)
		if str, ok := v.(string); ok && str != "" {
			s = str
		}
		leaves[prefix] = s
	}
	walk("", values)
	for _, k := range slices.Sorted(maps.Keys(leaves)) {
		if d, ok := rows[k]; !ok {
			t.Errorf("README.md's table has no row for %s (default %s)", k, leaves[k])
		} else if d != leaves[k] {
			t.Errorf("README.md gives %s the default %s; values.yaml has %s", k, d, leaves[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(rows)) {
		if _, ok := leaves[k]; !ok {
			t.Errorf("README.md's table has %s, which values.yaml has not", k)
		}
	}
	if len(leaves) < 50 {
		t.Errorf("found %d values in values.yaml: is the walk right?", len(leaves))
	}
}

// TestChartTemplate lints and renders the chart with a matrix of values
// (each role, bbolt and PostgreSQL, Roles per namespace and a
// ClusterRole, exposures) and checks the objects; values that cannot
// work fail the render with a message saying what to set.
func TestChartTemplate(t *testing.T) {
	h := newHelm(t)
	const ns = "dp"
	lint := func(t *testing.T, values string) {
		t.Helper()
		if out, err := h.run("lint", "--strict", chartDir, "--namespace", ns, "-f", valuesFile(t, values)); err != nil {
			t.Errorf("helm lint: %v", err)
		} else if !strings.Contains(out, "0 chart(s) failed") {
			t.Errorf("helm lint:\n%s", out)
		}
	}
	render := func(t *testing.T, values string) rendered {
		t.Helper()
		lint(t, values)
		r, err := h.template(t, "rel", ns, values)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	const obj = "rel-deployplane"
	container := func(t *testing.T, r rendered) (*appsv1.Deployment, corev1.Container) {
		t.Helper()
		var d appsv1.Deployment
		r.object(t, "Deployment "+ns+"/"+obj, &d)
		if len(d.Spec.Template.Spec.Containers) != 1 {
			t.Fatalf("containers: %+v", d.Spec.Template.Spec.Containers)
		}
		return &d, d.Spec.Template.Spec.Containers[0]
	}
	envFrom := func(c corev1.Container, name string) string {
		for _, e := range c.Env {
			if e.Name == name && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				return e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
			}
		}
		return ""
	}
	hasArgs := func(t *testing.T, c corev1.Container, want ...string) {
		t.Helper()
		for i := 0; i < len(want); i += 2 {
			j := slices.Index(c.Args, want[i])
			if j < 0 || (i+1 < len(want) && want[i+1] != "" && (j+1 >= len(c.Args) || c.Args[j+1] != want[i+1])) {
				t.Errorf("args %q have no %s %s", c.Args, want[i], want[i+1])
			}
		}
	}
	noArgs := func(t *testing.T, c corev1.Container, flags ...string) {
		t.Helper()
		for _, f := range flags {
			if slices.Contains(c.Args, f) {
				t.Errorf("args %q have %s", c.Args, f)
			}
		}
	}
	hardened := func(t *testing.T, d *appsv1.Deployment, c corev1.Container) {
		t.Helper()
		p, s := d.Spec.Template.Spec.SecurityContext, c.SecurityContext
		if p == nil || p.RunAsNonRoot == nil || !*p.RunAsNonRoot || p.RunAsUser == nil || *p.RunAsUser != 65532 ||
			s == nil || s.ReadOnlyRootFilesystem == nil || !*s.ReadOnlyRootFilesystem || s.AllowPrivilegeEscalation == nil ||
			*s.AllowPrivilegeEscalation || s.Capabilities == nil || !slices.Equal(s.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("the pod is not locked down: %+v %+v", p, s)
		}
	}

	t.Run("ControlPlaneBbolt", func(t *testing.T) {
		r := render(t, "{}")
		d, c := container(t, r)
		if *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
			t.Errorf("replicas %d, strategy %q; want 1, Recreate (one process holds the bbolt file)", *d.Spec.Replicas, d.Spec.Strategy.Type)
		}
		hasArgs(t, c, "-addr", "0.0.0.0:8124", "-db", "/data/deployplane.db", "-k8s-in-cluster=false", "", "-log-format", "json")
		noArgs(t, c, "-k8s-namespaces", "-keys", "-deployer")
		if d.Spec.Template.Spec.AutomountServiceAccountToken == nil || *d.Spec.Template.Spec.AutomountServiceAccountToken {
			t.Error("a control plane that drives no cluster mounts a service account token")
		}
		if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" || p.HTTPGet.Port.String() != "http" {
			t.Errorf("readiness probe %+v, want GET /readyz on http", p)
		}
		if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
			t.Errorf("liveness probe %+v, want GET /healthz", p)
		}
		if len(c.Ports) != 1 || c.Ports[0].ContainerPort != 8124 || c.Ports[0].Name != "http" {
			t.Errorf("ports %+v", c.Ports)
		}
		a := d.Spec.Template.Annotations
		if a["prometheus.io/scrape"] != "true" || a["prometheus.io/port"] != "8124" || a["prometheus.io/path"] != "/metrics" {
			t.Errorf("pod annotations %v, want Prometheus's", a)
		}
		hardened(t, d, c)
		var pvc corev1.PersistentVolumeClaim
		r.object(t, "PersistentVolumeClaim "+ns+"/"+obj, &pvc)
		if q := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; q.String() != "1Gi" || pvc.Annotations["helm.sh/resource-policy"] != "keep" {
			t.Errorf("claim of %s, annotations %v; want 1Gi, kept on uninstall", q.String(), pvc.Annotations)
		}
		if v := d.Spec.Template.Spec.Volumes[0]; v.Name != "data" || v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != obj {
			t.Errorf("volume %+v, want the claim", v)
		}
		var svc corev1.Service
		r.object(t, "Service "+ns+"/"+obj, &svc)
		if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8124 || svc.Spec.Ports[0].TargetPort.String() != "http" ||
			!maps.Equal(svc.Spec.Selector, d.Spec.Selector.MatchLabels) {
			t.Errorf("service %+v, want port 8124 to the pods", svc.Spec)
		}
		for _, k := range []string{"Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding", "Ingress", "ServiceMonitor", "Secret", "Namespace"} {
			if got := r.kinds(k); len(got) > 0 {
				t.Errorf("rendered %v by default", got)
			}
		}
	})

	t.Run("ControlPlanePostgresReplicas", func(t *testing.T) {
		r := render(t, `controlPlane:
  replicas: 3
  publicURL: https://deploy.example.com
  postgres: {dsn: "postgres://dp:pw@db:5432/dp?sslmode=require", schema: one}
  secretKey: {existingSecret: dp-key}
  apiKeys: {keys: [{key: k1, tenant_ids: [0190a2b4-0000-7000-8000-000000000001]}]}
  ingress: {enabled: true, className: nginx, host: deploy.example.com, tlsSecretName: deploy-tls}
  metrics: {keySecret: dp-metrics, serviceMonitor: {enabled: true, labels: {release: prom}}}
`)
		d, c := container(t, r)
		if *d.Spec.Replicas != 3 || d.Spec.Strategy.Type != "" {
			t.Errorf("replicas %d, strategy %q; want 3, rolling", *d.Spec.Replicas, d.Spec.Strategy.Type)
		}
		hasArgs(t, c, "-db", "$(DEPLOYPLANE_DB)", "-pg-schema", "one", "-keys", "/etc/deployplane/keys/keys.json",
			"-public-url", "https://deploy.example.com")
		if got := envFrom(c, "DEPLOYPLANE_DB"); got != obj+"/dsn" {
			t.Errorf("DEPLOYPLANE_DB from %q, want the chart's Secret", got)
		}
		if got := envFrom(c, "DEPLOYPLANE_SECRET_KEY"); got != "dp-key/secret-key" {
			t.Errorf("DEPLOYPLANE_SECRET_KEY from %q", got)
		}
		if got := envFrom(c, "DEPLOYPLANE_METRICS_KEY"); got != "dp-metrics/metrics-key" {
			t.Errorf("DEPLOYPLANE_METRICS_KEY from %q", got)
		}
		if r.kinds("PersistentVolumeClaim") != nil {
			t.Error("a claim with PostgreSQL")
		}
		var s corev1.Secret
		r.object(t, "Secret "+ns+"/"+obj, &s)
		var keys []map[string]any
		if err := json.Unmarshal([]byte(s.StringData["keys.json"]), &keys); err != nil || len(keys) != 1 || keys[0]["key"] != "k1" {
			t.Errorf("keys.json %q: %v", s.StringData["keys.json"], err)
		}
		if s.StringData["dsn"] != "postgres://dp:pw@db:5432/dp?sslmode=require" || len(s.StringData) != 2 {
			t.Errorf("the chart's Secret holds %v", slices.Sorted(maps.Keys(s.StringData)))
		}
		var in networkingv1.Ingress
		r.object(t, "Ingress "+ns+"/"+obj, &in)
		if in.Spec.IngressClassName == nil || *in.Spec.IngressClassName != "nginx" || len(in.Spec.Rules) != 1 ||
			in.Spec.Rules[0].Host != "deploy.example.com" || len(in.Spec.TLS) != 1 || in.Spec.TLS[0].SecretName != "deploy-tls" ||
			in.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name != obj {
			t.Errorf("ingress %+v", in.Spec)
		}
		var sm struct {
			Metadata struct{ Labels map[string]string }
			Spec     struct {
				Endpoints []struct {
					Port, Path    string
					Authorization struct{ Credentials struct{ Name, Key string } }
				}
			}
		}
		r.object(t, "ServiceMonitor "+ns+"/"+obj, &sm)
		if e := sm.Spec.Endpoints; len(e) != 1 || e[0].Port != "http" || e[0].Path != "/metrics" || e[0].Authorization.Credentials.Name != "dp-metrics" ||
			sm.Metadata.Labels["release"] != "prom" {
			t.Errorf("service monitor %+v", sm)
		}
	})

	t.Run("ControlPlaneDrivesItsCluster", func(t *testing.T) {
		r := render(t, `controlPlane: {kubernetes: {enabled: true}}
rbac: {namespaces: [agents, team-b, agents]}
`)
		d, c := container(t, r)
		hasArgs(t, c, "-k8s-namespaces", "agents,team-b", "-k8s-instance", obj, "-deployer", "k8s")
		noArgs(t, c, "-k8s-in-cluster=false", "-k8s-expose")
		_, c = container(t, render(t, `controlPlane: {kubernetes: {enabled: true, runUnlisted: false}}
rbac: {namespaces: [agents]}
`))
		noArgs(t, c, "-deployer")
		if d.Spec.Template.Spec.AutomountServiceAccountToken == nil || !*d.Spec.Template.Spec.AutomountServiceAccountToken {
			t.Error("a control plane that drives its cluster has no service account token")
		}
		if got, want := r.kinds("Role"), []string{"Role agents/" + obj, "Role team-b/" + obj}; !slices.Equal(got, want) {
			t.Errorf("roles %v, want %v", got, want)
		}
		for _, n := range []string{"agents", "team-b"} {
			var b rbacv1.RoleBinding
			r.object(t, "RoleBinding "+n+"/"+obj, &b)
			if b.RoleRef.Kind != "Role" || b.RoleRef.Name != obj || len(b.Subjects) != 1 || b.Subjects[0].Kind != "ServiceAccount" ||
				b.Subjects[0].Name != obj || b.Subjects[0].Namespace != ns {
				t.Errorf("binding in %s: %+v", n, b)
			}
		}
		if r.kinds("ClusterRole") != nil || r.kinds("Namespace") != nil {
			t.Errorf("a ClusterRole or Namespace: %v %v", r.kinds("ClusterRole"), r.kinds("Namespace"))
		}
		var role rbacv1.Role
		r.object(t, "Role agents/"+obj, &role)
		if diff := grantsDiff(grants(role.Rules), deployerGrants("")); diff != "" {
			t.Errorf("the Role's rules: %s", diff)
		}
	})

	t.Run("Agent", func(t *testing.T) {
		r := render(t, `role: agent
agent: {controlPlaneURL: "https://deploy.example.com", listenerID: 0190a2b4-0000-7000-8000-00000000000a,
  token: {existingSecret: agent-token}, replicas: 2}
rbac: {namespaces: [agents], createNamespaces: true}
kubernetes: {expose: {kind: ingress, hostTemplate: "{name}.agents.example.com", ingressClass: nginx}}
`)
		d, c := container(t, r)
		if !slices.Equal(c.Command, []string{"/deployplane", "agent"}) || *d.Spec.Replicas != 2 {
			t.Errorf("command %q, replicas %d", c.Command, *d.Spec.Replicas)
		}
		hasArgs(t, c, "-control-plane", "https://deploy.example.com", "-listener-id", "0190a2b4-0000-7000-8000-00000000000a",
			"-k8s-namespaces", "agents", "-k8s-expose", "ingress", "-k8s-host-template", "{name}.agents.example.com",
			"-k8s-ingress-class", "nginx", "-concurrency", "4")
		noArgs(t, c, "-instance", "-k8s-instance")
		if got := envFrom(c, "DEPLOYPLANE_AGENT_TOKEN"); got != "agent-token/token" {
			t.Errorf("DEPLOYPLANE_AGENT_TOKEN from %q", got)
		}
		hardened(t, d, c)
		for _, k := range []string{"Service", "PersistentVolumeClaim", "Ingress", "Secret", "ClusterRole"} {
			if got := r.kinds(k); len(got) > 0 {
				t.Errorf("an agent with %v", got)
			}
		}
		if got := r.kinds("Namespace"); !slices.Equal(got, []string{"Namespace /agents"}) {
			t.Errorf("namespaces %v", got)
		}
		var role rbacv1.Role
		r.object(t, "Role agents/"+obj, &role)
		if diff := grantsDiff(grants(role.Rules), deployerGrants("ingress")); diff != "" {
			t.Errorf("the Role's rules with an Ingress exposure: %s", diff)
		}
	})

	t.Run("AgentAllNamespaces", func(t *testing.T) {
		r := render(t, `role: agent
agent: {controlPlaneURL: "https://deploy.example.com", listenerID: l1, token: {value: dpl_lt_x}}
rbac: {allNamespaces: true}
kubernetes: {instance: edge, expose: {kind: httproute, hostTemplate: "{id}.example.com", gateway: gw/public}}
`)
		_, c := container(t, r)
		hasArgs(t, c, "-instance", "edge", "-k8s-gateway", "gw/public")
		noArgs(t, c, "-k8s-namespaces")
		if got := envFrom(c, "DEPLOYPLANE_AGENT_TOKEN"); got != obj+"/token" {
			t.Errorf("DEPLOYPLANE_AGENT_TOKEN from %q", got)
		}
		if r.kinds("Role") != nil || r.kinds("RoleBinding") != nil {
			t.Errorf("Roles with allNamespaces: %v", r.kinds("Role"))
		}
		var cr rbacv1.ClusterRole
		r.object(t, "ClusterRole /"+ns+"-"+obj, &cr)
		if diff := grantsDiff(grants(cr.Rules), deployerGrants("httproute")); diff != "" {
			t.Errorf("the ClusterRole's rules with an HTTPRoute exposure: %s", diff)
		}
		var b rbacv1.ClusterRoleBinding
		r.object(t, "ClusterRoleBinding /"+ns+"-"+obj, &b)
		if b.RoleRef.Name != ns+"-"+obj || len(b.Subjects) != 1 || b.Subjects[0].Name != obj || b.Subjects[0].Namespace != ns {
			t.Errorf("cluster role binding %+v", b)
		}
	})

	t.Run("Refused", func(t *testing.T) {
		for _, c := range []struct{ values, msg string }{
			{`role: server`, `role must be controlPlane or agent, not "server"`},
			{`controlPlane: {replicas: 3}`, "a bbolt file serves one replica: give controlPlane.postgres"},
			{`controlPlane: {postgres: {existingSecret: db}}`, "with PostgreSQL every replica needs the same secret key"},
			{`controlPlane: {kubernetes: {enabled: true}}`, "rbac.namespaces: name the namespaces deployments run in"},
			{`{role: agent, agent: {controlPlaneURL: "https://cp", listenerID: l1}, rbac: {namespaces: [a]}}`, "agent.token: give the listener token"},
			{`{role: agent, agent: {listenerID: l1, token: {value: x}}, rbac: {namespaces: [a]}}`, "agent.controlPlaneURL is required"},
			{`{role: agent, agent: {controlPlaneURL: "https://cp", listenerID: l1, token: {value: x}}, rbac: {namespaces: [Agents]}}`,
				`rbac.namespaces: "Agents" is no namespace name`},
			{`{role: agent, agent: {controlPlaneURL: "https://cp", listenerID: l1, token: {value: x}}, rbac: {allNamespaces: true},
			  kubernetes: {expose: {kind: ingress}}}`, "kubernetes.expose.hostTemplate is required"},
		} {
			if _, err := h.template(t, "rel", ns, c.values); err == nil || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("%s: %v, want an error saying %q", c.values, err, c.msg)
			}
		}
	})
}

// grant is one verb on one kind: "verb group/resource" (group "" for
// the core group).
type grant string

// grants are the rules' grants.
func grants(rules []rbacv1.PolicyRule) map[grant]bool {
	out := map[grant]bool{}
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out[grant(v+" "+g+"/"+res)] = true
				}
			}
		}
	}
	return out
}

// deployerGrants are the grants package deployk8s needs (its package
// documentation), with the exposure kind ("", "ingress" or "httproute").
func deployerGrants(expose string) map[grant]bool {
	out := map[grant]bool{}
	add := func(group, resource string, verbs ...string) {
		for _, v := range verbs {
			out[grant(v+" "+group+"/"+resource)] = true
		}
	}
	add("", "configmaps", "list", "watch", "create", "patch", "delete")
	add("", "secrets", "get", "list", "watch", "create", "patch", "delete")
	add("", "services", "list", "watch", "create", "patch")
	add("", "persistentvolumeclaims", "get", "list", "patch")
	add("", "pods", "list", "watch")
	add("", "events", "list", "watch")
	add("apps", "deployments", "get", "list", "watch", "create", "patch")
	add("apps", "statefulsets", "get", "list", "watch", "create", "patch")
	add("apps", "replicasets", "list")
	add("autoscaling", "horizontalpodautoscalers", "list", "watch", "create", "patch", "delete")
	add("policy", "poddisruptionbudgets", "list", "watch", "create", "patch", "delete")
	add("networking.k8s.io", "ingresses", "list", "watch", "delete")
	add("gateway.networking.k8s.io", "httproutes", "list", "delete")
	switch expose {
	case "ingress":
		add("networking.k8s.io", "ingresses", "create", "patch")
	case "httproute":
		add("gateway.networking.k8s.io", "httproutes", "create", "patch")
	}
	return out
}

// grantsDiff says which grants got has that want has not and the other
// way round, or "".
func grantsDiff(got, want map[grant]bool) string {
	var extra, missing []string
	for g := range got {
		if !want[g] {
			extra = append(extra, string(g))
		}
	}
	for g := range want {
		if !got[g] {
			missing = append(missing, string(g))
		}
	}
	if len(extra)+len(missing) == 0 {
		return ""
	}
	slices.Sort(extra)
	slices.Sort(missing)
	return fmt.Sprintf("more than wanted: %q; missing: %q", extra, missing)
}

// TestChartInstall installs the chart on the test cluster kube-a, as a
// control plane on a volume and as an agent whose namespace the chart
// creates: helm waits until every object is ready (kwok's pods are Ready
// without running anything), the objects are there as rendered, and
// helm uninstall removes them, keeping the control plane's claim.
func TestChartInstall(t *testing.T) {
	kubeconfig := os.Getenv("DEPLOYPLANE_TEST_KUBECONFIG")
	if kubeconfig == "" {
		t.Skip("DEPLOYPLANE_TEST_KUBECONFIG is not set: no Kubernetes control plane to install the chart on (.ci/run starts two)")
	}
	h := newHelm(t)
	cli := kubeClient(t, kubeconfig, "kube-a")
	ctx := context.Background()
	ns := kubeNamespace(t, cli, "helm-")
	managed := "helm-agents-" + randSuffix()
	t.Cleanup(func() { _ = cli.CoreV1().Namespaces().Delete(context.Background(), managed, metav1.DeleteOptions{}) })
	kube := []string{"--kubeconfig", kubeconfig, "--kube-context", "kube-a", "--namespace", ns}
	install := func(name, values string) {
		t.Helper()
		args := append([]string{"install", name, chartDir, "--wait", "--timeout", "5m", "-f", valuesFile(t, values)}, kube...)
		if _, err := h.run(args...); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = h.run(append([]string{"uninstall", name, "--ignore-not-found"}, kube...)...) })
	}
	install("cp", `controlPlane: {apiKeys: {keys: [{key: k1, tenant_ids: [0190a2b4-0000-7000-8000-000000000001]}]}}`)
	install("agent", fmt.Sprintf(`role: agent
agent: {controlPlaneURL: "https://deploy.example.com", listenerID: l1, token: {value: dpl_lt_x}}
rbac: {namespaces: [%s], createNamespaces: true}
`, managed))

	type check struct {
		what string
		get  func() error
	}
	present := []check{
		{"the control plane's Deployment, available", func() error {
			d, err := cli.AppsV1().Deployments(ns).Get(ctx, "cp-deployplane", metav1.GetOptions{})
			if err == nil && d.Status.AvailableReplicas != 1 {
				err = fmt.Errorf("%d available", d.Status.AvailableReplicas)
			}
			return err
		}},
		{"its Service", func() error {
			_, err := cli.CoreV1().Services(ns).Get(ctx, "cp-deployplane", metav1.GetOptions{})
			return err
		}},
		{"its keys' Secret", func() error {
			_, err := cli.CoreV1().Secrets(ns).Get(ctx, "cp-deployplane", metav1.GetOptions{})
			return err
		}},
		{"its ServiceAccount", func() error {
			_, err := cli.CoreV1().ServiceAccounts(ns).Get(ctx, "cp-deployplane", metav1.GetOptions{})
			return err
		}},
		{"the agent's Deployment, available", func() error {
			d, err := cli.AppsV1().Deployments(ns).Get(ctx, "agent-deployplane", metav1.GetOptions{})
			if err == nil && d.Status.AvailableReplicas != 1 {
				err = fmt.Errorf("%d available", d.Status.AvailableReplicas)
			}
			return err
		}},
		{"the agent's token Secret", func() error {
			_, err := cli.CoreV1().Secrets(ns).Get(ctx, "agent-deployplane", metav1.GetOptions{})
			return err
		}},
		{"the agent's Role in its namespace", func() error {
			_, err := cli.RbacV1().Roles(managed).Get(ctx, "agent-deployplane", metav1.GetOptions{})
			return err
		}},
		{"the agent's RoleBinding", func() error {
			_, err := cli.RbacV1().RoleBindings(managed).Get(ctx, "agent-deployplane", metav1.GetOptions{})
			return err
		}},
	}
	for _, c := range present {
		if err := c.get(); err != nil {
			t.Errorf("after helm install, %s: %v", c.what, err)
		}
	}
	pvc, err := cli.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "cp-deployplane", metav1.GetOptions{})
	if err != nil || pvc.Status.Phase != corev1.ClaimBound {
		t.Errorf("the control plane's claim: %v %v, want it bound", err, pvc.Status.Phase)
	}
	if t.Failed() {
		return
	}

	for _, name := range []string{"cp", "agent"} {
		if _, err := h.run(append([]string{"uninstall", name, "--wait", "--timeout", "5m"}, kube...)...); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range present {
		eventually(t, "after helm uninstall, no "+c.what, func() (bool, string) {
			err := c.get()
			return k8serrors.IsNotFound(err), fmt.Sprint(err)
		})
	}
	if _, err := cli.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "cp-deployplane", metav1.GetOptions{}); err != nil {
		t.Errorf("helm uninstall removed the control plane's claim (its database): %v", err)
	}
	eventually(t, "the namespace the chart created goes with it", func() (bool, string) {
		n, err := cli.CoreV1().Namespaces().Get(ctx, managed, metav1.GetOptions{})
		return k8serrors.IsNotFound(err) || (err == nil && n.DeletionTimestamp != nil), fmt.Sprint(err)
	})
}
