package apierr

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Match them with errors.Is. The Error text of an error a
// domain returns that matches ErrNotFound, ErrConflict or ErrInvalidState is
// the sentence for a response's "detail", never the sentinel's own text.
var (
	// ErrNotFound: the id is unknown or belongs to another tenant (the two
	// are never told apart). The error is a *NotFoundError. HTTP 404.
	ErrNotFound = errors.New("not found")
	// ErrConflict: a name or id that must be unique is taken, for example
	// a deployment name or an OAuth provider_id. HTTP 409.
	ErrConflict = errors.New("conflict")
	// ErrInvalidState: the request is well-formed but the resource's state
	// forbids it, for example a change while the deployment is being
	// deleted. HTTP 400.
	ErrInvalidState = errors.New("invalid state")
	// ErrInvalidTenant: the tenant breaks CheckTenant's rule. Tenants come
	// from the caller's authentication, not from clients, so this is a
	// programming error. HTTP 500.
	ErrInvalidTenant = errors.New("invalid tenant")
)

// The Kind values of a NotFoundError: every kind of resource either domain
// reports missing.
const (
	KindDeployment     = "Deployment"      // controlplane
	KindRevision       = "Revision"        // controlplane
	KindListener       = "Listener"        // controlplane
	KindListenerToken  = "Listener token"  // controlplane
	KindIntegration    = "Integration"     // controlplane (an unknown integration_id)
	KindTracingProject = "Tracing project" // controlplane (TracingProjects hook)
	KindOAuthProvider  = "OAuth provider"  // oauthflow; the ID is the provider_id
	KindWebhook        = "Webhook"         // webhooks
)

// NotFoundError says which kind of resource was not found, and the id the
// caller gave. It matches ErrNotFound.
type NotFoundError struct {
	Kind string // KindDeployment, KindRevision, ...
	ID   string
}

// Error returns the sentence of the wire contract: "{Kind} ID {ID} not
// found." ("Deployment ID {id} not found."), or "{Kind} {ID} not found."
// for KindOAuthProvider, whose id is a name of the tenant's choosing
// ("OAuth provider github not found.").
func (e *NotFoundError) Error() string {
	if e.Kind == KindOAuthProvider {
		return e.Kind + " " + e.ID + " not found."
	}
	return e.Kind + " ID " + e.ID + " not found."
}

// Is reports whether target is ErrNotFound.
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// DetailError is an error whose text is a sentence for a response's
// "detail" and that matches Kind, a sentinel, with errors.Is.
type DetailError struct {
	Kind   error  // ErrConflict, ErrInvalidState or a domain's own sentinel
	Detail string // a sentence, e.g. "A deployment named 'agent' already exists."
}

// Error returns the sentence.
func (e *DetailError) Error() string { return e.Detail }

// Unwrap returns Kind, so that errors.Is matches it.
func (e *DetailError) Unwrap() error { return e.Kind }

// Conflictf returns a *DetailError matching ErrConflict whose sentence is
// formatted as fmt.Sprintf does.
func Conflictf(format string, args ...any) error {
	return &DetailError{Kind: ErrConflict, Detail: fmt.Sprintf(format, args...)}
}

// InvalidStatef returns a *DetailError matching ErrInvalidState whose
// sentence is formatted as fmt.Sprintf does.
func InvalidStatef(format string, args ...any) error {
	return &DetailError{Kind: ErrInvalidState, Detail: fmt.Sprintf(format, args...)}
}

// Problem is one validation failure, as in the 422 body. Loc starts with
// "body", "path" or "query" and continues with JSON member names (string)
// and array indexes (int).
type Problem struct {
	Loc  []any  `json:"loc"`
	Msg  string `json:"msg"`
	Type string `json:"type"` // one of the Type constants
}

// ValidationError lists every problem of a request. HTTP 422.
type ValidationError struct {
	Problems []Problem
}

// Validation returns a *ValidationError listing ps, or nil when ps is
// empty (an untyped nil, so that err != nil means a problem).
func Validation(ps ...Problem) error {
	if len(ps) == 0 {
		return nil
	}
	return &ValidationError{Problems: ps}
}

// Error joins the problems into one line: "validation failed: " and then
// each problem's loc, dot-separated, and message, separated by "; ".
func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString("validation failed: ")
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("; ")
		}
		for j, l := range p.Loc {
			if j > 0 {
				b.WriteByte('.')
			}
			fmt.Fprint(&b, l)
		}
		b.WriteString(": ")
		b.WriteString(p.Msg)
	}
	return b.String()
}

// CheckTenant returns nil when tenant is 1 to 64 bytes of ASCII letters,
// digits, '.', '_' and '-', else an error matching ErrInvalidTenant. Both
// domains check every tenant they are given with it: a tenant starts every
// store key, so it may hold neither the key separator '/' nor anything
// else outside that set.
func CheckTenant(tenant string) error {
	ok := tenant != "" && len(tenant) <= 64
	for i := 0; ok && i < len(tenant); i++ {
		switch c := tenant[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			ok = false
		}
	}
	if !ok {
		shown := tenant
		if len(shown) > 80 {
			shown = shown[:80] + "..."
		}
		return fmt.Errorf("%w %q: a tenant is 1 to 64 bytes of ASCII letters, digits, '.', '_' and '-'", ErrInvalidTenant, shown)
	}
	return nil
}
