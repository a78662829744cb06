package workqueue

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/deployplane/deployplane/controlplane/internal/keyenc"
	"github.com/deployplane/deployplane/store"
)

// Options tune a Queue. Zero fields take the defaults.
type Options struct {
	// Lease is how long a claim, a renewal or Extend holds a unit.
	// Default DefaultLease.
	Lease time.Duration
	// TenantShare is how many units of one tenant the Claims of this
	// Queue hold at once, until Done: a tenant at its share is passed
	// over, and other tenants' units are claimed. 0: no cap.
	TenantShare int
	// NewID makes the Queue's owner id, the first part of its claims'
	// tokens, at its first claim; ids must not collide between the
	// Queues over one store. Default: a random UUID.
	NewID func() string
}

// DefaultLease is the default of Options.Lease.
const DefaultLease = 30 * time.Second

// Queue claims the units of the work in a store. It is safe for
// concurrent use; the Queues of several processes may share one store.
type Queue struct {
	st     store.Store
	o      Options
	shares shares

	ownerOnce sync.Once
	owner     string
	claims    atomic.Uint64
}

// New returns the Queue of st; nil o means the defaults.
func New(st store.Store, o *Options) *Queue {
	q := &Queue{st: st}
	if o != nil {
		q.o = *o
	}
	if q.o.Lease <= 0 {
		q.o.Lease = DefaultLease
	}
	if q.o.NewID == nil {
		q.o.NewID = uuid.NewString
	}
	q.shares = shares{limit: max(q.o.TenantShare, 0), n: map[string]int{}}
	return q
}

// claimTries bounds the searches of one claim whose candidates others
// claimed first; the caller's next poll searches again.
const claimTries = 4

// Claim takes the first unit of the server's ranges, in key order, whose
// lease is free or expired at now and whose tenant is below its share
// (Options.TenantShare), with a lease until now plus Options.Lease, and a
// place in its tenant's share, which Done gives back. It returns nil when
// there is none. Its error is the store's, unwrapped.
//
// It looks in a View first, so that an idle poll writes nothing (an empty
// Update still commits, and syncs, on some stores), then claims in an
// Update that reads and writes only the candidate's record and checks its
// lease again: a claim does not read the range of records that concurrent
// writers of other units write to (over storepg, every such write would
// conflict with it). When another claim took the candidate first, or
// another claim of this Queue filled the candidate's tenant's share
// meanwhile, the search starts again, a few times.
//
// The walk's cost follows the work in flight and waiting: the held
// records of the tenants below their share, up to the first claimable
// one, plus one record and one seek per full tenant and kind (see the
// package doc).
func (q *Queue) Claim(ctx context.Context, now time.Time) (*Lease, error) {
	for range claimTries {
		full := q.shares.full()
		var found *Unit
		err := q.st.View(ctx, func(r store.Reader) error {
			var err error
			found, err = firstClaimable(r, "", keyAfterPrefix(kindAgent), now, full)
			return err
		})
		if err != nil || found == nil {
			return nil, err
		}
		if !q.shares.take(found.Range.Tenant) {
			continue
		}
		l, err := q.take(ctx, *found, now)
		if err != nil || l == nil {
			q.shares.leave(found.Range.Tenant)
		}
		if err != nil {
			return nil, err
		}
		if l != nil {
			l.place = q.shares.limit > 0
			return l, nil
		}
	}
	return nil, nil
}

// ClaimIn is Claim over the range of one listener's agents (rg.Listener
// not ""), without shares: its walk reads only that range's records.
func (q *Queue) ClaimIn(ctx context.Context, rg Range, now time.Time) (*Lease, error) {
	if rg.Listener == "" {
		return nil, errors.New("workqueue: ClaimIn needs a listener's range")
	}
	for range claimTries {
		var found *Unit
		err := q.st.View(ctx, func(r store.Reader) error {
			var err error
			found, err = firstClaimable(r, rg.start(), "", now, nil)
			return err
		})
		if err != nil || found == nil {
			return nil, err
		}
		l, err := q.take(ctx, *found, now)
		if err != nil || l != nil {
			return l, err
		}
	}
	return nil, nil
}

// Done gives back the place in its tenant's share that Claim took for l.
// Call it once per Lease of Claim; for other leases it does nothing.
func (q *Queue) Done(l *Lease) {
	if l.place {
		q.shares.leave(l.Range.Tenant)
	}
}

// firstClaimable finds the first unit under prefix, from start ("" for
// the first), whose lease is free or expired at now and whose tenant is
// not in full. The first record of a full tenant ends the walk, and a new
// one starts at the first key past that tenant's records of that kind.
func firstClaimable(r store.Reader, prefix, start string, now time.Time, full map[string]bool) (*Unit, error) {
	var k string
	opts := &store.ScanOptions{Start: start}
	for {
		var past string // where the walk goes on, past a full tenant's records
		err := r.Scan(Collection, prefix, opts, func(key string, v []byte) (bool, error) {
			if len(full) > 0 && len(key) > 1 {
				if n := keyenc.TenantLen(key[1:]); n > 0 && full[key[1:1+n]] {
					past = keyAfterPrefix(key[:1+n])
					return false, nil
				}
			}
			if t, exp, _ := decodeLease(v); t != "" && exp.After(now) {
				return true, nil
			}
			k = key
			return false, nil
		})
		if err != nil {
			return nil, err
		}
		if past == "" {
			break
		}
		opts.Start = past
	}
	if k == "" {
		return nil, nil
	}
	u, ok := Parse(k)
	if !ok {
		return nil, errors.New("workqueue: a malformed key " + strconv.Quote(k))
	}
	return &u, nil
}

// take claims u, a unit a View saw claimable at now, in an Update that
// reads and writes only its record and checks its lease again. It returns
// nil when the unit was done or claimed meanwhile.
func (q *Queue) take(ctx context.Context, u Unit, now time.Time) (*Lease, error) {
	q.ownerOnce.Do(func() { q.owner = q.o.NewID() })
	token := q.owner + ":" + strconv.FormatUint(q.claims.Add(1), 10)
	var l *Lease
	err := q.st.Update(ctx, func(tx store.Tx) error {
		l = nil
		v, err := tx.Get(Collection, u.Key())
		if errors.Is(err, store.ErrNotFound) {
			return nil // done meanwhile
		}
		if err != nil {
			return err
		}
		t, exp, failures := decodeLease(v)
		if t != "" && exp.After(now) {
			return nil // claimed meanwhile
		}
		l = &Lease{Unit: u, Token: token, Failures: failures, Takeover: t != "" && t != retryToken}
		return tx.Put(Collection, u.Key(), encodeLease(token, now.Add(q.o.Lease), failures))
	})
	if err != nil {
		return nil, err
	}
	return l, nil
}

// Extend pushes the expiry of l's lease to now plus Options.Lease in tx,
// keeping l's count of failures. The caller checked that l holds the unit
// (Own).
func (q *Queue) Extend(tx store.Tx, l *Lease, now time.Time) error {
	return tx.Put(Collection, l.Key(), encodeLease(l.Token, now.Add(q.o.Lease), l.Failures))
}

// Renew extends l's lease in an Update of its own, keeping the count of
// failures the unit keeps. Errors: ErrLeaseLost when the lease is not l's
// or the unit is gone, or the store's.
func (q *Queue) Renew(ctx context.Context, l *Lease, now time.Time) error {
	return q.st.Update(ctx, func(tx store.Tx) error {
		cur, err := Own(tx, l)
		if err != nil {
			return err
		}
		if cur == nil {
			return ErrLeaseLost
		}
		return q.Extend(tx, cur, now)
	})
}

// Release gives l's unit back in an Update of its own (Requeue): at once
// when at is zero, else until at. Nothing happens when the lease is not
// l's or the unit is gone. Its error is the store's.
func (q *Queue) Release(ctx context.Context, l *Lease, at time.Time) error {
	err := q.st.Update(ctx, func(tx store.Tx) error {
		cur, err := Own(tx, l)
		if err != nil || cur == nil {
			return err
		}
		return Requeue(tx, cur, at)
	})
	if errors.Is(err, ErrLeaseLost) {
		return nil
	}
	return err
}

// shares counts the units of each tenant (by prefix) that a Queue's
// claims hold, so that one tenant takes at most limit of them.
type shares struct {
	limit int // 0: no cap
	mu    sync.Mutex
	n     map[string]int // tenant prefix -> units held
}

// full returns the tenants at their share.
func (s *shares) full() map[string]bool {
	if s.limit == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var f map[string]bool
	for tp, n := range s.n {
		if n >= s.limit {
			if f == nil {
				f = map[string]bool{}
			}
			f[tp] = true
		}
	}
	return f
}

// take takes a place in the tenant's share, unless it is full.
func (s *shares) take(tp string) bool {
	if s.limit == 0 {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n[tp] >= s.limit {
		return false
	}
	s.n[tp]++
	return true
}

// leave gives back a place take took.
func (s *shares) leave(tp string) {
	if s.limit == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n[tp]--
	if s.n[tp] <= 0 {
		delete(s.n, tp)
	}
}
