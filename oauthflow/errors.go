package oauthflow

import (
	"errors"
	"fmt"
	"strings"
)

// Errors returned by Service methods. Match them with errors.Is; for
// ErrNotFound and ErrConflict the error's message is the sentence to show
// the client (e.g. "OAuth provider github not found.").
var (
	// ErrNotFound: the named record does not exist in the caller's tenant
	// (or exists in another one; the two are never told apart). The
	// concrete error is a *NotFoundError. HTTP 404.
	ErrNotFound = errors.New("oauthflow: not found")
	// ErrConflict: a provider with that provider_id already exists in the
	// tenant. HTTP 409.
	ErrConflict = errors.New("oauthflow: conflict")
	// ErrUnknownState is returned by Callback when the state is missing,
	// unknown, expired, already used, or belongs to another provider.
	// Nothing is changed. HTTP 400 (an error page).
	ErrUnknownState = errors.New("oauthflow: unknown, expired or already used state")
	// ErrExchangeFailed is returned by Callback when the provider's token
	// endpoint refused the authorization code or could not be reached,
	// including when the egress policy refused to reach it (then the error
	// also matches egress.ErrRefused and wraps an *egress.RefusedError
	// naming the address). The flow is marked failed. The message carries
	// only non-secret details (HTTP status, RFC 6749 error code, the
	// refused host and address). HTTP 502 (an error page).
	ErrExchangeFailed = errors.New("oauthflow: token exchange failed")
	// ErrInvalidTenant: the tenant string is empty, longer than 64 bytes,
	// or holds a byte outside [A-Za-z0-9._-] (the rule controlplane
	// applies too). Tenants come from authentication, not from clients, so
	// this is a programming error (HTTP 500).
	ErrInvalidTenant = errors.New("oauthflow: invalid tenant")
)

// NotFoundError names the missing record. It matches ErrNotFound.
type NotFoundError struct {
	// Kind is what is missing, e.g. "OAuth provider".
	Kind string
	// ID is the identifier the caller gave.
	ID string
}

// Error returns the client-facing sentence, e.g. "OAuth provider github not found.".
func (e *NotFoundError) Error() string { return fmt.Sprintf("%s %s not found.", e.Kind, e.ID) }

// Is reports whether target is ErrNotFound.
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

func providerNotFound(providerID string) error {
	return &NotFoundError{Kind: "OAuth provider", ID: providerID}
}

// conflictError carries the client-facing sentence of an ErrConflict.
type conflictError struct{ detail string }

func (e *conflictError) Error() string        { return e.detail }
func (e *conflictError) Is(target error) bool { return target == ErrConflict }

// AuthorizationError is returned by Callback when the provider redirected
// back with an RFC 6749 error (e.g. access_denied) or without a code. The
// flow is marked failed. Both fields come from the provider (untrusted
// text: escape it before putting it in a page). HTTP 400 (an error page).
type AuthorizationError struct {
	// Code is the RFC 6749 "error" parameter, e.g. "access_denied".
	Code string
	// Description is the "error_description" parameter, possibly empty.
	Description string
}

// Error describes the provider's refusal.
func (e *AuthorizationError) Error() string {
	if e.Description == "" {
		return "oauthflow: the provider refused the authorization: " + e.Code
	}
	return "oauthflow: the provider refused the authorization: " + e.Code + ": " + e.Description
}

// Problem is one validation failure: where (Loc, starting with "body",
// "path" or "query", then JSON keys and array indexes), what (Msg, a
// sentence), and a short snake_case code (Type, e.g. "missing").
type Problem struct {
	Loc  []any  `json:"loc"`
	Msg  string `json:"msg"`
	Type string `json:"type"`
}

// ValidationError lists every problem found in a request, not just the
// first. HTTP 422 with {"detail": Problems}.
type ValidationError struct {
	Problems []Problem
}

// Error summarises the problems on one line.
func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString("oauthflow: invalid request:")
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteByte(';')
		}
		fmt.Fprintf(&b, " %v: %s", p.Loc, p.Msg)
	}
	return b.String()
}

// problems collects validation failures.
type problems []Problem

func (ps *problems) add(typ, msg string, loc ...any) {
	*ps = append(*ps, Problem{Loc: loc, Msg: msg, Type: typ})
}

// err returns nil when nothing was added, else a *ValidationError.
func (ps problems) err() error {
	if len(ps) == 0 {
		return nil
	}
	return &ValidationError{Problems: ps}
}
