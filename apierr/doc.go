// Package apierr is the error vocabulary of deployplane's API, shared by
// both domains (controlplane, oauthflow) and the HTTP layer (httphandler).
//
// The domains report a client's mistakes with these errors (beside a few
// sentinels of their own, such as oauthflow.ErrUnknownState and
// controlplane's GitHub installation errors); httphandler turns each into
// one answer of the wire contract. The package knows nothing of HTTP: the
// statuses below are the mapping httphandler applies, listed so that an
// embedder calling a domain directly knows what a client of the HTTP API
// would see.
//
//	*ValidationError                422 {"detail": [{"loc", "msg", "type"}, ...]}
//	ErrNotFound (a *NotFoundError)  404 {"detail": "Deployment ID {id} not found."}
//	ErrConflict                     409 {"detail": sentence}
//	ErrInvalidState                 400 {"detail": sentence}
//	ErrInvalidTenant                500 (a programming error of the embedder)
//
// Match them with errors.Is (the sentinels) and errors.As (*ValidationError,
// *NotFoundError, *DetailError). The Error text of an error matching
// ErrNotFound, ErrConflict or ErrInvalidState is the sentence a response
// carries as its "detail"; Conflictf and InvalidStatef make such errors,
// and DetailError gives a domain's own sentinel (for example controlplane's
// GitHub installation errors) a sentence the same way.
//
// A *ValidationError lists every problem of a request, not just the first:
// each Problem says where (Loc: "body", "path" or "query", then JSON member
// names and array indexes), what (Msg, a sentence), and a short snake_case
// code (Type, one of the Type constants). How many problems one answer
// lists is the HTTP layer's rule (at most 100, wire contract section 9);
// the domains report them all.
//
// CheckTenant is the one rule both domains apply to the tenant they are
// given: it is part of every store key, so it is 1 to 64 bytes of ASCII
// letters, digits, '.', '_' and '-'. A tenant comes from the embedder's
// authentication (httphandler's are canonical UUIDs), never from a client's
// body, so a tenant that breaks the rule is ErrInvalidTenant, a programming
// error.
//
// The package imports nothing of deployplane; controlplane, oauthflow and
// httphandler import it.
package apierr
