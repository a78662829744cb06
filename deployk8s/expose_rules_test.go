package deployk8s_test

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deployk8s"
)

// offline is a client of no cluster: New does not contact it.
func offline(t *testing.T) kubernetes.Interface {
	t.Helper()
	cli, err := kubernetes.NewForConfig(&rest.Config{Host: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	return cli
}

// TestExposeRules: New refuses the exposures that Expose.Validate
// refuses, each with an error wrapping ErrExpose that says what is wrong,
// and takes the others.
func TestExposeRules(t *testing.T) {
	ingress := func(host, path string) deployk8s.Expose {
		return deployk8s.Expose{Kind: deployk8s.ExposeIngress, HostTemplate: host, PathTemplate: path}
	}
	route := func(host, path string) deployk8s.Expose {
		return deployk8s.Expose{Kind: deployk8s.ExposeHTTPRoute, HostTemplate: host, PathTemplate: path,
			Gateway: deployk8s.GatewayRef{Namespace: "gateways", Name: "public"}}
	}
	with := func(e deployk8s.Expose, f func(*deployk8s.Expose)) deployk8s.Expose { f(&e); return e }
	cases := []struct {
		name   string
		expose deployk8s.Expose
		want   string // in the error; "" for none
	}{
		{"ingress by name", ingress("{name}.agents.example.com", ""), ""},
		{"route by name and tenant", route("{name}-{tenant}.agents.example.com", ""), ""},
		{"one host, a path each", ingress("agents.example.com", "/{tenant}/{name}"), ""},
		{"uppercase literal", ingress("{id}.Agents.Example.COM", ""), ""},
		{"namespace in the host", route("{id}.{namespace}.example.com", "/x/{name}"), ""},
		{"tls issuer", with(ingress("{name}.example.com", ""), func(e *deployk8s.Expose) {
			e.TLSIssuer, e.IngressClassName = &deployk8s.Issuer{Kind: "ClusterIssuer", Name: "letsencrypt"}, "nginx"
			e.Annotations = map[string]string{"nginx.ingress.kubernetes.io/proxy-body-size": "8m"}
		}), ""},
		{"route with a section", with(route("{id}.example.com", ""), func(e *deployk8s.Expose) { e.Gateway.SectionName = "https" }), ""},

		{"no kind", deployk8s.Expose{HostTemplate: "{id}.example.com"}, "neither Ingress nor HTTPRoute"},
		{"other kind", with(ingress("{id}.example.com", ""), func(e *deployk8s.Expose) { e.Kind = "Service" }), `Kind "Service"`},
		{"no host", ingress("", "/{id}"), "a host template is required"},
		{"unknown placeholder", ingress("{nope}.example.com", ""), "unknown placeholder {nope}"},
		{"placeholders are lowercase", ingress("{ID}.example.com", ""), "unknown placeholder {ID}"},
		{"empty placeholder", ingress("{}.example.com", "/{id}"), "unknown placeholder {}"},
		{"unclosed", ingress("{name.example.com", ""), "a '{' without its '}' at offset 0"},
		{"nested", ingress("{{name}}.example.com", ""), "a '{' without its '}' at offset 0"},
		{"stray close", ingress("{name}}.example.com", ""), "a '}' without its '{' at offset 6"},
		{"unknown in the path", ingress("{name}.example.com", "/{tenant}/{who}"), "the path template \"/{tenant}/{who}\": unknown placeholder {who}"},
		{"one address for all", ingress("agents.example.com", ""), "give every deployment the same address"},
		{"tenant tells no deployment", ingress("{tenant}.example.com", "/{namespace}"), "give every deployment the same address"},
		{"underscore", ingress("{name}_x.example.com", ""), "no DNS names"},
		{"trailing dot", ingress("{name}.example.com.", ""), "no DNS names"},
		{"label too long", ingress("{id}-{tenant}.example.com", ""), "longer than 63 characters"},
		{"host too long", ingress("{id}."+strings.Repeat("abcdefghij.", 22)+"com", ""), "no DNS names"},
		{"ip address", ingress("10.1.2.3", "/{id}"), "is an IP address"},
		{"wildcard", ingress("*.{name}.example.com", ""), "no DNS names"},
		{"path without slash", ingress("{name}.example.com", "{id}"), "do not start with '/'"},
		{"path with a trailing slash", ingress("example.com", "/{id}/"), "end with '/'"},
		{"path of the whole host", ingress("{id}.example.com", "/"), "is the whole host"},
		{"empty segment", ingress("example.com", "/a//{id}"), "empty, '.' or '..' segment"},
		{"dot segment", ingress("example.com", "/a/../{id}"), "empty, '.' or '..' segment"},
		{"query in the path", ingress("example.com", "/{id}?x=1"), `has "?"`},
		{"space in the path", ingress("example.com", "/my {id}"), `has " "`},
		{"route without gateway", deployk8s.Expose{Kind: deployk8s.ExposeHTTPRoute, HostTemplate: "{id}.example.com"}, "needs its Gateway's name"},
		{"route with a class", with(route("{id}.example.com", ""), func(e *deployk8s.Expose) { e.IngressClassName = "nginx" }),
			"an ingress class is for an Ingress"},
		{"route with an issuer", with(route("{id}.example.com", ""), func(e *deployk8s.Expose) {
			e.TLSIssuer = &deployk8s.Issuer{Kind: "ClusterIssuer", Name: "le"}
		}), "a TLS issuer is for an Ingress"},
		{"ingress with a gateway", with(ingress("{id}.example.com", ""), func(e *deployk8s.Expose) {
			e.Gateway = deployk8s.GatewayRef{Name: "public"}
		}), "a Gateway is for an HTTPRoute"},
		{"bad gateway namespace", with(route("{id}.example.com", ""), func(e *deployk8s.Expose) { e.Gateway.Namespace = "Gate_ways" }),
			`the Gateway's namespace "Gate_ways"`},
		{"bad gateway section", with(route("{id}.example.com", ""), func(e *deployk8s.Expose) { e.Gateway.SectionName = "HTTPS" }),
			`the Gateway's section "HTTPS"`},
		{"bad class", with(ingress("{id}.example.com", ""), func(e *deployk8s.Expose) { e.IngressClassName = "Nginx!" }),
			`the ingress class "Nginx!"`},
		{"issuer kind", with(ingress("{id}.example.com", ""), func(e *deployk8s.Expose) {
			e.TLSIssuer = &deployk8s.Issuer{Kind: "Certificate", Name: "le"}
		}), `"Certificate" is neither ClusterIssuer nor Issuer`},
		{"issuer without name", with(ingress("{id}.example.com", ""), func(e *deployk8s.Expose) {
			e.TLSIssuer = &deployk8s.Issuer{Kind: "Issuer"}
		}), `the TLS issuer's name ""`},
		{"bad annotation", with(ingress("{id}.example.com", ""), func(e *deployk8s.Expose) {
			e.Annotations = map[string]string{"not a key!": "v"}
		}), "annotations"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := c.expose
			verr := e.Validate()
			_, err := deployk8s.New(&deployk8s.Options{Client: offline(t), Expose: &e})
			if c.want == "" {
				if err != nil || verr != nil {
					t.Fatalf("New: %v; Validate: %v; want neither", err, verr)
				}
				return
			}
			if err == nil || !errors.Is(err, deployk8s.ErrExpose) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("New: %v, want an ErrExpose saying %q", err, c.want)
			}
			if verr == nil || verr.Error() != err.Error() {
				t.Errorf("Validate: %v, want New's error", verr)
			}
		})
	}
}

// TestExposeAddress: the url a deployment reports is its Service's
// without Expose, else the templates' host (lowercased) and path (as it
// is), https with a TLS issuer or HTTPS.
func TestExposeAddress(t *testing.T) {
	const tenant, ns = "Acme", "agents"
	dep := &controlplane.Deployment{ID: "0190a2b4-0000-7000-8000-0000000000aa", Name: "My.Bot-1"}
	cases := []struct {
		name   string
		expose *deployk8s.Expose
		want   string
	}{
		{"none", nil, "http://dp-0190a2b4-0000-7000-8000-0000000000aa.agents.svc.cluster.local:8000"},
		{"host by name", &deployk8s.Expose{Kind: deployk8s.ExposeIngress, HostTemplate: "{name}.Agents.example.com"},
			"http://my.bot-1.agents.example.com"},
		{"tls issuer", &deployk8s.Expose{Kind: deployk8s.ExposeIngress, HostTemplate: "{id}.example.com",
			TLSIssuer: &deployk8s.Issuer{Kind: "Issuer", Name: "le"}}, "https://0190a2b4-0000-7000-8000-0000000000aa.example.com"},
		{"https", &deployk8s.Expose{Kind: deployk8s.ExposeHTTPRoute, HostTemplate: "{namespace}.example.com", PathTemplate: "/{tenant}/{name}",
			Gateway: deployk8s.GatewayRef{Name: "public"}, HTTPS: true}, "https://agents.example.com/Acme/My.Bot-1"},
		{"every placeholder", &deployk8s.Expose{Kind: deployk8s.ExposeIngress, HostTemplate: "{name}.{namespace}.{tenant}.example.com",
			PathTemplate: "/{id}"}, "http://my.bot-1.agents.acme.example.com/0190a2b4-0000-7000-8000-0000000000aa"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := deployk8s.New(&deployk8s.Options{Client: offline(t), Expose: c.expose})
			if err != nil {
				t.Fatal(err)
			}
			if got := d.Address(tenant, ns, dep); got != c.want {
				t.Errorf("Address: %q, want %q", got, c.want)
			}
		})
	}
}

// TestExposeOptionsKept: New keeps its own copy of Options.Expose: a
// caller that changes its Expose afterwards changes nothing.
func TestExposeOptionsKept(t *testing.T) {
	e := &deployk8s.Expose{Kind: deployk8s.ExposeIngress, HostTemplate: "{id}.example.com",
		TLSIssuer: &deployk8s.Issuer{Kind: "ClusterIssuer", Name: "le"}}
	d, err := deployk8s.New(&deployk8s.Options{Client: offline(t), Expose: e})
	if err != nil {
		t.Fatal(err)
	}
	e.HostTemplate, e.TLSIssuer.Kind = "{name}.example.org", "nope"
	dep := &controlplane.Deployment{ID: "0190a2b4-0000-7000-8000-0000000000aa", Name: "bot"}
	if got, want := d.Address("t", "ns", dep), "https://0190a2b4-0000-7000-8000-0000000000aa.example.com"; got != want {
		t.Errorf("Address after the caller changed its Expose: %q, want %q", got, want)
	}
}
