package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/deployplane/deployplane/deployk8s"
)

// TestK8sExposeFlags: the -k8s-* flags, the server's and the agent's,
// make the deployk8s.Expose of the Kubernetes deployers, or a usage error
// that names what is wrong.
func TestK8sExposeFlags(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want *deployk8s.Expose
		msg  string // in the usage error
	}{
		{"none", nil, nil, ""},
		{"none said", []string{"-k8s-expose", "none"}, nil, ""},
		{"ingress", []string{"-k8s-expose", "ingress", "-k8s-host-template", "{name}.agents.example.com", "-k8s-ingress-class", "nginx",
			"-k8s-tls-issuer", "ClusterIssuer/letsencrypt", "-k8s-expose-annotation", "a.example.com/x=1", "-k8s-expose-annotation", "b=two=2"},
			&deployk8s.Expose{Kind: deployk8s.ExposeIngress, HostTemplate: "{name}.agents.example.com", IngressClassName: "nginx",
				TLSIssuer: &deployk8s.Issuer{Kind: "ClusterIssuer", Name: "letsencrypt"}, Annotations: map[string]string{"a.example.com/x": "1", "b": "two=2"}}, ""},
		{"httproute", []string{"-k8s-expose", "httproute", "-k8s-host-template", "agents.example.com", "-k8s-path-template", "/{id}",
			"-k8s-gateway", "gateways/public", "-k8s-gateway-section", "https", "-k8s-https"},
			&deployk8s.Expose{Kind: deployk8s.ExposeHTTPRoute, HostTemplate: "agents.example.com", PathTemplate: "/{id}", HTTPS: true,
				Gateway: deployk8s.GatewayRef{Namespace: "gateways", Name: "public", SectionName: "https"}}, ""},
		{"gateway without namespace", []string{"-k8s-expose", "httproute", "-k8s-host-template", "{id}.example.com", "-k8s-gateway", "public"},
			&deployk8s.Expose{Kind: deployk8s.ExposeHTTPRoute, HostTemplate: "{id}.example.com", Gateway: deployk8s.GatewayRef{Name: "public"}}, ""},

		{"unknown kind", []string{"-k8s-expose", "service"}, nil, `-k8s-expose must be none, ingress or httproute, not "service"`},
		{"settings without exposure", []string{"-k8s-host-template", "{name}.example.com"}, nil, "need -k8s-expose ingress or -k8s-expose httproute"},
		{"no host", []string{"-k8s-expose", "ingress"}, nil, "-k8s-expose ingress: a host template is required"},
		{"unknown placeholder", []string{"-k8s-expose", "ingress", "-k8s-host-template", "{app}.example.com"}, nil,
			`-k8s-expose ingress: the host template "{app}.example.com": unknown placeholder {app}`},
		{"bad path", []string{"-k8s-expose", "ingress", "-k8s-host-template", "example.com", "-k8s-path-template", "{id}"}, nil,
			"do not start with '/'"},
		{"route without gateway", []string{"-k8s-expose", "httproute", "-k8s-host-template", "{id}.example.com"}, nil, "needs its Gateway's name"},
		{"section without gateway", []string{"-k8s-expose", "httproute", "-k8s-host-template", "{id}.example.com", "-k8s-gateway-section", "https"},
			nil, "-k8s-gateway-section needs -k8s-gateway"},
		{"issuer without kind", []string{"-k8s-expose", "ingress", "-k8s-host-template", "{id}.example.com", "-k8s-tls-issuer", "letsencrypt"},
			nil, "-k8s-tls-issuer must be ClusterIssuer/NAME or Issuer/NAME"},
		{"issuer on a route", []string{"-k8s-expose", "httproute", "-k8s-host-template", "{id}.example.com", "-k8s-gateway", "gw",
			"-k8s-tls-issuer", "Issuer/le"}, nil, "a TLS issuer is for an Ingress"},
		{"annotation twice", []string{"-k8s-expose", "ingress", "-k8s-host-template", "{id}.example.com",
			"-k8s-expose-annotation", "a=1", "-k8s-expose-annotation", "a=2"}, nil, `"a" is given twice`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// The server's flags.
			var stderr bytes.Buffer
			f := &deployerFlags{}
			fs := flag.NewFlagSet("deployplane", flag.ContinueOnError)
			fs.SetOutput(&stderr)
			f.register(fs, func(string) string { return "" })
			msg := ""
			if err := fs.Parse(c.args); err != nil {
				msg = stderr.String()
			} else {
				msg = f.check()
			}
			if c.msg == "" {
				if msg != "" || !reflect.DeepEqual(f.expose, c.want) {
					t.Fatalf("server: %q, expose %+v; want %+v", msg, f.expose, c.want)
				}
			} else if !strings.Contains(msg, c.msg) {
				t.Fatalf("server: %q, want %q", msg, c.msg)
			}

			// The agent's: the same flags, the same result.
			stderr.Reset()
			args := append([]string{"-control-plane", "https://cp.example", "-listener-id", "l1", "-deployer", "k8s"}, c.args...)
			a, err := parseAgentFlags(args, func(k string) string { return map[string]string{"DEPLOYPLANE_AGENT_TOKEN": "dpl_lt_x"}[k] }, &stderr)
			if c.msg == "" {
				if err != nil || !reflect.DeepEqual(a.deployer.expose, c.want) {
					t.Fatalf("agent: %v %s, expose %+v; want %+v", err, stderr.String(), a.deployer.expose, c.want)
				}
			} else if !errors.Is(err, errUsage) || !strings.Contains(stderr.String(), c.msg) {
				t.Fatalf("agent: %v %q, want a usage error saying %q", err, stderr.String(), c.msg)
			}
		})
	}
}

// TestK8sExposeWired: a server given -k8s-expose ingress deploys on its
// cluster with the external address as the deployment's url, which -h
// documents. Needs the test clusters (DEPLOYPLANE_TEST_KUBECONFIG).
func TestK8sExposeWired(t *testing.T) {
	var help bytes.Buffer
	if err := run(context.Background(), []string{"-h"}, func(string) string { return "" }, io.Discard, &help); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("run -h: %v", err)
	}
	for _, want := range []string{"-k8s-expose none|ingress|httproute", "-k8s-host-template T, -k8s-path-template T", "{name}", "{id}",
		"{namespace}", "{tenant}", "-k8s-ingress-class NAME", "-k8s-gateway [NAMESPACE/]NAME, -k8s-gateway-section NAME",
		"-k8s-tls-issuer ClusterIssuer/NAME|Issuer/NAME", "cert-manager.io/cluster-issuer", "-k8s-https", "-k8s-expose-annotation KEY=VALUE"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("-h does not mention %q", want)
		}
	}
	kubeconfig := os.Getenv("DEPLOYPLANE_TEST_KUBECONFIG")
	if kubeconfig == "" {
		t.Skip("DEPLOYPLANE_TEST_KUBECONFIG is not set: no Kubernetes control plane to test against (.ci/run starts two)")
	}
	url, _, _ := server(t, []string{"-db", ":memory:", "-kubeconfig", kubeconfig, "-k8s-expose", "ingress",
		"-k8s-host-template", "{name}.agents.example.com", "-k8s-tls-issuer", "ClusterIssuer/letsencrypt"},
		map[string]string{"DEPLOYPLANE_API_KEY": "k"})
	dep, rev := k8sDeployment(t, url, k8sListener(t, url, "kube-b"))
	waitStatus(t, url, "k", dep, rev, "DEPLOYED")
	_, d := call(t, "GET", url+"/v2/deployments/"+dep, "k", "")
	if want := "https://" + d["name"].(string) + ".agents.example.com"; d["url"] != want {
		t.Errorf("url %v, want %s", d["url"], want)
	}
	if status, body := call(t, "DELETE", url+"/v2/deployments/"+dep, "k", ""); status != 204 && status != 202 {
		t.Fatalf("DELETE: %d %v", status, body)
	}
	waitGone(t, url, dep)
}
