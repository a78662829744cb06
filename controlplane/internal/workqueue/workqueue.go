// Package workqueue keeps the pending work of a store: one record per
// unit of work not yet done, in the collection cp_pending, whose value is
// the unit's lease. A unit is a revision to drive or a deployment to tear
// down; it lies in a range: a tenant's range for the server itself, or
// the range of one of the tenant's listeners, whose agents claim it.
//
// Add and Remove write units in the caller's transaction, beside the
// change that creates or ends the work, so that claiming never scans
// anything but the work itself. A Queue claims a unit with a lease:
// Claim takes the first free or expired unit of the server's ranges in key
// order, at most Options.TenantShare of one tenant at once (Done gives a
// place back), and ClaimIn the first of one listener's range. The lease
// is renewed (Renew, or Extend in the caller's transaction), checked in a
// transaction (Own) and given back (Release, Requeue) at once or until a
// time; a lease keeps a count of failures, which claims, renewals and
// releases keep. Once a lease expires another claim takes the unit over.
// Lease.Text names a lease outside the process (an agent's), and ParseText
// reads it back.
//
// Storage (T the tenant prefix, L a listener's and D a deployment's id
// part, ts R a revision's tail):
//
//	cp_pending  "r" T D ts R          -> lease   (a revision to drive, the server's)
//	cp_pending  "d" T D               -> lease   (a deployment to tear down, the server's)
//	cp_pending  "a" T L "r" D ts R    -> lease   (the same, for the agents of listener L)
//	cp_pending  "a" T L "d" D         -> lease
//
// A lease is "" (free) or "token expiry", the expiry in Unix microseconds,
// and " failures" after them when a count of failures is kept (a free
// lease with a count is " 0 failures"). A token is the claiming Queue's
// owner id, ":" and a sequence number, or "retry" for a unit given back
// until its expiry, which nobody holds: claiming it is no takeover. "a"
// sorts before "d" and "r": Claim starts past the agents' ranges with one
// seek and never enters them, and ClaimIn walks only its listener's
// records. A tenant at its share may have any number of units waiting,
// which lie together in key order (kind, then tenant): the first of them
// ends Claim's walk, and a new one starts past them with a seek, so that
// a claim costs one record and one seek per full tenant and kind, never
// that tenant's burst.
//
// The key parts are those of internal/keyenc, which Parse splits a key
// by: a tenant prefix, id parts, and a revision's tail, a time part and
// an id part.
//
// What the work means is not the package's: which range a deployment's
// work goes to and which ranges may hold it (its listener, and whether
// the server drives that listener), the tenant a prefix names, what is
// done with a claimed unit (the work built, the deployer called, the
// reports checked against the lifecycle), how long a failed teardown
// waits (the count is kept here, the schedule is not), and how a running
// unit keeps its lease and what it cancels once it is lost. The long poll
// of an agent stays with the caller too: each of its looks records the
// agent as seen and checks its listener.
package workqueue

import (
	"errors"
	"time"

	"github.com/deployplane/deployplane/controlplane/internal/keyenc"
	"github.com/deployplane/deployplane/store"
)

// Collection is the store collection of the pending work.
const Collection = "cp_pending"

// The first byte of a key of a server's range (a kind) or of an agents'
// range (then the kind follows the listener).
const (
	kindRevision = "r"
	kindTeardown = "d"
	kindAgent    = "a"
)

// ErrLeaseLost is returned when a lease is no longer its claim's: another
// claim took the unit over once the lease expired, or the unit was given
// back. Its text names controlplane, whose ErrLeaseLost it is.
var ErrLeaseLost = errors.New("controlplane: lease lost")

// Range is where a unit lies: a tenant's work for the server (Listener
// "") or for the agents of one of its listeners.
type Range struct {
	// Tenant is the tenant prefix.
	Tenant string
	// Listener is the listener's id part; "" for the server's range.
	Listener string
}

// start is what the range's keys start with before their kind: "" for a
// server's range, whose keys start with their kind.
func (rg Range) start() string {
	if rg.Listener == "" {
		return ""
	}
	return kindAgent + rg.Tenant + rg.Listener
}

// prefix is the prefix of the keys of a deployment's units of kind.
func (rg Range) prefix(kind, deployment string) string {
	if rg.Listener == "" {
		return kind + rg.Tenant + deployment
	}
	return rg.start() + kind + deployment
}

// Unit is a unit of work.
type Unit struct {
	Range Range
	// Deployment is the deployment's id part.
	Deployment string
	// Revision is the revision's tail (8 bytes of time key, then its id
	// part), "" for a teardown.
	Revision string
}

// Key is the unit's key in Collection.
func (u Unit) Key() string {
	if u.Revision == "" {
		return u.Range.prefix(kindTeardown, u.Deployment)
	}
	return u.Range.prefix(kindRevision, u.Deployment) + u.Revision
}

// Parse splits a key of Collection into its unit, and reports whether it
// is one.
func Parse(key string) (Unit, bool) {
	var u Unit
	if key == "" {
		return u, false
	}
	kind, rest := key[:1], key[1:]
	n := keyenc.TenantLen(rest)
	if n == 0 {
		return u, false
	}
	u.Range.Tenant, rest = rest[:n], rest[n:]
	if kind == kindAgent {
		n := keyenc.IDLen(rest)
		if n == 0 || n == len(rest) {
			return u, false
		}
		u.Range.Listener, kind, rest = rest[:n], rest[n:n+1], rest[n+1:]
	}
	if kind != kindRevision && kind != kindTeardown {
		return u, false
	}
	if n = keyenc.IDLen(rest); n == 0 {
		return u, false
	}
	u.Deployment, rest = rest[:n], rest[n:]
	if kind == kindRevision {
		if len(rest) < keyenc.TimeLen {
			return u, false
		}
		n := keyenc.IDLen(rest[keyenc.TimeLen:])
		if n == 0 {
			return u, false
		}
		u.Revision, rest = rest[:keyenc.TimeLen+n], rest[keyenc.TimeLen+n:]
	}
	return u, rest == ""
}

// Add queues u, free, in tx. A revision's unit must be new (its tail
// holds an id made for the revision: it is written without a look for an
// old one, store.Insert); a teardown's replaces any the deployment has.
func Add(tx store.Tx, u Unit) error {
	if u.Revision != "" {
		return store.Insert(tx, Collection, u.Key(), nil)
	}
	return tx.Put(Collection, u.Key(), nil)
}

// Remove deletes u in tx, whoever holds it; a unit not there is no error.
func Remove(tx store.Tx, u Unit) error {
	err := tx.Delete(Collection, u.Key())
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// Revisions lists the revision units of a deployment in rg, oldest first
// (by their tails' time keys).
func Revisions(r store.Reader, rg Range, deployment string) ([]Unit, error) {
	prefix := rg.prefix(kindRevision, deployment)
	var us []Unit
	err := r.Scan(Collection, prefix, nil, func(k string, _ []byte) (bool, error) {
		us = append(us, Unit{Range: rg, Deployment: deployment, Revision: k[len(prefix):]})
		return true, nil
	})
	return us, err
}

// RemoveDeployment deletes every unit of a deployment in rg, in tx: its
// revisions' and its teardown.
func RemoveDeployment(tx store.Tx, rg Range, deployment string) error {
	us, err := Revisions(tx, rg, deployment)
	if err != nil {
		return err
	}
	for _, u := range append(us, Unit{Range: rg, Deployment: deployment}) {
		if err := Remove(tx, u); err != nil {
			return err
		}
	}
	return nil
}

// Counts counts the units of work, as Count returns them: held (by a
// lease not expired, a unit given back until a time included) or waiting.
type Counts struct {
	RevisionsWaiting, RevisionsHeld int
	TeardownsWaiting, TeardownsHeld int
}

// Count counts every unit of every range at now, in one read of the
// collection: its cost follows the work not yet done. A key that is no
// unit's counts as a teardown.
func Count(r store.Reader, now time.Time) (Counts, error) {
	var c Counts
	err := r.Scan(Collection, "", nil, func(k string, v []byte) (bool, error) {
		tok, exp, _ := decodeLease(v)
		held := tok != "" && exp.After(now)
		u, ok := Parse(k)
		revision := ok && u.Revision != ""
		switch {
		case revision && held:
			c.RevisionsHeld++
		case revision:
			c.RevisionsWaiting++
		case held:
			c.TeardownsHeld++
		default:
			c.TeardownsWaiting++
		}
		return true, nil
	})
	return c, err
}

// keyAfterPrefix returns the least key greater than every key that starts
// with p, which must hold a byte below 0xff.
func keyAfterPrefix(p string) string {
	b := []byte(p)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1])
		}
	}
	panic("workqueue: keyAfterPrefix of a prefix of 0xff bytes")
}
