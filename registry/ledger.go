package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/deployplane/deployplane/internal/expiry"
	"github.com/deployplane/deployplane/store"
)

// UploadLedger keeps the bytes each unfinished upload of a deployment has
// received, where the registries that count them against the quota see
// them. Replicas sharing one storage need a shared one: *TokenStore
// keeps it in the control plane's store.
type UploadLedger interface {
	// AddUpload adds n bytes to the count of an unfinished upload of the
	// deployment (the count starts at 0; n may be 0), kept until the
	// upload is maxAge old, and answers the sum of the counts of the
	// deployment's unfinished uploads after it.
	AddUpload(ctx context.Context, deploymentID, uploadID string, n int64, maxAge time.Duration) (int64, error)
	// DropUpload removes the count of an upload that is finished:
	// committed (its blob is in the storage), cancelled or refused.
	DropUpload(ctx context.Context, deploymentID, uploadID string) error
}

// memLedger is the UploadLedger of a registry given none: this process's
// uploads only. A count goes maxAge after it started, like the upload's
// data.
type memLedger struct {
	mu     sync.Mutex
	counts map[string]map[string]*memCount // deployment -> upload -> count
}

type memCount struct {
	bytes   int64
	expires time.Time
}

func (l *memLedger) AddUpload(_ context.Context, deploymentID, uploadID string, n int64, maxAge time.Duration) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if l.counts == nil {
		l.counts = map[string]map[string]*memCount{}
	}
	m := l.counts[deploymentID]
	if m == nil {
		m = map[string]*memCount{}
		l.counts[deploymentID] = m
	}
	c := m[uploadID]
	if c == nil {
		c = &memCount{expires: now.Add(maxAge)}
		m[uploadID] = c
	}
	c.bytes += n
	var sum int64
	for id, c := range m {
		if now.After(c.expires) {
			delete(m, id)
			continue
		}
		sum += c.bytes
	}
	return sum, nil
}

func (l *memLedger) DropUpload(_ context.Context, deploymentID, uploadID string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if m := l.counts[deploymentID]; m != nil {
		delete(m, uploadID)
		if len(m) == 0 {
			delete(l.counts, deploymentID)
		}
	}
	return nil
}

// uploadRecord is what TokenCollection holds of an unfinished upload,
// under q/<deployment id>/<upload id>.
type uploadRecord struct {
	Bytes   int64 `json:"n"`
	Expires int64 `json:"e"` // Unix microseconds
}

func ledgerKey(deploymentID, uploadID string) string { return "q/" + deploymentID + "/" + uploadID }

// AddUpload implements UploadLedger in the control plane's store, so that
// every replica counts every replica's unfinished uploads. A count goes
// maxAge after its upload's first bytes (Distribution removes the
// upload's data then), swept as counts are added.
func (s *TokenStore) AddUpload(ctx context.Context, deploymentID, uploadID string, n int64, maxAge time.Duration) (int64, error) {
	if strings.Contains(deploymentID, "/") || strings.Contains(uploadID, "/") {
		return 0, fmt.Errorf("registry: upload %q of deployment %q: not an id", uploadID, deploymentID)
	}
	now := s.now()
	var sum int64
	err := s.st.Update(ctx, func(tx store.Tx) error {
		sum = 0
		if err := expiry.Sweep(tx, TokenCollection, expiry.Key(now)); err != nil {
			return err
		}
		k := ledgerKey(deploymentID, uploadID)
		var rec uploadRecord
		b, err := tx.Get(TokenCollection, k)
		switch {
		case errors.Is(err, store.ErrNotFound):
			rec.Expires = now.Add(maxAge).UnixMicro()
			if err := tx.Put(TokenCollection, expiry.Entry(time.UnixMicro(rec.Expires), k), nil); err != nil {
				return err
			}
		case err != nil:
			return err
		default:
			if err := json.Unmarshal(b, &rec); err != nil {
				return fmt.Errorf("decoding upload record %s: %w", k, err)
			}
		}
		rec.Bytes += n
		if b, err = json.Marshal(rec); err != nil {
			return err
		}
		if err := tx.Put(TokenCollection, k, b); err != nil {
			return err
		}
		return tx.Scan(TokenCollection, "q/"+deploymentID+"/", nil, func(_ string, v []byte) (bool, error) {
			var r uploadRecord
			if err := json.Unmarshal(v, &r); err != nil {
				return false, err
			}
			if r.Expires > now.UnixMicro() {
				sum += r.Bytes
			}
			return true, nil
		})
	})
	if err != nil {
		return 0, storeErr("count upload", err)
	}
	return sum, nil
}

// DropUpload implements UploadLedger (its expiry index entry is swept
// in time).
func (s *TokenStore) DropUpload(ctx context.Context, deploymentID, uploadID string) error {
	err := s.st.Update(ctx, func(tx store.Tx) error {
		err := tx.Delete(TokenCollection, ledgerKey(deploymentID, uploadID))
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return err
	})
	if err != nil {
		return storeErr("drop upload", err)
	}
	return nil
}
