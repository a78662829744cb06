// Package tokens keeps bearer tokens, each made for one listener of a
// tenant: the credentials of a listener's agents. A token is Prefix, its
// id, "_" and a random secret; it is shown once, when created, and
// stored only as the SHA-256 digest of the whole token, under its id, so
// that authenticating one is one read and a comparison in constant time.
//
// Create, Delete and DeleteListener write in the caller's transaction,
// beside its check that the listener exists; List pages a listener's
// tokens newest first. Authenticate runs its own transactions: it reads
// the token, and records its use (Token.Used) at most once per UseEvery,
// so that an agent's calls write once a minute, not with each call.
//
// Storage (ts16 is the creation time: 16 hex digits of its Unix
// microseconds with the sign bit flipped, so that byte order is time
// order):
//
//	cp_listener_tokens  "k" id                          -> record JSON {"t":tenant,"l":listener,"h":hex digest,"c":created,"u":used}
//	cp_listener_tokens  "o" tenant/listener/ts16/id     -> "" (the listener's tokens, oldest first)
//
// times in Unix microseconds, "u" left out until the token is used. The
// tenant and the listener are the caller's names, without "/"; the ids
// are the caller's too (what it may ask Authenticate with is its check).
// What a listener is, who may manage its tokens and what a token lets
// through are the caller's.
package tokens

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/deployplane/deployplane/store"
)

// Collection is the store collection of the tokens.
const Collection = "cp_listener_tokens"

// Prefix starts every token.
const Prefix = "dpl_lt_"

// UseEvery is how often, at most, Authenticate writes a token's use.
const UseEvery = time.Minute

// ErrInvalid is returned by Authenticate for a token that is malformed,
// unknown or deleted. Its text names controlplane, whose
// ErrInvalidListenerToken it is.
var ErrInvalid = errors.New("controlplane: invalid listener token")

// NotFoundError is the error of a token that is not stored, or not of
// the listener named.
type NotFoundError struct {
	ID string
}

func (e *NotFoundError) Error() string { return "tokens: no token " + e.ID }

// Token is a token as lists show it: never its secret.
type Token struct {
	ID      string
	Created time.Time
	// Used is when Authenticate last recorded its use; zero if never.
	Used time.Time
}

// record is what Collection holds of a token.
type record struct {
	Tenant   string `json:"t"`
	Listener string `json:"l"`
	Digest   string `json:"h"` // hex SHA-256 of the whole token
	Created  int64  `json:"c"` // Unix microseconds
	Used     int64  `json:"u,omitzero"`
}

func (r *record) token(id string) Token {
	t := Token{ID: id, Created: time.UnixMicro(r.Created).UTC()}
	if r.Used != 0 {
		t.Used = time.UnixMicro(r.Used).UTC()
	}
	return t
}

func recordKey(id string) string { return "k" + id }

func orderPrefix(tenant, listener string) string { return "o" + tenant + "/" + listener + "/" }

func orderKey(r *record, id string) string {
	return orderPrefix(r.Tenant, r.Listener) + fmt.Sprintf("%016x", uint64(r.Created)^(1<<63)) + "/" + id
}

func digest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// get reads the record of id, or a *NotFoundError.
func get(r store.Reader, id string) (*record, error) {
	b, err := r.Get(Collection, recordKey(id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, &NotFoundError{ID: id}
	}
	if err != nil {
		return nil, err
	}
	var rec record
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("controlplane: decoding listener token %s: %w", id, err)
	}
	return &rec, nil
}

// Create makes a token of id for the tenant's listener, created at now,
// in tx, and returns it: the only time it is seen. id must be new.
func Create(tx store.Tx, tenant, listener, id string, now time.Time) (string, error) {
	token := Prefix + id + "_" + rand.Text()
	rec := record{Tenant: tenant, Listener: listener, Digest: digest(token), Created: now.UnixMicro()}
	b, err := json.Marshal(&rec)
	if err != nil {
		return "", err
	}
	if err := tx.Create(Collection, recordKey(id), b); err != nil {
		return "", err
	}
	if err := tx.Create(Collection, orderKey(&rec, id), nil); err != nil {
		return "", err
	}
	return token, nil
}

// List returns a page of the tokens of the tenant's listener, newest
// first: limit tokens after the first offset.
func List(r store.Reader, tenant, listener string, offset, limit int) ([]Token, error) {
	prefix := orderPrefix(tenant, listener)
	var ids []string
	err := r.Scan(Collection, prefix, &store.ScanOptions{Reverse: true}, func(k string, _ []byte) (bool, error) {
		if offset > 0 {
			offset--
			return true, nil
		}
		ids = append(ids, tailID(k[len(prefix):]))
		return len(ids) < limit, nil
	})
	if err != nil {
		return nil, err
	}
	page := make([]Token, 0, len(ids))
	for _, id := range ids {
		rec, err := get(r, id)
		if err != nil {
			return nil, err
		}
		page = append(page, rec.token(id))
	}
	return page, nil
}

// tailID is the id of an order key's tail (ts16/id).
func tailID(tail string) string {
	_, id, _ := strings.Cut(tail, "/")
	return id
}

// Delete deletes the token id of the tenant's listener in tx: it is
// refused from then on. Its error is a *NotFoundError when there is no
// such token, or it is another listener's.
func Delete(tx store.Tx, tenant, listener, id string) error {
	rec, err := get(tx, id)
	if err != nil {
		return err
	}
	if rec.Tenant != tenant || rec.Listener != listener {
		return &NotFoundError{ID: id}
	}
	return remove(tx, id, rec)
}

func remove(tx store.Tx, id string, rec *record) error {
	if err := tx.Delete(Collection, recordKey(id)); err != nil {
		return err
	}
	return tx.Delete(Collection, orderKey(rec, id))
}

// DeleteListener deletes every token of the tenant's listener in tx.
func DeleteListener(tx store.Tx, tenant, listener string) error {
	prefix := orderPrefix(tenant, listener)
	var ids []string
	err := tx.Scan(Collection, prefix, nil, func(k string, _ []byte) (bool, error) {
		ids = append(ids, tailID(k[len(prefix):]))
		return true, nil
	})
	if err != nil {
		return err
	}
	for _, id := range ids {
		rec, err := get(tx, id)
		if err != nil {
			return err
		}
		if err := remove(tx, id, rec); err != nil {
			return err
		}
	}
	return nil
}

// Parse returns the id of a token of the form Create makes, and whether
// it has that form (Prefix, an id, "_" and a secret, neither empty).
func Parse(token string) (id string, ok bool) {
	rest, ok := strings.CutPrefix(token, Prefix)
	i := strings.LastIndexByte(rest, '_')
	if !ok || i <= 0 || i == len(rest)-1 {
		return "", false
	}
	return rest[:i], true
}

// Authenticate returns the tenant and listener a token was made for, and
// records its use at now when the last one recorded is UseEvery or more
// before, in an Update of st. The token's digest is compared in constant
// time. Errors: ErrInvalid for a token that is malformed, unknown or
// deleted (also while its use is recorded), or the store's.
func Authenticate(ctx context.Context, st store.Store, token string, now time.Time) (tenant, listener string, err error) {
	id, ok := Parse(token)
	if !ok {
		return "", "", ErrInvalid
	}
	d := digest(token)
	var rec *record
	err = st.View(ctx, func(r store.Reader) error {
		var err error
		rec, err = get(r, id)
		return err
	})
	if errors.As(err, new(*NotFoundError)) || err == nil && subtle.ConstantTimeCompare([]byte(rec.Digest), []byte(d)) != 1 {
		return "", "", ErrInvalid
	}
	if err != nil {
		return "", "", err
	}
	if now.Sub(time.UnixMicro(rec.Used)) >= UseEvery {
		err = st.Update(ctx, func(tx store.Tx) error {
			cur, err := get(tx, id)
			if err != nil || cur.Digest != rec.Digest || now.Sub(time.UnixMicro(cur.Used)) < UseEvery {
				return err // deleted meanwhile (refused below), or used meanwhile
			}
			cur.Used = now.UnixMicro()
			b, err := json.Marshal(cur)
			if err != nil {
				return err
			}
			return tx.Put(Collection, recordKey(id), b)
		})
		if errors.As(err, new(*NotFoundError)) {
			return "", "", ErrInvalid
		}
		if err != nil {
			return "", "", err
		}
	}
	return rec.Tenant, rec.Listener, nil
}
