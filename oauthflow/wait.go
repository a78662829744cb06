package oauthflow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/store"
)

// WaitResult answers Wait: completed with Token, pending (timeout 0 only),
// timeout, or not_found.
type WaitResult struct {
	// Status is StatusCompleted, StatusPending, StatusTimeout or
	// StatusNotFound.
	Status string `json:"status"`
	// Token is the access token (completed).
	Token Secret `json:"token,omitempty"`
}

// LogValue keeps the token out of logs, whatever the handler.
func (r WaitResult) LogValue() slog.Value {
	return slog.GroupValue(slog.String("status", r.Status), slog.Bool("token_set", r.Token != ""))
}

// Wait long-polls the flow authID of tenant until it completes, timeout
// passes, or ctx is done (then it returns ctx.Err()). It answers completed
// with the token, timeout, or not_found when tenant has no such flow or it
// expired or failed. timeout must be within 0..MaxWaitTimeout (else a
// *apierr.ValidationError at ["query", "timeout"]); 0 checks once and answers
// pending while the flow is open. The HTTP layer applies
// DefaultWaitTimeout when the client gives none.
//
// Wait does not spin: it sleeps until a Callback in this process finishes
// the flow, re-reading the store every Options.PollInterval meanwhile so
// that a flow finished by another replica is seen too.
func (s *Service) Wait(ctx context.Context, tenant, authID string, timeout time.Duration) (WaitResult, error) {
	if err := apierr.CheckTenant(tenant); err != nil {
		return WaitResult{}, err
	}
	var ps problems
	if timeout < 0 {
		ps.add(apierr.TypeGreaterThanEqual, "Input should be greater than or equal to 0", "query", "timeout")
	} else if timeout > MaxWaitTimeout {
		ps.add(apierr.TypeLessThanEqual, "Input should be less than or equal to "+strconv.Itoa(int(MaxWaitTimeout/time.Second)), "query", "timeout")
	}
	if err := ps.err(); err != nil {
		return WaitResult{}, err
	}
	if authID == "" {
		return WaitResult{Status: StatusNotFound}, nil
	}

	done, unsubscribe := s.notes.subscribe(authID)
	defer func() { unsubscribe() }()
	res, final, err := s.check(ctx, tenant, authID)
	if err != nil || final || timeout == 0 {
		return res, err
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	poll := time.NewTicker(s.poll)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return WaitResult{}, ctx.Err()
		case <-deadline.C:
			res, final, err := s.check(ctx, tenant, authID)
			if err != nil || final {
				return res, err
			}
			return WaitResult{Status: StatusTimeout}, nil
		case <-done:
			unsubscribe()
			done, unsubscribe = s.notes.subscribe(authID)
		case <-poll.C:
		}
		res, final, err := s.check(ctx, tenant, authID)
		if err != nil || final {
			return res, err
		}
	}
}

// check reads the flow once. final says the answer will not change.
func (s *Service) check(ctx context.Context, tenant, authID string) (WaitResult, bool, error) {
	now := s.clock()
	var (
		flow flowRecord
		tok  *tokenRecord
		key  string
	)
	err := s.st.View(ctx, func(r store.Reader) error {
		flow, tok, key = flowRecord{}, nil, ""
		if err := getJSON(r, collFlows, authID, &flow); err != nil {
			return err
		}
		if flow.Tenant != tenant || flow.Status != flowCompleted {
			return nil
		}
		key = tokenKey(flow.Tenant, flow.ProviderID, flow.UserID)
		var rec tokenRecord
		if err := getJSON(r, collTokens, key, &rec); err != nil {
			return err
		}
		tok = &rec
		return nil
	})
	notFound := WaitResult{Status: StatusNotFound}
	switch {
	case errors.Is(err, store.ErrNotFound):
		return notFound, true, nil
	case err != nil:
		return WaitResult{}, false, err
	case flow.Tenant != tenant || flow.Status == flowFailed || !now.Before(flow.ExpiresAt):
		return notFound, true, nil
	case flow.Status != flowCompleted:
		return WaitResult{Status: StatusPending}, false, nil
	}
	secrets, err := s.openToken(key, tok)
	if err != nil {
		return WaitResult{}, false, err
	}
	return WaitResult{Status: StatusCompleted, Token: Secret(secrets.AccessToken)}, true, nil
}

// notifier wakes the Waits of this process when a flow finishes: one
// channel per awaited auth_id, closed by notify.
type notifier struct {
	mu      sync.Mutex
	waiters map[string]*waiters
}

type waiters struct {
	ch chan struct{}
	n  int
}

// subscribe returns a channel closed at the next notify(authID), and a
// function to call when no longer waiting (safe to call more than once).
func (nt *notifier) subscribe(authID string) (<-chan struct{}, func()) {
	nt.mu.Lock()
	defer nt.mu.Unlock()
	if nt.waiters == nil {
		nt.waiters = make(map[string]*waiters)
	}
	w := nt.waiters[authID]
	if w == nil {
		w = &waiters{ch: make(chan struct{})}
		nt.waiters[authID] = w
	}
	w.n++
	var once sync.Once
	return w.ch, func() {
		once.Do(func() {
			nt.mu.Lock()
			defer nt.mu.Unlock()
			w.n--
			if w.n == 0 && nt.waiters[authID] == w {
				delete(nt.waiters, authID)
			}
		})
	}
}

// notify wakes every current waiter of authID.
func (nt *notifier) notify(authID string) {
	nt.mu.Lock()
	defer nt.mu.Unlock()
	if w := nt.waiters[authID]; w != nil {
		close(w.ch)
		delete(nt.waiters, authID)
	}
}

// sweepPerFlow is how many expired flows each new flow removes: cleanup
// is lazy, paid for a little at a time by Authenticate.
const sweepPerFlow = 16

// sweepExpired walks up to limit expiry index entries due at or before
// now, removing each entry and, unless it was extended, its flow and state
// entry. It reports how many entries it walked and how many flows it
// removed.
func sweepExpired(tx store.Tx, now time.Time, limit int) (walked, removed int, err error) {
	var keys []string
	err = tx.Scan(collFlowExpiry, "", nil, func(key string, _ []byte) (bool, error) {
		nanos, _, ok := strings.Cut(key, "\x00")
		if !ok {
			return false, fmt.Errorf("oauthflow: corrupt expiry key %q", key)
		}
		n, err := strconv.ParseInt(nanos, 10, 64)
		if err != nil {
			return false, fmt.Errorf("oauthflow: corrupt expiry key %q", key)
		}
		if n > now.UnixNano() {
			return false, nil
		}
		keys = append(keys, key)
		return len(keys) < limit, nil
	})
	if err != nil {
		return 0, 0, err
	}
	for _, k := range keys {
		if err := tx.Delete(collFlowExpiry, k); err != nil {
			return 0, 0, err
		}
		_, authID, _ := strings.Cut(k, "\x00")
		var flow flowRecord
		switch err := getJSON(tx, collFlows, authID, &flow); {
		case errors.Is(err, store.ErrNotFound):
			continue
		case err != nil:
			return 0, 0, err
		}
		if now.Before(flow.ExpiresAt) {
			continue // extended; its current expiry key is elsewhere
		}
		if err := tx.Delete(collFlows, authID); err != nil {
			return 0, 0, err
		}
		if err := tx.Delete(collStates, flow.StateKey); err != nil && !errors.Is(err, store.ErrNotFound) {
			return 0, 0, err
		}
		removed++
	}
	return len(keys), removed, nil
}

// Cleanup removes every expired flow and reports how many. Authenticate
// already removes a few expired flows each time it starts one, so calling
// Cleanup is optional; a server may run it periodically to bound storage
// when flows are rarely started.
func (s *Service) Cleanup(ctx context.Context) (int, error) {
	const batch = 256
	total := 0
	for {
		now := s.clock()
		var walked, removed int
		err := s.st.Update(ctx, func(tx store.Tx) error {
			var err error
			walked, removed, err = sweepExpired(tx, now, batch)
			return err
		})
		total += removed
		if err != nil || walked < batch {
			return total, err
		}
	}
}
