package controlplane

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/wiretime"
)

// Pending work. cp_pending holds one record per unit of work not yet done,
// written in the same Update as the change that creates or ends it, so that
// claiming never scans revisions:
//
//	cp_pending  "r" tenant deployment ts revision  -> lease   (a revision not terminal)
//	cp_pending  "d" tenant deployment              -> lease   (a deployment AWAITING_DELETE)
//
// in the compact key encoding (keys.go): tenant prefix, encID ids, timeKey.
// The work of deployments served by agents lies apart, under "a", where Run
// never looks (agentwork.go).
//
// A lease is "" (free) or "token expiry": the token of the claim (the
// ControlPlane's owner id and a sequence number) and the expiry in Unix
// microseconds of the ControlPlane's clock. A record whose lease has expired
// may be claimed by anyone. A teardown that failed adds " failures", how
// many times in a row (deletes.go: its backoff), kept by the claims,
// renewals and releases of the work until it is done.
const (
	pendingRevision = "r"
	pendingDelete   = "d"
	pendingAgent    = "a" // agentwork.go
)

// retryToken is the token of a lease that gives work back until a later
// time (release with retry): nobody holds it, so claiming it once it has
// expired takes nothing over.
const retryToken = "retry"

// workQueue is where a deployment's pending work lies: Run's range
// (agent "") or the range of the agents of listener agent (agentwork.go).
// tp is the tenant prefix.
type workQueue struct{ tp, agent string }

// start is what the queue's keys start with before their kind.
func (q workQueue) start() string {
	if q.agent == "" {
		return ""
	}
	return pendingAgent + q.tp + encID(q.agent)
}

// revisionPrefix is the prefix of the pending keys of a deployment's
// revisions in the queue.
func (q workQueue) revisionPrefix(deploymentID string) string {
	if q.agent == "" {
		return pendingRevision + deploymentKey(q.tp, deploymentID)
	}
	return q.start() + pendingRevision + encID(deploymentID)
}

// revisionKey is the pending key of rev in the queue.
func (q workQueue) revisionKey(rev *revisionRecord) string {
	return q.revisionPrefix(rev.DeploymentID) + timeKey(rev.CreatedAt.Time()) + encID(rev.ID)
}

// deleteKey is the pending key of a deployment's teardown in the queue.
func (q workQueue) deleteKey(deploymentID string) string {
	if q.agent == "" {
		return pendingDelete + deploymentKey(q.tp, deploymentID)
	}
	return q.start() + pendingDelete + encID(deploymentID)
}

// queuesOf lists the queues that may hold the work of a deployment placed
// on listener (nil for none): Run's, and its listener's agents', since
// whether an agent serves a deployment is decided anew for each unit of
// work (queueFor).
func queuesOf(tp string, listener *string) []workQueue {
	if listener == nil {
		return []workQueue{{tp: tp}}
	}
	return []workQueue{{tp: tp}, {tp: tp, agent: *listener}}
}

// pendingRevisionKeys lists the pending keys of a deployment's revisions
// in every queue that may hold them, each with the prefix it was found
// under (for pendingRevisionID).
func pendingRevisionKeys(r store.Reader, tp string, d *deploymentRecord) (keys, prefixes []string, err error) {
	for _, q := range queuesOf(tp, d.SourceConfig.ListenerID) {
		prefix := q.revisionPrefix(d.ID)
		err := r.Scan(colPending, prefix, nil, func(k string, _ []byte) (bool, error) {
			keys, prefixes = append(keys, k), append(prefixes, prefix)
			return true, nil
		})
		if err != nil {
			return nil, nil, err
		}
	}
	return keys, prefixes, nil
}

// pendingRevisionID returns the revision id at the end of a revision's
// pending key whose prefix up to the deployment is prefix.
func pendingRevisionID(prefix, k string) string {
	id, _, _ := decID(k[min(len(k), len(prefix)+8):])
	return id
}

func lease(token string, expiry time.Time) []byte {
	return leaseOf(token, expiry, 0)
}

// leaseOf is a lease that keeps a count of failures (none when 0).
func leaseOf(token string, expiry time.Time, failures int) []byte {
	v := token + " " + strconv.FormatInt(expiry.UnixMicro(), 10)
	if failures > 0 {
		v += " " + strconv.Itoa(failures)
	}
	return []byte(v)
}

// parseLease returns the lease's token and expiry; a free lease has token "".
func parseLease(v []byte) (token string, expiry time.Time) {
	tok, exp, ok := strings.Cut(string(v), " ")
	if !ok {
		return "", time.Time{}
	}
	exp, _, _ = strings.Cut(exp, " ")
	us, _ := strconv.ParseInt(exp, 10, 64)
	return tok, time.UnixMicro(us)
}

// leaseFailures returns the count of failures a lease keeps (0: none).
func leaseFailures(v []byte) int {
	_, rest, _ := strings.Cut(string(v), " ")
	_, n, _ := strings.Cut(rest, " ")
	f, _ := strconv.Atoi(n)
	return f
}

// addRevision stores rev, a new revision of d (the deployment as it will
// be written), as pending work, and supersedes the deployment's revisions
// still before DEPLOYING: they become SKIPPED in this same Update. It
// decides whether an agent serves d (queueFor), which sets
// d.RemoteReconciled: the caller writes d after it.
func (cp *ControlPlane) addRevision(tx store.Tx, tenant string, d *deploymentRecord, rev *revisionRecord) error {
	tp, err := cp.writeTenant(tx, tenant)
	if err != nil {
		return err
	}
	if err := cp.skipPending(tx, tenant, tp, d, rev); err != nil {
		return err
	}
	q, l, err := cp.queueFor(tx, tenant, tp, d)
	if err != nil {
		return err
	}
	return cp.addFirstRevision(tx, tenant, q, l, rev)
}

// addFirstRevision adds rev to queue q, the first revision of a deployment
// created in tx when called directly: there is no earlier revision to
// skip, and it reads nothing (a scan of the new deployment's pending work
// would lock, in PostgreSQL, the index page where concurrent creates add
// theirs). agent is the listener whose agent serves the deployment, nil
// when Run does: its revision waits for that agent in QUEUED.
func (cp *ControlPlane) addFirstRevision(tx store.Tx, tenant string, q workQueue, agent *Listener, rev *revisionRecord) error {
	if agent != nil {
		rev.enter(RevisionQueued, rev.CreatedAt)
		rev.StatusMessage = new(waitingMessage(agent))
	}
	if err := cp.putRevision(tx, tenant, rev, true); err != nil {
		return err
	}
	return store.Insert(tx, colPending, q.revisionKey(rev), nil)
}

// skipPending moves the revisions of d that have not started to SKIPPED,
// superseded by rev.
func (cp *ControlPlane) skipPending(tx store.Tx, tenant, tp string, d *deploymentRecord, rev *revisionRecord) error {
	olds, prefixes, err := pendingRevisionKeys(tx, tp, d)
	if err != nil {
		return err
	}
	for i, k := range olds {
		old, err := cp.getRevision(tx, tenant, rev.DeploymentID, pendingRevisionID(prefixes[i], k))
		if err != nil {
			return err
		}
		if !skippable(old.Status) {
			continue
		}
		old.enter(RevisionSkipped, later(rev.CreatedAt.Time(), old.UpdatedAt))
		old.StatusMessage = new("Superseded by revision " + rev.ID + ".")
		if err := cp.putRevision(tx, tenant, old, false); err != nil {
			return err
		}
		if err := tx.Delete(colPending, k); err != nil {
			return err
		}
	}
	return nil
}

// enter moves the revision to status s at at (its new updated_at) and
// records the change in its status_history.
func (r *revisionRecord) enter(s RevisionStatus, at wiretime.Time) {
	r.Status, r.UpdatedAt = s, at
	r.StatusHistory = append(slices.Clip(r.StatusHistory), StatusChange{Status: s, At: at})
}

// interruptRevisions ends every unfinished revision of d, a deployment
// being deleted (as it will be written), with INTERRUPTED, and queues its
// teardown where queueFor says (which sets d.RemoteReconciled).
func (cp *ControlPlane) interruptRevisions(tx store.Tx, tenant string, d *deploymentRecord, at wiretime.Time) error {
	tp, err := cp.writeTenant(tx, tenant)
	if err != nil {
		return err
	}
	ks, prefixes, err := pendingRevisionKeys(tx, tp, d)
	if err != nil {
		return err
	}
	for i, k := range ks {
		rev, err := cp.getRevision(tx, tenant, d.ID, pendingRevisionID(prefixes[i], k))
		if err != nil {
			return err
		}
		rev.enter(RevisionInterrupted, later(at.Time(), rev.UpdatedAt))
		rev.StatusMessage = new("The deployment is being deleted.")
		if err := cp.putRevision(tx, tenant, rev, false); err != nil {
			return err
		}
		if err := tx.Delete(colPending, k); err != nil {
			return err
		}
	}
	q, _, err := cp.queueFor(tx, tenant, tp, d)
	if err != nil {
		return err
	}
	return tx.Put(colPending, q.deleteKey(d.ID), nil)
}

// job is one claimed unit of work.
type job struct {
	pkey       string // its cp_pending key
	token      string // the claim's lease token
	tp         string // the tenant's key prefix, which its share is counted by
	tenant     string
	deployment string
	revision   string // "" for a teardown
	failures   int    // a teardown's failures in a row when claimed (its lease keeps them)
	// listener is the listener whose agents claim the work (agentwork.go),
	// "" for Run's work.
	listener string
	// takeover: the claim took a lease another claim still held when it
	// expired (Observer.LeaseTakenOver).
	takeover bool
	// stepStart is when the Deployer's current step began (Unix
	// nanoseconds by Options.Clock), for Transition.Step.
	stepStart atomic.Int64
}

// parseJob decodes a pending key of either queue; the tenant is looked up
// by its prefix.
func (cp *ControlPlane) parseJob(r store.Reader, k string) (*job, error) {
	j, ok := parsePendingKey(k)
	if !ok {
		return nil, fmt.Errorf("controlplane: malformed pending work key %q", k)
	}
	_, committed := r.(viewReader)
	t, err := cp.tenants.tenantOf(r, j.tp, committed)
	if err != nil {
		return nil, err
	}
	j.tenant = t
	return j, nil
}

// parsePendingKey decodes a pending key of either queue into a job
// without its tenant (only its tenant prefix).
func parsePendingKey(k string) (*job, bool) {
	if k == "" {
		return nil, false
	}
	j := &job{pkey: k}
	n := tenantPrefixLen(k[1:])
	if n == 0 {
		return nil, false
	}
	j.tp = k[1 : 1+n]
	kind, rest := k[:1], k[1+n:]
	var ok bool
	if kind == pendingAgent {
		if j.listener, rest, ok = decID(rest); !ok || rest == "" {
			return nil, false
		}
		kind, rest = rest[:1], rest[1:]
	}
	if kind != pendingRevision && kind != pendingDelete {
		return nil, false
	}
	if j.deployment, rest, ok = decID(rest); !ok {
		return nil, false
	}
	if kind == pendingRevision {
		if len(rest) < 8 {
			return nil, false
		}
		if j.revision, rest, ok = decID(rest[8:]); !ok {
			return nil, false
		}
	}
	return j, rest == ""
}

// owner is this ControlPlane's lease owner id, made on first use from NewID
// (so ids never collide between replicas that use the default NewID).
func (cp *ControlPlane) owner() string {
	cp.ownerOnce.Do(func() { cp.ownerID = cp.newID() })
	return cp.ownerID
}

// claim takes the first pending unit of work whose lease is free or
// expired and whose tenant is below its share of this ControlPlane's
// workers (Options.TenantWorkers), and takes a place in that share, which
// do gives back. It looks in a View first, so that an idle poll writes
// nothing (an empty Update still commits, and syncs, on some stores), then
// claims in an Update that checks the candidate's lease again. It returns
// nil when there is none. Its error is the store's, unwrapped.
//
// The Update reads and writes only the candidate's pending record, so that
// a claim does not read the range of pending records that concurrent
// creates and reports write to (over storepg, every such write would
// conflict with it). When another claim took the candidate first, or
// another claim of this ControlPlane filled the candidate's tenant's share
// meanwhile, the search starts again, a few times.
func (cp *ControlPlane) claim(ctx context.Context) (*job, error) {
	now := cp.now()
	for range claimTries {
		full := cp.shares.full()
		var found *job
		err := cp.st.View(ctx, func(r store.Reader) error {
			var err error
			found, err = cp.claimable(r, now, full)
			return err
		})
		if err != nil || found == nil {
			return nil, err
		}
		if !cp.shares.take(found.tp) {
			continue
		}
		j, err := cp.takeLease(ctx, found, now)
		if err != nil || j == nil {
			cp.shares.leave(found.tp)
		}
		if err != nil || j != nil {
			return j, err
		}
	}
	return nil, nil
}

// takeLease claims found, a unit of work a View saw claimable at now, in
// an Update that reads and writes only its pending record and checks its
// lease again. It returns nil when the work was done or claimed
// meanwhile. Its error is the store's, unwrapped.
func (cp *ControlPlane) takeLease(ctx context.Context, found *job, now time.Time) (*job, error) {
	token := cp.owner() + ":" + strconv.FormatUint(cp.claims.Add(1), 10)
	var j *job
	err := cp.st.Update(ctx, func(tx store.Tx) error {
		j = nil
		v, err := tx.Get(colPending, found.pkey)
		if errors.Is(err, store.ErrNotFound) {
			return nil // done meanwhile
		}
		if err != nil {
			return err
		}
		t, exp := parseLease(v)
		if t != "" && exp.After(now) {
			return nil // claimed meanwhile
		}
		found.token, found.takeover = token, t != "" && t != retryToken
		found.failures = leaseFailures(v)
		j = found
		return tx.Put(colPending, j.pkey, leaseOf(token, now.Add(cp.leaseFor), j.failures))
	})
	if err != nil {
		return nil, err
	}
	if j != nil && j.takeover {
		cp.obs.LeaseTakenOver()
	}
	return j, nil
}

// claimTries bounds the searches of one claim whose candidates others
// claimed first; the next poll searches again.
const claimTries = 4

// claimable finds the first pending unit of work, in key order, whose
// lease is free or expired at now and whose tenant (by key prefix) is not
// in full, the tenants at their share. It walks the pending records, so
// its cost follows the work in flight and waiting, never the revisions
// stored.
//
// A tenant at its share may have any number of records waiting (one
// tenant's burst of revisions), and they lie together in key order: kind,
// then tenant. Walking them one by one would make every claim of another
// tenant's work cost that burst. Instead, the first record of a full
// tenant ends the walk, and a new one starts at the first key after that
// tenant's records of that kind (a seek in every store's key order). So a
// claim walks what it walked without shares (the leased records of the
// other tenants, up to the first claimable one) plus one record and one
// seek per full tenant and kind: at most 2*len(full) more, and len(full)
// is at most Workers/TenantWorkers under Run, since each full tenant has
// TenantWorkers units in flight.
//
// The agents' work (pendingAgent, which sorts first) is never Run's: the
// walk starts past it, with one seek.
func (cp *ControlPlane) claimable(r store.Reader, now time.Time, full map[string]bool) (*job, error) {
	return cp.firstClaimable(r, "", keyAfterPrefix(pendingAgent), now, full)
}

// firstClaimable is claimable over the pending records under prefix, from
// start ("" for the first): the walk of claimable, and of an agent's claim
// over its listener's records (with full nil).
func (cp *ControlPlane) firstClaimable(r store.Reader, prefix, start string, now time.Time, full map[string]bool) (*job, error) {
	var k, tok string
	opts := &store.ScanOptions{Start: start}
	for {
		var past string // where the walk goes on, past a full tenant's records
		err := r.Scan(colPending, prefix, opts, func(key string, v []byte) (bool, error) {
			if len(full) > 0 && len(key) > 1 {
				if n := tenantPrefixLen(key[1:]); n > 0 && full[key[1:1+n]] {
					past = keyAfterPrefix(key[:1+n])
					return false, nil
				}
			}
			t, exp := parseLease(v)
			if t != "" && exp.After(now) {
				return true, nil
			}
			k, tok = key, t
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
	j, err := cp.parseJob(r, k)
	if err != nil {
		return nil, err
	}
	j.takeover = tok != "" && tok != retryToken
	return j, nil
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
	panic("controlplane: keyAfterPrefix of a prefix of 0xff bytes")
}

// tenantShare is the cap per tenant that Options.TenantWorkers t gives
// over workers workers: 0 for none (a cap of workers or more caps nothing).
func tenantShare(t, workers int) int {
	if t == 0 {
		t = max(1, workers/4)
	}
	if t < 0 || t >= workers {
		return 0
	}
	return t
}

// shares counts the units of work of each tenant (by key prefix) that this
// ControlPlane drives, so that one tenant takes at most limit of its
// workers (Options.TenantWorkers) and never starves the others.
type shares struct {
	limit int // 0: no cap
	mu    sync.Mutex
	n     map[string]int // tenant prefix -> units in flight
}

func newShares(limit int) *shares {
	return &shares{limit: limit, n: map[string]int{}}
}

// full returns the tenants at their share: at most workers/limit of them.
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

// ownLease reads the job's pending record and checks that the lease is
// still the job's. A missing record means the work is done (by a report, a
// newer revision or a delete): ErrLeaseLost too, as far as the job is
// concerned, except that reports explain it better (see apply).
func ownLease(tx store.Tx, j *job) (found bool, err error) {
	found, _, err = ownLeaseOf(tx, j)
	return found, err
}

// ownLeaseOf is ownLease, also returning the count of failures the lease
// keeps (a teardown's), which a write of the lease keeps.
func ownLeaseOf(tx store.Tx, j *job) (found bool, failures int, err error) {
	v, err := tx.Get(colPending, j.pkey)
	if errors.Is(err, store.ErrNotFound) {
		return false, 0, nil
	}
	if err != nil {
		return false, 0, err
	}
	if tok, _ := parseLease(v); tok != j.token {
		return true, 0, ErrLeaseLost
	}
	return true, leaseFailures(v), nil
}

// renewLease pushes the job's lease expiry forward.
func (cp *ControlPlane) renewLease(ctx context.Context, j *job) error {
	now := cp.now()
	err := cp.st.Update(ctx, func(tx store.Tx) error {
		found, failures, err := ownLeaseOf(tx, j)
		if err != nil {
			return err
		}
		if !found {
			return ErrLeaseLost
		}
		return tx.Put(colPending, j.pkey, leaseOf(j.token, now.Add(cp.leaseFor), failures))
	})
	return cp.storeErr("renew lease", err)
}

// release gives the job's work back: at once (retry false: expiry now, so
// any replica takes it) or after PollInterval (retry true: the deployer
// asked to be called again later). Nothing happens if the lease is no
// longer the job's.
func (cp *ControlPlane) release(ctx context.Context, j *job, retry bool) error {
	now := cp.now()
	err := cp.st.Update(ctx, func(tx store.Tx) error {
		found, failures, err := ownLeaseOf(tx, j)
		if err != nil || !found {
			return err
		}
		if !retry {
			var free []byte // free; a count of failures stays, with an expiry long past
			if failures > 0 {
				free = leaseOf("", time.UnixMicro(0), failures)
			}
			return tx.Put(colPending, j.pkey, free)
		}
		return tx.Put(colPending, j.pkey, leaseOf(retryToken, now.Add(cp.poll), failures))
	})
	if errors.Is(err, ErrLeaseLost) {
		return nil
	}
	return cp.storeErr("release work", err)
}

// keepLease renews the job's lease every third of its duration until stop
// is called, and cancels ctx with ErrLeaseLost if it is lost.
func (cp *ControlPlane) keepLease(ctx context.Context, j *job, cancel context.CancelCauseFunc) (stop func()) {
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(cp.leaseFor / 3)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if err := cp.renewLease(ctx, j); errors.Is(err, ErrLeaseLost) {
					cancel(ErrLeaseLost)
					return
				} else if err != nil && ctx.Err() == nil {
					cp.log.Warn("controlplane: renewing a lease failed", "work", j.pkey, "err", err)
				}
			}
		}
	})
	return func() { close(quit); wg.Wait() }
}

// Process claims one unit of pending work, if any, and does it in the
// calling goroutine: it calls d.Deploy for a revision not yet terminal, or
// d.Teardown and then removes the deployment for one AWAITING_DELETE. It
// reports whether there was work, and returns Teardown's error once it is
// recorded (the deployment's status_message, and the backoff after which
// the teardown is tried again). Run does the same concurrently, forever;
// Process is for tests and for callers that schedule work themselves.
// Work is claimed in key order (tenant, deployment, revision age), so a
// sequence of Process calls over the same state is deterministic.
func (cp *ControlPlane) Process(ctx context.Context, d Deployer) (bool, error) {
	if d == nil {
		return false, errors.New("controlplane: Process needs a Deployer")
	}
	j, err := cp.claim(ctx)
	if err != nil || j == nil {
		return false, cp.storeErr("claim work", err)
	}
	return true, cp.do(ctx, d, j)
}

// do runs one claimed job, and then gives back its place in its tenant's
// share. Errors are store errors (the work is then retried after
// PollInterval) and Teardown's error, as a *teardownError (retried after
// its backoff); a Deploy error is recorded on the revision instead.
func (cp *ControlPlane) do(ctx context.Context, d Deployer, j *job) error {
	defer cp.shares.leave(j.tp)
	jctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := cp.keepLease(jctx, j, cancel)
	j.stepStart.Store(cp.clock().UnixNano())
	var err error
	if j.revision != "" {
		err = cp.deploy(jctx, d, j)
	} else {
		err = cp.teardown(jctx, d, j)
	}
	stop()
	switch {
	case errors.Is(context.Cause(jctx), ErrLeaseLost):
		return nil // someone else has it now
	case ctx.Err() != nil:
		// Stopping: give the work back at once, so that a replica or the
		// next start takes it over without waiting for the lease to expire.
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer rcancel()
		return errors.Join(ctx.Err(), cp.release(rctx, j, false))
	case errors.As(err, new(*teardownError)):
		return err // recorded, and given back until its backoff ends
	case err != nil:
		// A store failure: try again after PollInterval rather than when
		// the lease expires.
		return errors.Join(err, cp.release(ctx, j, true))
	}
	return nil
}

// loadWork reads the Work of the job's revision.
func (cp *ControlPlane) loadWork(r store.Reader, j *job) (*Work, error) {
	dep, err := cp.getDeployment(r, j.tenant, j.deployment)
	if err != nil {
		return nil, err
	}
	rev, err := cp.getRevision(r, j.tenant, j.deployment, j.revision)
	if err != nil {
		return nil, err
	}
	w := &Work{Tenant: j.tenant, Deployment: *dep.wire(), Revision: rev.wire(), Secrets: rev.Secrets,
		ResourceSpec: rev.ResourceSpec, InstallCommand: rev.InstallCommand, BuildCommand: rev.BuildCommand,
		ImageVersion: rev.ImageVersion}
	if w.Secrets == nil {
		w.Secrets = []Secret{}
	}
	if id := dep.SourceConfig.ListenerID; id != nil {
		if w.Listener, err = getListener(r, j.tenant, *id); err != nil {
			return nil, err
		}
		cp.answerListener(w.Listener, cp.now())
	}
	return w, nil
}

func (cp *ControlPlane) deploy(ctx context.Context, d Deployer, j *job) error {
	var w *Work
	err := cp.st.View(ctx, func(r store.Reader) error {
		var err error
		w, err = cp.loadWork(r, j)
		return err
	})
	if err != nil {
		return cp.storeErr("load work", err)
	}
	rep := &reporter{cp: cp, j: j}
	start := cp.clock()
	derr := d.Deploy(ctx, w, rep)
	cp.obs.DeployerCall(DeployerDeploy, cp.clock().Sub(start), derr)
	if ctx.Err() != nil {
		return nil // do releases the work, or it was lost
	}
	if derr != nil {
		// Record the failure of the phase the revision is in.
		err := cp.apply(ctx, j, Step{Message: derr.Error()}, true)
		if IsRefusal(err) {
			return nil // someone else's now, or already terminal
		}
		return err
	}
	return cp.release(ctx, j, true) // no-op when the revision is terminal
}

func (cp *ControlPlane) teardown(ctx context.Context, d Deployer, j *job) error {
	var dep *deploymentRecord
	err := cp.st.View(ctx, func(r store.Reader) error {
		var err error
		dep, err = cp.getDeployment(r, j.tenant, j.deployment)
		return err
	})
	if errors.Is(err, apierr.ErrNotFound) {
		dep = nil // removed already; drop the work below
	} else if err != nil {
		return cp.storeErr("load work", err)
	}
	if dep != nil {
		start := cp.clock()
		err := d.Teardown(ctx, j.tenant, dep.wire())
		cp.obs.DeployerCall(DeployerTeardown, cp.clock().Sub(start), err)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			err = cp.teardownFailed(ctx, j, err) // deletes.go
			if errors.Is(err, ErrLeaseLost) {
				return nil
			}
			return err
		}
	}
	err = cp.finishTeardown(ctx, j)
	if errors.Is(err, ErrLeaseLost) {
		return nil
	}
	if err == nil && j.failures > 0 {
		cp.log.Info("controlplane: teardown succeeded after failing; the deployment is removed",
			"tenant", j.tenant, "deployment", j.deployment, "failures", j.failures)
	}
	return err
}

// finishTeardown removes every record of the job's deployment, once its
// Deployer tore it down, if the lease is still the job's (ErrLeaseLost
// otherwise; nothing when the work is gone already).
func (cp *ControlPlane) finishTeardown(ctx context.Context, j *job) error {
	err := cp.st.Update(ctx, func(tx store.Tx) error {
		found, err := ownLease(tx, j)
		if err != nil || !found {
			return err
		}
		rec, err := cp.getDeployment(tx, j.tenant, j.deployment)
		if errors.Is(err, apierr.ErrNotFound) {
			return tx.Delete(colPending, j.pkey)
		}
		if err != nil {
			return err
		}
		return cp.dropDeployment(ctx, tx, j.tenant, rec) // deletes.go
	})
	return cp.storeErr("remove deployment", err)
}

// reporter is the Reporter of one claimed revision.
type reporter struct {
	cp *ControlPlane
	j  *job
}

func (r *reporter) Report(ctx context.Context, s Step) error {
	return r.cp.apply(ctx, r.j, s, false)
}

// apply records a step of the job's revision in one Update: the transition
// is checked against the table, the revision, its pending record (lease
// renewed, or removed when terminal) and, when it becomes active or the
// step sets a deployment status, the deployment are written together.
// With fail, the step's status is the failure of the revision's phase.
func (cp *ControlPlane) apply(ctx context.Context, j *job, s Step, fail bool) error {
	if s.Status != "" && !validRevisionStatus(s.Status) {
		return apierr.InvalidStatef("Unknown revision status %q.", s.Status)
	}
	if s.DeploymentStatus != "" {
		if err := deployerStatus(s.DeploymentStatus); err != nil {
			return err
		}
	}
	now := cp.now()
	var from, to RevisionStatus // the status change committed, if any
	var entered time.Time       // when the revision entered from
	err := cp.st.Update(ctx, func(tx store.Tx) error {
		from, to = "", ""
		found, err := ownLease(tx, j)
		if err != nil {
			return err
		}
		rev, err := cp.getRevision(tx, j.tenant, j.deployment, j.revision)
		if !found && errors.Is(err, apierr.ErrNotFound) {
			// Removed with its deployment (a delete of one that never
			// ran, or a forced one): a refusal, as for any revision ended
			// without the deployer.
			return apierr.InvalidStatef("Revision %s was removed with its deployment.", j.revision)
		}
		if err != nil {
			return err
		}
		step := s
		if fail {
			step.Status = FailureOf(rev.Status)
		}
		if j.listener != "" && repeatedReport(rev.Status, step.Status, fail) {
			// An agent's report repeated after its answer was lost (the
			// revision may have ended with it): it changes nothing but
			// the lease, while the work is the lease's.
			if !found {
				return nil
			}
			return tx.Put(colPending, j.pkey, lease(j.token, now.Add(cp.leaseFor)))
		}
		if !found {
			return apierr.InvalidStatef("Revision %s is %s.", rev.ID, rev.Status)
		}
		if step.Status != "" && !CanTransition(rev.Source, rev.Status, step.Status) {
			return apierr.InvalidStatef("Revision %s cannot move from %s to %s.", rev.ID, rev.Status, step.Status)
		}
		if step == (Step{}) {
			return tx.Put(colPending, j.pkey, lease(j.token, now.Add(cp.leaseFor)))
		}
		next := *rev
		next.UpdatedAt = later(now, rev.UpdatedAt)
		if step.Status != "" {
			next.enter(step.Status, next.UpdatedAt)
		}
		if step.Message != "" {
			next.StatusMessage = new(step.Message)
		} else if j.listener != "" && rev.Status == RevisionQueued && next.Status != RevisionQueued {
			next.StatusMessage = nil // its agent took it: no longer waiting
		}
		if step.RepoCommitSHA != nil {
			next.SourceRevisionConfig.RepoCommitSHA = new(*step.RepoCommitSHA)
		}
		if step.ImageVersion != nil {
			next.ImageVersion = new(*step.ImageVersion)
		}
		if err := cp.putRevision(tx, j.tenant, &next, false); err != nil {
			return err
		}
		if next.Status != rev.Status {
			from, to = rev.Status, next.Status
			if h := rev.StatusHistory; len(h) > 0 {
				entered = h[len(h)-1].At.Time()
			}
		}
		if IsTerminal(next.Status) {
			err = tx.Delete(colPending, j.pkey)
		} else {
			err = tx.Put(colPending, j.pkey, lease(j.token, now.Add(cp.leaseFor)))
		}
		if err != nil {
			return err
		}
		if next.Status != RevisionDeployed && step.DeploymentStatus == "" && step.RepoCommitSHA == nil {
			return nil
		}
		return cp.applyToDeployment(tx, j, &next, step, now)
	})
	if err != nil {
		return cp.storeErr("report", err)
	}
	if to != "" {
		if j.listener != "" && !entered.IsZero() {
			// An agent's job is made anew for each call: its step began
			// when the revision entered its status.
			j.stepStart.Store(entered.UnixNano())
		}
		cp.observeTransition(ctx, j, from, to, now)
	}
	return nil
}

// applyToDeployment makes a revision that just reached DEPLOYED active
// (unless a newer one already is), mirrors a repo_commit_sha reported for
// the deployment's latest revision into the deployment's
// source_revision_config, and sets the status a step asks for.
func (cp *ControlPlane) applyToDeployment(tx store.Tx, j *job, rev *revisionRecord, s Step, now time.Time) error {
	dep, err := cp.getDeployment(tx, j.tenant, j.deployment)
	if err != nil {
		return err
	}
	next := *dep
	if s.RepoCommitSHA != nil && dep.LatestRevisionID != nil && *dep.LatestRevisionID == rev.ID {
		next.SourceRevisionConfig.RepoCommitSHA = new(*s.RepoCommitSHA)
	}
	if rev.Status == RevisionDeployed && s.Status == RevisionDeployed {
		newer := dep.ActiveRevisionID == nil
		if !newer {
			act, err := cp.getRevision(tx, j.tenant, j.deployment, *dep.ActiveRevisionID)
			if err != nil {
				return err
			}
			newer = createdKey(act.CreatedAt.Time())+act.ID < createdKey(rev.CreatedAt.Time())+rev.ID
		}
		if newer {
			next.ActiveRevisionID = new(rev.ID)
			if rev.ImageVersion != nil {
				next.ImageVersion = new(*rev.ImageVersion)
			}
			if s.URL != nil {
				next.URL = new(next.servedURL(*s.URL))
			}
			if next.Status == StatusAwaitingDatabase {
				next.Status = StatusReady
			}
		}
	}
	if s.DeploymentStatus != "" {
		if err := setDeployerStatus(&next, s.DeploymentStatus); err != nil {
			return err
		}
	}
	if next.equal(dep) {
		return nil
	}
	next.UpdatedAt = later(now, dep.UpdatedAt)
	return cp.putDeployment(tx, j.tenant, dep, &next)
}

// notify wakes Run: there is new work in this process.
func (cp *ControlPlane) notify() {
	select {
	case cp.wake <- struct{}{}:
	default:
	}
}

// Run drives pending work until ctx is done, then waits for the work in
// flight to stop and returns nil. It claims work inside store transactions
// with a lease (Options.LeaseDuration, renewed while the work runs), so
// several ControlPlanes over one store (replicas over one storepg database,
// or a restarted process) never drive the same revision at the same time,
// and work whose owner died is taken over once its lease expires. Up to
// Options.Workers units run at once, at most Options.TenantWorkers of them
// one tenant's: while a tenant is at its share, its waiting work is passed
// over and other tenants' is claimed. Run wakes at once when this
// ControlPlane creates work, and polls the store every
// Options.PollInterval for work other replicas created. Work in flight when
// ctx is done is given back at once, so a restart resumes it.
//
// A ControlPlane runs one Run at a time (a second call returns an error).
// Store failures are logged and retried at the next poll; Run returns
// early only when the store is closed.
func (cp *ControlPlane) Run(ctx context.Context, d Deployer) error {
	if d == nil {
		return errors.New("controlplane: Run needs a Deployer")
	}
	if !cp.running.CompareAndSwap(false, true) {
		return errors.New("controlplane: Run is already running")
	}
	defer cp.running.Store(false)
	cp.deployer.Store(&d)
	sem := make(chan struct{}, cp.workers)
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(cp.poll)
	defer tick.Stop()
	for {
		// Number the outbox's events and fold the order counts
		// (sequencer.go), for this replica's writes and the others'.
		if err := cp.maintain(ctx); err != nil {
			if errors.Is(err, store.ErrClosed) {
				return errors.New("controlplane: Run: the store is closed")
			}
			if ctx.Err() == nil {
				cp.log.Error("controlplane: sequencing events failed", "err", err)
			}
		}
		for len(sem) < cap(sem) && ctx.Err() == nil {
			j, err := cp.claim(ctx)
			if err != nil {
				if errors.Is(err, store.ErrClosed) {
					return errors.New("controlplane: Run: the store is closed")
				}
				if ctx.Err() == nil {
					cp.log.Error("controlplane: claiming work failed", "err", err)
				}
				break
			}
			if j == nil {
				break
			}
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem; cp.notify() }()
				// A failed teardown logged itself, once per distinct failure.
				if err := cp.do(ctx, d, j); err != nil && ctx.Err() == nil && !errors.As(err, new(*teardownError)) {
					cp.log.Error("controlplane: work failed", "work", j.pkey, "err", err)
				}
			})
		}
		select {
		case <-ctx.Done():
			return nil
		case <-cp.wake:
		case <-tick.C:
		}
	}
}

// ReportDeploymentStatus sets a deployment's status on a deployer's word,
// outside any revision's work: UNUSED when it scaled an idle deployment to
// zero, UNKNOWN when it cannot tell, READY when it is serving again (only
// once a revision is active). Errors: *apierr.NotFoundError, apierr.ErrInvalidState for
// another status, a deployment being deleted, or READY without an active
// revision. Setting the status it already has changes nothing.
func (cp *ControlPlane) ReportDeploymentStatus(ctx context.Context, tenant, deploymentID string, s DeploymentStatus) error {
	if err := apierr.CheckTenant(tenant); err != nil {
		return err
	}
	did, ok := pathID(deploymentID)
	if !ok {
		return &apierr.NotFoundError{Kind: apierr.KindDeployment, ID: deploymentID}
	}
	if err := deployerStatus(s); err != nil {
		return err
	}
	now := cp.now()
	err := cp.st.Update(ctx, func(tx store.Tx) error {
		dep, err := cp.getDeployment(tx, tenant, did)
		if err != nil {
			return err
		}
		next := *dep
		if err := setDeployerStatus(&next, s); err != nil || next.Status == dep.Status {
			return err
		}
		next.UpdatedAt = later(now, dep.UpdatedAt)
		return cp.putDeployment(tx, tenant, dep, &next)
	})
	return cp.storeErr("report deployment status", err)
}

// deployerStatus checks that a deployer may set s at all.
func deployerStatus(s DeploymentStatus) error {
	switch s {
	case StatusReady, StatusUnused, StatusUnknown:
		return nil
	}
	return apierr.InvalidStatef("A deployer may not set the deployment status %q.", s)
}

// setDeployerStatus applies a deployer's status to d, checking its state.
func setDeployerStatus(d *deploymentRecord, s DeploymentStatus) error {
	switch {
	case d.Status == StatusAwaitingDelete:
		return apierr.InvalidStatef("Deployment ID %s is being deleted.", d.ID)
	case s == StatusReady && d.ActiveRevisionID == nil:
		return apierr.InvalidStatef("Deployment ID %s has no active revision; it cannot be READY.", d.ID)
	}
	d.Status = s
	return nil
}
