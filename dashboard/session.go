package dashboard

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/deployplane/deployplane/store"
)

// sessionCollection holds the sessions in the Store: one record per
// session, keyed by its expiry (16 hex digits of Unix seconds) and the
// SHA-256 of its token, so that the expired ones are a prefix scan from
// the start and a reader of the store cannot use a session it sees.
const sessionCollection = "dashboard_sessions"

// sweepBatch is the most expired sessions one sign-in removes.
const sweepBatch = 64

// session is one signed-in browser.
type session struct {
	// Principal names the key holder (Authenticator's principal; not a
	// secret).
	Principal string `json:"p"`
	// Tenants are those the key may use; Tenant the one chosen ("" until
	// chosen, when there are several).
	Tenants []string `json:"ts"`
	Tenant  string   `json:"t"`
	// CSRF is the token every form of this session carries.
	CSRF string `json:"c"`
	// Expires is when the session ends (Unix seconds).
	Expires int64 `json:"e"`
	// KeyDigest is the hex SHA-256 of the API key that opened the session,
	// kept when the Authenticator is a KeyChecker (which then checks it
	// again at every request); "" otherwise. It is the form key tables
	// hold: the key cannot be had from it, and it opens nothing.
	KeyDigest string `json:"k,omitempty"`

	key string // its key in sessionCollection (not stored)
}

// sessions keeps sessions in a store.Store.
type sessions struct {
	st  store.Store
	ttl time.Duration
	now func() time.Time
}

// errNoSession is a cookie that names no live session.
var errNoSession = errors.New("dashboard: no session")

// randomToken returns 32 random bytes, base64url.
func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// storeKey is the key of the session whose cookie carries expiry and token.
func storeKey(expires int64, token string) string {
	d := sha256.Sum256([]byte(token))
	return fmt.Sprintf("%016x.%s", expires, hex.EncodeToString(d[:]))
}

// keyDigest returns the session's KeyDigest, and whether it has a valid
// one.
func (s *session) keyDigest() ([sha256.Size]byte, bool) {
	var d [sha256.Size]byte
	if len(s.KeyDigest) != hex.EncodedLen(sha256.Size) {
		return d, false
	}
	_, err := hex.Decode(d[:], []byte(s.KeyDigest))
	return d, err == nil
}

// create stores a new session and returns it with its cookie value
// ("<expiry>.<token>"; the token is random, the key never in it).
// keyDigest is the hex SHA-256 of the key, or "" (see session.KeyDigest).
func (s *sessions) create(ctx context.Context, principal string, tenants []string, keyDigest string) (*session, string, error) {
	now := s.now()
	sess := &session{Principal: principal, Tenants: tenants, CSRF: randomToken(), Expires: now.Add(s.ttl).Unix(), KeyDigest: keyDigest}
	if len(tenants) == 1 {
		sess.Tenant = tenants[0]
	}
	token := randomToken()
	sess.key = storeKey(sess.Expires, token)
	b, err := json.Marshal(sess)
	if err != nil {
		return nil, "", err
	}
	cutoff := fmt.Sprintf("%016x", now.Unix())
	err = s.st.Update(ctx, func(tx store.Tx) error {
		// Sweep a batch of expired sessions: their keys sort before now.
		var old []string
		err := tx.Scan(sessionCollection, "", nil, func(k string, _ []byte) (bool, error) {
			if k >= cutoff {
				return false, nil
			}
			old = append(old, k)
			return len(old) < sweepBatch, nil
		})
		if err != nil {
			return err
		}
		for _, k := range old {
			if err := tx.Delete(sessionCollection, k); err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		return tx.Create(sessionCollection, sess.key, b)
	})
	if err != nil {
		return nil, "", err
	}
	return sess, strconv.FormatInt(sess.Expires, 16) + "." + token, nil
}

// parseCookie splits a cookie value into its store key.
func parseCookie(v string) (string, int64, bool) {
	exp, token, ok := strings.Cut(v, ".")
	if !ok || len(token) != 43 || len(exp) == 0 || len(exp) > 16 {
		return "", 0, false
	}
	e, err := strconv.ParseInt(exp, 16, 64)
	if err != nil || e <= 0 {
		return "", 0, false
	}
	return storeKey(e, token), e, true
}

// get returns the live session of a cookie value, or errNoSession.
func (s *sessions) get(ctx context.Context, cookie string) (*session, error) {
	key, exp, ok := parseCookie(cookie)
	if !ok || exp <= s.now().Unix() {
		return nil, errNoSession
	}
	var b []byte
	err := s.st.View(ctx, func(r store.Reader) error {
		var err error
		b, err = r.Get(sessionCollection, key)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, errNoSession
	}
	if err != nil {
		return nil, err
	}
	var sess session
	if err := json.Unmarshal(b, &sess); err != nil {
		return nil, fmt.Errorf("dashboard: a session record: %w", err)
	}
	if sess.Expires != exp {
		return nil, errNoSession
	}
	sess.key = key
	return &sess, nil
}

// setTenant records the tenant a session chose (one of its Tenants).
func (s *sessions) setTenant(ctx context.Context, sess *session, tenant string) error {
	next := *sess
	next.Tenant = tenant
	b, err := json.Marshal(&next)
	if err != nil {
		return err
	}
	err = s.st.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.Get(sessionCollection, sess.key); err != nil {
			return err
		}
		return tx.Put(sessionCollection, sess.key, b)
	})
	if errors.Is(err, store.ErrNotFound) {
		return errNoSession
	}
	if err == nil {
		sess.Tenant = tenant
	}
	return err
}

// remove ends a session.
func (s *sessions) remove(ctx context.Context, sess *session) error {
	err := s.st.Update(ctx, func(tx store.Tx) error { return tx.Delete(sessionCollection, sess.key) })
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// tokenEqual compares two tokens in constant time; an empty one never
// matches.
func tokenEqual(a, b string) bool {
	return a != "" && b != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
