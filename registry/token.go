package registry

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// The token server: an external registry (CNCF Distribution configured
// with auth: token, or any registry that speaks the Docker Registry v2
// token authentication specification) refuses a request without a
// bearer token and names this server's token endpoint (the realm); the
// client asks the realm with a registry token (TokenStore) as the
// password of HTTP basic auth, and gets a short-lived JWT, signed with the
// key the registry trusts, whose access claim is the deployment's
// repository prefix only (Grant.Allows decides), for
// the actions the token allows, whatever the client asked for.

// Defaults of TokenOptions.
const (
	// DefaultIssuer is the iss claim of the tokens: the registry's
	// auth.token.issuer.
	DefaultIssuer = "deployplane"
	// DefaultBearerTTL is the lifetime of a bearer token (the registry
	// checks it; clients ask again when it ends).
	DefaultBearerTTL = 5 * time.Minute
)

// TokenOptions configure a TokenServer.
type TokenOptions struct {
	// Key signs the tokens: an ed25519.PrivateKey (SigningKey derives
	// one from a secret), an *ecdsa.PrivateKey (P-256, P-384 or P-521)
	// or an *rsa.PrivateKey (ParseSigningKey reads any of them from
	// PEM). Required.
	Key crypto.Signer
	// Service is the registry's service name (its auth.token.service):
	// the tokens' audience. A request naming another service is refused.
	// Required.
	Service string
	// Issuer is the iss claim (the registry's auth.token.issuer).
	// Default DefaultIssuer.
	Issuer string
	// TTL is a bearer token's lifetime, never beyond the registry
	// token's own expiry. Default DefaultBearerTTL.
	TTL time.Duration
	// Clock tells the time. Default time.Now.
	Clock func() time.Time
	// Logger receives one line per refused credential. Default: discard.
	Logger *slog.Logger
}

// TokenServer is the token endpoint (realm) of an external registry: an
// http.Handler for GET and POST of its path (TokenPath when mounted by
// httphandler) and for the JWKS of its key. It is safe for concurrent use.
type TokenServer struct {
	tokens  Tokens
	signer  jose.Signer
	pub     jose.JSONWebKey // the public key, KeyID set
	key     crypto.Signer
	service string
	issuer  string
	ttl     time.Duration
	now     func() time.Time
	log     *slog.Logger
}

// The paths httphandler serves the TokenServer at (on the control
// plane's own port; no API route lives under /registry/).
const (
	// TokenPath is the realm: GET (the Docker token flow) and POST (its
	// OAuth2 password grant).
	TokenPath = "/registry/token"
	// JWKSPath answers the JSON Web Key Set of the signing key: the
	// registry's auth.token.jwks (a file: save the answer).
	JWKSPath = "/registry/jwks.json"
)

// NewTokenServer builds the realm over the control plane's registry
// tokens (tokens checks the passwords).
func NewTokenServer(tokens Tokens, o *TokenOptions) (*TokenServer, error) {
	if o == nil || o.Key == nil || o.Service == "" {
		return nil, errors.New("registry: TokenOptions.Key and Service are required")
	}
	alg, err := algorithm(o.Key)
	if err != nil {
		return nil, err
	}
	pub := jose.JSONWebKey{Key: o.Key.Public(), Algorithm: string(alg), Use: "sig"}
	thumb, err := pub.Thumbprint(crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("registry: token key: %w", err)
	}
	// The key id is the key's RFC 7638 thumbprint: what Distribution
	// computes for the keys of its rootcertbundle, so the registry finds
	// the key by the id with a certificate bundle as with a JWKS.
	pub.KeyID = base64.RawURLEncoding.EncodeToString(thumb)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: o.Key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", pub.KeyID))
	if err != nil {
		return nil, fmt.Errorf("registry: token key: %w", err)
	}
	s := &TokenServer{tokens: tokens, signer: signer, pub: pub, key: o.Key, service: o.Service,
		issuer: o.Issuer, ttl: o.TTL, now: o.Clock, log: o.Logger}
	if s.issuer == "" {
		s.issuer = DefaultIssuer
	}
	if s.ttl <= 0 {
		s.ttl = DefaultBearerTTL
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s, nil
}

func algorithm(k crypto.Signer) (jose.SignatureAlgorithm, error) {
	switch k := k.(type) {
	case ed25519.PrivateKey:
		return jose.EdDSA, nil
	case *ecdsa.PrivateKey:
		switch k.Curve {
		case elliptic.P256():
			return jose.ES256, nil
		case elliptic.P384():
			return jose.ES384, nil
		case elliptic.P521():
			return jose.ES512, nil
		}
	case *rsa.PrivateKey:
		if k.N.BitLen() >= 2048 {
			return jose.RS256, nil
		}
	}
	return "", fmt.Errorf("registry: a token key must be Ed25519, ECDSA P-256/384/521 or RSA of 2048 bits or more, not %T", k)
}

// SigningKey derives an Ed25519 token key from a secret (the server's
// secret key): replicas that share the secret sign with the same key.
func SigningKey(secret []byte) ed25519.PrivateKey {
	seed := sha256.Sum256(append([]byte("deployplane registry token key\x00"), secret...))
	return ed25519.NewKeyFromSeed(seed[:])
}

// ParseSigningKey reads a PEM private key: PKCS #8 (Ed25519, ECDSA or
// RSA), SEC 1 ("EC PRIVATE KEY") or PKCS #1 ("RSA PRIVATE KEY").
func ParseSigningKey(pemBytes []byte) (crypto.Signer, error) {
	for rest := pemBytes; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return nil, errors.New("registry: no PEM private key")
		}
		var k any
		var err error
		switch b.Type {
		case "PRIVATE KEY":
			k, err = x509.ParsePKCS8PrivateKey(b.Bytes)
		case "EC PRIVATE KEY":
			k, err = x509.ParseECPrivateKey(b.Bytes)
		case "RSA PRIVATE KEY":
			k, err = x509.ParsePKCS1PrivateKey(b.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("registry: %s: %w", b.Type, err)
		}
		s, ok := k.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("registry: a %T cannot sign", k)
		}
		if _, err := algorithm(s); err != nil {
			return nil, err
		}
		return s, nil
	}
}

// Service is TokenOptions.Service; Issuer the iss claim.
func (s *TokenServer) Service() string { return s.service }

// Issuer is the iss claim of the tokens (the registry's auth.token.issuer).
func (s *TokenServer) Issuer() string { return s.issuer }

// KeyID is the kid of the tokens' header: the key's RFC 7638 thumbprint.
func (s *TokenServer) KeyID() string { return s.pub.KeyID }

// JWKS is the JSON Web Key Set of the public key (the registry's
// auth.token.jwks file).
func (s *TokenServer) JWKS() []byte {
	b, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{s.pub}})
	return b
}

// CertificatePEM is a self-signed certificate of the public key, PEM (the
// registry's auth.token.rootcertbundle). For an Ed25519 key it is the same
// bytes on every call and every replica.
func (s *TokenServer) CertificatePEM() ([]byte, error) {
	serial := new(big.Int).SetBytes([]byte(s.pub.KeyID)[:16])
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: s.issuer + " registry token signer"},
		NotBefore:    time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:     time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, s.key.Public(), s.key)
	if err != nil {
		return nil, fmt.Errorf("registry: token certificate: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// Access is one entry of a token's access claim: actions on a resource.
type Access struct {
	Type    string   `json:"type"`
	Name    string   `json:"name"`
	Actions []string `json:"actions"`
}

// Bearer is a token the realm issued.
type Bearer struct {
	// Token is the JWT, for Authorization: Bearer at the registry.
	Token     string
	IssuedAt  time.Time
	ExpiresAt time.Time
	// Access is what it grants (empty: it only proves who asked, as
	// docker login needs).
	Access []Access
}

// Errors of Issue.
var (
	// ErrUnknownService: the request names a service other than
	// TokenOptions.Service.
	ErrUnknownService = errors.New("registry: the token is for another service")
)

// Issue checks password (a registry token of the control plane) and
// answers a bearer token for the scopes asked ("repository:<name>:<action>[,<action>]"),
// limited to what the token's grant allows: repositories outside the
// deployment's prefix, other resource types and other actions are left
// out, whatever was asked. An empty service means TokenOptions.Service.
// Errors: ErrTokenInvalid, ErrUnknownService.
func (s *TokenServer) Issue(ctx context.Context, password, service string, scopes []string) (*Bearer, error) {
	if service != "" && service != s.service {
		return nil, fmt.Errorf("%w: this realm issues tokens for %q, not %q", ErrUnknownService, s.service, service)
	}
	g, err := s.tokens.CheckRegistryToken(ctx, password)
	if err != nil {
		return nil, err
	}
	return s.sign(g, scopes)
}

// Mint answers a bearer token of the grant for the scopes asked, without
// a registry token: for the server's own requests (resolving an image's
// tag) on a deployment's behalf.
func (s *TokenServer) Mint(g *Grant, scopes []string) (*Bearer, error) {
	return s.sign(g, scopes)
}

func (s *TokenServer) sign(g *Grant, scopes []string) (*Bearer, error) {
	now := s.now().UTC().Truncate(time.Second)
	exp := now.Add(s.ttl)
	if !g.ExpiresAt.IsZero() && g.ExpiresAt.Before(exp) {
		exp = g.ExpiresAt.UTC().Truncate(time.Second)
	}
	access := grantedAccess(g, scopes)
	jti := make([]byte, 16)
	_, _ = rand.Read(jti)
	subject := "deployment:" + g.DeploymentID
	raw, err := jwt.Signed(s.signer).
		Claims(jwt.Claims{Issuer: s.issuer, Subject: subject, Audience: jwt.Audience{s.service},
			Expiry: jwt.NewNumericDate(exp), NotBefore: jwt.NewNumericDate(now), IssuedAt: jwt.NewNumericDate(now),
			ID: base64.RawURLEncoding.EncodeToString(jti)}).
		Claims(map[string]any{"access": access}).
		Serialize()
	if err != nil {
		return nil, fmt.Errorf("registry: signing a token: %w", err)
	}
	return &Bearer{Token: raw, IssuedAt: now, ExpiresAt: exp, Access: access}, nil
}

// grantedAccess is the access claim: for each repository scope asked,
// the actions of it the grant allows; nothing else.
func grantedAccess(g *Grant, scopes []string) []Access {
	access := []Access{}
	for _, scope := range scopes {
		for sc := range strings.FieldsSeq(scope) {
			typ, rest, ok := strings.Cut(sc, ":")
			i := strings.LastIndexByte(rest, ':')
			if !ok || typ != "repository" || i <= 0 {
				continue // another resource type (the catalog), or malformed
			}
			name, actions := rest[:i], rest[i+1:]
			var allowed []string
			for a := range strings.SplitSeq(actions, ",") {
				if a == "*" {
					// Everything the grant allows, nothing more.
					for _, a := range []string{"pull", "push"} {
						if g.Allows(name, a) && !slices.Contains(allowed, a) {
							allowed = append(allowed, a)
						}
					}
					continue
				}
				if g.Allows(name, a) && !slices.Contains(allowed, a) {
					allowed = append(allowed, a)
				}
			}
			if len(allowed) == 0 {
				continue
			}
			if j := slices.IndexFunc(access, func(x Access) bool { return x.Name == name }); j >= 0 {
				for _, a := range allowed {
					if !slices.Contains(access[j].Actions, a) {
						access[j].Actions = append(access[j].Actions, a)
					}
				}
				continue
			}
			access = append(access, Access{Type: "repository", Name: name, Actions: allowed})
		}
	}
	return access
}

// scope is the access as the scope parameter spells it.
func scope(access []Access) string {
	var b strings.Builder
	for i, a := range access {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(a.Type + ":" + a.Name + ":" + strings.Join(a.Actions, ","))
	}
	return b.String()
}

// TokenResponse is the realm's answer (the Docker token specification's
// token and access_token, the same JWT; expires_in seconds; issued_at
// RFC 3339), with scope, what it grants, as the OAuth2 answer has.
type TokenResponse struct {
	Token       string `json:"token"`
	AccessToken string `json:"access_token"`
	ExpiresIn   int    `json:"expires_in"`
	IssuedAt    string `json:"issued_at"`
	Scope       string `json:"scope"`
}

// ErrorResponse is the body of the realm's 401 and 400 to GET: the
// registry API's error list, which docker prints.
type ErrorResponse struct {
	Errors []ErrorItem `json:"errors"`
}

// ErrorItem is one error of an ErrorResponse.
type ErrorItem struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// OAuthErrorResponse is the body of the realm's 400 to POST (RFC 6749
// section 5.2).
type OAuthErrorResponse struct {
	Error            string `json:"error"`
	ErrorDescription string `json:"error_description"`
}

// maxFormBytes bounds a POST to the realm.
const maxFormBytes = 64 << 10

// ServeHTTP serves the realm (any path but one ending in JWKSPath's
// last element): GET with basic auth and service, scope (repeated)
// parameters; POST with the OAuth2 password grant's form; and the JWKS.
func (s *TokenServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.Path, "/jwks.json") {
		writeJSON(w, http.StatusOK, json.RawMessage(s.JWKS()))
		return
	}
	switch r.Method {
	case http.MethodGet:
		s.serveGet(w, r)
	case http.MethodPost:
		s.servePost(w, r)
	default:
		w.Header().Set("Allow", "GET, POST")
		writeJSON(w, http.StatusMethodNotAllowed, ErrorResponse{Errors: []ErrorItem{{Code: "UNSUPPORTED", Message: "GET or POST"}}})
	}
}

func (s *TokenServer) serveGet(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	user, password, ok := r.BasicAuth()
	if !ok {
		s.unauthorized(w, "authentication required: a push or pull token as the password of basic auth")
		return
	}
	b, err := s.Issue(r.Context(), password, q.Get("service"), q["scope"])
	switch {
	case errors.Is(err, ErrTokenInvalid):
		s.log.Info("registry realm: refused credential", "user", user, "remote", r.RemoteAddr)
		s.unauthorized(w, "incorrect token: unknown, expired, or its deployment is gone")
	case errors.Is(err, ErrUnknownService):
		writeJSON(w, http.StatusBadRequest, ErrorResponse{Errors: []ErrorItem{{Code: "DENIED", Message: err.Error()}}})
	case err != nil:
		s.log.Error("registry realm", "err", err)
		writeJSON(w, http.StatusInternalServerError, ErrorResponse{Errors: []ErrorItem{{Code: "UNKNOWN", Message: "internal error"}}})
	default:
		writeJSON(w, http.StatusOK, answer(b))
	}
}

func (s *TokenServer) unauthorized(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", `Basic realm="deployplane registry"`)
	writeJSON(w, http.StatusUnauthorized, ErrorResponse{Errors: []ErrorItem{{Code: "UNAUTHORIZED", Message: msg}}})
}

func (s *TokenServer) servePost(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		writeJSON(w, http.StatusBadRequest, OAuthErrorResponse{Error: "invalid_request", ErrorDescription: "a form (application/x-www-form-urlencoded) of at most 64 KiB"})
		return
	}
	f := r.PostForm
	switch f.Get("grant_type") {
	case "password":
	case "":
		writeJSON(w, http.StatusBadRequest, OAuthErrorResponse{Error: "invalid_request", ErrorDescription: "grant_type is required"})
		return
	default:
		writeJSON(w, http.StatusBadRequest, OAuthErrorResponse{Error: "unsupported_grant_type", ErrorDescription: "only the password grant (a push or pull token as the password)"})
		return
	}
	if f.Get("password") == "" {
		writeJSON(w, http.StatusBadRequest, OAuthErrorResponse{Error: "invalid_request", ErrorDescription: "password is required"})
		return
	}
	b, err := s.Issue(r.Context(), f.Get("password"), f.Get("service"), f["scope"])
	switch {
	case errors.Is(err, ErrTokenInvalid):
		s.log.Info("registry realm: refused credential", "user", f.Get("username"), "remote", r.RemoteAddr)
		writeJSON(w, http.StatusBadRequest, OAuthErrorResponse{Error: "invalid_grant", ErrorDescription: "incorrect token: unknown, expired, or its deployment is gone"})
	case errors.Is(err, ErrUnknownService):
		writeJSON(w, http.StatusBadRequest, OAuthErrorResponse{Error: "invalid_request", ErrorDescription: err.Error()})
	case err != nil:
		s.log.Error("registry realm", "err", err)
		writeJSON(w, http.StatusInternalServerError, OAuthErrorResponse{Error: "server_error", ErrorDescription: "internal error"})
	default:
		writeJSON(w, http.StatusOK, answer(b))
	}
}

func answer(b *Bearer) TokenResponse {
	return TokenResponse{Token: b.Token, AccessToken: b.Token, ExpiresIn: int(b.ExpiresAt.Sub(b.IssuedAt) / time.Second),
		IssuedAt: b.IssuedAt.Format(time.RFC3339), Scope: scope(b.Access)}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	_ = json.NewEncoder(&buf).Encode(v)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}
