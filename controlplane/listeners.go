package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane/internal/index"
	"github.com/deployplane/deployplane/controlplane/internal/tokens"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/wiretime"
)

// checkComputeConfig checks a listener's k8s namespaces: DNS labels, no
// duplicates, at most MaxItems.
func (c *checker) checkComputeConfig(loc []any, cc *ComputeConfig) {
	if cc == nil {
		return
	}
	nl := at(loc, "k8s_namespaces")
	if !c.items(nl, len(cc.K8sNamespaces), c.lim.MaxItems) {
		return
	}
	seen := map[string]bool{}
	for i, ns := range cc.K8sNamespaces {
		if c.pattern(at(nl, i), validDNSLabel(ns), dnsLabelPattern) {
			if seen[ns] {
				c.add(at(nl, i), apierr.TypeDuplicate, "Namespaces should be unique")
			}
			seen[ns] = true
		}
	}
}

// storedListener is what cp_listeners holds of a listener: its wire JSON
// without the status, which answers compute when they are made, and with
// last_heartbeat_at only once an agent was seen (so that a listener no
// agent serves is stored as it was before agents).
type storedListener struct {
	ID              string         `json:"id"`
	ComputeType     string         `json:"compute_type"`
	ComputeID       string         `json:"compute_id"`
	ComputeConfig   ComputeConfig  `json:"compute_config"`
	Version         string         `json:"version"`
	CreatedAt       wiretime.Time  `json:"created_at"`
	UpdatedAt       wiretime.Time  `json:"updated_at"`
	LastHeartbeatAt *wiretime.Time `json:"last_heartbeat_at,omitzero"`
	// Deleting: a forced delete of the listener waits for its
	// deployments to be removed (DeleteListenerWith). Not on the wire;
	// putListener keeps it.
	Deleting bool `json:"deleting,omitzero"`
}

func (s *storedListener) listener() *Listener {
	return &Listener{ID: s.ID, ComputeType: s.ComputeType, ComputeID: s.ComputeID, ComputeConfig: s.ComputeConfig,
		Version: s.Version, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt, LastHeartbeatAt: s.LastHeartbeatAt}
}

// encodeListener is the record of l in cp_listeners.
func encodeListener(l *Listener) ([]byte, error) {
	return json.Marshal(storedOf(l))
}

// storedOf is l's storedListener, without a mark.
func storedOf(l *Listener) *storedListener {
	return &storedListener{ID: l.ID, ComputeType: l.ComputeType, ComputeID: l.ComputeID,
		ComputeConfig: l.ComputeConfig, Version: l.Version, CreatedAt: l.CreatedAt, UpdatedAt: l.UpdatedAt,
		LastHeartbeatAt: l.LastHeartbeatAt}
}

// putListener writes l's record, keeping the mark of a forced delete that
// waits (storedListener.Deleting).
func putListener(tx store.Tx, tenant string, l *Listener) error {
	deleting, err := listenerDeleting(tx, tenant, l.ID)
	if err != nil {
		return err
	}
	return writeListener(tx, tenant, l, deleting)
}

// writeListener writes l's record with the mark deleting.
func writeListener(tx store.Tx, tenant string, l *Listener, deleting bool) error {
	s := storedOf(l)
	s.Deleting = deleting
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return tx.Put(colListeners, key(tenant, l.ID), b)
}

// listenerDeleting reports whether a forced delete of the tenant's
// listener waits for its deployments (false for a listener not stored).
func listenerDeleting(r store.Reader, tenant, id string) (bool, error) {
	s, err := getRecord[storedListener](r, colListeners, key(tenant, id), apierr.KindListener, id)
	if errors.Is(err, apierr.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return s.Deleting, nil
}

func listenerComputeKey(tenant, computeID string) string {
	return key(tenant, url.QueryEscape(computeID))
}

// checkCreateListener is every check of CreateListener.
func (cp *ControlPlane) checkCreateListener(req *CreateListenerRequest) []apierr.Problem {
	c := &checker{lim: cp.lim}
	switch {
	case req.ComputeType == nil:
		c.add([]any{"body", "compute_type"}, apierr.TypeMissing, apierr.MsgFieldRequired)
	case *req.ComputeType != ComputeTypeK8s && *req.ComputeType != ComputeTypeDocker:
		c.add([]any{"body", "compute_type"}, apierr.TypeLiteralError, "Input should be 'k8s' or 'docker'")
	}
	if req.ComputeID == nil {
		c.add([]any{"body", "compute_id"}, apierr.TypeMissing, apierr.MsgFieldRequired)
	} else {
		c.str([]any{"body", "compute_id"}, *req.ComputeID, 253)
	}
	c.checkComputeConfig([]any{"body", "compute_config"}, req.ComputeConfig)
	if req.Version != nil && len(*req.Version) > 256 {
		c.add([]any{"body", "version"}, apierr.TypeStringTooLong, "String should have at most 256 bytes")
	}
	return c.ps
}

// checkUpdateListener is every check of UpdateListener that needs no
// stored listener.
func (cp *ControlPlane) checkUpdateListener(req *UpdateListenerRequest) []apierr.Problem {
	c := &checker{lim: cp.lim}
	c.checkComputeConfig([]any{"body", "compute_config"}, req.ComputeConfig)
	if req.Version != nil && len(*req.Version) > 256 {
		c.add([]any{"body", "version"}, apierr.TypeStringTooLong, "String should have at most 256 bytes")
	}
	return c.ps
}

// listenerImmutables appends to ps the problems of a PATCH that would
// change listener l's immutable fields.
func listenerImmutables(req *UpdateListenerRequest, l *Listener, ps []apierr.Problem) []apierr.Problem {
	if req.ComputeType != nil && *req.ComputeType != l.ComputeType {
		ps = append(ps, apierr.Problem{Loc: []any{"body", "compute_type"}, Type: apierr.TypeImmutableField, Msg: apierr.MsgImmutable})
	}
	if req.ComputeID != nil && *req.ComputeID != l.ComputeID {
		ps = append(ps, apierr.Problem{Loc: []any{"body", "compute_id"}, Type: apierr.TypeImmutableField, Msg: apierr.MsgImmutable})
	}
	return ps
}

// CreateListener registers a listener. compute_type must be "k8s" or "docker";
// compute_id is required and unique per tenant (apierr.ErrConflict). Errors:
// *apierr.ValidationError, apierr.ErrConflict.
func (cp *ControlPlane) CreateListener(ctx context.Context, tenant string, req *CreateListenerRequest) (*Listener, error) {
	if err := apierr.CheckTenant(tenant); err != nil {
		return nil, err
	}
	if req == nil {
		req = &CreateListenerRequest{}
	}
	if err := apierr.Validation(cp.checkCreateListener(req)...); err != nil {
		return nil, err
	}
	now := cp.now()
	l := &Listener{ID: cp.newID(), ComputeType: *req.ComputeType, ComputeID: *req.ComputeID,
		ComputeConfig: ComputeConfig{K8sNamespaces: []string{}}, CreatedAt: wiretime.New(now), UpdatedAt: wiretime.New(now)}
	if req.ComputeConfig != nil && req.ComputeConfig.K8sNamespaces != nil {
		l.ComputeConfig.K8sNamespaces = slices.Clone(req.ComputeConfig.K8sNamespaces)
	}
	if req.Version != nil {
		l.Version = *req.Version
	}
	b, err := encodeListener(l)
	if err != nil {
		return nil, err
	}
	err = cp.st.Update(ctx, func(tx store.Tx) error {
		if err := tx.Create(colListenerCompute, listenerComputeKey(tenant, l.ComputeID), []byte(l.ID)); err != nil {
			if errors.Is(err, store.ErrAlreadyExists) {
				return apierr.Conflictf("A listener with compute_id '%s' is already registered.", l.ComputeID)
			}
			return err
		}
		if err := tx.Create(colListeners, key(tenant, l.ID), b); err != nil {
			return err
		}
		return tx.Put(colListenerOrder, key(tenant, createdKey(now), l.ID), nil)
	})
	if err != nil {
		return nil, cp.storeErr("create listener", err)
	}
	cp.answerListener(l, now)
	return l, nil
}

// GetListener returns a listener of the tenant, or a *apierr.NotFoundError.
func (cp *ControlPlane) GetListener(ctx context.Context, tenant, id string) (*Listener, error) {
	if err := apierr.CheckTenant(tenant); err != nil {
		return nil, err
	}
	cid, ok := pathID(id)
	if !ok {
		return nil, &apierr.NotFoundError{Kind: apierr.KindListener, ID: id}
	}
	var l *Listener
	err := cp.st.View(ctx, func(r store.Reader) error {
		var err error
		l, err = getListener(r, tenant, cid)
		return err
	})
	if err != nil {
		return nil, cp.storeErr("get listener", err)
	}
	cp.answerListener(l, cp.now())
	return l, nil
}

// ListListeners returns one page of the tenant's listeners, newest first.
// Errors: *apierr.ValidationError.
func (cp *ControlPlane) ListListeners(ctx context.Context, tenant string, q *ListListenersQuery) (*ListenerPage, error) {
	if err := apierr.CheckTenant(tenant); err != nil {
		return nil, err
	}
	if q == nil {
		q = &ListListenersQuery{}
	}
	if err := q.ValidateWith(cp.lim); err != nil {
		return nil, err
	}
	limit := limitOf(q.Limit)
	var page []Listener
	err := cp.st.View(ctx, func(r store.Reader) error {
		page = page[:0]
		ids, err := pageIDs(r, colListenerOrder, tenant+"/", q.Offset, limit, nil, textTailID)
		if err != nil {
			return err
		}
		for _, id := range ids {
			l, err := getListener(r, tenant, id)
			if err != nil {
				return err
			}
			page = append(page, *l)
		}
		return nil
	})
	if err != nil {
		return nil, cp.storeErr("list listeners", err)
	}
	if page == nil {
		page = []Listener{}
	}
	now := cp.now()
	for i := range page {
		cp.answerListener(&page[i], now)
	}
	return &ListenerPage{Resources: page, Offset: q.Offset + len(page)}, nil
}

// UpdateListener applies a PATCH to a listener: compute_type and compute_id
// are accepted only when equal to the stored values (422 immutable_field);
// compute_config replaces the stored one; version changes in place. Errors:
// *apierr.NotFoundError, *apierr.ValidationError.
func (cp *ControlPlane) UpdateListener(ctx context.Context, tenant, id string, req *UpdateListenerRequest) (*Listener, error) {
	if err := apierr.CheckTenant(tenant); err != nil {
		return nil, err
	}
	cid, ok := pathID(id)
	if !ok {
		return nil, &apierr.NotFoundError{Kind: apierr.KindListener, ID: id}
	}
	if req == nil {
		req = &UpdateListenerRequest{}
	}
	pure := cp.checkUpdateListener(req)
	now := cp.now()
	var out *Listener
	err := cp.st.Update(ctx, func(tx store.Tx) error {
		out = nil
		l, err := getListener(tx, tenant, cid)
		if err != nil {
			return err
		}
		ps := listenerImmutables(req, l, slices.Clone(pure))
		if err := apierr.Validation(ps...); err != nil {
			return err
		}
		next := *l
		if req.ComputeConfig != nil {
			next.ComputeConfig.K8sNamespaces = slices.Clone(req.ComputeConfig.K8sNamespaces)
			if next.ComputeConfig.K8sNamespaces == nil {
				next.ComputeConfig.K8sNamespaces = []string{}
			}
		}
		if req.Version != nil {
			next.Version = *req.Version
		}
		if slices.Equal(next.ComputeConfig.K8sNamespaces, l.ComputeConfig.K8sNamespaces) && next.Version == l.Version {
			out = l
			return nil
		}
		next.UpdatedAt = later(now, l.UpdatedAt)
		out = &next
		return putListener(tx, tenant, &next)
	})
	if err != nil {
		return nil, cp.storeErr("update listener", err)
	}
	cp.answerListener(out, now)
	return out, nil
}

// DeleteListener is DeleteListenerWith with the default options.
func (cp *ControlPlane) DeleteListener(ctx context.Context, tenant, id string) error {
	return cp.DeleteListenerWith(ctx, tenant, id, nil)
}

// DeleteListenerOptions are the options of a delete of a listener. A nil
// *DeleteListenerOptions means the defaults.
type DeleteListenerOptions struct {
	// Force deletes the listener's deployments with it (force=true).
	Force bool
}

// DeleteListenerWith removes a listener and its tokens
// (CreateListenerToken), in one Update. A listener that deployments (of
// any status, until they are removed) still name cannot be deleted
// (apierr.ErrInvalidState), but with opts.Force, which deletes each of
// them as DeleteDeployment does: those that never ran anywhere are
// removed at once, the others become AWAITING_DELETE and are torn down
// where the listener points (by its agents, for a listener they serve).
// The listener goes when its last deployment does: at once when none
// needed a teardown, else once the last teardown is done (or the last
// deployment is removed by a forced delete), since their teardowns need
// it. Meanwhile it answers as before, but no new deployment may name it
// (422), and a delete without Force is refused. Errors:
// *apierr.NotFoundError, apierr.ErrInvalidState.
func (cp *ControlPlane) DeleteListenerWith(ctx context.Context, tenant, id string, opts *DeleteListenerOptions) error {
	if err := apierr.CheckTenant(tenant); err != nil {
		return err
	}
	var o DeleteListenerOptions
	if opts != nil {
		o = *opts
	}
	cid, ok := pathID(id)
	if !ok {
		return &apierr.NotFoundError{Kind: apierr.KindListener, ID: id}
	}
	now := cp.now()
	var removed []*deploymentRecord // deployments removed at once, for the log
	var queued []*deploymentRecord  // deployments whose teardown is queued
	gone := false                   // the listener was removed
	err := cp.st.Update(ctx, func(tx store.Tx) error {
		removed, queued, gone = nil, nil, false
		l, err := getListener(tx, tenant, cid)
		if err != nil {
			return err
		}
		deleting, err := listenerDeleting(tx, tenant, cid)
		if err != nil {
			return err
		}
		ids, err := cp.listenerDeployments(tx, tenant, cid, 0)
		if err != nil {
			return err
		}
		switch {
		case len(ids) == 0:
			gone = true
			return removeListener(tx, tenant, l)
		case !o.Force && deleting:
			return apierr.InvalidStatef("Listener ID %s is being deleted: it goes once its deployments are removed.", cid)
		case !o.Force:
			return apierr.InvalidStatef("Listener ID %s is used by deployments; delete them first, or delete the listener with force=true.", cid)
		}
		if !deleting {
			if err := writeListener(tx, tenant, l, true); err != nil {
				return err
			}
		}
		if ids, err = cp.listenerDeployments(tx, tenant, cid, -1); err != nil {
			return err
		}
		for _, did := range ids {
			stored, err := cp.getDeployment(tx, tenant, did)
			if err != nil {
				return err
			}
			if stored.Status == StatusAwaitingDelete {
				continue
			}
			r, err := cp.deleteInTx(ctx, tx, tenant, stored, false, now) // deletes.go
			if err != nil {
				return err
			}
			if r.Status != StatusAwaitingDelete {
				removed = append(removed, r)
			} else {
				queued = append(queued, r)
			}
		}
		// The last deployment removed removed the listener (dropDeletedListener).
		_, err = getListener(tx, tenant, cid)
		gone = errors.Is(err, apierr.ErrNotFound)
		if gone {
			return nil
		}
		return err
	})
	if err != nil {
		return cp.storeErr("delete listener", err)
	}
	if gone {
		cp.agents.seen.Delete(agentKey(tenant, cid))
	}
	for _, r := range slices.Concat(removed, queued) {
		cp.stopEnded(tenant, r.ID) // the revisions it INTERRUPTED or removed (interrupt.go)
	}
	for _, r := range removed {
		cp.log.Info("controlplane: deployment removed at once with its listener: none of its revisions reached an engine",
			deletedAttrs(tenant, r)...)
	}
	if len(queued) > 0 {
		cp.notify()
		cp.notifyAgent(tenant, &queued[0].Deployment) // they share the listener
	}
	return nil
}

// listenerDeployments returns the ids of the tenant's deployments that
// name the listener, at most limit of them (-1: all; 0: one, to tell
// whether there are any).
func (cp *ControlPlane) listenerDeployments(r store.Reader, tenant, listenerID string, limit int) ([]string, error) {
	tp, err := cp.readTenant(r, tenant)
	if err != nil {
		return nil, err
	}
	var ids []string
	err = index.ScanTerm(r, tp, indexTerm(idxListener, listenerID), "", func(tail string) (bool, error) {
		ids = append(ids, tailID(tail))
		return limit < 0 || len(ids) < max(limit, 1), nil
	})
	return ids, err
}

// dropDeletedListener removes a listener that a forced delete marked, once
// no deployment names it: dropDeployment calls it in the Update that
// removes one of its deployments.
func (cp *ControlPlane) dropDeletedListener(tx store.Tx, tenant, id string) error {
	deleting, err := listenerDeleting(tx, tenant, id)
	if err != nil || !deleting {
		return err
	}
	ids, err := cp.listenerDeployments(tx, tenant, id, 0)
	if err != nil || len(ids) > 0 {
		return err
	}
	l, err := getListener(tx, tenant, id)
	if err != nil {
		return err
	}
	return removeListener(tx, tenant, l)
}

// removeListener deletes a listener's records and its tokens.
func removeListener(tx store.Tx, tenant string, l *Listener) error {
	for _, k := range []struct{ col, key string }{
		{colListeners, key(tenant, l.ID)},
		{colListenerOrder, key(tenant, createdKey(l.CreatedAt.Time()), l.ID)},
		{colListenerCompute, listenerComputeKey(tenant, l.ComputeID)},
	} {
		if err := tx.Delete(k.col, k.key); err != nil {
			return err
		}
	}
	return tokenErr(tokens.DeleteListener(tx, tenant, l.ID)) // listenertokens.go
}

// CreateIntegration registers a GitHub App installation for the tenant
// without asking GitHub (the unverified way; CompleteGitHubInstall is the
// verified one): whoever calls it is trusted to hold the installation.
// installation_id (> 0) and name (1..MaxStringBytes) are required. An
// installation belongs to at most one tenant: one already registered, by
// this tenant or another, is apierr.ErrConflict. Errors: *apierr.ValidationError,
// apierr.ErrConflict.
func (cp *ControlPlane) CreateIntegration(ctx context.Context, tenant string, req *CreateIntegrationRequest) (*Integration, error) {
	if err := apierr.CheckTenant(tenant); err != nil {
		return nil, err
	}
	if req == nil {
		req = &CreateIntegrationRequest{}
	}
	c := &checker{lim: cp.lim}
	if req.InstallationID == nil {
		c.add([]any{"body", "installation_id"}, apierr.TypeMissing, apierr.MsgFieldRequired)
	} else if *req.InstallationID <= 0 {
		c.add([]any{"body", "installation_id"}, apierr.TypeGreaterThan, "Input should be greater than 0")
	}
	if req.Name == nil {
		c.add([]any{"body", "name"}, apierr.TypeMissing, apierr.MsgFieldRequired)
	} else {
		c.str([]any{"body", "name"}, *req.Name, cp.lim.MaxStringBytes)
	}
	if err := apierr.Validation(c.ps...); err != nil {
		return nil, err
	}
	return cp.recordIntegration(ctx, tenant, *req.InstallationID, *req.Name, false)
}

// ListIntegrations returns the tenant's GitHub integrations, oldest first
// (created_at, then id). The list is never nil.
func (cp *ControlPlane) ListIntegrations(ctx context.Context, tenant string) ([]Integration, error) {
	if err := apierr.CheckTenant(tenant); err != nil {
		return nil, err
	}
	var recs []integrationRecord
	err := cp.st.View(ctx, func(r store.Reader) error {
		recs = recs[:0]
		return r.Scan(colIntegrations, tenant+"/", nil, func(k string, v []byte) (bool, error) {
			var rec integrationRecord
			if err := json.Unmarshal(v, &rec); err != nil {
				return false, fmt.Errorf("controlplane: decoding integration %s: %w", k, err)
			}
			recs = append(recs, rec)
			return true, nil
		})
	})
	if err != nil {
		return nil, cp.storeErr("list integrations", err)
	}
	slices.SortFunc(recs, func(a, b integrationRecord) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	out := make([]Integration, len(recs))
	for i, r := range recs {
		out[i] = r.Integration
	}
	return out, nil
}
