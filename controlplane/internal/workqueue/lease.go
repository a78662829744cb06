package workqueue

import (
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/deployplane/deployplane/store"
)

// retryToken is the token of a unit given back until a time (Requeue):
// nobody holds it, so claiming it once it has expired takes nothing over.
const retryToken = "retry"

// holdToken is the token of a unit held until Unhold (Hold): no claim
// takes it, whatever the time.
const holdToken = "hold"

// holdExpiry is the expiry a held unit's record carries, after every time
// a claim compares it with.
var holdExpiry = time.UnixMicro(1<<63 - 1)

// Lease is a claim's hold on a unit.
type Lease struct {
	Unit
	// Token is the claim's token, which the unit's record holds while the
	// lease is the claim's.
	Token string
	// Failures is the count of failures the lease keeps: as claimed, or
	// as stored when Own returned it.
	Failures int
	// Takeover: the claim took the unit from another claim whose lease
	// had expired (not from a unit given back).
	Takeover bool

	place bool // the claim took a place in its tenant's share (Done gives it back)
}

// encodeLease is the value of a unit's record: the lease of token until
// expiry, keeping a count of failures (none when 0).
func encodeLease(token string, expiry time.Time, failures int) []byte {
	v := token + " " + strconv.FormatInt(expiry.UnixMicro(), 10)
	if failures > 0 {
		v += " " + strconv.Itoa(failures)
	}
	return []byte(v)
}

// decodeLease returns the token, expiry and count of failures of a unit's
// record; a free lease has token "".
func decodeLease(v []byte) (token string, expiry time.Time, failures int) {
	tok, rest, ok := strings.Cut(string(v), " ")
	if !ok {
		return "", time.Time{}, 0
	}
	exp, n, _ := strings.Cut(rest, " ")
	us, _ := strconv.ParseInt(exp, 10, 64)
	failures, _ = strconv.Atoi(n)
	return tok, time.UnixMicro(us), failures
}

// Own reads l's unit in r and checks that l still holds it. It returns the
// lease as stored (l with the count of failures the unit keeps), nil when
// the unit is gone (its work done or removed), and ErrLeaseLost when
// another claim holds it, or nobody. An expired lease not taken over is
// still l's.
func Own(r store.Reader, l *Lease) (*Lease, error) {
	v, err := r.Get(Collection, l.Key())
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	tok, _, failures := decodeLease(v)
	if tok != l.Token {
		return nil, ErrLeaseLost
	}
	cur := *l
	cur.Failures, cur.place = failures, false
	return &cur, nil
}

// Requeue gives l's unit back in tx, keeping l's count of failures: free
// at once when at is zero (any claim takes it), else until at, after which
// a claim takes it without taking it over. The caller checked that l
// holds the unit (Own).
func Requeue(tx store.Tx, l *Lease, at time.Time) error {
	if at.IsZero() {
		var free []byte // an expiry long past keeps the count of failures
		if l.Failures > 0 {
			free = encodeLease("", time.UnixMicro(0), l.Failures)
		}
		return tx.Put(Collection, l.Key(), free)
	}
	return tx.Put(Collection, l.Key(), encodeLease(retryToken, at, l.Failures))
}

// Hold gives l's unit back in tx, claimable by nobody until Unhold frees
// it, keeping l's count of failures: work that waits for something the
// caller decides (a pinned deployment's revision). The caller checked
// that l holds the unit (Own).
func Hold(tx store.Tx, l *Lease) error {
	return tx.Put(Collection, l.Key(), encodeLease(holdToken, holdExpiry, l.Failures))
}

// Held reports whether u is held (Hold) in r.
func Held(r store.Reader, u Unit) (bool, error) {
	v, err := r.Get(Collection, u.Key())
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	tok, _, _ := decodeLease(v)
	return tok == holdToken, nil
}

// Unhold frees u in tx when it is held, keeping its count of failures,
// and reports whether it was; any other unit is left as it is.
func Unhold(tx store.Tx, u Unit) (bool, error) {
	v, err := tx.Get(Collection, u.Key())
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	tok, _, failures := decodeLease(v)
	if tok != holdToken {
		return false, nil
	}
	return true, Requeue(tx, &Lease{Unit: u, Failures: failures}, time.Time{})
}

// Text names the lease outside this process: its unit's key and its
// token, opaque.
func (l *Lease) Text() string {
	return base64.RawURLEncoding.EncodeToString([]byte(l.Key())) + "." + l.Token
}

// ParseText reads a lease's Text back, and reports whether s is one. The
// lease has no count of failures (Own reads it).
func ParseText(s string) (*Lease, bool) {
	enc, token, ok := strings.Cut(s, ".")
	k, err := base64.RawURLEncoding.DecodeString(enc)
	if !ok || err != nil || token == "" || strings.Contains(token, " ") {
		return nil, false
	}
	u, ok := Parse(string(k))
	if !ok {
		return nil, false
	}
	return &Lease{Unit: u, Token: token}, true
}
