package registry_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/registry"
	"github.com/deployplane/deployplane/storemem"
)

// A registry on its own listener, whose credentials are the control
// plane's tokens; the ControlPlane resolves image tags through it.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "registry-example-")
	defer os.RemoveAll(dir)
	srv := httptest.NewUnstartedServer(nil)
	host := srv.Listener.Addr().String()

	st := storemem.New()
	defer st.Close()
	tokens := &lazy{}
	reg, err := registry.New(ctx, tokens, &registry.Options{Host: host, Dir: dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer reg.Close()
	cp := controlplane.New(st, &controlplane.Options{Images: reg})
	tokens.TokenStore = registry.NewTokenStore(cp, nil)
	srv.Config.Handler = reg
	srv.Start()
	defer srv.Close()

	var req controlplane.CreateDeploymentRequest
	_ = json.Unmarshal([]byte(`{"name": "agent", "source": "internal_docker"}`), &req)
	d, _ := cp.CreateDeployment(ctx, "tenant-1", &req)
	tok, _ := tokens.IssuePushToken(ctx, "tenant-1", d.ID)
	// docker login -u any --password-stdin <host>; docker push <registry_url>/agent:v1 ...
	fmt.Println(strings.HasPrefix(tok.Token, "dpr_"), reg.URL(d.ID) == host+"/deployments/"+d.ID)
	// Output: true true
}

// lazy lets the registry be built before the ControlPlane whose store
// keeps its tokens (which takes the registry as its ImageResolver).
type lazy struct{ *registry.TokenStore }

// The realm of an external registry: a push token of the control plane,
// sent as the basic-auth password, becomes a bearer token for the
// registry that grants only the deployment's repositories.
func ExampleTokenServer() {
	ctx := context.Background()
	st := storemem.New()
	defer st.Close()
	cp := controlplane.New(st, nil)
	tokens := registry.NewTokenStore(cp, nil)
	ts, err := registry.NewTokenServer(tokens, &registry.TokenOptions{
		Key:     registry.SigningKey([]byte("the server's secret key")),
		Service: "registry.example.com", // the registry's auth.token.service
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	// Serve it at registry.TokenPath (httphandler.Options.RegistryRealm
	// does); the registry trusts ts.CertificatePEM() or ts.JWKS().
	var req controlplane.CreateDeploymentRequest
	_ = json.Unmarshal([]byte(`{"name": "agent", "source": "internal_docker"}`), &req)
	d, _ := cp.CreateDeployment(ctx, "tenant-1", &req)
	tok, _ := tokens.IssuePushToken(ctx, "tenant-1", d.ID)
	b, err := ts.Issue(ctx, tok.Token, "registry.example.com", []string{
		"repository:deployments/" + d.ID + "/agent:push,pull",
		"repository:deployments/someone-else/agent:pull", // never granted
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, a := range b.Access {
		fmt.Println(a.Type, a.Name == "deployments/"+d.ID+"/agent", a.Actions)
	}
	fmt.Println(b.ExpiresAt.Sub(b.IssuedAt))
	// Output:
	// repository true [push pull]
	// 5m0s
}
