package registry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/distribution/reference"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/deployplane/deployplane/controlplane"
)

// ExternalOptions configure an External registry.
type ExternalOptions struct {
	// Host is the registry's host[:port], as clients and the deployers'
	// engines reach it: the host of push-token's registry_url. Required.
	Host string
	// Tokens is the realm the registry trusts (its auth.token.realm is
	// TokenPath on this server). Required.
	Tokens *TokenServer
	// Insecure reaches the registry over plain HTTP when resolving image
	// tags (a loopback registry); default HTTPS.
	Insecure bool
	// Transport carries the requests that resolve image tags. Default
	// http.DefaultTransport.
	Transport http.RoundTripper
}

// External is a registry the operator runs, configured to trust
// TokenServer's tokens (Docker Registry v2 token authentication): it
// names registry_url for push-token (httphandler.RegistryURLs) and
// resolves image tags to digests (controlplane.ImageResolver), with a
// pull token of the deployment minted for the purpose.
type External struct {
	host     string
	tokens   *TokenServer
	insecure bool
	rt       http.RoundTripper
}

// NewExternal builds an External.
func NewExternal(o *ExternalOptions) (*External, error) {
	if o == nil || o.Host == "" || o.Tokens == nil {
		return nil, errors.New("registry: ExternalOptions.Host and Tokens are required")
	}
	if strings.Contains(o.Host, "/") {
		return nil, fmt.Errorf("registry: external registry host %q: host[:port] only, no scheme or path", o.Host)
	}
	rt := o.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	return &External{host: o.Host, tokens: o.Tokens, insecure: o.Insecure, rt: rt}, nil
}

// Host is ExternalOptions.Host.
func (e *External) Host() string { return e.host }

// URL is the registry_url of a deployment: Host and its repository prefix
// (controlplane.RegistryRepository).
func (e *External) URL(deploymentID string) string {
	return e.host + "/" + controlplane.RegistryRepository(deploymentID)
}

// ResolveImage implements controlplane.ImageResolver as Registry's does:
// an image of this registry must be in the deployment's repository prefix
// and exist there; one named by tag is answered by digest. Images of
// other registries are returned unchanged.
func (e *External) ResolveImage(ctx context.Context, tenant, deploymentID string, image string) (string, error) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil || reference.Domain(named) != e.host {
		return image, nil
	}
	path := reference.Path(named)
	g := &controlplane.RegistryGrant{Tenant: tenant, DeploymentID: deploymentID,
		Repository: controlplane.RegistryRepository(deploymentID)}
	if !g.Allows(path, "pull") {
		return "", fmt.Errorf("%w: %s is not in this deployment's repository %s/%s", controlplane.ErrImageNotFound, image, e.host, g.Repository)
	}
	b, err := e.tokens.Mint(g, []string{"repository:" + path + ":pull"})
	if err != nil {
		return "", err
	}
	var opts []name.Option
	if e.insecure {
		opts = append(opts, name.Insecure)
	}
	ref, err := name.ParseReference(image, opts...)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v", controlplane.ErrImageNotFound, image, err)
	}
	desc, err := remote.Head(ref, remote.WithContext(ctx), remote.WithTransport(e.rt),
		remote.WithAuth(authn.FromConfig(authn.AuthConfig{RegistryToken: b.Token})))
	if err != nil {
		var te *transport.Error
		if errors.As(err, &te) && te.StatusCode == http.StatusNotFound {
			return "", fmt.Errorf("%w: %s has not been pushed", controlplane.ErrImageNotFound, image)
		}
		return "", fmt.Errorf("registry: %s: %w", image, err)
	}
	if _, ok := named.(reference.Digested); ok {
		return image, nil
	}
	return e.host + "/" + path + "@" + desc.Digest.String(), nil
}

var _ controlplane.ImageResolver = (*External)(nil)
