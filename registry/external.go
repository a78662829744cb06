package registry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/distribution/reference"

	"github.com/deployplane/deployplane/controlplane"
)

// ExternalOptions configure an External registry.
type ExternalOptions struct {
	// Host is the registry's host[:port], as clients and the deployers'
	// engines reach it: the host of push-token's registry_url. Required.
	Host string
	// Aliases are other host[:port] names of the same registry; images
	// naming them are held to the deployment's repository as Host's are
	// (see Names).
	Aliases []string
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
// names registry_url for push-token (httphandler.Registry) and
// resolves image tags to digests (controlplane.ImageResolver), with a
// pull token of the deployment minted for the purpose.
type External struct {
	host     string
	names    *Names
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
	return &External{host: o.Host, names: NewNames(o.Host, o.Aliases...), tokens: o.Tokens, insecure: o.Insecure, rt: rt}, nil
}

// Host is ExternalOptions.Host.
func (e *External) Host() string { return e.host }

// Names is the set of names the registry answers to: Host and Aliases.
func (e *External) Names() *Names { return e.names }

// URL is the registry_url of a deployment: Host and its repository prefix
// (Repository).
func (e *External) URL(deploymentID string) string {
	return e.host + "/" + Repository(deploymentID)
}

// ResolveImage implements controlplane.ImageResolver as Registry's does:
// an image of this registry must be in the deployment's repository prefix
// and exist there; one named by tag is answered by digest. Images of
// other registries are returned unchanged.
func (e *External) ResolveImage(ctx context.Context, tenant, deploymentID string, image string) (string, error) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil || !e.names.Match(reference.Domain(named)) {
		return image, nil
	}
	path := reference.Path(named)
	g := &Grant{Tenant: tenant, DeploymentID: deploymentID,
		Repository: Repository(deploymentID)}
	if !g.Allows(path, "pull") {
		return "", fmt.Errorf("%w: %s is not in this deployment's repository %s/%s", controlplane.ErrImageNotFound, image, e.host, g.Repository)
	}
	b, err := e.tokens.Mint(g, []string{"repository:" + path + ":pull"})
	if err != nil {
		return "", err
	}
	ref := ""
	if dg, ok := named.(reference.Digested); ok {
		ref = dg.Digest().String()
	} else if tg, ok := named.(reference.Tagged); ok {
		ref = tg.Tag()
	} else {
		ref = "latest"
	}
	digest, err := e.head(ctx, path, ref, b.Token)
	if err != nil {
		return "", fmt.Errorf("registry: %s: %w", image, err)
	}
	if digest == "" {
		return "", fmt.Errorf("%w: %s has not been pushed", controlplane.ErrImageNotFound, image)
	}
	if dg, ok := named.(reference.Digested); ok {
		digest = dg.Digest().String()
	}
	return e.host + "/" + path + "@" + digest, nil
}

// manifestTypes are the manifests ResolveImage accepts.
var manifestTypes = strings.Join([]string{"application/vnd.oci.image.index.v1+json", "application/vnd.oci.image.manifest.v1+json",
	"application/vnd.docker.distribution.manifest.list.v2+json", "application/vnd.docker.distribution.manifest.v2+json"}, ", ")

// head asks the registry for the digest of the manifest repo:ref with the
// bearer token (the registry API directly, not a client's token flow: the
// token is minted here, and the realm may be at a private address that
// clients guarding against SSRF refuse). "" when there is none.
func (e *External) head(ctx context.Context, repo, ref, token string) (string, error) {
	scheme := "https"
	if e.insecure {
		scheme = "http"
	}
	u := scheme + "://" + e.host + "/v2/" + repo + "/manifests/" + ref
	for _, method := range []string{http.MethodHead, http.MethodGet} {
		req, err := http.NewRequestWithContext(ctx, method, u, nil)
		if err != nil {
			return "", err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Accept", manifestTypes)
		resp, err := (&http.Client{Transport: e.rt, Timeout: time.Minute}).Do(req)
		if err != nil {
			return "", err
		}
		var digest string
		if resp.StatusCode == http.StatusOK && method == http.MethodGet {
			h := sha256.New()
			_, err = io.Copy(h, io.LimitReader(resp.Body, 4<<20))
			digest = "sha256:" + hex.EncodeToString(h.Sum(nil))
		}
		resp.Body.Close()
		switch {
		case err != nil:
			return "", err
		case resp.StatusCode == http.StatusNotFound:
			return "", nil
		case resp.StatusCode != http.StatusOK:
			return "", fmt.Errorf("%s %s: %s", method, u, resp.Status)
		case resp.Header.Get("Docker-Content-Digest") != "":
			return resp.Header.Get("Docker-Content-Digest"), nil
		case method == http.MethodGet:
			return digest, nil
		}
		// No digest header: the body's digest.
	}
	return "", nil
}

var _ controlplane.ImageResolver = (*External)(nil)
