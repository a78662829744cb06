package deployk8s

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	k8serrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"

	"github.com/deployplane/deployplane/controlplane"
)

// ExposeKind is the kind of object that exposes a deployment outside the
// cluster.
type ExposeKind string

// The kinds of Expose.
const (
	// ExposeIngress: an Ingress (networking.k8s.io/v1).
	ExposeIngress ExposeKind = "Ingress"
	// ExposeHTTPRoute: a Gateway API HTTPRoute
	// (gateway.networking.k8s.io/v1), whose CRDs the cluster must have.
	ExposeHTTPRoute ExposeKind = "HTTPRoute"
)

// Expose makes each deployment reachable from outside the cluster: an
// Ingress or an HTTPRoute "dp-<id>" in front of its Service, and the url
// its revisions report is that external address,
// scheme://host[path] (a custom_url still wins).
//
// HostTemplate and PathTemplate make the address of a deployment from
// placeholders: {name} (the deployment's name), {id} (its id),
// {namespace} and {tenant}. A host is lowercased (DNS names are
// case-insensitive; the API server wants them lowercase). New refuses a
// template with another placeholder, a '{' or '}' that is none, or one
// whose hosts or paths cannot be valid; a host that the values of one
// deployment make invalid is refused by the API server, which fails that
// revision saying so.
type Expose struct {
	// Kind is ExposeIngress or ExposeHTTPRoute.
	Kind ExposeKind
	// IngressClassName is the Ingress's class ("": the cluster's
	// default). Ingress only.
	IngressClassName string
	// Gateway is the HTTPRoute's parent. HTTPRoute only, and required.
	Gateway GatewayRef
	// HostTemplate makes the host of each deployment, such as
	// "{name}.agents.example.com". Required: it may be one host for
	// all when PathTemplate tells the deployments apart. The two
	// together must use {id} or {name} (with {tenant} when several
	// tenants share the cluster: names are unique within a tenant).
	HostTemplate string
	// PathTemplate makes a path prefix, such as "/{id}" ("": the whole
	// host). It starts with '/' and does not end with one. An HTTPRoute
	// strips it before the request reaches the server (a URLRewrite
	// filter); an Ingress passes the path as it is, unless the
	// controller rewrites it (its annotations, in Annotations).
	PathTemplate string
	// HTTPS makes the url https: TLS ends at the Gateway's listener or at
	// the ingress controller (its default certificate). TLSIssuer
	// implies it.
	HTTPS bool
	// TLSIssuer has cert-manager issue each Ingress's certificate (into
	// the Secret "dp-<id>-tls"): the Ingress gets the annotation
	// cert-manager.io/cluster-issuer or cert-manager.io/issuer and a TLS
	// section for its host. Ingress only: an HTTPRoute's TLS is its
	// Gateway listener's.
	TLSIssuer *Issuer
	// Annotations are set on each Ingress or HTTPRoute: the controller's
	// settings. The resource_spec's annotations are not, since
	// controllers read annotations as their configuration, which is the
	// operator's to give, not a tenant's.
	Annotations map[string]string
}

// GatewayRef names an HTTPRoute's parent Gateway.
type GatewayRef struct {
	// Namespace is the Gateway's ("": the deployment's). Its listener
	// must allow routes from the deployments' namespaces.
	Namespace string
	// Name is the Gateway's name.
	Name string
	// SectionName names one of its listeners ("": all).
	SectionName string
}

// Issuer is a cert-manager issuer.
type Issuer struct {
	// Kind is "ClusterIssuer" or "Issuer" (of the deployment's
	// namespace).
	Kind string
	// Name is the issuer's name.
	Name string
}

// ErrExpose is wrapped by New's errors about Options.Expose.
var ErrExpose = errors.New("deployk8s: Options.Expose")

// The annotations cert-manager reads on an Ingress.
const (
	annotationClusterIssuer = "cert-manager.io/cluster-issuer"
	annotationIssuer        = "cert-manager.io/issuer"
)

// The Gateway API's group and the HTTPRoutes' path in it.
const (
	gatewayGroup   = "gateway.networking.k8s.io"
	httpRoutesPath = "/apis/" + gatewayGroup + "/v1"
)

// tlsSecretName is the Secret cert-manager keeps an Ingress's certificate
// in.
func tlsSecretName(dep string) string { return "dp-" + dep + "-tls" }

// exposeName is the Ingress's or HTTPRoute's name: the Service's.
func exposeName(dep string) string { return "dp-" + dep }

// The placeholders of the templates, by name.
var placeholders = []string{"name", "id", "namespace", "tenant"}

// template is a parsed HostTemplate or PathTemplate: literal text and
// placeholders.
type template []tmplPart

// tmplPart is literal text (key "") or a placeholder (its key).
type tmplPart struct{ lit, key string }

// parseTemplate parses s: every '{' opens a known placeholder closed by
// the next '}'; no other brace may appear.
func parseTemplate(s string) (template, error) {
	t := template{}
	for off := 0; off < len(s); {
		rest := s[off:]
		i := strings.IndexAny(rest, "{}")
		if i < 0 {
			return append(t, tmplPart{lit: rest}), nil
		}
		if i > 0 {
			t = append(t, tmplPart{lit: rest[:i]})
		}
		if rest[i] == '}' {
			return nil, fmt.Errorf("a '}' without its '{' at offset %d", off+i)
		}
		j := strings.IndexAny(rest[i+1:], "{}")
		if j < 0 || rest[i+1+j] != '}' {
			return nil, fmt.Errorf("a '{' without its '}' at offset %d", off+i)
		}
		key := rest[i+1 : i+1+j]
		if !slices.Contains(placeholders, key) {
			return nil, fmt.Errorf("unknown placeholder {%s} (known: {name}, {id}, {namespace}, {tenant})", key)
		}
		t = append(t, tmplPart{key: key})
		off += i + j + 2
	}
	return t, nil
}

// uses says whether the template has the placeholder key.
func (t template) uses(key string) bool {
	return slices.ContainsFunc(t, func(p tmplPart) bool { return p.key == key })
}

// render puts the values in the placeholders, once: a value that holds a
// placeholder's text is not expanded again.
func (t template) render(values map[string]string) string {
	var b strings.Builder
	for _, p := range t {
		if p.key == "" {
			b.WriteString(p.lit)
		} else {
			b.WriteString(values[p.key])
		}
	}
	return b.String()
}

// sampleValues are the placeholders' values New checks templates with: a
// short name, ids and a tenant of a UUID's length, the default namespace.
var sampleValues = map[string]string{"name": "agent", "id": "0190a2b4-0000-7000-8000-000000000001",
	"namespace": "default", "tenant": "0190a2b4-0000-7000-8000-000000000002"}

// exposure is a validated Expose with its parsed templates.
type exposure struct {
	Expose
	host, path template
}

// Validate checks the exposure as New does (see Expose); its errors wrap
// ErrExpose.
func (e *Expose) Validate() error {
	_, err := compileExpose(e)
	return err
}

// compileExpose validates e and parses its templates.
func compileExpose(e *Expose) (*exposure, error) {
	bad := func(format string, args ...any) (*exposure, error) {
		return nil, fmt.Errorf("%w: %s", ErrExpose, fmt.Sprintf(format, args...))
	}
	x := &exposure{Expose: *e}
	switch e.Kind {
	case ExposeIngress:
		if e.Gateway != (GatewayRef{}) {
			return bad("a Gateway is for an HTTPRoute, not an Ingress")
		}
		if e.IngressClassName != "" {
			if errs := validation.IsDNS1123Subdomain(e.IngressClassName); len(errs) > 0 {
				return bad("the ingress class %q: %s", e.IngressClassName, strings.Join(errs, "; "))
			}
		}
	case ExposeHTTPRoute:
		if e.IngressClassName != "" {
			return bad("an ingress class is for an Ingress, not an HTTPRoute (whose Gateway has its class)")
		}
		if e.TLSIssuer != nil {
			return bad("a TLS issuer is for an Ingress: an HTTPRoute's TLS is its Gateway listener's (set HTTPS, and give the Gateway its certificate)")
		}
		if e.Gateway.Name == "" {
			return bad("an HTTPRoute needs its Gateway's name")
		}
		for _, f := range [][2]string{{"name", e.Gateway.Name}, {"section", e.Gateway.SectionName}} {
			if f[1] != "" {
				if errs := validation.IsDNS1123Subdomain(f[1]); len(errs) > 0 {
					return bad("the Gateway's %s %q: %s", f[0], f[1], strings.Join(errs, "; "))
				}
			}
		}
		if ns := e.Gateway.Namespace; ns != "" {
			if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
				return bad("the Gateway's namespace %q: %s", ns, strings.Join(errs, "; "))
			}
		}
	default:
		return bad("Kind %q is neither %s nor %s", e.Kind, ExposeIngress, ExposeHTTPRoute)
	}
	if i := e.TLSIssuer; i != nil {
		if i.Kind != "ClusterIssuer" && i.Kind != "Issuer" {
			return bad("the TLS issuer's kind %q is neither ClusterIssuer nor Issuer", i.Kind)
		}
		if errs := validation.IsDNS1123Subdomain(i.Name); len(errs) > 0 {
			return bad("the TLS issuer's name %q: %s", i.Name, strings.Join(errs, "; "))
		}
	}
	if errs := apivalidation.ValidateAnnotations(e.Annotations, field.NewPath("annotations")); len(errs) > 0 {
		return bad("%s", errs.ToAggregate().Error())
	}
	if e.HostTemplate == "" {
		return bad("a host template is required (it may be one host when the path template tells deployments apart)")
	}
	var err error
	if x.host, err = parseTemplate(e.HostTemplate); err != nil {
		return bad("the host template %q: %v", e.HostTemplate, err)
	}
	if x.path, err = parseTemplate(e.PathTemplate); err != nil {
		return bad("the path template %q: %v", e.PathTemplate, err)
	}
	if !x.host.uses("id") && !x.host.uses("name") && !x.path.uses("id") && !x.path.uses("name") {
		return bad("the host template %q and path template %q give every deployment the same address: use {id}, or {name} "+
			"(with {tenant} when several tenants share the cluster)", e.HostTemplate, e.PathTemplate)
	}
	if msg := hostProblem(strings.ToLower(x.host.render(sampleValues))); msg != "" {
		return bad("the host template %q gives hosts that are no DNS names: %s", e.HostTemplate, msg)
	}
	if e.PathTemplate != "" {
		for _, p := range x.path {
			if i := strings.IndexFunc(p.lit, func(r rune) bool { return !isPathRune(r) }); i >= 0 {
				return bad("the path template %q has %q: a path may have letters, digits, '/', '-', '.', '_' and '~'", e.PathTemplate, p.lit[i:i+1])
			}
		}
		if msg := pathProblem(x.path.render(sampleValues)); msg != "" {
			return bad("the path template %q gives paths such as %q, which %s", e.PathTemplate, x.path.render(sampleValues), msg)
		}
	}
	x.Annotations = maps.Clone(e.Annotations)
	if e.TLSIssuer != nil {
		iss := *e.TLSIssuer
		x.TLSIssuer = &iss
	}
	return x, nil
}

// hostProblem says what makes host no DNS name, or "".
func hostProblem(host string) string {
	if errs := validation.IsDNS1123Subdomain(host); len(errs) > 0 {
		return fmt.Sprintf("%q: %s", host, strings.Join(errs, "; "))
	}
	if net.ParseIP(host) != nil {
		return fmt.Sprintf("%q is an IP address", host)
	}
	return labelProblem(host)
}

// labelProblem says which label of host is too long for DNS, or "". The
// API server checks the rest of a host, but not this.
func labelProblem(host string) string {
	for l := range strings.SplitSeq(host, ".") {
		if len(l) > validation.DNS1123LabelMaxLength {
			return fmt.Sprintf("%q: its label %q is longer than %d characters", host, l, validation.DNS1123LabelMaxLength)
		}
	}
	return ""
}

func isPathRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/-._~", r)
}

// pathProblem says what makes p no path prefix of a url, or "".
func pathProblem(p string) string {
	switch {
	case !strings.HasPrefix(p, "/"):
		return "do not start with '/'"
	case p == "/":
		return "is the whole host: leave the path template empty"
	case strings.HasSuffix(p, "/"):
		return "end with '/'"
	}
	for seg := range strings.SplitSeq(p[1:], "/") {
		if seg == "" || seg == "." || seg == ".." {
			return "have an empty, '.' or '..' segment"
		}
	}
	return ""
}

// address is where a deployment is reached from outside the cluster.
type address struct {
	host, path string // path "" for the whole host
	url        string
}

// addressOf renders the exposure's address of a deployment.
func (x *exposure) addressOf(tenant, ns string, dep *controlplane.Deployment) address {
	v := map[string]string{"name": dep.Name, "id": dep.ID, "namespace": ns, "tenant": tenant}
	a := address{host: strings.ToLower(x.host.render(v)), path: x.path.render(v)}
	scheme := "http"
	if x.HTTPS || x.TLSIssuer != nil {
		scheme = "https"
	}
	a.url = scheme + "://" + a.host + a.path
	return a
}

// Address is the url a deployment's revisions report on this cluster:
// its external address when Options.Expose is set, else its Service's
// (URL). ns is the namespace it runs in (Namespace).
func (d *Deployer) Address(tenant, ns string, dep *controlplane.Deployment) string {
	if d.expose == nil {
		return d.URL(ns, dep.ID)
	}
	return d.expose.addressOf(tenant, ns, dep).url
}

// exposeMeta are the labels, annotations and owner of an Ingress or
// HTTPRoute: the resource_spec's labels and this package's, and the
// exposure's annotations (not the resource_spec's: see Expose).
func (o *objects) exposeMeta() (labels, annotations map[string]string) {
	x := o.d.expose
	annotations = maps.Clone(x.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	if x.TLSIssuer != nil {
		delete(annotations, annotationClusterIssuer)
		delete(annotations, annotationIssuer)
		k := annotationIssuer
		if x.TLSIssuer.Kind == "ClusterIssuer" {
			k = annotationClusterIssuer
		}
		annotations[k] = x.TLSIssuer.Name
	}
	annotations[AnnotationTenant] = o.w.Tenant
	return o.labels(componentAPI, false), annotations
}

// address is the deployment's external address (o.d.expose is set).
func (o *objects) address() address {
	return o.d.expose.addressOf(o.w.Tenant, o.ns, &o.w.Deployment)
}

// ingress is the deployment's Ingress: its host (and path prefix) to its
// Service, with a certificate from the TLS issuer when there is one.
func (o *objects) ingress() *networkingv1ac.IngressApplyConfiguration {
	x, dep, a := o.d.expose, o.w.Deployment.ID, o.address()
	lb, ann := o.exposeMeta()
	in := networkingv1ac.Ingress(exposeName(dep), o.ns).WithLabels(lb).WithAnnotations(ann)
	if o.owner != "" {
		in.WithOwnerReferences(o.ownerReference())
	}
	path := a.path
	if path == "" {
		path = "/"
	}
	spec := networkingv1ac.IngressSpec().WithRules(networkingv1ac.IngressRule().WithHost(a.host).
		WithHTTP(networkingv1ac.HTTPIngressRuleValue().WithPaths(networkingv1ac.HTTPIngressPath().
			WithPath(path).WithPathType(networkingv1.PathTypePrefix).
			WithBackend(networkingv1ac.IngressBackend().WithService(networkingv1ac.IngressServiceBackend().
				WithName(serviceName(dep)).WithPort(networkingv1ac.ServiceBackendPort().WithNumber(o.d.o.ServerPort)))))))
	if x.IngressClassName != "" {
		spec.WithIngressClassName(x.IngressClassName)
	}
	if x.TLSIssuer != nil {
		spec.WithTLS(networkingv1ac.IngressTLS().WithHosts(a.host).WithSecretName(tlsSecretName(dep)))
	}
	return in.WithSpec(spec)
}

// httpRoute is the deployment's HTTPRoute, as the JSON object applied:
// its host (and path prefix, stripped) from the Gateway to its Service.
func (o *objects) httpRoute() map[string]any {
	x, dep, a := o.d.expose, o.w.Deployment.ID, o.address()
	lb, ann := o.exposeMeta()
	meta := map[string]any{"name": exposeName(dep), "namespace": o.ns, "labels": lb, "annotations": ann}
	if o.owner != "" {
		meta["ownerReferences"] = []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"name": ownerName(dep), "uid": string(o.owner), "blockOwnerDeletion": true}}
	}
	parent := map[string]any{"group": gatewayGroup, "kind": "Gateway", "name": x.Gateway.Name}
	if x.Gateway.Namespace != "" {
		parent["namespace"] = x.Gateway.Namespace
	}
	if x.Gateway.SectionName != "" {
		parent["sectionName"] = x.Gateway.SectionName
	}
	path := a.path
	if path == "" {
		path = "/"
	}
	rule := map[string]any{
		"matches":     []any{map[string]any{"path": map[string]any{"type": "PathPrefix", "value": path}}},
		"backendRefs": []any{map[string]any{"group": "", "kind": "Service", "name": serviceName(dep), "port": int64(o.d.o.ServerPort)}},
	}
	if a.path != "" {
		rule["filters"] = []any{map[string]any{"type": "URLRewrite", "urlRewrite": map[string]any{
			"path": map[string]any{"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}}}}
	}
	return map[string]any{"apiVersion": gatewayGroup + "/v1", "kind": "HTTPRoute", "metadata": meta,
		"spec": map[string]any{"parentRefs": []any{parent}, "hostnames": []any{a.host}, "rules": []any{rule}}}
}

// disrupted: the API server has min_scale 2 or more, so a
// PodDisruptionBudget keeps one replica through node drains.
func (o *objects) disrupted() bool {
	lo, _ := o.scale(componentAPI)
	return lo >= 2
}

// pdb keeps one of the API server's pods available through voluntary
// disruptions (node drains).
func (o *objects) pdb() *policyv1ac.PodDisruptionBudgetApplyConfiguration {
	p := withMeta(o, policyv1ac.PodDisruptionBudget(apiName(o.w.Deployment.ID), o.ns), componentAPI, false)
	return p.WithSpec(policyv1ac.PodDisruptionBudgetSpec().WithMinAvailable(intstr.FromInt32(1)).
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(o.selector(componentAPI))))
}

// ownerReference is the reference to the deployment's owner ConfigMap.
func (o *objects) ownerReference() *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().WithAPIVersion("v1").WithKind("ConfigMap").
		WithName(ownerName(o.w.Deployment.ID)).WithUID(o.owner).WithBlockOwnerDeletion(true)
}

// exposeProblem says why the deployment cannot have the address the
// templates give it, as a revision's failure, or "". The API server
// refuses a host that is no DNS name; a label longer than DNS allows it
// takes.
func (o *objects) exposeProblem() string {
	if o.d.expose == nil || o.exposeUnknown {
		return ""
	}
	if msg := labelProblem(o.address().host); msg != "" {
		return fmt.Sprintf("The host template %q gives this deployment a host that is no DNS name: %s.", o.d.expose.HostTemplate, msg)
	}
	return ""
}

// exposeNote says, for a refusal of the Ingress or HTTPRoute, which host
// and path the templates gave.
func (o *objects) exposeNote() string {
	x, a := o.d.expose, o.address()
	note := fmt.Sprintf(" (host %q from the host template %q", a.host, x.HostTemplate)
	if x.PathTemplate != "" {
		note += fmt.Sprintf(", path %q from the path template %q", a.path, x.PathTemplate)
	}
	return note + ")"
}

// The HTTPRoutes go through the API server's REST interface (the
// Gateway API is CRDs, which the typed client does not know): JSON in,
// JSON out, with the typed client's connection, credentials and rate
// limits.

// applyHTTPRoute applies an HTTPRoute (httpRoute) with server-side apply.
// A cluster without the Gateway API's CRDs refuses it saying so.
func (d *Deployer) applyHTTPRoute(ctx context.Context, ns string, route map[string]any) error {
	b, err := json.Marshal(route)
	if err != nil {
		return err
	}
	name, _ := route["metadata"].(map[string]any)["name"].(string)
	err = d.cli.CoreV1().RESTClient().Patch(types.ApplyPatchType).AbsPath(httpRoutesPath, "namespaces", ns, "httproutes", name).
		Param("fieldManager", d.o.FieldManager).Param("force", "true").SetHeader("Accept", "application/json").
		Body(b).Do(ctx).Error()
	if k8serrors.IsNotFound(err) {
		// Server-side apply creates what is missing: only the kind can be.
		return &k8serrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusNotFound,
			Reason: metav1.StatusReasonNotFound,
			Message: "the cluster has no HTTPRoute (gateway.networking.k8s.io/v1): install the Gateway API's CRDs " +
				"(standard channel) or expose deployments with an Ingress"}}
	}
	return err
}

// deleteHTTPRoute deletes an HTTPRoute; one that does not exist, or a
// cluster without HTTPRoutes, is no error.
func (d *Deployer) deleteHTTPRoute(ctx context.Context, ns, name string) error {
	err := d.cli.CoreV1().RESTClient().Delete().AbsPath(httpRoutesPath, "namespaces", ns, "httproutes", name).
		SetHeader("Accept", "application/json").Do(ctx).Error()
	return absentOK(err)
}

// listHTTPRoutes lists the HTTPRoutes of namespace ns (every namespace
// when "") that match the label selector, at most limit (0: all). A
// cluster without HTTPRoutes has none.
func (d *Deployer) listHTTPRoutes(ctx context.Context, ns, selector string, limit int64) ([]unstructured.Unstructured, error) {
	path := []string{httpRoutesPath, "httproutes"}
	if ns != "" {
		path = []string{httpRoutesPath, "namespaces", ns, "httproutes"}
	}
	req := d.cli.CoreV1().RESTClient().Get().AbsPath(path...).Param("labelSelector", selector).
		SetHeader("Accept", "application/json")
	if limit > 0 {
		req.Param("limit", strconv.FormatInt(limit, 10))
	}
	raw, err := req.Do(ctx).Raw()
	if err != nil {
		return nil, absentOK(err)
	}
	var l unstructured.UnstructuredList
	if err := l.UnmarshalJSON(raw); err != nil {
		return nil, fmt.Errorf("deployk8s: the HTTPRoutes' list: %w", err)
	}
	return l.Items, nil
}

// absentOK turns the errors that say there is nothing of a kind this
// package exposes deployments with (not found: the object, or the kind in
// this cluster; forbidden: a grant without that kind, so nothing of it was
// made) into nil.
func absentOK(err error) error {
	if k8serrors.IsNotFound(err) || k8serrors.IsForbidden(err) {
		return nil
	}
	return err
}
