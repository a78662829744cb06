package controlplane

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/deployplane/deployplane/store"
)

// Options configure a ControlPlane. A nil *Options, and every zero field,
// means the default.
type Options struct {
	// Clock returns the current time; default time.Now. Times are stored in
	// UTC, truncated to the microsecond. It is called from many goroutines
	// at once (every method, and Run's workers), so it must be safe for
	// concurrent use. Leases expire by this clock: replicas over one store
	// need clocks that agree to well within LeaseDuration.
	Clock func() time.Time
	// NewID returns a new id, which must be a lowercase canonical UUID
	// string (ids that are not UUIDs are never found). It is called from
	// many goroutines at once, so it must be safe for concurrent use, like
	// Clock, and its ids must be unique across every ControlPlane over the
	// same store (the lease owner id of Run comes from it too). Default: a
	// UUIDv7 from github.com/google/uuid.
	NewID func() string
	// Sources lists the sources this control plane offers: cloud installs
	// offer only SourceGitHub, self-hosted ones only SourceExternalDocker.
	// Default (nil): every source, a hybrid install. The sources of
	// langgraph deploy (SourceInternalSource, SourceInternalDocker) are
	// offered wherever SourceExternalDocker is (wire contract section 10),
	// and may also be listed alone. Creating a deployment with a source
	// not offered is a 422 at ["body", "source"].
	Sources []Source
	// Uploads checks the source_tarball_path of a create or PATCH of an
	// internal_source deployment, inside the store transaction that
	// writes it (see UploadChecker). nil means uploads are not offered:
	// every source_tarball_path is refused (422 unknown_reference), so no
	// internal_source revision can be made. A server that issues upload
	// URLs gives uploads.Records{}, which refuses paths never issued to
	// the deployment or whose upload did not complete, as wire contract
	// section 10 says, so that no deployment can name another's tarball.
	// An embedder whose tarballs arrive some other way gives its own
	// checker, or AnyUpload{} to take every path as given.
	Uploads UploadChecker
	// Images, when set, resolves the image_uri of an internal_docker
	// revision (a tag in the built-in registry becomes its digest) before
	// the revision is created (see ImageResolver). Default nil: image_uri
	// is kept as sent.
	Images ImageResolver
	// CustomURLTemplate builds the read-only custom_url of github
	// deployments. The placeholders {name} (the deployment name lowercased,
	// with '.' and '_' turned into '-'), {id} and {tenant} are replaced.
	// Default DefaultCustomURLTemplate.
	CustomURLTemplate string
	// Logger receives an error record for every store failure (the caller
	// gets the error too, without the store's sentinel). Default: a logger
	// that discards everything.
	Logger *slog.Logger
	// TracingProjects creates the tracing project of every new deployment
	// and, when it is a TracingProjectRemover, removes or keeps it when
	// the deployment goes. Default: StoreTracingProjects, which keeps a
	// record in the store.
	TracingProjects TracingProjects
	// Limits caps list sizes and string lengths; zero fields take the
	// defaults of DefaultLimits.
	Limits Limits
	// SecretKey is the 32-byte AES-256 key that seals deployment and
	// revision secrets at rest (AES-256-GCM, each value bound to its tenant
	// and record), the same key oauthflow.Options.SecretKey takes. Default
	// nil: secrets are stored in plain text, readable by anyone who can read
	// the store; set it in production (cmd/deployplane always does). A key
	// of another length fails every write with an error. Records sealed
	// under a key can only be read with that key (ErrSecretKey otherwise);
	// see the package doc on key rotation.
	SecretKey []byte
	// GitHubApp verifies GitHub installations (StartGitHubInstall,
	// CompleteGitHubInstall); package githubapp implements it. Default
	// nil: those methods answer ErrGitHubAppNotConfigured, and
	// installations can only be registered unverified (CreateIntegration).
	GitHubApp GitHubApp
	// GitHubInstallStates keeps the states of the verified installation
	// flow; package githubapp's States implements it. Default nil:
	// StartGitHubInstall and CompleteGitHubInstall answer
	// ErrGitHubAppNotConfigured.
	GitHubInstallStates InstallStates
	// PreviewForks lets pull requests from forks (head repository other
	// than the base) have previews (source_config.preview). Default false:
	// they never do, because a preview runs the pull request's code with
	// a copy of its parent's secrets, and anyone can open a pull request
	// from a fork of a public repository.
	PreviewForks bool
	// PreviewStatus tells pull requests about their previews (GitHub
	// Deployments and their statuses); package githubapp's App implements
	// it. Default nil: they are not told.
	PreviewStatus PreviewStatusReporter
	// LogRetention bounds the build and deploy logs of each revision
	// (zero fields: 10,000 lines and 5 MiB per log); older lines are
	// dropped and counted.
	LogRetention LogRetention
	// AnswerCacheBytes bounds the memory GetDeploymentJSON may keep of the
	// answers it made (the wire JSON of recently read deployments, each
	// beside the stored record it came from), so that reading a
	// deployment that has not changed since costs a store read and a
	// comparison rather than decoding its record, opening its secrets and
	// encoding it. An answer is served only when the store still holds
	// the very record it was made from, so every change is seen by the
	// next read, whichever replica made it. The answers hold secret values
	// in plain text, in this process's memory only. Default (0):
	// DefaultAnswerCacheBytes. Negative: nothing is kept.
	AnswerCacheBytes int

	// Drives says whether this server's own Deployer (the one Run drives)
	// drives the compute of listener l, a listener's record as stored
	// (its compute_type and compute_id name a cluster or engine of the
	// server's configuration). The deployments of a listener it does not
	// drive are served by agents (ClaimAgentWork; wire contract section
	// 11): their work is queued for the listener's agents, never for Run,
	// and they answer remote_reconciled true. It is asked when work is
	// queued (a create, each new revision, a delete), inside the store
	// transaction, so it must be quick, do no I/O and be safe for
	// concurrent use. Default nil: this server drives every listener
	// (no agent serves anything).
	Drives func(l *Listener) bool

	// SecretReferenceProblem, when set, says whether the Deployer Run
	// drives can resolve a secret reference of deployment d (its create or
	// PATCH, merged): "" when it can, else why not, naming the deployer
	// and what the operator would map ("the Docker deployer has no value
	// for secret db-creds key password: map one with -docker-secret-ref").
	// A create or PATCH with a reference it refuses is 422 at ["body",
	// "secret_references", i, "secret_name"]. Deployments an agent serves
	// (Drives) are not asked: their agent's deployer fails a revision
	// whose reference it cannot resolve. It must be quick, do no I/O and
	// be safe for concurrent use. Default nil: every reference is
	// accepted (the Kubernetes deployer reads Secrets in the cluster).
	SecretReferenceProblem func(d *Deployment, ref SecretReference) string

	// PollInterval is how often Run looks in the store for work that other
	// replicas created (work created through this ControlPlane wakes Run at
	// once), and how long a Deployer that returned before the revision was
	// terminal waits to be called again. Default DefaultPollInterval.
	PollInterval time.Duration
	// LeaseDuration is how long a claim on a unit of work lasts without
	// renewal; Run renews it every third of it while the work runs. Work
	// whose owner stopped without giving it back (a crash) is taken over
	// once its lease expires. Default DefaultLeaseDuration.
	LeaseDuration time.Duration
	// Workers caps the units of work Run drives at once. Default
	// DefaultWorkers.
	Workers int
	// TenantWorkers caps the units of work of one tenant that this
	// ControlPlane drives at once (Run's workers and concurrent Process
	// calls together; a revision and a teardown are a unit each, and a
	// Deployer builds a revision's image inside its unit, so this caps a
	// tenant's builds too). While a tenant is at its share its waiting
	// work waits, and other tenants' work is claimed by the free workers:
	// a tenant with a hundred revisions waiting takes TenantWorkers of
	// them at a time and never starves another. Default (0): Workers/4,
	// at least 1. Negative: no cap per tenant (one tenant may take every
	// worker). The share is per ControlPlane: replicas over one store each
	// give a tenant up to TenantWorkers units, so N replicas give it up to
	// N*TenantWorkers in all.
	TenantWorkers int
	// Observer is told of every revision status change the reconcile loop
	// records, every lease it takes over and every Deployer call, for
	// metrics (package prommetrics). Default nil: nobody. Every change the
	// loop records is also logged at Info ("revision transition").
	Observer Observer

	// AutoRollbackWindow is how long after a revision becomes active a
	// failure of its health checks rolls it back automatically, for the
	// deployments with source_config.auto_rollback (ReportUnhealthy); the
	// Deployer watches the revision that long (Work.HealthWatchSeconds).
	// Default DefaultAutoRollbackWindow.
	AutoRollbackWindow time.Duration

	// EventRetention is how many of each tenant's newest events the
	// event log keeps, no more (FollowEvents resumes within them); each
	// numbering of events deletes those it pushes out. Default
	// DefaultEventRetention.
	EventRetention int
	// EventMaxAge is how long events are kept at most; older ones are
	// pruned as the tenant's later changes are written. Default
	// DefaultEventMaxAge.
	EventMaxAge time.Duration
	// EventPollInterval is how often an event follower (FollowEvents,
	// WaitRevision) looks in the store for changes other replicas
	// committed (those committed through this ControlPlane wake it at
	// once). Default DefaultEventPollInterval.
	EventPollInterval time.Duration

	// Which clock does what: Clock stamps every record and decides when a
	// lease has expired (so a test moves work past a lease with an
	// injected clock, as internal/testclock does). Run's waits, the poll
	// every PollInterval, the lease renewal every third of LeaseDuration
	// and the few seconds it allows for giving work back, use the
	// runtime's timers (time.NewTicker, context.WithTimeout), which
	// testing/synctest fakes: the package's own tests of Run, renewals and
	// shutdown run in synctest bubbles over storemem and storebolt.

	// hooks is set only by this package's mutation tests (export_test.go).
	hooks ruleHooks
}

// DefaultAutoRollbackWindow is the default Options.AutoRollbackWindow.
const DefaultAutoRollbackWindow = 5 * time.Minute

// Defaults of the lifecycle Options.
const (
	DefaultPollInterval  = time.Second
	DefaultLeaseDuration = 30 * time.Second
	DefaultWorkers       = 16
)

// DefaultCustomURLTemplate is the default Options.CustomURLTemplate.
const DefaultCustomURLTemplate = "https://{name}-{id}.deployplane.local"

// DefaultAnswerCacheBytes is the default Options.AnswerCacheBytes: 4 MiB,
// the wire JSON of a few thousand typical deployments.
const DefaultAnswerCacheBytes = 4 << 20

// answerCacheBytes is the bound of Options.AnswerCacheBytes o.
func answerCacheBytes(o int) int {
	if o == 0 {
		return DefaultAnswerCacheBytes
	}
	return max(o, 0)
}

// Limits are the caps that keep every record bounded whatever a request
// holds. A request beyond them is a 422 (string_too_long or too_long).
type Limits struct {
	// MaxStringBytes caps every free string (URLs, refs, paths, commands,
	// image URIs, label values, ...). Default 2048.
	MaxStringBytes int
	// MaxSecrets caps the number of secrets of a deployment. Default 100.
	MaxSecrets int
	// MaxSecretValueBytes caps a secret's value. Default 65536.
	MaxSecretValueBytes int
	// MaxItems caps every list inside a resource_spec (volumes, containers,
	// env, command, ...) and a listener's k8s_namespaces. Default 64.
	MaxItems int
	// MaxMapEntries caps labels, annotations and resource requirement
	// maps. Default 64.
	MaxMapEntries int
	// MaxObjectBytes caps each free-form object (volume sources, valueFrom,
	// envFrom items, securityContext), measured as JSON. Default 16384.
	MaxObjectBytes int
	// MaxTagValueIDs caps the tag value ids of a deployment. Default 50.
	MaxTagValueIDs int
	// MaxFilterIDs caps the ids of the deployment_ids and tag_value_ids list
	// filters. Default 100.
	MaxFilterIDs int
}

// DefaultLimits returns the limits used for zero fields of Options.Limits.
func DefaultLimits() Limits {
	return Limits{
		MaxStringBytes:      2048,
		MaxSecrets:          100,
		MaxSecretValueBytes: 65536,
		MaxItems:            64,
		MaxMapEntries:       64,
		MaxObjectBytes:      16384,
		MaxTagValueIDs:      50,
		MaxFilterIDs:        100,
	}
}

// TracingProject is the tracing project created with a deployment; it has
// the deployment's name.
type TracingProject struct {
	Tenant       string    `json:"tenant"`
	DeploymentID string    `json:"deployment_id"`
	Name         string    `json:"name"`
	CreatedAt    time.Time `json:"created_at"`
}

// TracingProjects creates tracing projects.
//
// CreateTracingProject is called inside the store Update that creates the
// deployment, with that Update's Tx: writes made through tx commit with the
// deployment or not at all, and an error fails the create and leaves nothing
// behind. Like every Update closure it may run more than once for one
// deployment, so an implementation that talks to an outside service must be
// idempotent (keyed by p.DeploymentID) and must not call the Store.
type TracingProjects interface {
	CreateTracingProject(ctx context.Context, tx store.Tx, p TracingProject) error
}

// TracingProjectRemover is a TracingProjects told when a deployment's
// records are removed (after its teardown, at once for a deployment that
// never ran, or by a forced delete), so that its tracing project goes
// with it or stays: deleteProject is the delete's delete_tracing_project
// (true unless DeleteDeploymentOptions.KeepTracingProject). p is the
// project as CreateTracingProject was given it. RemoveTracingProject is
// called inside the store Update that removes the records, with its Tx,
// under the same rules as CreateTracingProject: idempotent, no call of
// the Store, and an error fails the removal (a delete answers it; a
// removal after a teardown is retried). A TracingProjects that is not one
// is told nothing. StoreTracingProjects is one.
type TracingProjectRemover interface {
	RemoveTracingProject(ctx context.Context, tx store.Tx, p TracingProject, deleteProject bool) error
}

// UploadChecker is the hook behind the rule "a PATCH naming a
// source_tarball_path not issued to this deployment, or never uploaded, is
// 422" (wire contract section 10). CheckUpload is called inside the store
// transaction that would create the revision, with that transaction's
// Reader, so it must do no I/O outside the store and may run more than
// once. It returns nil for a path issued to the tenant's deployment whose
// upload completed, an error wrapping ErrUploadNotFound (whose text is the
// problem's message) for any other path, or another error, which fails
// the call.
type UploadChecker interface {
	CheckUpload(r store.Reader, tenant, deploymentID, objectPath string) error
}

// ErrUploadNotFound is wrapped by an UploadChecker's error for a
// source_tarball_path that names no completed upload of the deployment;
// the call answers a 422 unknown_reference at ["body",
// "source_revision_config", "source_tarball_path"].
var ErrUploadNotFound = errors.New("controlplane: source_tarball_path names no completed upload of this deployment")

// ImageResolver turns the image_uri a client sent for an internal_docker
// revision into the one the revision records: a tag in the built-in
// registry becomes name@sha256:digest (wire contract section 10), an image
// elsewhere is returned unchanged. It is called before the store
// transaction (it may reach the registry), once per create or PATCH that
// carries an image_uri for an internal_docker deployment. An error wrapping
// ErrImageNotFound answers a 422 unknown_reference at ["body",
// "source_revision_config", "image_uri"] with the error's text; another
// error fails the call.
type ImageResolver interface {
	ResolveImage(ctx context.Context, tenant, deploymentID, imageURI string) (string, error)
}

// ErrImageNotFound is wrapped by an ImageResolver's error for an image
// that is not in the registry it names.
var ErrImageNotFound = errors.New("controlplane: image_uri names no image of the registry")
