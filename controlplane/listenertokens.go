package controlplane

import (
	"context"
	"errors"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane/internal/tokens"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/wiretime"
)

// Listener tokens: the credentials of a listener's agents (wire contract
// section 11), kept by internal/tokens in cp_listener_tokens. The methods
// here check that the listener is the tenant's and say what the errors
// mean; a listener's tokens are deleted with it (removeListener).

// ListenerTokenPrefix starts every listener token, so that a face tells
// one from an API key before asking AuthenticateListenerToken.
const ListenerTokenPrefix = tokens.Prefix

// ErrInvalidListenerToken is returned by AuthenticateListenerToken for a
// token that is malformed, unknown or revoked (deleted, or its listener
// deleted). HTTP 401.
var ErrInvalidListenerToken = tokens.ErrInvalid

// ListenerToken is a listener token as lists show it: never its secret.
type ListenerToken struct {
	ID         string         `json:"id"`
	CreatedAt  wiretime.Time  `json:"created_at"`
	LastUsedAt *wiretime.Time `json:"last_used_at"`
}

// NewListenerToken is the answer of CreateListenerToken: the only one
// that carries the token.
type NewListenerToken struct {
	ID        string        `json:"id"`
	Token     string        `json:"token"`
	CreatedAt wiretime.Time `json:"created_at"`
}

// ListenerTokenPage is one page of ListListenerTokens, newest first.
// Resources is never nil.
type ListenerTokenPage struct {
	Resources []ListenerToken `json:"resources"`
	Offset    int             `json:"offset"`
}

// tokenErr is err with a token not found as the API's
// *apierr.NotFoundError.
func tokenErr(err error) error {
	var nf *tokens.NotFoundError
	if errors.As(err, &nf) {
		return &apierr.NotFoundError{Kind: apierr.KindListenerToken, ID: nf.ID}
	}
	return err
}

// CreateListenerToken makes a token for the agents of the tenant's
// listener and returns it: its Token is in this answer only.
// Errors: *apierr.NotFoundError for a listener not the tenant's.
func (cp *ControlPlane) CreateListenerToken(ctx context.Context, tenant, listenerID string) (*NewListenerToken, error) {
	lid, err := agentListenerID(tenant, listenerID)
	if err != nil {
		return nil, err
	}
	now := cp.now()
	id := cp.newID()
	var token string
	err = cp.st.Update(ctx, func(tx store.Tx) error {
		if _, err := getListener(tx, tenant, lid); err != nil {
			return err
		}
		var err error
		token, err = tokens.Create(tx, tenant, lid, id, now)
		return err
	})
	if err != nil {
		return nil, cp.storeErr("create listener token", err)
	}
	return &NewListenerToken{ID: id, Token: token, CreatedAt: wiretime.New(now)}, nil
}

// ListListenerTokens returns one page of the tokens of the tenant's
// listener, newest first; q pages as for ListListeners (nil: the first
// page). Errors: *apierr.NotFoundError for a listener not the tenant's,
// *apierr.ValidationError.
func (cp *ControlPlane) ListListenerTokens(ctx context.Context, tenant, listenerID string, q *ListListenersQuery) (*ListenerTokenPage, error) {
	lid, err := agentListenerID(tenant, listenerID)
	if err != nil {
		return nil, err
	}
	if q == nil {
		q = &ListListenersQuery{}
	}
	if err := q.ValidateWith(cp.lim); err != nil {
		return nil, err
	}
	page := []ListenerToken{}
	err = cp.st.View(ctx, func(r store.Reader) error {
		page = page[:0]
		if _, err := getListener(r, tenant, lid); err != nil {
			return err
		}
		ts, err := tokens.List(r, tenant, lid, q.Offset, limitOf(q.Limit))
		if err != nil {
			return tokenErr(err)
		}
		for _, t := range ts {
			lt := ListenerToken{ID: t.ID, CreatedAt: wiretime.New(t.Created)}
			if !t.Used.IsZero() {
				lt.LastUsedAt = new(wiretime.New(t.Used))
			}
			page = append(page, lt)
		}
		return nil
	})
	if err != nil {
		return nil, cp.storeErr("list listener tokens", err)
	}
	return &ListenerTokenPage{Resources: page, Offset: q.Offset + len(page)}, nil
}

// DeleteListenerToken revokes a token of the tenant's listener: it is
// refused from then on. Errors: *apierr.NotFoundError for a listener not
// the tenant's or a token not the listener's.
func (cp *ControlPlane) DeleteListenerToken(ctx context.Context, tenant, listenerID, tokenID string) error {
	lid, err := agentListenerID(tenant, listenerID)
	if err != nil {
		return err
	}
	tid, ok := pathID(tokenID)
	err = cp.st.Update(ctx, func(tx store.Tx) error {
		if _, err := getListener(tx, tenant, lid); err != nil {
			return err
		}
		notFound := &apierr.NotFoundError{Kind: apierr.KindListenerToken, ID: tokenID}
		if !ok {
			return notFound
		}
		err := tokens.Delete(tx, tenant, lid, tid)
		if errors.As(err, new(*tokens.NotFoundError)) {
			return notFound
		}
		return err
	})
	return cp.storeErr("delete listener token", err)
}

// AuthenticateListenerToken returns the tenant and listener a token was
// made for, and records its use (last_used_at, written at most once a
// minute). The token's digest is compared in constant time. Errors:
// ErrInvalidListenerToken for a token that is malformed, unknown or
// revoked, or a store error. A caller lets the token reach only the agent
// routes of that listener.
func (cp *ControlPlane) AuthenticateListenerToken(ctx context.Context, token string) (tenant, listenerID string, err error) {
	// A token's id is one this package made: a canonical UUID.
	if id, ok := tokens.Parse(token); !ok || !isCanonicalID(id) {
		return "", "", ErrInvalidListenerToken
	}
	tenant, listenerID, err = tokens.Authenticate(ctx, cp.st, token, cp.now())
	if err != nil && !errors.Is(err, ErrInvalidListenerToken) {
		return "", "", cp.storeErr("authenticate listener token", err)
	}
	return tenant, listenerID, err
}

// isCanonicalID reports whether id is a UUID in its canonical form.
func isCanonicalID(id string) bool {
	c, ok := pathID(id)
	return ok && c == id
}
