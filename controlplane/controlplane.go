package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane/internal/answercache"
	"github.com/deployplane/deployplane/controlplane/internal/eventlog"
	"github.com/deployplane/deployplane/controlplane/internal/index"
	"github.com/deployplane/deployplane/controlplane/internal/keyenc"
	"github.com/deployplane/deployplane/controlplane/internal/revlog"
	"github.com/deployplane/deployplane/controlplane/internal/workqueue"
	"github.com/deployplane/deployplane/internal/seal"
	"github.com/deployplane/deployplane/internal/uuidtext"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/wiretime"
)

// ControlPlane is the deployment domain over a store.Store: every rule of
// the wire contract, scoped per tenant. It is safe for concurrent use.
type ControlPlane struct {
	st      store.Store
	clock   func() time.Time
	newID   func() string
	sources []Source
	urlTmpl string
	log     *slog.Logger
	tracing TracingProjects
	lim     Limits
	github  GitHubApp            // nil: no verified GitHub installations
	states  InstallStates        // nil: no verified GitHub installations
	uploads UploadChecker        // nil: uploads not offered, every source_tarball_path refused (sources.go)
	images  ImageResolver        // nil: image_uri kept as sent (sources.go)
	shapes  *shapes              // the shape tags' validator, built once (shape.go)
	secrets secretCodec          // seals secret values at rest (storageform.go)
	logs    *revlog.Logs         // the revision logs, bounded by Options.LogRetention (logs.go)
	idx     *index.Index         // the name and order index of the deployments (list.go, records.go)
	tenants keyenc.Tenants       // tenant key prefixes (records.go)
	events  *eventlog.Log        // the event log: outbox, sequencer, followers (events.go)
	renders *renderCache         // the rendered data of recent events (events.go)
	answers *answercache.Cache   // GetDeploymentJSON's recent answers (records.go)
	jsons   sync.Pool            // *jsonRead, AppendDeploymentJSON's Views
	raw     store.Store          // the store New was given, without st's wrappers: AppendDeploymentJSON's Views
	drives  func(*Listener) bool // Options.Drives; nil: every listener (agentwork.go)
	// refProblem is Options.SecretReferenceProblem.
	refProblem func(d *Deployment, ref SecretReference) string
	agents     agentHub     // agents waiting for work, and last seen (agentwork.go)
	previews   previewState // previews.go

	// lifecycle (worker.go)
	poll     time.Duration
	leaseFor time.Duration
	watchFor time.Duration // Options.AutoRollbackWindow (autorollback.go)
	workers  int
	queue    *workqueue.Queue // the pending work, its leases and each tenant's share of the workers (worker.go)
	wake     chan struct{}
	running  atomic.Bool
	jobs     runningJobs              // the jobs Run and Process drive now (interrupt.go)
	obs      Observer                 // observe.go; never nil
	deployer atomic.Pointer[Deployer] // the Deployer Run drives, for Ready
	folding  sync.Mutex               // one fold of the order counts at a time (sequencer.go)

	hooks ruleHooks // none outside the mutation tests (rules.go)
}

// Open is New, after checking Options.SecretKey against the store:
// a store whose secrets were sealed under another key (or under a key,
// when none is given) is refused with an error wrapping ErrSecretKey,
// before anything is served. The first key used with a store is recorded
// (as a sealed check value, never the key) and every later Open is held
// to it. A key of the wrong length is refused too. A store in another
// storage layout than the current one is refused with ErrOldLayout
// (CheckLayout).
func Open(ctx context.Context, st store.Store, opts *Options) (*ControlPlane, error) {
	var key []byte
	if opts != nil {
		key = opts.SecretKey
	}
	if err := VerifySecretKey(ctx, st, key); err != nil {
		return nil, err
	}
	cp := New(st, opts)
	if err := cp.CheckLayout(ctx); err != nil {
		return nil, err
	}
	return cp, nil
}

// VerifySecretKey checks key (nil: none) against the check value kept in
// st, writing one when the store has none and key is set; see Open. Its
// errors wrap ErrSecretKey when the key is not the store's (another key,
// or none for a store that has one). oauthflow seals with the same key, so
// an embedder of oauthflow alone calls this before serving.
func VerifySecretKey(ctx context.Context, st store.Store, key []byte) error {
	err := seal.Verify(ctx, st, key)
	switch {
	case errors.Is(err, seal.ErrWrongKey), errors.Is(err, seal.ErrNoKey):
		return fmt.Errorf("%w: %w", ErrSecretKey, err)
	case err != nil:
		return fmt.Errorf("controlplane: checking the secret key: %w", err)
	}
	return nil
}

// New returns a ControlPlane over st. A nil opts means defaults.
func New(st store.Store, opts *Options) *ControlPlane {
	var o Options
	if opts != nil {
		o = *opts
	}
	cp := &ControlPlane{
		st:         keyenc.Views(st),
		raw:        st,
		clock:      o.Clock,
		newID:      o.NewID,
		sources:    slices.Clone(o.Sources),
		urlTmpl:    o.CustomURLTemplate,
		log:        o.Logger,
		tracing:    o.TracingProjects,
		lim:        o.Limits,
		github:     o.GitHubApp,
		states:     o.GitHubInstallStates,
		uploads:    o.Uploads,
		images:     o.Images,
		logs:       o.LogRetention.logs(),
		drives:     o.Drives,
		refProblem: o.SecretReferenceProblem,
		idx:        index.New(nil),
		previews:   previewState{forks: o.PreviewForks, reporter: o.PreviewStatus},

		poll:     o.PollInterval,
		leaseFor: o.LeaseDuration,
		watchFor: o.AutoRollbackWindow,
		workers:  o.Workers,
		wake:     make(chan struct{}, 1),
		obs:      o.Observer,
		hooks:    o.hooks,
	}
	cp.events = newEventLog(st, &o)
	cp.renders = newRenderCache()
	cp.answers = answercache.New(answerCacheBytes(o.AnswerCacheBytes))
	cp.st = eventStore{Store: cp.st, cp: cp} // wakes event followers after commits, runs the sequencer (events.go)
	if len(o.SecretKey) > 0 {
		s, err := seal.New(o.SecretKey)
		if err != nil {
			err = fmt.Errorf("controlplane: Options.SecretKey: %w", err)
		}
		cp.secrets = secretCodec{sealer: s, err: err}
	}
	if cp.poll <= 0 {
		cp.poll = DefaultPollInterval
	}
	if cp.leaseFor <= 0 {
		cp.leaseFor = DefaultLeaseDuration
	}
	if cp.watchFor <= 0 {
		cp.watchFor = DefaultAutoRollbackWindow
	}
	if cp.workers <= 0 {
		cp.workers = DefaultWorkers
	}
	if cp.clock == nil {
		cp.clock = time.Now
	}
	if cp.obs == nil {
		cp.obs = noObserver{}
	}
	if cp.newID == nil {
		cp.newID = func() string { return uuid.Must(uuid.NewV7()).String() }
	}
	// The lease owner id is made from NewID at the first claim, so that
	// ids never collide between replicas that use the default NewID.
	cp.queue = workqueue.New(cp.st, &workqueue.Options{Lease: cp.leaseFor,
		TenantShare: tenantShare(o.TenantWorkers, cp.workers), NewID: cp.newID})
	if len(cp.sources) == 0 {
		cp.sources = Sources()
	}
	if slices.Contains(cp.sources, SourceExternalDocker) {
		for _, s := range []Source{SourceInternalSource, SourceInternalDocker} {
			if !slices.Contains(cp.sources, s) {
				cp.sources = append(cp.sources, s)
			}
		}
	}
	if cp.urlTmpl == "" {
		cp.urlTmpl = DefaultCustomURLTemplate
	}
	if cp.log == nil {
		cp.log = slog.New(slog.DiscardHandler)
	}
	if cp.tracing == nil {
		cp.tracing = StoreTracingProjects{}
	}
	def := DefaultLimits()
	for _, f := range []struct {
		v *int
		d int
	}{
		{&cp.lim.MaxStringBytes, def.MaxStringBytes},
		{&cp.lim.MaxSecrets, def.MaxSecrets},
		{&cp.lim.MaxSecretValueBytes, def.MaxSecretValueBytes},
		{&cp.lim.MaxItems, def.MaxItems},
		{&cp.lim.MaxMapEntries, def.MaxMapEntries},
		{&cp.lim.MaxObjectBytes, def.MaxObjectBytes},
		{&cp.lim.MaxTagValueIDs, def.MaxTagValueIDs},
		{&cp.lim.MaxFilterIDs, def.MaxFilterIDs},
	} {
		if *f.v <= 0 {
			*f.v = f.d
		}
	}
	cp.shapes = newShapes(cp.lim)
	return cp
}

// Limits returns the limits this ControlPlane applies: Options.Limits with
// zero fields set to DefaultLimits. HTTP layers validate list queries with
// them (ListDeploymentsQuery.ValidateWith) so that they agree with the
// ControlPlane.
func (cp *ControlPlane) Limits() Limits { return cp.lim }

// now is the one timestamp of an operation.
func (cp *ControlPlane) now() time.Time {
	return cp.clock().UTC().Truncate(time.Microsecond)
}

// later returns now, or a microsecond after prev when now is not after it.
// Operations read the clock before their transaction (so that a closure run
// twice sees the same time); a change is stamped later(now, updated_at) so
// that updated_at only grows and a new revision is always newer than the
// deployment's previous ones, even when concurrent calls commit out of clock
// order.
func later(now time.Time, prev wiretime.Time) wiretime.Time {
	if !now.After(prev.Time()) {
		return prev.Add(time.Microsecond)
	}
	return wiretime.New(now)
}

// pathID canonicalizes an id from a path; ok is false when it cannot be an
// id at all (the resource is then simply not found), and id is returned
// as it came.
func pathID(id string) (string, bool) {
	if c, ok := uuidtext.Canonical(id); ok {
		return c, true
	}
	return id, false
}

// storeErr keeps store sentinels from leaking: an error that matches one is
// logged and returned as plain text. Domain errors, context errors and the
// hooks' errors pass through unchanged (wrapped, so errors.Is still works).
func (cp *ControlPlane) storeErr(op string, err error) error {
	if err == nil {
		return nil
	}
	for _, sentinel := range []error{store.ErrNotFound, store.ErrAlreadyExists, store.ErrClosed, store.ErrInvalidKey} {
		if errors.Is(err, sentinel) {
			cp.log.Error("controlplane: store failure", "op", op, "err", err)
			return fmt.Errorf("controlplane: %s: %s", op, err.Error())
		}
	}
	var nf *apierr.NotFoundError
	var ve *apierr.ValidationError
	var de *apierr.DetailError
	if errors.As(err, &nf) || errors.As(err, &ve) || errors.As(err, &de) {
		return err
	}
	return fmt.Errorf("controlplane: %s: %w", op, err)
}

func (cp *ControlPlane) offered(s Source) bool { return slices.Contains(cp.sources, s) }

// customURL fills the template for a github deployment.
func (cp *ControlPlane) customURL(tenant, id, name string) string {
	slug := strings.Map(func(r rune) rune {
		if r == '.' || r == '_' {
			return '-'
		}
		return r
	}, strings.ToLower(name))
	return strings.NewReplacer("{name}", slug, "{id}", id, "{tenant}", tenant).Replace(cp.urlTmpl)
}

func (r *deploymentRecord) wire() *Deployment {
	d := r.Deployment
	d.RemoteReconciled = r.remote()
	d.TagValueIDs = slices.Clone(r.Tags)
	d.SourceRevisionConfig = d.SourceRevisionConfig.answered()
	if d.Secrets == nil {
		d.Secrets = []Secret{}
	}
	if d.SecretReferences == nil {
		d.SecretReferences = []SecretReference{}
	}
	return &d
}

// wire is the revision as answers show it.
func (r *revisionRecord) wire() Revision {
	rev := r.Revision
	rev.SourceRevisionConfig = rev.SourceRevisionConfig.answered()
	return rev
}

// answered is c as answers show it: langgraph_config_path carries
// graph_config_path (wire contract section 9), the name every client of
// the hosted service reads.
func (c SourceRevisionConfig) answered() SourceRevisionConfig {
	c.LanggraphConfigPath = c.GraphConfigPath
	return c
}

// normalizeRevisionConfig folds the langgraph_config_path alias into
// graph_config_path, reporting a conflict. aliased says that the client
// named the path by the alias alone, so that problems about it are reported
// at the key it sent (aliasLocs).
func normalizeRevisionConfig(src *SourceRevisionConfig, ps []apierr.Problem) (_ []apierr.Problem, aliased bool) {
	if a := src.LanggraphConfigPath; a != nil {
		if g := src.GraphConfigPath; g != nil && *g != *a {
			ps = append(ps, apierr.Problem{Loc: []any{"body", "source_revision_config", "langgraph_config_path"},
				Type: apierr.TypeValueError, Msg: "langgraph_config_path is an alias of graph_config_path; both are given with different values"})
		} else {
			aliased = g == nil
			src.GraphConfigPath = a
		}
		src.LanggraphConfigPath = nil
	}
	return ps, aliased
}

// aliasLocs returns ps with every problem at source_revision_config.
// graph_config_path moved to langgraph_config_path when aliased: a
// problem's loc names the key the client sent. ps's own Locs are not
// modified (they may be shared by a transaction that runs again).
func aliasLocs(ps []apierr.Problem, aliased bool) []apierr.Problem {
	if !aliased {
		return ps
	}
	for i, p := range ps {
		if len(p.Loc) >= 3 && p.Loc[0] == "body" && p.Loc[1] == "source_revision_config" && p.Loc[2] == "graph_config_path" {
			loc := slices.Clone(p.Loc)
			loc[2] = "langgraph_config_path"
			ps[i].Loc = loc
		}
	}
	return ps
}

// draftOf sees a request as a Deployment so that the rules table applies:
// the draft holds the request's members that are rows' fields, as the
// table derives them (requestCopies), normalized. Its secrets are left
// nil: the caller sets them from checker.secrets.
func draftOf[R CreateDeploymentRequest | UpdateDeploymentRequest](req *R) (_ *Deployment, _ []apierr.Problem, aliased bool) {
	d := &Deployment{}
	copyRequest(d, req)
	ps, aliased := normalizeRevisionConfig(&d.SourceRevisionConfig, nil)
	d.SourceConfig.IntegrationID = canonicalUUID(d.SourceConfig.IntegrationID)
	d.SourceConfig.ListenerID = canonicalUUID(d.SourceConfig.ListenerID)
	if lc := d.SourceConfig.ListenerConfig; lc != nil && lc.K8sNamespace == nil {
		d.SourceConfig.ListenerConfig = nil // {} says nothing
	}
	return d, ps, aliased
}

func isTagRef(ref *string) bool { return ref != nil && strings.HasPrefix(*ref, "refs/tags/") }

// checkTagRef is the cross-field rule on a merged deployment: build_on_push
// cannot be true with a tag ref.
func checkTagRef(d *Deployment, ps []apierr.Problem, h ruleHooks) []apierr.Problem {
	isTag := isTagRef
	if h.isTagRef != nil {
		isTag = h.isTagRef
	}
	if b := d.SourceConfig.BuildOnPush; b != nil && *b && isTag(d.SourceRevisionConfig.RepoRef) {
		ps = append(ps, apierr.Problem{Loc: []any{"body", "source_config", "build_on_push"}, Type: apierr.TypeBuildOnPushWithTagRef,
			Msg: "build_on_push cannot be enabled when source_revision_config.repo_ref is a tag (starts with 'refs/tags/')"})
	}
	return ps
}

// checkScaleToZero is the cross-field rule of min_scale (wire contract
// section 11) on a deployment with its create defaults: resource_spec's
// min_scale may be 0 only for the deployment types that scale to zero
// (DeploymentType.ScalesToZero), where the source has a deployment_type
// at all; external_docker, which has none, keeps the rule of section 6
// (scales >= 0). A source without a resource_spec (github) has its
// not_applicable problem instead.
func checkScaleToZero(d *Deployment, ps []apierr.Problem) []apierr.Problem {
	spec := d.SourceConfig.ResourceSpec
	si := sourceIndex(d.Source)
	if spec == nil || spec.MinScale == nil || *spec.MinScale != 0 || !knownSource(d.Source) ||
		rules[ruleIndex(locDeploymentType)].create[si] == CreateNotApplicable ||
		rules[ruleIndex(locResourceSpec)].create[si] == CreateNotApplicable {
		return ps
	}
	if t := d.SourceConfig.DeploymentType; t != nil && t.ScalesToZero() {
		return ps
	}
	return append(ps, apierr.Problem{Loc: bodyLoc(locResourceSpec, "min_scale"), Type: apierr.TypeGreaterThanEqual,
		Msg: "Input should be greater than or equal to 1: min_scale 0 needs deployment_type 'dev_zero' or 'dev_free_zero'"})
}

// CreateDeployment creates a deployment, its first revision (status
// CREATING, returned as latest_revision_id) and its tracing project, all in
// one store transaction. The deployment starts AWAITING_DATABASE. Errors: a
// *apierr.ValidationError listing every problem; apierr.ErrConflict when the name is
// taken among the tenant's deployments not yet removed, or when another of
// them is linked to the same agent and environment; the tracing hook's
// error, in which case nothing is left behind.
func (cp *ControlPlane) CreateDeployment(ctx context.Context, tenant string, req *CreateDeploymentRequest) (*Deployment, error) {
	if err := apierr.CheckTenant(tenant); err != nil {
		return nil, err
	}
	if req == nil {
		req = &CreateDeploymentRequest{}
	}
	d, tags, pure := cp.checkCreate(req)

	now := cp.now()
	id, revID := cp.newID(), cp.newID()
	if len(pure) == 0 && d.Source == SourceInternalDocker {
		var err error
		if pure, err = cp.resolveImage(ctx, tenant, id, d.SourceRevisionConfig.ImageURI, pure); err != nil {
			return nil, err
		}
	}
	rec := &deploymentRecord{Deployment: *d, Tags: tags}
	rec.TenantID = tenant
	rec.ID, rec.CreatedAt, rec.UpdatedAt = id, wiretime.New(now), wiretime.New(now)
	rec.Status = StatusAwaitingDatabase
	// internal_source and internal_docker: no revision until what it
	// comes from arrives (wire contract section 10).
	hasSource := hasRevisionSource
	if cp.hooks.hasRevisionSource != nil {
		hasSource = cp.hooks.hasRevisionSource
	}
	withRevision := hasSource(&rec.Deployment)
	if withRevision {
		rec.LatestRevisionID = &revID
	}
	rec.SourceRevisionConfig.RepoCommitSHA = nil
	applyCreateDefaults(&rec.Deployment, rec.Source)
	if rec.Source == SourceGitHub { // CreateReadOnly: the service assigns it
		rec.SourceConfig.CustomURL = new(cp.customURL(tenant, id, rec.Name))
	}

	fnFailed := false // the closure's last run returned an error
	err := cp.st.Update(ctx, func(tx store.Tx) (err error) {
		defer func() { fnFailed = err != nil }()
		return cp.insertDeployment(ctx, tx, tenant, rec, revID, withRevision, pure, now)
	})
	// Every record the Update inserts has a key that holds the new
	// deployment's id (a random UUID), but for the name's: an Insert that
	// the store refused after the closure returned, for a key already
	// there, was the name's. Two creates of one name at once: one commits,
	// the other is refused so.
	if errors.Is(err, errNameTaken) || !fnFailed && errors.Is(err, store.ErrAlreadyExists) {
		return nil, apierr.Conflictf("A deployment named '%s' already exists.", rec.Name)
	}
	if err != nil {
		return nil, cp.storeErr("create deployment", err)
	}
	cp.notify()
	cp.notifyAgent(tenant, &rec.Deployment)
	return rec.wire(), nil
}

// insertDeployment writes the new deployment rec (its id, times, status
// and defaults set) in tx with everything that derives from it: its name
// record, index entry, first revision (revID, when withRevision) and its
// pending work, and its tracing project. pure are the problems found
// before the transaction; the references are checked here. A name taken
// is errNameTaken (or an ErrAlreadyExists after the closure, see
// CreateDeployment).
func (cp *ControlPlane) insertDeployment(ctx context.Context, tx store.Tx, tenant string, rec *deploymentRecord, revID string,
	withRevision bool, pure []apierr.Problem, now time.Time) error {
	id := rec.ID
	ps := slices.Clone(pure)
	ps = cp.checkReferences(tx, tenant, rec.Source, &rec.SourceConfig, ps)
	ps = cp.secretRefProblems(tx, tenant, &rec.Deployment, ps)
	ps, err := cp.checkUpload(tx, tenant, id, rec.Source, rec.SourceRevisionConfig.SourceTarballPath, ps)
	if err != nil {
		return err
	}
	if err := apierr.Validation(ps...); err != nil {
		return err
	}
	tp, err := cp.writeTenant(tx, tenant)
	if err != nil {
		return err
	}
	if a := rec.Agent; a != nil {
		if err := agentLinkFree(tx, tp, a, id); err != nil {
			return err
		}
	}
	// The name's record is an Insert too: a store that holds Inserts
	// back (storepg) learns that the name is taken only when it sends
	// them, after the closure has returned (see below).
	if err := store.Insert(tx, colDeploymentNames, tp+rec.Name, nil); err != nil {
		if errors.Is(err, store.ErrAlreadyExists) {
			return errNameTaken
		}
		return err
	}
	q, agent, err := cp.queueFor(tx, tenant, tp, rec) // sets rec.RemoteReconciled
	if err != nil {
		return err
	}
	if err := cp.putDeployment(tx, tenant, nil, rec); err != nil {
		return err
	}
	if withRevision {
		if err := cp.addFirstRevision(tx, tenant, q, agent, newRevision(rec, revID, rec.CreatedAt)); err != nil {
			return err
		}
	}
	return cp.tracing.CreateTracingProject(ctx, tx, TracingProject{Tenant: tenant, DeploymentID: id, Name: rec.Name, CreatedAt: now})
}

// errNameTaken is what CreateDeployment's closure returns when the name's
// Insert is refused at once (a store that does not hold Inserts back).
var errNameTaken = errors.New("controlplane: deployment name taken")

// checkReferences checks the ids a create names: the integration of a
// github deployment, the listener and namespace of an external_docker one.
// (Fields that do not apply to the source are reported by the table.)
func (cp *ControlPlane) checkReferences(r store.Reader, tenant string, src Source, sc *SourceConfig, ps []apierr.Problem) []apierr.Problem {
	switch src {
	case SourceGitHub:
		if id := sc.IntegrationID; id != nil && validUUID(*id) {
			if _, err := r.Get(colIntegrations, key(tenant, *id)); err != nil {
				ps = append(ps, apierr.Problem{Loc: []any{"body", "source_config", "integration_id"}, Type: apierr.TypeUnknownReference,
					Msg: (&apierr.NotFoundError{Kind: apierr.KindIntegration, ID: *id}).Error()})
			}
		}
	case SourceExternalDocker:
		var l *Listener
		if id := sc.ListenerID; id != nil && validUUID(*id) {
			var err error
			if l, err = getListener(r, tenant, *id); err != nil {
				ps = append(ps, apierr.Problem{Loc: []any{"body", "source_config", "listener_id"}, Type: apierr.TypeUnknownReference,
					Msg: (&apierr.NotFoundError{Kind: apierr.KindListener, ID: *id}).Error()})
			} else if deleting, _ := listenerDeleting(r, tenant, *id); deleting { // a forced delete waits (listeners.go)
				ps = append(ps, apierr.Problem{Loc: []any{"body", "source_config", "listener_id"}, Type: apierr.TypeUnknownReference,
					Msg: fmt.Sprintf("Listener ID %s is being deleted.", *id)})
				l = nil
			}
		}
		if lc := sc.ListenerConfig; lc != nil && lc.K8sNamespace != nil {
			loc := []any{"body", "source_config", "listener_config", "k8s_namespace"}
			switch {
			case sc.ListenerID == nil:
				ps = append(ps, apierr.Problem{Loc: loc, Type: apierr.TypeValueError, Msg: "k8s_namespace requires source_config.listener_id"})
			case l == nil:
				// the listener problem is already reported
			case l.ComputeType != ComputeTypeK8s:
				ps = append(ps, apierr.Problem{Loc: loc, Type: apierr.TypeValueError, Msg: "k8s_namespace applies only to listeners whose compute type is 'k8s'"})
			case len(l.ComputeConfig.K8sNamespaces) > 0 && !slices.Contains(l.ComputeConfig.K8sNamespaces, *lc.K8sNamespace):
				ps = append(ps, apierr.Problem{Loc: loc, Type: apierr.TypeNamespaceNotOfListener,
					Msg: "Namespace should be one of the listener's compute_config.k8s_namespaces"})
			}
		}
	}
	return ps
}

func validUUID(s string) bool { _, ok := pathID(s); return ok }

// secretRefProblems asks Options.SecretReferenceProblem about each of d's
// secret references, unless an agent serves d (its listener is one Drives
// says this server does not drive).
func (cp *ControlPlane) secretRefProblems(r store.Reader, tenant string, d *Deployment, ps []apierr.Problem) []apierr.Problem {
	if cp.refProblem == nil || len(d.SecretReferences) == 0 {
		return ps
	}
	if id := d.SourceConfig.ListenerID; id != nil && cp.drives != nil {
		if l, err := getListener(r, tenant, *id); err == nil && !cp.drives(l) {
			return ps
		}
	}
	for i, ref := range d.SecretReferences {
		if msg := cp.refProblem(d, ref); msg != "" {
			ps = append(ps, apierr.Problem{Loc: []any{"body", "secret_references", i, "secret_name"}, Type: apierr.TypeValueError, Msg: msg})
		}
	}
	return ps
}

// newRevision snapshots d as a new revision with status CREATING. The
// snapshot includes d's repo_commit_sha: the caller sets it first (nil for
// a revision that builds its branch head, the pushed commit for a push, the
// named revision's for a redeploy), so that the deployment's
// source_revision_config stays the mirror of its latest revision's.
func newRevision(d *deploymentRecord, id string, now wiretime.Time) *revisionRecord {
	return newRevisionRecord(Revision{ID: id, CreatedAt: now, UpdatedAt: now, Status: RevisionCreating,
		StatusHistory: []StatusChange{{Status: RevisionCreating, At: now}}}, d.ID, snapshotOf(&d.Deployment))
}

// GetDeployment returns a deployment of the tenant, or a *apierr.NotFoundError.
func (cp *ControlPlane) GetDeployment(ctx context.Context, tenant, id string) (*Deployment, error) {
	if err := apierr.CheckTenant(tenant); err != nil {
		return nil, err
	}
	cid, ok := pathID(id)
	if !ok {
		return nil, &apierr.NotFoundError{Kind: apierr.KindDeployment, ID: id}
	}
	var rec *deploymentRecord
	err := cp.st.View(ctx, func(r store.Reader) error {
		var err error
		rec, err = cp.getDeployment(r, tenant, cid)
		return err
	})
	if err != nil {
		return nil, cp.storeErr("get deployment", err)
	}
	return rec.wire(), nil
}

// GetDeploymentJSON returns a deployment of the tenant as its wire JSON,
// the bytes json.Marshal of GetDeployment's result would give, in a slice
// of the caller's. The stored record is in a compact storage form, not the
// wire form: the first read of a record decodes and encodes it, and the
// answer is kept (Options.AnswerCacheBytes) for the next reads, which
// serve it as long as the store holds the very same record (see
// BENCHMARKS.md for the cost). It is the one call an HTTP GET needs.
// Errors: as GetDeployment.
func (cp *ControlPlane) GetDeploymentJSON(ctx context.Context, tenant, id string) ([]byte, error) {
	return cp.AppendDeploymentJSON(ctx, nil, tenant, id)
}

// AppendDeploymentJSON is GetDeploymentJSON appending to dst: it returns
// dst and the deployment's wire JSON, so that a caller may reuse its
// buffers. On an error it returns dst as it was.
func (cp *ControlPlane) AppendDeploymentJSON(ctx context.Context, dst []byte, tenant, id string) ([]byte, error) {
	if err := apierr.CheckTenant(tenant); err != nil {
		return dst, err
	}
	cid, ok := pathID(id)
	if !ok {
		return dst, &apierr.NotFoundError{Kind: apierr.KindDeployment, ID: id}
	}
	g, _ := cp.jsons.Get().(*jsonRead)
	if g == nil {
		g = &jsonRead{cp: cp}
		g.view = g.run
	}
	g.dst, g.tenant, g.id = dst, tenant, cid
	st := cp.st
	if tp, ok := cp.tenants.Cached(tenant); ok {
		// The View needs no mark for the tenant cache, nor anything
		// else of cp.st's.
		st, g.tp = cp.raw, tp
	}
	err := st.View(ctx, g.view)
	out := g.out
	*g = jsonRead{cp: cp, view: g.view} // holding no caller's bytes
	cp.jsons.Put(g)
	if err != nil {
		return dst, cp.storeErr("get deployment", err)
	}
	return out, nil
}

// jsonRead is one AppendDeploymentJSON's View: what it reads, what it
// answers, and the function the View runs, made once with it, so that a
// read makes no closure (ControlPlane.jsons keeps them for the next).
type jsonRead struct {
	cp         *ControlPlane
	dst, out   []byte
	tenant, id string
	tp         string // the tenant's prefix, when cached; "": read it
	view       func(store.Reader) error
}

func (g *jsonRead) run(r store.Reader) error {
	var err error
	g.out, err = g.cp.appendDeploymentJSON(r, g.dst, g.tenant, g.tp, g.id)
	return err
}

// UpdateDeployment applies a PATCH: immutable fields must equal the stored
// values, in-place fields change, and any revision-triggering field (a
// non-null source_revision_config field, non-empty secrets, non-null
// resource_spec) creates a new revision, even when equal to the current
// value. A new revision supersedes the deployment's revisions still before
// DEPLOYING (they become SKIPPED in the same Update) and is pending work
// for Run. Errors: *apierr.NotFoundError, apierr.ErrInvalidState while the deployment is
// AWAITING_DELETE, *apierr.ValidationError, apierr.ErrConflict when the agent
// named is linked to another deployment in that environment. A request that changes nothing leaves
// the deployment, including updated_at, as it was.
func (cp *ControlPlane) UpdateDeployment(ctx context.Context, tenant, id string, req *UpdateDeploymentRequest) (*Deployment, error) {
	d, _, err := cp.patch(ctx, tenant, id, req, false)
	return d, err
}

// CreateRevision applies req like UpdateDeployment and always creates a new
// revision, which it returns (POST /v2/deployments/{id}/revisions).
func (cp *ControlPlane) CreateRevision(ctx context.Context, tenant, deploymentID string, req *UpdateDeploymentRequest) (*Revision, error) {
	_, rev, err := cp.patch(ctx, tenant, deploymentID, req, true)
	return rev, err
}

func (cp *ControlPlane) patch(ctx context.Context, tenant, id string, req *UpdateDeploymentRequest, force bool) (*Deployment, *Revision, error) {
	if err := apierr.CheckTenant(tenant); err != nil {
		return nil, nil, err
	}
	cid, ok := pathID(id)
	if !ok {
		return nil, nil, &apierr.NotFoundError{Kind: apierr.KindDeployment, ID: id}
	}
	if req == nil {
		req = &UpdateDeploymentRequest{}
	}
	p, pure, aliased := cp.checkPatch(req)
	if img := p.SourceRevisionConfig.ImageURI; img != nil && cp.images != nil && len(pure) == 0 {
		src, err := cp.sourceOf(ctx, tenant, cid)
		if err != nil {
			return nil, nil, cp.storeErr("update deployment", err)
		}
		if src == SourceInternalDocker {
			if pure, err = cp.resolveImage(ctx, tenant, cid, img, pure); err != nil {
				return nil, nil, err
			}
		}
	}

	now := cp.now()
	revID := cp.newID()
	var out *deploymentRecord
	var outRev *revisionRecord
	err := cp.st.Update(ctx, func(tx store.Tx) error {
		out, outRev = nil, nil
		stored, err := cp.getDeployment(tx, tenant, cid)
		if err != nil {
			return err
		}
		if stored.Status == StatusAwaitingDelete {
			return apierr.InvalidStatef("Deployment ID %s is being deleted.", cid)
		}
		merged, ps, trigger := cp.mergeWith(stored, p, req, pure, aliased)
		if len(p.SecretReferences) > 0 {
			ps = cp.secretRefProblems(tx, tenant, &merged.Deployment, ps)
		}
		ps, err = cp.checkUpload(tx, tenant, cid, stored.Source, p.SourceRevisionConfig.SourceTarballPath, ps)
		if err != nil {
			return err
		}
		if (trigger || force) && !hasRevisionSource(&merged.Deployment) {
			// Nothing a revision comes from yet: a PATCH changes the
			// deployment in place, POST .../revisions is refused.
			if force {
				ps = append(ps, noRevisionSource(&merged.Deployment))
			}
			trigger = false
		}
		if err := apierr.Validation(ps...); err != nil {
			return err
		}
		if merged.PinnedRevisionID != nil || stored.PinnedRevisionID != nil {
			tp, err := cp.readTenant(tx, tenant)
			if err != nil {
				return err
			}
			if err := cp.checkPin(tx, tenant, tp, stored, &merged); err != nil { // pin.go
				return err
			}
		}
		if merged.URL != nil { // a custom_url patched in place is the url at once
			merged.URL = new(merged.servedURL(*merged.URL))
		}
		if !trigger && !force {
			if merged.equal(stored) {
				out = stored
				return nil
			}
			merged.UpdatedAt = later(now, stored.UpdatedAt)
			out = &merged
			return cp.putDeployment(tx, tenant, stored, &merged)
		}
		at := later(now, stored.UpdatedAt)
		merged.SourceRevisionConfig.RepoCommitSHA = nil // the new revision builds its ref anew
		rev := newRevision(&merged, revID, at)
		rev.TrackedPackages = slices.Clone(req.TrackedPackages)
		merged.LatestRevisionID = &revID
		merged.UpdatedAt = at
		if err := cp.addRevision(tx, tenant, &merged, rev); err != nil {
			return err
		}
		out, outRev = &merged, rev
		return cp.putDeployment(tx, tenant, stored, &merged)
	})
	if err != nil {
		return nil, nil, cp.storeErr("update deployment", err)
	}
	if outRev != nil {
		cp.notify()
		cp.notifyAgent(tenant, &out.Deployment)
		cp.stopEnded(tenant, cid) // the revisions it SKIPPED (interrupt.go)
		r := outRev.wire()
		return out.wire(), &r, nil
	}
	return out.wire(), nil, nil
}

func (r *deploymentRecord) equal(o *deploymentRecord) bool {
	a, _ := json.Marshal(r)
	b, _ := json.Marshal(o)
	return string(a) == string(b)
}

// GetRevision returns a revision of the tenant's deployment. Errors:
// *apierr.NotFoundError of kind Deployment or Revision (a revision of another
// deployment is not found).
func (cp *ControlPlane) GetRevision(ctx context.Context, tenant, deploymentID, revisionID string) (*Revision, error) {
	if err := apierr.CheckTenant(tenant); err != nil {
		return nil, err
	}
	did, ok := pathID(deploymentID)
	if !ok {
		return nil, &apierr.NotFoundError{Kind: apierr.KindDeployment, ID: deploymentID}
	}
	rid, ok := pathID(revisionID)
	var rev *revisionRecord
	err := cp.st.View(ctx, func(r store.Reader) error {
		tp, err := cp.readTenant(r, tenant)
		if err != nil {
			return err
		}
		if _, err := r.Get(colDeployments, deploymentKey(tp, did)); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return &apierr.NotFoundError{Kind: apierr.KindDeployment, ID: did}
			}
			return err
		}
		if !ok {
			return &apierr.NotFoundError{Kind: apierr.KindRevision, ID: revisionID}
		}
		rev, err = cp.getRevision(r, tenant, did, rid)
		return err
	})
	if err != nil {
		return nil, cp.storeErr("get revision", err)
	}
	return new(rev.wire()), nil
}

// RedeployRevision creates a new revision of the deployment copying the
// named revision's snapshot (source_revision_config, secrets and
// resource_spec: what a revision is, wire contract section 7), including
// its repo_commit_sha when it has one
// (a pushed commit, or the commit its build reported), so that the
// Deployer rebuilds that commit rather than the branch's head; the
// deployment then mirrors the copy, and the new revision becomes active
// once the Deployer reports it DEPLOYED. The fields a PATCH changes in
// place (install_command, build_command, custom_url, build_on_push) are
// not part of a revision and keep their current values (older
// revisions before DEPLOYING become SKIPPED, as for any new one). Errors:
// *apierr.NotFoundError (deployment, or a revision that is not this deployment's),
// apierr.ErrInvalidState while the deployment is AWAITING_DELETE, or for an
// internal_source revision whose tarball Options.Uploads no longer finds
// (only the newest UploadsKept revisions keep theirs) or when uploads are
// not offered (Options.Uploads nil).
func (cp *ControlPlane) RedeployRevision(ctx context.Context, tenant, deploymentID, revisionID string) (*Deployment, error) {
	if err := apierr.CheckTenant(tenant); err != nil {
		return nil, err
	}
	did, ok := pathID(deploymentID)
	if !ok {
		return nil, &apierr.NotFoundError{Kind: apierr.KindDeployment, ID: deploymentID}
	}
	now := cp.now()
	newID := cp.newID()
	var out *deploymentRecord
	err := cp.st.Update(ctx, func(tx store.Tx) error {
		out = nil
		stored, old, err := cp.getDeploymentRevision(tx, tenant, did, revisionID)
		if err != nil {
			return err
		}
		rid := old.ID
		if stored.Status == StatusAwaitingDelete {
			return apierr.InvalidStatef("Deployment ID %s is being deleted.", did)
		}
		next := *stored
		redeployed(&next.Deployment, old)
		// An internal_source revision builds from its tarball: refuse at
		// once, rather than fail the build, once it is no longer kept.
		if ps, err := cp.checkUpload(tx, tenant, did, next.Source, next.SourceRevisionConfig.SourceTarballPath, nil); err != nil {
			return err
		} else if len(ps) > 0 && cp.uploads == nil {
			return apierr.InvalidStatef("Revision %s cannot be redeployed: %s", rid, noUploads)
		} else if len(ps) > 0 {
			return apierr.InvalidStatef("Revision %s cannot be redeployed: its source tarball is no longer kept (the newest %d revisions keep theirs). Upload the project again.", rid, UploadsKept)
		}
		next.LatestRevisionID = &newID
		next.UpdatedAt = later(now, stored.UpdatedAt)
		rev := newRevision(&next, newID, next.UpdatedAt)
		rev.TrackedPackages = slices.Clone(old.TrackedPackages)
		if err := cp.addRevision(tx, tenant, &next, rev); err != nil {
			return err
		}
		out = &next
		return cp.putDeployment(tx, tenant, stored, &next)
	})
	if err != nil {
		return nil, cp.storeErr("redeploy revision", err)
	}
	cp.notify()
	cp.notifyAgent(tenant, &out.Deployment)
	cp.stopEnded(tenant, did) // the revisions it SKIPPED (interrupt.go)
	return out.wire(), nil
}

// StoreTracingProjects is the default TracingProjects: it keeps one record
// per deployment in the store, in the transaction that creates the
// deployment.
type StoreTracingProjects struct{}

// storedTracingProject is the storage form (version 1) of a tracing
// project record: the key holds the tenant and the deployment id.
type storedTracingProject struct {
	V       int    `json:"v"`
	Name    string `json:"n"`
	Created int64  `json:"c"`
}

// CreateTracingProject records p in tx.
func (StoreTracingProjects) CreateTracingProject(ctx context.Context, tx store.Tx, p TracingProject) error {
	b, err := json.Marshal(storedTracingProject{V: recordVersion, Name: p.Name, Created: p.CreatedAt.UnixMicro()})
	if err != nil {
		return err
	}
	tp, err := assignTenant(nil, tx, p.Tenant)
	if err != nil {
		return err
	}
	// The key holds the new deployment's id, which no record has.
	return store.Insert(tx, colTracingProjects, deploymentKey(tp, p.DeploymentID), b)
}

// Get reads the tracing project of a deployment; the error matches
// apierr.ErrNotFound when there is none.
func (StoreTracingProjects) Get(r store.Reader, tenant, deploymentID string) (TracingProject, error) {
	var p TracingProject
	tp, err := (*keyenc.Tenants)(nil).Prefix(r, tenant)
	if err != nil {
		return p, err
	}
	b, err := r.Get(colTracingProjects, deploymentKey(tp, deploymentID))
	if errors.Is(err, store.ErrNotFound) {
		return p, &apierr.NotFoundError{Kind: apierr.KindTracingProject, ID: deploymentID}
	}
	if err != nil {
		return p, err
	}
	if err := checkRecordVersion(b, "tracing project", deploymentID); err != nil {
		return p, err
	}
	var s storedTracingProject
	if err := json.Unmarshal(b, &s); err != nil {
		return p, err
	}
	return TracingProject{Tenant: tenant, DeploymentID: deploymentID, Name: s.Name, CreatedAt: time.UnixMicro(s.Created).UTC()}, nil
}
