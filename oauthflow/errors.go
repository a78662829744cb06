package oauthflow

import (
	"errors"

	"github.com/deployplane/deployplane/apierr"
)

// Errors of the OAuth flows, beside the shared vocabulary of package
// apierr (*apierr.ValidationError, apierr.ErrNotFound, apierr.ErrConflict,
// apierr.ErrInvalidTenant). Match them with errors.Is.
var (
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
	// ErrTokenEndpointRefused is matched, beside ErrExchangeFailed and
	// egress.ErrRefused, by the error of a Callback whose exchange the
	// egress policy refused: this server may not contact the provider's
	// token endpoint, which only its operator can change. Callers tell it
	// apart without knowing package egress. HTTP 502 (an error page).
	ErrTokenEndpointRefused = errors.New("oauthflow: the egress policy refused the token endpoint")
)

// refusedExchange is the error of an exchange the egress policy refused:
// ErrExchangeFailed and ErrTokenEndpointRefused, wrapping the refusal.
type refusedExchange struct{ refused error }

func (e *refusedExchange) Error() string { return ErrExchangeFailed.Error() + ": " + e.refused.Error() }

func (e *refusedExchange) Is(target error) bool {
	return target == ErrExchangeFailed || target == ErrTokenEndpointRefused
}

func (e *refusedExchange) Unwrap() error { return e.refused }

// providerNotFound is the *apierr.NotFoundError of a provider_id: "OAuth
// provider {provider_id} not found.".
func providerNotFound(providerID string) error {
	return &apierr.NotFoundError{Kind: apierr.KindOAuthProvider, ID: providerID}
}

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

// problems collects validation failures.
type problems []apierr.Problem

func (ps *problems) add(typ, msg string, loc ...any) {
	*ps = append(*ps, apierr.Problem{Loc: loc, Msg: msg, Type: typ})
}

// err returns nil when nothing was added, else a *apierr.ValidationError.
func (ps problems) err() error { return apierr.Validation(ps...) }
