package controlplane

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane/internal/index"
	"github.com/deployplane/deployplane/controlplane/internal/workqueue"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/wiretime"
)

// Work served by agents. A deployment whose listener this server's own
// Deployer does not drive (Options.Drives) is served by an agent that runs
// beside the listener's compute and dials out to the control plane: the
// control plane never dials it. Whether an agent serves a deployment is
// decided when its work is queued (its create, each new revision, its
// delete: queueFor), and recorded on it (remote_reconciled). Its pending
// work lies in the range of its listener's agents in cp_pending
// (internal/workqueue), where Run and Process never claim, and an agent's
// claim walks only its listener's units: its cost follows that listener's
// work, never the other listeners'. A lease is the same as Run's: an
// agent claims with the same Update, renews, reports through the same
// apply, and its work is taken over by another agent of the listener once
// its lease expires. The agent holds its lease as an opaque string
// (workqueue.Lease.Text: the unit's key and the claim's token), which
// every call checks against the tenant and listener it names.
//
// A revision of an agent-served deployment is created QUEUED (CREATING,
// then QUEUED, at its created_at) with a status_message naming the
// listener and when its agent was last seen; it stays so until an agent
// reports its next step.

// The agent's rhythm. An agent heartbeats every AgentHeartbeatInterval
// (AgentHeartbeat); a listener is CONNECTED while an agent of it was seen
// (a heartbeat or a claim) within AgentConnectedWindow.
const (
	AgentHeartbeatInterval = 10 * time.Second
	AgentConnectedWindow   = 3 * AgentHeartbeatInterval
	// AgentPollInterval is how often WaitAgentWork looks in the store for
	// work that other replicas queued, or whose lease expired.
	AgentPollInterval = time.Second
)

// agentSeenEvery is how often, at most, a listener's last_heartbeat_at is
// written.
const agentSeenEvery = AgentHeartbeatInterval / 2

// AgentWorkKind is the kind of a unit of an agent's work.
type AgentWorkKind string

// The kinds of AgentWork.
const (
	// AgentDeploy: drive a revision (Deployer.Deploy) and report it.
	AgentDeploy AgentWorkKind = "deploy"
	// AgentTeardown: remove a deployment being deleted (Deployer.Teardown),
	// then FinishAgentTeardown.
	AgentTeardown AgentWorkKind = "teardown"
)

// AgentWork is a unit of work an agent claimed (ClaimAgentWork).
type AgentWork struct {
	// Lease names the claim in every later call about this work
	// (RenewAgentLease, ReportAgent, LogAgent, FailAgentWork,
	// ReleaseAgentWork, FinishAgentTeardown). It is opaque.
	Lease string `json:"lease"`
	// Kind is AgentDeploy or AgentTeardown.
	Kind AgentWorkKind `json:"kind"`
	// LeaseSeconds is how long the lease lasts without a renewal (a
	// report, a log or RenewAgentLease renews it): the agent renews it
	// every third of it, as Run does.
	LeaseSeconds int `json:"lease_seconds"`
	// Work is the revision to drive, secrets included (AgentDeploy only).
	Work *Work `json:"work,omitempty"`
	// Deployment is the deployment to tear down (AgentTeardown only).
	Deployment *Deployment `json:"deployment,omitempty"`
}

// AgentDeploymentsQuery pages ListAgentDeployments.
type AgentDeploymentsQuery struct {
	// Limit is 0 (DefaultAgentPageLimit) to MaxAgentPageLimit.
	Limit int
	// After is the Next of the previous page; "" for the first.
	After string
}

// The page sizes of ListAgentDeployments.
const (
	DefaultAgentPageLimit = 100
	MaxAgentPageLimit     = 1000
)

// AgentDeploymentPage is a page of the ids of a listener's deployments,
// oldest first. Next, when not nil, is the After of the next page.
type AgentDeploymentPage struct {
	DeploymentIDs []string `json:"deployment_ids"`
	// Digests holds, at the index of each id, a digest of the
	// deployment's stored record: it changes whenever AgentDeployment
	// would answer differently, so that an agent that keeps the answers
	// asks again for those of changed deployments only.
	Digests []string `json:"digests"`
	Next    *string  `json:"next"`
}

// agentHub is the agents' side of a ControlPlane: who waits for new work
// of which listener, and when each listener's agent was last recorded as
// seen.
type agentHub struct {
	mu      sync.Mutex
	waiters map[string]*agentSignal // tenant/listener -> the next new work's signal
	seen    sync.Map                // tenant/listener -> agentSeen
}

// agentSignal is closed when new work of its listener is queued.
type agentSignal struct {
	ch chan struct{}
	n  int // its waiters
}

// agentSeen is what the store holds of a listener's agent, as this
// process last wrote or read it.
type agentSeen struct {
	at      time.Time
	version string
}

func agentKey(tenant, listenerID string) string { return tenant + "/" + listenerID }

// watch returns the signal of the next new work of the listener under k,
// and the func to call once the caller no longer waits for it.
func (h *agentHub) watch(k string) (<-chan struct{}, func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.waiters == nil {
		h.waiters = map[string]*agentSignal{}
	}
	s := h.waiters[k]
	if s == nil {
		s = &agentSignal{ch: make(chan struct{})}
		h.waiters[k] = s
	}
	s.n++
	return s.ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if s.n--; s.n == 0 && h.waiters[k] == s {
			delete(h.waiters, k)
		}
	}
}

// wake signals the waiters of the listener under k.
func (h *agentHub) wake(k string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.waiters[k]; s != nil {
		close(s.ch)
		delete(h.waiters, k)
	}
}

// queueFor decides where d's new work is queued (for d as it will be
// written): in the range of its listener's agents when it has a listener
// that Options.Drives says this server does not drive, else in Run's. It
// records the answer as d.RemoteReconciled and returns the listener when
// an agent serves d. Without Options.Drives it reads nothing.
func (cp *ControlPlane) queueFor(r store.Reader, tenant, tp string, d *deploymentRecord) (workqueue.Range, *Listener, error) {
	rg := serverRange(tp)
	d.RemoteReconciled = false
	id := d.SourceConfig.ListenerID
	if cp.drives == nil || id == nil {
		return rg, nil, nil
	}
	l, err := getListener(r, tenant, *id)
	if err != nil {
		return rg, nil, err
	}
	if cp.drives(l) {
		return rg, nil, nil
	}
	d.RemoteReconciled = true
	return agentRange(tp, l.ID), l, nil
}

// waitingMessage is the status_message of a revision waiting for the
// agent of listener l.
func waitingMessage(l *Listener) string {
	return "Waiting for the agent of listener " + l.ID + " (last seen: " + lastSeen(l) + ")."
}

// lastSeen says when an agent of l last called in: a time, or "never".
func lastSeen(l *Listener) string {
	if l.LastHeartbeatAt == nil {
		return "never"
	}
	return l.LastHeartbeatAt.String()
}

// teardownWaitingMessage is the status_message of a deployment being
// deleted whose objects the agent of listener l is to remove.
func teardownWaitingMessage(l *Listener) string {
	return "Waiting for the agent of listener " + l.ID + " to remove the deployment's objects (last seen: " + lastSeen(l) + ")."
}

// notifyAgent wakes the agents waiting for work of d's listener in this
// process (WaitAgentWork), when an agent serves d.
func (cp *ControlPlane) notifyAgent(tenant string, d *Deployment) {
	if d != nil && d.RemoteReconciled && d.SourceConfig.ListenerID != nil {
		cp.agents.wake(agentKey(tenant, *d.SourceConfig.ListenerID))
	}
}

// agentListenerID checks the tenant and canonicalizes a listener id.
func agentListenerID(tenant, listenerID string) (string, error) {
	if err := apierr.CheckTenant(tenant); err != nil {
		return "", err
	}
	lid, ok := pathID(listenerID)
	if !ok {
		return "", &apierr.NotFoundError{Kind: apierr.KindListener, ID: listenerID}
	}
	return lid, nil
}

// ClaimAgentWork claims one unit of the work of the tenant's listener for
// one of its agents, with a lease, and returns it; nil when there is none
// (every unit is held, or there is no work). Units come in key order: the
// listener's teardowns first, then revisions by deployment and age. A
// claim counts as the agent being seen (Listener.Status). Errors:
// *apierr.NotFoundError for a listener not the tenant's, or a store
// error.
func (cp *ControlPlane) ClaimAgentWork(ctx context.Context, tenant, listenerID string) (*AgentWork, error) {
	lid, err := agentListenerID(tenant, listenerID)
	if err != nil {
		return nil, err
	}
	now := cp.now()
	var tp string
	err = cp.st.View(ctx, func(r store.Reader) error {
		if _, err := getListener(r, tenant, lid); err != nil {
			return err
		}
		tp, err = cp.readTenant(r, tenant)
		return err
	})
	if err != nil {
		return nil, cp.storeErr("claim agent work", err)
	}
	if err := cp.agentSeenAt(ctx, tenant, lid, "", now); err != nil && ctx.Err() == nil {
		cp.log.Warn("controlplane: recording an agent as seen failed", "listener", lid, "err", err)
	}
	for range agentClaimTries {
		l, err := cp.queue.ClaimIn(ctx, agentRange(tp, lid), now)
		if err != nil || l == nil {
			return nil, cp.storeErr("claim agent work", err)
		}
		if l.Takeover {
			cp.obs.LeaseTakenOver()
		}
		j := newJob(l, tenant)
		j.stepStart.Store(now.UnixNano())
		w := &AgentWork{Lease: l.Text(), LeaseSeconds: max(1, int(math.Ceil(cp.leaseFor.Seconds())))}
		err = cp.st.View(ctx, func(r store.Reader) error {
			if j.revision != "" {
				w.Kind = AgentDeploy
				var err error
				w.Work, err = cp.loadWork(r, j)
				return err
			}
			w.Kind = AgentTeardown
			dep, err := cp.getDeployment(r, j.tenant, j.deployment)
			if err == nil {
				w.Deployment = dep.wire()
			}
			return err
		})
		if j.revision == "" && errors.Is(err, apierr.ErrNotFound) {
			// Removed already: drop the work, look again.
			if err := cp.finishTeardown(ctx, j); err != nil && !errors.Is(err, ErrLeaseLost) {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, cp.storeErr("load agent work", err)
		}
		return w, nil
	}
	return nil, nil
}

// agentClaimTries bounds the units of work one ClaimAgentWork drops
// because their deployments were removed already.
const agentClaimTries = 4

// WaitAgentWork is ClaimAgentWork as a long poll: when there is no work
// to claim, it waits up to wait for some, claiming as soon as this
// ControlPlane queues work for the listener (a create, a revision, a
// delete, work given back) and otherwise looking in the store every
// AgentPollInterval (work other replicas queued, leases that expired). It
// returns nil once wait has passed without work, and ctx's error when ctx
// ends first. Its waits use the runtime's timers (testing/synctest fakes
// them). Errors: as ClaimAgentWork.
func (cp *ControlPlane) WaitAgentWork(ctx context.Context, tenant, listenerID string, wait time.Duration) (*AgentWork, error) {
	lid, err := agentListenerID(tenant, listenerID)
	if err != nil {
		return nil, err
	}
	deadline := time.NewTimer(max(wait, 0))
	defer deadline.Stop()
	for {
		sig, done := cp.agents.watch(agentKey(tenant, lid))
		w, err := cp.ClaimAgentWork(ctx, tenant, lid)
		if err != nil || w != nil || wait <= 0 {
			done()
			return w, err
		}
		poll := time.NewTimer(AgentPollInterval)
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-deadline.C:
			wait = 0 // one last look, then nil
		case <-sig:
		case <-poll.C:
		}
		poll.Stop()
		done()
		if err != nil {
			return nil, err
		}
	}
}

// agentJob decodes a lease string for the tenant's listener. Errors:
// apierr.ErrInvalidState for a string that is no lease, a
// *apierr.NotFoundError for a lease of another tenant's or listener's
// work, or a store error.
func (cp *ControlPlane) agentJob(ctx context.Context, tenant, listenerID, leaseText string) (*job, error) {
	lid, err := agentListenerID(tenant, listenerID)
	if err != nil {
		return nil, err
	}
	l, ok := workqueue.ParseText(leaseText)
	if !ok || l.Range.Listener == "" {
		return nil, apierr.InvalidStatef("The lease is not one this control plane issued.")
	}
	j := newJob(l, tenant)
	var tp string
	err = cp.st.View(ctx, func(r store.Reader) error {
		var err error
		tp, err = cp.readTenant(r, tenant)
		return err
	})
	if err != nil {
		return nil, cp.storeErr("read lease", err)
	}
	if l.Range.Tenant != tp || j.listener != lid {
		if j.revision != "" {
			return nil, &apierr.NotFoundError{Kind: apierr.KindRevision, ID: j.revision}
		}
		return nil, &apierr.NotFoundError{Kind: apierr.KindDeployment, ID: j.deployment}
	}
	return j, nil
}

// agentDeployJob is agentJob for a lease that must be a revision's.
func (cp *ControlPlane) agentDeployJob(ctx context.Context, tenant, listenerID, leaseText string) (*job, error) {
	j, err := cp.agentJob(ctx, tenant, listenerID, leaseText)
	if err == nil && j.revision == "" {
		return nil, apierr.InvalidStatef("The lease is a teardown's, not a revision's.")
	}
	return j, err
}

// RenewAgentLease pushes the expiry of an agent's lease forward by
// LeaseSeconds. Errors: ErrLeaseLost when the work is no longer the
// lease's (another agent took it over once it expired, or it ended: the
// revision was superseded or its deployment deleted); the errors of a
// lease (see ReportAgent).
func (cp *ControlPlane) RenewAgentLease(ctx context.Context, tenant, listenerID, lease string) error {
	j, err := cp.agentJob(ctx, tenant, listenerID, lease)
	if err != nil {
		return err
	}
	return cp.renewLease(ctx, j)
}

// ReportAgent records a step of the revision an agent's lease holds,
// exactly as a Deployer's Reporter.Report does (the transition table, the
// deployment's url and status, the lease renewed), and is idempotent: a
// report repeated after its answer was lost (the revision already has the
// step's status, or already ended with it) succeeds and changes nothing.
// Errors: ErrLeaseLost (another agent holds the work now; nothing is
// written), apierr.ErrInvalidState (the step may not follow the
// revision's status, the revision ended otherwise, or the lease is not a
// revision's or no lease at all), a *apierr.NotFoundError for a lease of
// another tenant's or listener's work, or a store error. IsRefusal tells
// the refusals, after which the agent stops driving the revision.
func (cp *ControlPlane) ReportAgent(ctx context.Context, tenant, listenerID, lease string, s Step) error {
	j, err := cp.agentDeployJob(ctx, tenant, listenerID, lease)
	if err != nil {
		return err
	}
	return cp.apply(ctx, j, s, false)
}

// FailAgentWork records the failure of the phase the lease's revision is
// in (CREATE_FAILED, BUILD_FAILED or DEPLOY_FAILED, as FailureOf says),
// with message as its status_message: what Run records when a Deployer's
// Deploy returns an error. Repeated after its answer was lost, it
// succeeds and changes nothing. Errors: as ReportAgent.
func (cp *ControlPlane) FailAgentWork(ctx context.Context, tenant, listenerID, lease, message string) error {
	j, err := cp.agentDeployJob(ctx, tenant, listenerID, lease)
	if err != nil {
		return err
	}
	if message == "" {
		message = "The agent failed to deploy the revision."
	}
	return cp.apply(ctx, j, Step{Message: message}, true)
}

// repeatedReport reports whether a step to status to (with fail: the
// failure of the revision's phase) is one a revision in status cur
// already took: an agent's report repeated after its answer was lost.
func repeatedReport(cur, to RevisionStatus, fail bool) bool {
	if fail {
		return cur == RevisionCreateFailed || cur == RevisionBuildFailed || cur == RevisionDeployFailed
	}
	return to != "" && cur == to
}

// LogAgent writes lines to the logs of the lease's revision, as a
// Deployer's Reporter.Log does (one transaction, the lease renewed, lines
// still accepted once the revision ended). Errors: ErrLeaseLost, a
// *apierr.ValidationError for a line of unknown type or level, at
// ["body", "lines", i, "type" or "level"] (nothing is written), the errors
// of a lease (see ReportAgent).
func (cp *ControlPlane) LogAgent(ctx context.Context, tenant, listenerID, lease string, lines ...LogLine) error {
	if err := checkAgentLines(lines); err != nil {
		return err
	}
	j, err := cp.agentDeployJob(ctx, tenant, listenerID, lease)
	if err != nil {
		return err
	}
	return (&reporter{cp: cp, j: j}).Log(ctx, lines...)
}

// ReleaseAgentWork gives the lease's work back: at once (retry false: any
// agent of the listener may claim it now, and the agents waiting in this
// process are woken) or after Options.PollInterval (retry true: the
// agent's Deployer returned before the revision was terminal, or its
// Teardown failed). Nothing happens when the work is no longer the
// lease's. Errors: those of a lease (see ReportAgent).
func (cp *ControlPlane) ReleaseAgentWork(ctx context.Context, tenant, listenerID, lease string, retry bool) error {
	j, err := cp.agentJob(ctx, tenant, listenerID, lease)
	if err != nil {
		return err
	}
	if err := cp.release(ctx, j, retry); err != nil {
		return err
	}
	if !retry {
		cp.agents.wake(agentKey(tenant, j.listener))
	}
	return nil
}

// FinishAgentTeardown removes every record of the deployment of a
// teardown's lease, once the agent's Deployer tore it down: what Run does
// after Deployer.Teardown. Repeated once the deployment is gone, it
// succeeds. Errors: ErrLeaseLost (another agent holds the teardown now),
// apierr.ErrInvalidState for a revision's lease, the errors of a lease
// (see ReportAgent).
func (cp *ControlPlane) FinishAgentTeardown(ctx context.Context, tenant, listenerID, lease string) error {
	j, err := cp.agentJob(ctx, tenant, listenerID, lease)
	if err != nil {
		return err
	}
	if j.revision != "" {
		return apierr.InvalidStatef("The lease is a revision's, not a teardown's.")
	}
	return cp.finishTeardown(ctx, j)
}

// agentDeployment reads a deployment of the tenant placed on the listener;
// another listener's is not found.
func (cp *ControlPlane) agentDeployment(r store.Reader, tenant, listenerID, deploymentID string) (*deploymentRecord, error) {
	d, err := cp.getDeployment(r, tenant, deploymentID)
	if err != nil {
		return nil, err
	}
	if l := d.SourceConfig.ListenerID; l == nil || *l != listenerID {
		return nil, &apierr.NotFoundError{Kind: apierr.KindDeployment, ID: deploymentID}
	}
	return d, nil
}

// AgentDeployment returns a deployment of the tenant placed on the
// listener (secrets included), for an agent's reconcile. Errors: a
// *apierr.NotFoundError for a deployment that is gone, another tenant's,
// or placed on another listener (or none).
func (cp *ControlPlane) AgentDeployment(ctx context.Context, tenant, listenerID, deploymentID string) (*Deployment, error) {
	lid, err := agentListenerID(tenant, listenerID)
	if err != nil {
		return nil, err
	}
	did, ok := pathID(deploymentID)
	if !ok {
		return nil, &apierr.NotFoundError{Kind: apierr.KindDeployment, ID: deploymentID}
	}
	var d *deploymentRecord
	err = cp.st.View(ctx, func(r store.Reader) error {
		var err error
		d, err = cp.agentDeployment(r, tenant, lid, did)
		return err
	})
	if err != nil {
		return nil, cp.storeErr("get agent deployment", err)
	}
	return d.wire(), nil
}

// AgentReportDeploymentStatus sets the status of a deployment of the
// tenant placed on the listener on its agent's word, outside any lease:
// ReportDeploymentStatus for an agent (UNUSED once its Docker deployer
// scaled the deployment to zero, READY once it serves again). Errors: as
// ReportDeploymentStatus, and a *apierr.NotFoundError for a deployment
// placed on another listener (or none).
func (cp *ControlPlane) AgentReportDeploymentStatus(ctx context.Context, tenant, listenerID, deploymentID string, s DeploymentStatus) error {
	lid, err := agentListenerID(tenant, listenerID)
	if err != nil {
		return err
	}
	did, ok := pathID(deploymentID)
	if !ok {
		return &apierr.NotFoundError{Kind: apierr.KindDeployment, ID: deploymentID}
	}
	return cp.setDeploymentStatus(ctx, tenant, s, func(tx store.Tx) (*deploymentRecord, error) {
		return cp.agentDeployment(tx, tenant, lid, did)
	})
}

// AgentReportUnhealthy is ReportUnhealthy for an agent: its deployer
// watched the revision (Work.HealthWatchSeconds) and saw it fail. Errors:
// as ReportUnhealthy, and a *apierr.NotFoundError for a deployment placed
// on another listener (or none).
func (cp *ControlPlane) AgentReportUnhealthy(ctx context.Context, tenant, listenerID, deploymentID, revisionID, reason string) error {
	lid, err := agentListenerID(tenant, listenerID)
	if err != nil {
		return err
	}
	did, ok := pathID(deploymentID)
	if !ok {
		return &apierr.NotFoundError{Kind: apierr.KindDeployment, ID: deploymentID}
	}
	// listener_id is immutable: a deployment on the listener now stays on it.
	err = cp.st.View(ctx, func(r store.Reader) error {
		_, err := cp.agentDeployment(r, tenant, lid, did)
		return err
	})
	if err != nil {
		return cp.storeErr("report unhealthy", err)
	}
	return cp.ReportUnhealthy(ctx, tenant, did, revisionID, reason)
}

// AgentRevision returns a revision of a deployment of the tenant placed
// on the listener, for an agent's reconcile. Errors: as AgentDeployment,
// and a *apierr.NotFoundError for a revision that is not the deployment's.
func (cp *ControlPlane) AgentRevision(ctx context.Context, tenant, listenerID, deploymentID, revisionID string) (*Revision, error) {
	lid, err := agentListenerID(tenant, listenerID)
	if err != nil {
		return nil, err
	}
	did, ok := pathID(deploymentID)
	if !ok {
		return nil, &apierr.NotFoundError{Kind: apierr.KindDeployment, ID: deploymentID}
	}
	rid, rok := pathID(revisionID)
	var rev *revisionRecord
	err = cp.st.View(ctx, func(r store.Reader) error {
		if _, err := cp.agentDeployment(r, tenant, lid, did); err != nil {
			return err
		}
		if !rok {
			return &apierr.NotFoundError{Kind: apierr.KindRevision, ID: revisionID}
		}
		var err error
		rev, err = cp.getRevision(r, tenant, did, rid)
		return err
	})
	if err != nil {
		return nil, cp.storeErr("get agent revision", err)
	}
	return new(rev.wire()), nil
}

// ListAgentDeployments returns a page of the ids of the tenant's
// deployments placed on the listener (whoever serves them, those being
// deleted included), oldest first, through the listener index, each with
// the digest of its record: for an agent that removes what it runs for
// deployments that are gone, and that asks again only for the deployments
// whose digest changed since it last asked (AgentDeployment). Pages
// follow one another by q.After, so a deployment created during the walk
// comes in a later page rather than shifting the pages; an agent confirms
// that a deployment missing from a walk is gone (AgentDeployment) before
// removing what it runs for it. Errors: *apierr.NotFoundError for a
// listener not the tenant's, *apierr.ValidationError at ["query",
// "limit"] or ["query", "after"].
func (cp *ControlPlane) ListAgentDeployments(ctx context.Context, tenant, listenerID string, q *AgentDeploymentsQuery) (*AgentDeploymentPage, error) {
	lid, err := agentListenerID(tenant, listenerID)
	if err != nil {
		return nil, err
	}
	if q == nil {
		q = &AgentDeploymentsQuery{}
	}
	c := &checker{lim: cp.lim}
	switch {
	case q.Limit < 0:
		c.add([]any{"query", "limit"}, apierr.TypeGreaterThanEqual, "Input should be greater than or equal to 0")
	case q.Limit > MaxAgentPageLimit:
		c.add([]any{"query", "limit"}, apierr.TypeLessThanEqual, fmt.Sprintf("Input should be less than or equal to %d", MaxAgentPageLimit))
	}
	after, herr := hex.DecodeString(q.After)
	if herr != nil {
		c.add([]any{"query", "after"}, apierr.TypeValueError, "Input should be the next of an earlier page")
	}
	if err := apierr.Validation(c.ps...); err != nil {
		return nil, err
	}
	limit := q.Limit
	if limit == 0 {
		limit = DefaultAgentPageLimit
	}
	page := &AgentDeploymentPage{DeploymentIDs: []string{}, Digests: []string{}}
	err = cp.st.View(ctx, func(r store.Reader) error {
		page.DeploymentIDs, page.Digests, page.Next = page.DeploymentIDs[:0], page.Digests[:0], nil
		if _, err := getListener(r, tenant, lid); err != nil {
			return err
		}
		tp, err := cp.readTenant(r, tenant)
		if err != nil {
			return err
		}
		var last string // the tail of the last id of the page
		return index.ScanTerm(r, tp, indexTerm(idxListener, lid), string(after), func(tail string) (bool, error) {
			if len(page.DeploymentIDs) == limit {
				// There is more: the next page starts after the last id.
				page.Next = new(hex.EncodeToString([]byte(last)))
				return false, nil
			}
			last = tail
			id := tailID(last)
			b, err := r.Get(colDeployments, deploymentKey(tp, id))
			if errors.Is(err, store.ErrNotFound) {
				return true, nil // no record beside its index entry: nothing to answer
			}
			if err != nil {
				return false, err
			}
			page.DeploymentIDs = append(page.DeploymentIDs, id)
			page.Digests = append(page.Digests, recordDigest(b))
			return true, nil
		})
	})
	if err != nil {
		return nil, cp.storeErr("list agent deployments", err)
	}
	return page, nil
}

// recordDigest is the digest of a stored record's bytes that
// AgentDeploymentPage carries: 128 bits of its SHA-256, in hex.
func recordDigest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// AgentHeartbeat records that an agent of the tenant's listener is alive,
// and its version (version "" leaves the listener's as it is): the
// listener's last_heartbeat_at becomes now, and its status CONNECTED
// (Listener.Status). To spare the store, last_heartbeat_at is written at
// most every AgentHeartbeatInterval/2 per listener (a new version is
// written at once). Errors: *apierr.NotFoundError for a listener not the
// tenant's, *apierr.ValidationError for a version over 256 bytes.
func (cp *ControlPlane) AgentHeartbeat(ctx context.Context, tenant, listenerID, version string) error {
	lid, err := agentListenerID(tenant, listenerID)
	if err != nil {
		return err
	}
	if len(version) > 256 {
		return apierr.Validation(apierr.Problem{Loc: []any{"body", "version"}, Type: apierr.TypeStringTooLong,
			Msg: "String should have at most 256 bytes"})
	}
	return cp.agentSeenAt(ctx, tenant, lid, version, cp.now())
}

// agentSeenAt records that an agent of the listener was seen at now, with
// its version ("" for unchanged), writing the listener only when its
// last_heartbeat_at is agentSeenEvery old or the version changes.
func (cp *ControlPlane) agentSeenAt(ctx context.Context, tenant, lid, version string, now time.Time) error {
	k := agentKey(tenant, lid)
	if v, ok := cp.agents.seen.Load(k); ok {
		s := v.(agentSeen)
		if (version == "" || version == s.version) && now.Sub(s.at) < agentSeenEvery {
			return nil
		}
	}
	var rec agentSeen
	err := cp.st.Update(ctx, func(tx store.Tx) error {
		l, err := getListener(tx, tenant, lid)
		if err != nil {
			return err
		}
		newVersion := version != "" && version != l.Version
		if last := l.LastHeartbeatAt; !newVersion && last != nil && now.Sub(last.Time()) < agentSeenEvery {
			rec = agentSeen{at: last.Time(), version: l.Version} // written meanwhile, by a replica
			return nil
		}
		next := *l
		next.LastHeartbeatAt = new(wiretime.New(now))
		if l.LastHeartbeatAt != nil && !now.After(l.LastHeartbeatAt.Time()) {
			next.LastHeartbeatAt = l.LastHeartbeatAt // a replica's clock ahead: keep its time
		}
		if newVersion {
			next.Version = version
			next.UpdatedAt = later(now, l.UpdatedAt)
		}
		rec = agentSeen{at: next.LastHeartbeatAt.Time(), version: next.Version}
		return putListener(tx, tenant, &next)
	})
	if err != nil {
		return cp.storeErr("record agent heartbeat", err)
	}
	cp.agents.seen.Store(k, rec)
	return nil
}

// answerListener sets the read-time fields of a listener answer at now.
func (cp *ControlPlane) answerListener(l *Listener, now time.Time) {
	l.Status = ListenerDisconnected
	if at := l.LastHeartbeatAt; at != nil && now.Sub(at.Time()) <= AgentConnectedWindow {
		l.Status = ListenerConnected
	}
}
