package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/deployplane/deployplane/deployk8s"
)

// TestChartRBAC proves the chart's RBAC on the test cluster kube-a. It
// installs the chart (a control plane driving its cluster, deployments
// in one namespace of their own), takes a token of the chart's
// ServiceAccount with the TokenRequest API, and runs the server out of
// cluster with a kubeconfig of that token alone, through a proxy that
// records every request it makes to the API server. A deployment with a
// rich resource_spec goes through create (DEPLOYED), a PATCH (a new
// revision DEPLOYED: its autoscaler and PodDisruptionBudget removed, the
// old revision's Secret deleted), a failing revision (a db_storage_gi the
// cluster refuses: DEPLOY_FAILED, the active revision put back) and
// DELETE (gone, and every object with it). Every request was granted (no
// Forbidden answer), in the deployments' namespace only, and the verbs
// used on each kind are exactly those the chart's Role grants (an apply
// that created its object uses create). Then one verb is taken from the
// Role (patch on Deployments): the next deployment fails, its deploy log
// carrying the API server's Forbidden message.
func TestChartRBAC(t *testing.T) {
	kubeconfig := os.Getenv("DEPLOYPLANE_TEST_KUBECONFIG")
	if kubeconfig == "" {
		t.Skip("DEPLOYPLANE_TEST_KUBECONFIG is not set: no Kubernetes control plane to prove the chart's RBAC on (.ci/run starts two)")
	}
	if testing.Short() {
		t.Skip("installs the chart and runs the command against the test cluster; skipped with -short")
	}
	h := newHelm(t)
	bin := binary(t)
	cli := kubeClient(t, kubeconfig, "kube-a")
	ctx := context.Background()
	release, deploy := kubeNamespace(t, cli, "rbac-"), kubeNamespace(t, cli, "rbac-dep-")
	kube := []string{"--kubeconfig", kubeconfig, "--kube-context", "kube-a", "--namespace", release}
	if _, err := h.run(append([]string{"install", "rbac", chartDir, "--wait", "--timeout", "5m", "-f", valuesFile(t,
		fmt.Sprintf("controlPlane: {kubernetes: {enabled: true}}\nrbac: {namespaces: [%s]}\n", deploy))}, kube...)...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = h.run(append([]string{"uninstall", "rbac", "--ignore-not-found"}, kube...)...) })
	const sa, role = "rbac-deployplane", "rbac-deployplane"
	user := "system:serviceaccount:" + release + ":" + sa
	can := func(verb, group, resource string) func() (bool, string) {
		return func() (bool, string) {
			r, err := cli.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
				Spec: authorizationv1.SubjectAccessReviewSpec{User: user,
					Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + release, "system:authenticated"},
					ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: deploy, Verb: verb, Group: group, Resource: resource}}},
				metav1.CreateOptions{})
			if err != nil {
				return false, err.Error()
			}
			return r.Status.Allowed, r.Status.Reason
		}
	}
	eventually(t, "the chart's Role applies", can("patch", "apps", "deployments"))

	rec := newAPIRecorder(t, kubeconfig, "kube-a")
	tok, err := cli.CoreV1().ServiceAccounts(release).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s: %v", user, err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["rbac"] = &clientcmdapi.Cluster{Server: rec.url, CertificateAuthorityData: rec.ca}
	kc.AuthInfos["rbac"] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	kc.Contexts["rbac"] = &clientcmdapi.Context{Cluster: "rbac", AuthInfo: "rbac"}
	kc.CurrentContext = "rbac"
	kcFile := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kcFile); err != nil {
		t.Fatal(err)
	}

	instance := "rbac-" + randSuffix()
	p := startProc(t, bin, processEnv(t.TempDir(), "DEPLOYPLANE_API_KEY=k"), "-addr", "127.0.0.1:0", "-db", ":memory:",
		"-kubeconfig", kcFile, "-k8s-namespaces", deploy, "-k8s-instance", instance, "-sim-agents=false", "-rate-limit", "0")
	var url string
	select {
	case url = <-p.log.addr:
	case <-p.done:
		t.Fatalf("the server exited: %v\n%s", p.err, p.log)
	case <-nearDeadline(t):
		t.Fatalf("the server did not start:\n%s", p.log)
	}
	t.Cleanup(func() { sweep(cli, instance) })
	status, l := call(t, "POST", url+"/v2/listeners", "k", `{"compute_type": "k8s", "compute_id": "rbac",
		"compute_config": {"k8s_namespaces": ["`+deploy+`"]}}`)
	if status != 201 {
		t.Fatalf("create listener: %d %v", status, l)
	}
	lid := l["id"].(string)

	// The lifecycle, with the chart's Role as installed.
	dep, rev := rbacDeployment(t, url, lid)
	waitStatus(t, url, "k", dep, rev, "DEPLOYED")
	rev = patchRevision(t, url, dep, rbacSpec(lid, 1, 1, 1), "example.com/agent:v2", "s3cret-2")
	waitStatus(t, url, "k", dep, rev, "DEPLOYED")
	rev = patchRevision(t, url, dep, rbacSpec(lid, 1, 1, 2), "example.com/agent:v2", "s3cret-2")
	waitStatus(t, url, "k", dep, rev, "DEPLOY_FAILED")
	if _, r := call(t, "GET", url+"/v2/deployments/"+dep+"/revisions/"+rev, "k", ""); !strings.Contains(fmt.Sprint(r["status_message"]),
		"The cluster refused to change the database's volume from 1Gi to 2Gi") {
		t.Errorf("the failed revision says %q, want the cluster's refusal of the volume's new size", r["status_message"])
	}
	if status, body := call(t, "DELETE", url+"/v2/deployments/"+dep, "k", ""); status != 202 && status != 204 {
		t.Fatalf("DELETE: %d %v", status, body)
	}
	waitGone(t, url, dep)
	if left := objectsOf(t, cli, deployk8s.LabelDeployment+"="+dep); len(left) > 0 {
		t.Errorf("objects of the deleted deployment are left: %v", left)
	}

	// What the deployer did, against what the Role grants.
	calls := rec.calls()
	used := map[grant]bool{}
	var denied, elsewhere, other []string
	for _, c := range calls {
		r, ok := c.resource()
		switch {
		case !ok:
			if !slices.Contains([]string{"/readyz", "/healthz", "/livez", "/version"}, c.path) {
				other = append(other, c.method+" "+c.path)
			}
			continue
		case c.forbidden():
			denied = append(denied, c.method+" "+c.path+": "+c.body)
		case r.namespace != deploy:
			elsewhere = append(elsewhere, c.method+" "+c.path)
		}
		used[grant(r.verb+" "+r.group+"/"+r.resource)] = true
		if r.verb == "patch" && c.status == http.StatusCreated { // server-side apply made it
			used[grant("create "+r.group+"/"+r.resource)] = true
		}
	}
	if len(denied) > 0 {
		t.Errorf("the API server refused %d requests for the chart's Role: %q", len(denied), denied)
	}
	if len(elsewhere) > 0 {
		t.Errorf("requests outside the deployments' namespace %s: %q", deploy, elsewhere)
	}
	if len(other) > 0 {
		t.Errorf("requests to other paths: %q", other)
	}
	// Granted for what this cluster does not make the deployer do (the
	// chart's README, "Permissions"): list on Events is what client-go's
	// informer falls back to where the API server does not stream a
	// watch's initial events.
	for _, g := range []grant{"list /events"} {
		if !used[g] {
			t.Logf("granted, not used here: %s", g)
			used[g] = true
		}
	}
	r, err := cli.RbacV1().Roles(deploy).Get(ctx, role, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := grantsDiff(grants(r.Rules), used); diff != "" {
		t.Errorf("the chart's Role against the %d requests of the lifecycle (used: %q): %s", len(calls), slices.Sorted(maps.Keys(used)), diff)
	}
	t.Logf("%d requests to the API server, %d grants used", len(calls), len(used))

	// One verb less: patch on Deployments.
	for i, rule := range r.Rules {
		if slices.Equal(rule.Resources, []string{"deployments"}) {
			r.Rules[i].Verbs = slices.DeleteFunc(slices.Clone(rule.Verbs), func(v string) bool { return v == "patch" })
		}
	}
	if _, err := cli.RbacV1().Roles(deploy).Update(ctx, r, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Role without patch on Deployments applies", func() (bool, string) {
		ok, why := can("patch", "apps", "deployments")()
		return !ok, why
	})
	dep, rev = rbacDeployment(t, url, lid)
	waitStatus(t, url, "k", dep, rev, "DEPLOY_FAILED")
	forbidden := fmt.Sprintf(`is forbidden: User %q cannot patch resource "deployments" in API group "apps" in the namespace %q`, user, deploy)
	_, page := call(t, "GET", url+"/v2/deployments/"+dep+"/revisions/"+rev+"/logs?type=deploy&limit=1000", "k", "")
	var lines []string
	found := false
	for _, e := range page["logs"].([]any) {
		m := e.(map[string]any)["message"].(string)
		lines = append(lines, m)
		if strings.Contains(m, forbidden) && !found {
			found = true
			t.Logf("without patch on Deployments, the deploy log says: %s", m)
		}
	}
	if !found {
		t.Errorf("the deploy log has no %q:\n%s", forbidden, strings.Join(lines, "\n"))
	}
	if status, body := call(t, "DELETE", url+"/v2/deployments/"+dep, "k", ""); status != 202 && status != 204 {
		t.Fatalf("DELETE: %d %v", status, body)
	}
	waitGone(t, url, dep)
	p.stop(t)
}

// rbacSpec is the resource_spec of TestChartRBAC's deployment: scales
// (an autoscaler and a PodDisruptionBudget while min_scale is 2 or more),
// requests and limits, the queue's, the database's and Redis's sizes,
// labels, annotations, a volume and a sidecar with its environment.
func rbacSpec(lid string, minScale, maxScale, dbGi int) string {
	return fmt.Sprintf(`{"listener_id": %q, "resource_spec": {
		"min_scale": %d, "max_scale": %d, "cpu": 0.25, "cpu_limit": 0.5, "memory_mb": 256, "memory_limit_mb": 512,
		"queue_min_scale": 1, "queue_max_scale": 2, "queue_cpu": 0.25, "queue_memory_mb": 128,
		"db_storage_gi": %d, "db_cpu": 0.25, "db_memory_mb": 256, "db_max_connections": 50, "redis_memory_mb": 64,
		"labels": {"team": "rbac"}, "annotations": {"example.com/owner": "rbac"},
		"volumes": [{"name": "scratch", "emptyDir": {}}], "volume_mounts": [{"name": "scratch", "mountPath": "/scratch"}],
		"sidecars": [{"name": "shipper", "image": "example.com/shipper:1", "env": [{"name": "LEVEL", "value": "debug"}]}]}}`,
		lid, minScale, maxScale, dbGi)
}

// rbacDeployment creates TestChartRBAC's deployment (two to three
// replicas, a secret) and answers its id and its revision's.
func rbacDeployment(t *testing.T, url, lid string) (dep, rev string) {
	t.Helper()
	status, d := call(t, "POST", url+"/v2/deployments", "k", `{"name": "rbac-`+randSuffix()+`", "source": "external_docker",
		"source_config": `+rbacSpec(lid, 2, 3, 1)+`, "source_revision_config": {"image_uri": "example.com/agent:v1"},
		"secrets": [{"name": "API_TOKEN", "value": "s3cret-1"}]}`)
	if status != 201 {
		t.Fatalf("create: %d %v", status, d)
	}
	return d["id"].(string), d["latest_revision_id"].(string)
}

// patchRevision PATCHes the deployment's source_config, image and secret
// and answers the new revision's id.
func patchRevision(t *testing.T, url, dep, sourceConfig, image, secret string) string {
	t.Helper()
	status, d := call(t, "PATCH", url+"/v2/deployments/"+dep, "k", `{"source_config": `+sourceConfig+`,
		"source_revision_config": {"image_uri": "`+image+`"}, "secrets": [{"name": "API_TOKEN", "value": "`+secret+`"}]}`)
	if status != 200 {
		t.Fatalf("PATCH: %d %v", status, d)
	}
	return d["latest_revision_id"].(string)
}

// apiRecorder is a reverse proxy in front of a test cluster's API server
// that records every request and its answer's status. It passes the
// client's credentials (a bearer token) and adds none: the API server
// authenticates and authorizes each request as the client's.
type apiRecorder struct {
	url string
	ca  []byte // the PEM certificate clients trust it by
	mu  sync.Mutex
	log []apiCall
}

// apiCall is a request the recorder passed on.
type apiCall struct {
	method, path, query string
	status              int
	body                string // of a 403 answer
}

// newAPIRecorder starts a recorder in front of the API server of the
// kubeconfig's context, until the test ends.
func newAPIRecorder(t *testing.T, kubeconfig, kubeContext string) *apiRecorder {
	t.Helper()
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: kubeContext}).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	ca := cfg.TLSClientConfig.CAData
	if len(ca) == 0 {
		if ca, err = os.ReadFile(cfg.TLSClientConfig.CAFile); err != nil {
			t.Fatal(err)
		}
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatalf("no CA certificate in %s's", kubeContext)
	}
	upstream, err := neturl.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	rec := &apiRecorder{}
	// The CA only: no client certificate, so that the API server sees
	// the client's token and nothing else.
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	rp := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(upstream); r.Out.Host = upstream.Host },
		Transport:     tr,
		FlushInterval: -1, // watches stream
		ModifyResponse: func(resp *http.Response) error {
			c := apiCall{method: resp.Request.Method, path: resp.Request.URL.Path, query: resp.Request.URL.RawQuery, status: resp.StatusCode}
			if resp.StatusCode == http.StatusForbidden {
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					return err
				}
				resp.Body, c.body = io.NopCloser(bytes.NewReader(b)), string(b)
			}
			rec.mu.Lock()
			rec.log = append(rec.log, c)
			rec.mu.Unlock()
			return nil
		},
	}
	// TLS: a kubeconfig's credentials go to https servers only.
	srv := httptest.NewTLSServer(rp)
	t.Cleanup(func() {
		srv.CloseClientConnections() // a watch left open
		srv.Close()
	})
	rec.url = srv.URL
	rec.ca = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return rec
}

// calls are the requests recorded so far.
func (r *apiRecorder) calls() []apiCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.log)
}

// forbidden: the API server's authorizer refused the request (RBAC's
// message names the user and what it cannot do; an admission plugin's
// 403 does not).
func (c apiCall) forbidden() bool {
	return c.status == http.StatusForbidden && strings.Contains(c.body, `User \"`) && strings.Contains(c.body, " cannot ")
}

// apiResource is what the authorizer sees of a request to a resource.
type apiResource struct{ verb, group, resource, namespace string }

// resource reads the request's verb, group, resource (with its
// subresource) and namespace as the API server does; ok is false for a
// path that names no resource (/readyz, discovery).
func (c apiCall) resource() (r apiResource, ok bool) {
	parts := strings.Split(strings.Trim(c.path, "/"), "/")
	var rest []string
	switch {
	case len(parts) > 2 && parts[0] == "api":
		rest = parts[2:]
	case len(parts) > 3 && parts[0] == "apis":
		r.group, rest = parts[1], parts[3:]
	default:
		return r, false
	}
	if rest[0] == "namespaces" && len(rest) > 2 {
		r.namespace, rest = rest[1], rest[2:]
	}
	r.resource = rest[0]
	name := len(rest) > 1
	if len(rest) > 2 {
		r.resource += "/" + rest[2]
	}
	q, _ := neturl.ParseQuery(c.query)
	switch c.method {
	case http.MethodGet, http.MethodHead:
		switch {
		case name:
			r.verb = "get"
		case q.Get("watch") == "true" || q.Get("watch") == "1":
			r.verb = "watch"
		default:
			r.verb = "list"
		}
	case http.MethodPost:
		r.verb = "create"
	case http.MethodPut:
		r.verb = "update"
	case http.MethodPatch:
		r.verb = "patch"
	case http.MethodDelete:
		r.verb = "delete"
		if !name {
			r.verb = "deletecollection"
		}
	default:
		r.verb = strings.ToLower(c.method)
	}
	return r, true
}

// TestAPICallResource: the recorder reads requests as the API server's
// authorizer does.
func TestAPICallResource(t *testing.T) {
	for _, c := range []struct {
		call apiCall
		want apiResource
		ok   bool
	}{
		{apiCall{method: "GET", path: "/api/v1/namespaces/ns/secrets/s"}, apiResource{"get", "", "secrets", "ns"}, true},
		{apiCall{method: "GET", path: "/api/v1/namespaces/ns/events", query: "watch=true&resourceVersion=1"},
			apiResource{"watch", "", "events", "ns"}, true},
		{apiCall{method: "GET", path: "/api/v1/configmaps", query: "labelSelector=a%3Db"}, apiResource{"list", "", "configmaps", ""}, true},
		{apiCall{method: "PATCH", path: "/apis/apps/v1/namespaces/ns/deployments/d"}, apiResource{"patch", "apps", "deployments", "ns"}, true},
		{apiCall{method: "PATCH", path: "/apis/apps/v1/namespaces/ns/deployments/d/scale"},
			apiResource{"patch", "apps", "deployments/scale", "ns"}, true},
		{apiCall{method: "DELETE", path: "/apis/gateway.networking.k8s.io/v1/namespaces/ns/httproutes/r"},
			apiResource{"delete", "gateway.networking.k8s.io", "httproutes", "ns"}, true},
		{apiCall{method: "DELETE", path: "/api/v1/namespaces/ns/pods"}, apiResource{"deletecollection", "", "pods", "ns"}, true},
		{apiCall{method: "GET", path: "/api/v1/namespaces/ns"}, apiResource{"get", "", "namespaces", ""}, true},
		{apiCall{method: "POST", path: "/api/v1/namespaces/ns/serviceaccounts/sa/token"},
			apiResource{"create", "", "serviceaccounts/token", "ns"}, true},
		{apiCall{method: "GET", path: "/readyz"}, apiResource{}, false},
		{apiCall{method: "GET", path: "/apis/apps/v1"}, apiResource{}, false},
		{apiCall{method: "GET", path: "/api/v1"}, apiResource{}, false},
	} {
		if got, ok := c.call.resource(); got != c.want || ok != c.ok {
			t.Errorf("%s %s?%s: %+v %v, want %+v %v", c.call.method, c.call.path, c.call.query, got, ok, c.want, c.ok)
		}
	}
}
