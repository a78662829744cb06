package controlplane

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/wiretime"
)

// Listener tokens: the credentials of a listener's agents (wire contract
// section 11). A token is "dpl_lt_" + its id + "_" + a random secret; it
// is shown once, when created, and stored only as the SHA-256 digest of
// the whole token, under its id, so that authenticating one is one read:
//
//	cp_listener_tokens  "k" id                              -> listenerTokenRecord JSON
//	cp_listener_tokens  "o" tenant/listener/ts16/id         -> "" (the listener's tokens, newest last)
//
// ts16 is createdKey(created_at). A listener's tokens are deleted with it.
const colListenerTokens = "cp_listener_tokens"

// ListenerTokenPrefix starts every listener token, so that a face tells
// one from an API key before asking AuthenticateListenerToken.
const ListenerTokenPrefix = "dpl_lt_"

// tokenUseEvery is how often, at most, a token's last_used_at is written.
const tokenUseEvery = time.Minute

// ErrInvalidListenerToken is returned by AuthenticateListenerToken for a
// token that is malformed, unknown or revoked (deleted, or its listener
// deleted). HTTP 401.
var ErrInvalidListenerToken = errors.New("controlplane: invalid listener token")

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

// listenerTokenRecord is what cp_listener_tokens holds of a token.
type listenerTokenRecord struct {
	Tenant   string `json:"t"`
	Listener string `json:"l"`
	Digest   string `json:"h"` // hex SHA-256 of the whole token
	Created  int64  `json:"c"` // Unix microseconds
	Used     int64  `json:"u,omitzero"`
}

func (r *listenerTokenRecord) token(id string) ListenerToken {
	t := ListenerToken{ID: id, CreatedAt: fromMicros(r.Created)}
	if r.Used != 0 {
		t.LastUsedAt = new(fromMicros(r.Used))
	}
	return t
}

func tokenKey(id string) string { return "k" + id }

func tokenOrderPrefix(tenant, listenerID string) string { return "o" + key(tenant, listenerID) + "/" }

func tokenDigest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
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
	token := ListenerTokenPrefix + id + "_" + rand.Text()
	rec := listenerTokenRecord{Tenant: tenant, Listener: lid, Digest: tokenDigest(token), Created: now.UnixMicro()}
	b, err := json.Marshal(&rec)
	if err != nil {
		return nil, err
	}
	err = cp.st.Update(ctx, func(tx store.Tx) error {
		if _, err := getListener(tx, tenant, lid); err != nil {
			return err
		}
		if err := tx.Create(colListenerTokens, tokenKey(id), b); err != nil {
			return err
		}
		return tx.Create(colListenerTokens, tokenOrderPrefix(tenant, lid)+createdKey(now)+"/"+id, nil)
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
		ids, err := pageIDs(r, colListenerTokens, tokenOrderPrefix(tenant, lid), q.Offset, limitOf(q.Limit), nil, textTailID)
		if err != nil {
			return err
		}
		for _, id := range ids {
			rec, err := getRecord[listenerTokenRecord](r, colListenerTokens, tokenKey(id), apierr.KindListenerToken, id)
			if err != nil {
				return err
			}
			page = append(page, rec.token(id))
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
		rec, err := getRecord[listenerTokenRecord](tx, colListenerTokens, tokenKey(tid), apierr.KindListenerToken, tokenID)
		if err != nil {
			return err
		}
		if rec.Tenant != tenant || rec.Listener != lid {
			return notFound
		}
		return deleteToken(tx, tid, rec)
	})
	return cp.storeErr("delete listener token", err)
}

// deleteToken deletes a token's records.
func deleteToken(tx store.Tx, id string, rec *listenerTokenRecord) error {
	if err := tx.Delete(colListenerTokens, tokenKey(id)); err != nil {
		return err
	}
	return tx.Delete(colListenerTokens, tokenOrderPrefix(rec.Tenant, rec.Listener)+createdKey(time.UnixMicro(rec.Created))+"/"+id)
}

// deleteListenerTokens deletes every token of a listener, in tx.
func deleteListenerTokens(tx store.Tx, tenant, listenerID string) error {
	prefix := tokenOrderPrefix(tenant, listenerID)
	var ids []string
	err := tx.Scan(colListenerTokens, prefix, nil, func(k string, _ []byte) (bool, error) {
		ids = append(ids, textTailID(k[len(prefix):]))
		return true, nil
	})
	if err != nil {
		return err
	}
	for _, id := range ids {
		rec, err := getRecord[listenerTokenRecord](tx, colListenerTokens, tokenKey(id), apierr.KindListenerToken, id)
		if err != nil {
			return err
		}
		if err := deleteToken(tx, id, rec); err != nil {
			return err
		}
	}
	return nil
}

// AuthenticateListenerToken returns the tenant and listener a token was
// made for, and records its use (last_used_at, written at most once a
// minute). The token's digest is compared in constant time. Errors:
// ErrInvalidListenerToken for a token that is malformed, unknown or
// revoked, or a store error. A caller lets the token reach only the agent
// routes of that listener.
func (cp *ControlPlane) AuthenticateListenerToken(ctx context.Context, token string) (tenant, listenerID string, err error) {
	rest, ok := strings.CutPrefix(token, ListenerTokenPrefix)
	i := strings.LastIndexByte(rest, '_')
	if !ok || i < 0 {
		return "", "", ErrInvalidListenerToken
	}
	id, ok := pathID(rest[:i])
	if !ok || id != rest[:i] || i == len(rest)-1 {
		return "", "", ErrInvalidListenerToken
	}
	digest := tokenDigest(token)
	now := cp.now()
	var rec *listenerTokenRecord
	err = cp.st.View(ctx, func(r store.Reader) error {
		var err error
		rec, err = getRecord[listenerTokenRecord](r, colListenerTokens, tokenKey(id), apierr.KindListenerToken, id)
		return err
	})
	if errors.Is(err, apierr.ErrNotFound) || err == nil && subtle.ConstantTimeCompare([]byte(rec.Digest), []byte(digest)) != 1 {
		return "", "", ErrInvalidListenerToken
	}
	if err != nil {
		return "", "", cp.storeErr("authenticate listener token", err)
	}
	if now.Sub(time.UnixMicro(rec.Used)) >= tokenUseEvery {
		err = cp.st.Update(ctx, func(tx store.Tx) error {
			cur, err := getRecord[listenerTokenRecord](tx, colListenerTokens, tokenKey(id), apierr.KindListenerToken, id)
			if err != nil || cur.Digest != rec.Digest || now.Sub(time.UnixMicro(cur.Used)) < tokenUseEvery {
				return err // revoked meanwhile (refused below), or used meanwhile
			}
			cur.Used = now.UnixMicro()
			b, err := json.Marshal(cur)
			if err != nil {
				return err
			}
			return tx.Put(colListenerTokens, tokenKey(id), b)
		})
		if errors.Is(err, apierr.ErrNotFound) {
			return "", "", ErrInvalidListenerToken
		}
		if err != nil {
			return "", "", cp.storeErr("authenticate listener token", err)
		}
	}
	return rec.Tenant, rec.Listener, nil
}
