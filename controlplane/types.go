package controlplane

import "github.com/deployplane/deployplane/wiretime"

// Source says where a deployment's code comes from.
type Source string

// The sources of the wire contract.
const (
	// SourceGitHub builds the deployment from a git repository (cloud).
	SourceGitHub Source = "github"
	// SourceExternalDocker runs a prebuilt container image (self-hosted).
	SourceExternalDocker Source = "external_docker"
	// SourceInternalSource builds the deployment from a tarball of the
	// project uploaded to this service (langgraph deploy --remote; wire
	// contract section 10). Its revisions come from
	// source_revision_config.source_tarball_path.
	SourceInternalSource Source = "internal_source"
	// SourceInternalDocker runs an image pushed to the registry this
	// service names (langgraph deploy; wire contract section 10). Its
	// revisions come from source_revision_config.image_uri.
	SourceInternalDocker Source = "internal_docker"
)

// Sources lists every source of the wire contract, in the rules table's
// column order.
func Sources() []Source {
	return []Source{SourceGitHub, SourceExternalDocker, SourceInternalSource, SourceInternalDocker}
}

// DeploymentStatus is the status of a deployment.
type DeploymentStatus string

// The deployment statuses of the wire contract (section 7).
const (
	StatusAwaitingDatabase DeploymentStatus = "AWAITING_DATABASE"
	StatusReady            DeploymentStatus = "READY"
	StatusUnused           DeploymentStatus = "UNUSED"
	StatusAwaitingDelete   DeploymentStatus = "AWAITING_DELETE"
	StatusUnknown          DeploymentStatus = "UNKNOWN"
)

// DeploymentStatuses lists every deployment status of the wire contract,
// in its order.
func DeploymentStatuses() []DeploymentStatus {
	return []DeploymentStatus{StatusAwaitingDatabase, StatusReady, StatusUnused, StatusAwaitingDelete, StatusUnknown}
}

// DeploymentType is the size class of a deployment (github,
// internal_source and internal_docker; external_docker has none).
type DeploymentType string

// The deployment types of the wire contract. The two *_zero types scale
// to zero while idle (ScalesToZero).
const (
	DeploymentTypeDevFree     DeploymentType = "dev_free"
	DeploymentTypeDev         DeploymentType = "dev"
	DeploymentTypeProd        DeploymentType = "prod"
	DeploymentTypeDevZero     DeploymentType = "dev_zero"
	DeploymentTypeDevFreeZero DeploymentType = "dev_free_zero"
)

// DeploymentTypes lists every deployment type of the wire contract, in its
// order.
func DeploymentTypes() []DeploymentType {
	return []DeploymentType{DeploymentTypeDevFree, DeploymentTypeDev, DeploymentTypeProd, DeploymentTypeDevZero, DeploymentTypeDevFreeZero}
}

// ScalesToZero reports whether deployments of type t may run no replica
// while idle: dev_zero and dev_free_zero, the only types whose
// resource_spec.min_scale may be 0 (wire contract section 11). Deployers
// that can stop an idle deployment and start it on its next request do
// so for these types.
func (t DeploymentType) ScalesToZero() bool {
	return t == DeploymentTypeDevZero || t == DeploymentTypeDevFreeZero
}

// RevisionStatus is the status of a revision (wire contract section 7).
type RevisionStatus string

// The revision statuses of the wire contract. New revisions start as
// RevisionCreating; a Deployer moves them along.
const (
	RevisionCreating       RevisionStatus = "CREATING"
	RevisionQueued         RevisionStatus = "QUEUED"
	RevisionAwaitingBuild  RevisionStatus = "AWAITING_BUILD"
	RevisionBuilding       RevisionStatus = "BUILDING"
	RevisionAwaitingDeploy RevisionStatus = "AWAITING_DEPLOY"
	RevisionDeploying      RevisionStatus = "DEPLOYING"
	RevisionCreateFailed   RevisionStatus = "CREATE_FAILED"
	RevisionBuildFailed    RevisionStatus = "BUILD_FAILED"
	RevisionDeployFailed   RevisionStatus = "DEPLOY_FAILED"
	RevisionDeployed       RevisionStatus = "DEPLOYED"
	RevisionSkipped        RevisionStatus = "SKIPPED"
	RevisionInterrupted    RevisionStatus = "INTERRUPTED"
	RevisionUnknown        RevisionStatus = "UNKNOWN"
)

// RevisionStatuses lists every revision status of the wire contract, in
// its order.
func RevisionStatuses() []RevisionStatus {
	return []RevisionStatus{RevisionCreating, RevisionQueued, RevisionAwaitingBuild, RevisionBuilding, RevisionAwaitingDeploy,
		RevisionDeploying, RevisionCreateFailed, RevisionBuildFailed, RevisionDeployFailed, RevisionDeployed,
		RevisionSkipped, RevisionInterrupted, RevisionUnknown}
}

// Deployment is a deployment as it appears on the wire; json.Marshal of it
// is its wire JSON. Timestamps are wiretime.Time: UTC with microsecond
// precision, encoded with six fractional digits
// (2026-11-21T10:04:05.123456Z). Secrets is never nil in values returned by
// the ControlPlane (an empty list encodes as []).
type Deployment struct {
	ID   string `json:"id"`
	Name string `json:"name" validate:"omitempty,depname"`
	// TenantID is the tenant the deployment belongs to, as the API key
	// that reached it names it (read-only; wire contract section 9).
	TenantID string `json:"tenant_id"`
	// DisplayName is a free-form label of 1 to 256 characters, null
	// until set: settable on create and by PATCH, where null or absent
	// means no change, so that once set it cannot be cleared (wire
	// contract section 9; the rules table's display_name row).
	DisplayName          *string              `json:"display_name" validate:"omitnil,dispname"`
	Source               Source               `json:"source"`
	SourceConfig         SourceConfig         `json:"source_config"`
	SourceRevisionConfig SourceRevisionConfig `json:"source_revision_config"`
	Secrets              []Secret             `json:"secrets"`
	// SecretReferences are environment variables taken from secrets the
	// deployment's compute already holds (wire contract section 11): on
	// Kubernetes a key of an existing Secret, on Docker what the operator
	// maps the reference to. Beside Secrets: a name is in one list or the
	// other. Like secrets, a change makes a revision, and [] in a PATCH
	// is "no change". Answers carry [] when there are none.
	SecretReferences []SecretReference `json:"secret_references"`
	CreatedAt        wiretime.Time     `json:"created_at"`
	UpdatedAt        wiretime.Time     `json:"updated_at"`
	Status           DeploymentStatus  `json:"status"`
	LatestRevisionID *string           `json:"latest_revision_id"`
	ActiveRevisionID *string           `json:"active_revision_id"`
	ImageVersion     *string           `json:"image_version"`
	// URL is where the active revision answers (wire contract sections 9
	// and 10), read-only: null until a real deployer has deployed a
	// revision; then source_config.custom_url when the deployment has one
	// (a PATCH of it changes the url at once), else the address the
	// Deployer reported (Step.URL). internal_source and internal_docker
	// deployments answer that address as their custom_url too (wire
	// contract section 10). A value in a request is ignored.
	URL *string `json:"url"`
	// RemoteReconciled (read-only) says that the deployment is reconciled
	// outside this server: an external_docker deployment (wire contract
	// section 5), or one an agent serves (section 11) because its
	// listener is one this server's Deployer does not drive
	// (Options.Drives), so that an agent dialing out from the listener's
	// cluster claims its work (ClaimAgentWork). Whether an agent serves it
	// is decided when its work is queued (its create, each new revision,
	// its delete). The list filter remote_reconciled matches this value.
	RemoteReconciled bool `json:"remote_reconciled"`
	// StatusMessage says why the deployment waits (read-only): null but
	// while it is AWAITING_DELETE and its last teardown failed, when it
	// gives the failure and that the teardown is retried (deletes.go).
	StatusMessage *string `json:"status_message"`
	// Agent links the deployment to an agent and one of its environments
	// (wire contract section 11), null when it has none. An agent has at
	// most one deployment per environment (409 otherwise); it changes in
	// place. The list filters agent_id and agent_environment match it.
	Agent *DeploymentAgent `json:"agent" validate:"omitnil"`
	// IsPreview (read-only) says that the deployment is a preview of a
	// pull request, made by the service from a parent deployment; false
	// for every deployment a client creates.
	IsPreview bool `json:"is_preview"`
	// PinnedRevisionID pins the deployment to its active revision (wire
	// contract section 11): while it is set, new revisions are still
	// created and built, but none is deployed, and so none becomes
	// active: each waits before DEPLOYING, its status_message saying so,
	// until the pin is removed (a JSON merge patch's null), when the
	// newest deploys. A PATCH may set it only to the active revision's
	// id, and not while a revision is DEPLOYING; null when unpinned.
	PinnedRevisionID *string `json:"pinned_revision_id"`
	// TagValueIDs are the tag values the deployment carries, matched by the
	// tag_value_ids list filter. They are set on create and not part of the
	// wire shape of a deployment.
	TagValueIDs []string `json:"-"`
}

// SecretReference is an environment variable of the deployment container
// whose value the compute reads from a secret it holds: Kubernetes Secret
// SecretName's key SecretKey, in the deployment's namespace; on Docker,
// the file or variable the operator maps the pair to.
type SecretReference struct {
	Name       string `json:"name" validate:"required,cident"`
	SecretName string `json:"secret_name" validate:"required,dnssub"`
	SecretKey  string `json:"secret_key" validate:"required,secretkey"`
}

// DeploymentAgent is what an agent-linked deployment names: the agent and
// its environment.
type DeploymentAgent struct {
	AgentID     string           `json:"agent_id" validate:"required,agentid"`
	Environment AgentEnvironment `json:"environment" validate:"required,oneof=development staging production"`
}

// AgentEnvironment is an environment of an agent.
type AgentEnvironment string

// The agent environments of the wire contract.
const (
	AgentDevelopment AgentEnvironment = "development"
	AgentStaging     AgentEnvironment = "staging"
	AgentProduction  AgentEnvironment = "production"
)

// AgentEnvironments lists every agent environment, in the wire contract's
// order.
func AgentEnvironments() []AgentEnvironment {
	return []AgentEnvironment{AgentDevelopment, AgentStaging, AgentProduction}
}

// MaxAgentIDBytes is the longest agent_id accepted.
const MaxAgentIDBytes = 256

// MaxDisplayNameChars is the most characters (not bytes) a display_name
// may have; it has at least one.
const MaxDisplayNameChars = 256

// SourceConfig holds the source-specific settings that need no new revision
// when changed, or cannot be changed (resource_spec is the exception: a
// non-null value in a PATCH creates a revision). Every field is nullable.
type SourceConfig struct {
	IntegrationID  *string         `json:"integration_id" validate:"omitnil,uuid36"`
	RepoURL        *string         `json:"repo_url" validate:"omitnil,str"`
	DeploymentType *DeploymentType `json:"deployment_type" validate:"omitnil,oneof=dev_free dev prod dev_zero dev_free_zero"`
	BuildOnPush    *bool           `json:"build_on_push"`
	CustomURL      *string         `json:"custom_url" validate:"omitnil,str,httpurl"`
	ResourceSpec   *ResourceSpec   `json:"resource_spec"`
	ListenerID     *string         `json:"listener_id" validate:"omitnil,uuid36"`
	ListenerConfig *ListenerConfig `json:"listener_config"`
	InstallCommand *string         `json:"install_command" validate:"omitnil,str"`
	BuildCommand   *string         `json:"build_command" validate:"omitnil,str"`
	// AutoRollback, when true, rolls a revision back automatically when it
	// fails its health checks within Options.AutoRollbackWindow of
	// becoming active (ReportUnhealthy); null or false: never. It changes
	// in place, for every source.
	AutoRollback *bool `json:"auto_rollback"`
	// Preview turns on preview deployments of pull requests (github
	// only; wire contract section 11): see PreviewConfig.
	Preview *PreviewConfig `json:"preview" validate:"omitnil"`
}

// PreviewConfig is source_config.preview of a github deployment: which
// pull requests against its repo_ref get a preview deployment (a copy of
// it at the pull request's head commit, is_preview true), and how long and
// how many of them live. The stored object is what the client sent;
// WithDefaults fills the defaults.
type PreviewConfig struct {
	// Mode is "all" (every pull request) or "label" (those carrying
	// Label). Required.
	Mode *PreviewMode `json:"mode" validate:"required,oneof=all label"`
	// Label is the label a pull request carries to get a preview; required
	// with mode "label", refused with "all".
	Label *string `json:"label" validate:"excluded_unless=Mode label,required_if=Mode label,omitnil,str"`
	// IdleTTLMinutes: a preview that has served no request and seen no
	// push for this long is deleted. Default DefaultPreviewIdleTTLMinutes.
	IdleTTLMinutes *int64 `json:"idle_ttl_minutes" validate:"omitnil,gte=1,lte=525600"`
	// MaxConcurrent caps the previews of the deployment: a new one beyond
	// it deletes the one idle longest first. Default
	// DefaultPreviewMaxConcurrent.
	MaxConcurrent *int64 `json:"max_concurrent" validate:"omitnil,gte=1,lte=1000"`
}

// PreviewMode is source_config.preview.mode.
type PreviewMode string

// The preview modes.
const (
	PreviewAll   PreviewMode = "all"
	PreviewLabel PreviewMode = "label"
)

// Defaults of PreviewConfig.
const (
	DefaultPreviewIdleTTLMinutes = 1440
	DefaultPreviewMaxConcurrent  = 10
)

// WithDefaults returns p with its null idle_ttl_minutes and max_concurrent
// filled with the defaults.
func (p PreviewConfig) WithDefaults() PreviewConfig {
	if p.IdleTTLMinutes == nil {
		p.IdleTTLMinutes = new(int64(DefaultPreviewIdleTTLMinutes))
	}
	if p.MaxConcurrent == nil {
		p.MaxConcurrent = new(int64(DefaultPreviewMaxConcurrent))
	}
	return p
}

// SourceRevisionConfig holds the settings whose change creates a revision.
// On a Deployment it mirrors the latest revision, repo_commit_sha included
// (the pushed or redeployed commit, or the one the Deployer reports for the
// latest revision). Every field is nullable.
type SourceRevisionConfig struct {
	RepoRef         *string `json:"repo_ref" validate:"omitnil,str"`
	GraphConfigPath *string `json:"graph_config_path" validate:"omitnil,str"`
	// LanggraphConfigPath is the hosted service's name for GraphConfigPath
	// (wire contract sections 1 and 9). In a request it is an alias, which
	// the ControlPlane folds into GraphConfigPath (both given must be
	// equal); answers (deployments, revisions, Work) carry both, always
	// equal, null together.
	LanggraphConfigPath *string `json:"langgraph_config_path"`
	ImageURI            *string `json:"image_uri" validate:"omitnil,str"`
	// SourceTarballPath is the object_path of an upload (POST
	// .../upload-url) that an internal_source revision builds from (wire
	// contract section 10); null for the other sources.
	SourceTarballPath *string `json:"source_tarball_path" validate:"omitnil,str"`
	// RepoCommitSHA is read-only, ignored in requests: the commit a
	// revision builds, set by a push (the pushed commit), a redeploy (the
	// named revision's) or the Deployer (Step.RepoCommitSHA); nil until
	// known.
	RepoCommitSHA *string `json:"repo_commit_sha"`
}

// Secret is an environment variable of the deployment container, as
// answers and Work carry it. Requests give secrets as SecretInput.
type Secret struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// ResourceSpec sizes an external_docker deployment. Every field is nullable;
// the stored spec is what the client sent. WithDefaults fills the documented
// defaults (limit = 2x request, queue_* = main values) for deployers. CPU
// fields take integers and decimals.
type ResourceSpec struct {
	MinScale      *int64   `json:"min_scale" validate:"omitnil,gte=0,lte=1000000000"`
	MaxScale      *int64   `json:"max_scale" validate:"omitnil,gte=0,lte=1000000000"`
	CPU           *float64 `json:"cpu" validate:"omitnil,gt=0,lte=1000000000"`
	CPULimit      *float64 `json:"cpu_limit" validate:"omitnil,gt=0,lte=1000000000"`
	MemoryMB      *int64   `json:"memory_mb" validate:"omitnil,gt=0,lte=1000000000"`
	MemoryLimitMB *int64   `json:"memory_limit_mb" validate:"omitnil,gt=0,lte=1000000000"`

	QueueMinScale      *int64   `json:"queue_min_scale" validate:"omitnil,gte=0,lte=1000000000"`
	QueueMaxScale      *int64   `json:"queue_max_scale" validate:"omitnil,gte=0,lte=1000000000"`
	QueueCPU           *float64 `json:"queue_cpu" validate:"omitnil,gt=0,lte=1000000000"`
	QueueCPULimit      *float64 `json:"queue_cpu_limit" validate:"omitnil,gt=0,lte=1000000000"`
	QueueMemoryMB      *int64   `json:"queue_memory_mb" validate:"omitnil,gt=0,lte=1000000000"`
	QueueMemoryLimitMB *int64   `json:"queue_memory_limit_mb" validate:"omitnil,gt=0,lte=1000000000"`

	// The orchestrator_* and executor_* fields are marked "do not use" by
	// the seed; they are accepted, validated and stored.
	OrchestratorCPU           *float64 `json:"orchestrator_cpu" validate:"omitnil,gt=0,lte=1000000000"`
	OrchestratorCPULimit      *float64 `json:"orchestrator_cpu_limit" validate:"omitnil,gt=0,lte=1000000000"`
	OrchestratorMemoryMB      *int64   `json:"orchestrator_memory_mb" validate:"omitnil,gt=0,lte=1000000000"`
	OrchestratorMemoryLimitMB *int64   `json:"orchestrator_memory_limit_mb" validate:"omitnil,gt=0,lte=1000000000"`
	OrchestratorMinScale      *int64   `json:"orchestrator_min_scale" validate:"omitnil,gte=0,lte=1000000000"`
	OrchestratorMaxScale      *int64   `json:"orchestrator_max_scale" validate:"omitnil,gte=0,lte=1000000000"`
	ExecutorCPU               *float64 `json:"executor_cpu" validate:"omitnil,gt=0,lte=1000000000"`
	ExecutorCPULimit          *float64 `json:"executor_cpu_limit" validate:"omitnil,gt=0,lte=1000000000"`
	ExecutorMemoryMB          *int64   `json:"executor_memory_mb" validate:"omitnil,gt=0,lte=1000000000"`
	ExecutorMemoryLimitMB     *int64   `json:"executor_memory_limit_mb" validate:"omitnil,gt=0,lte=1000000000"`

	RedisMemoryMB *int64 `json:"redis_memory_mb" validate:"omitnil,gt=0,lte=1000000000"`

	Labels             map[string]string      `json:"labels"`
	Annotations        map[string]string      `json:"annotations"`
	ServiceAccountName *string                `json:"service_account_name" validate:"omitnil,dnssub"`
	ImagePullSecrets   []LocalObjectReference `json:"image_pull_secrets"`
	Volumes            []Volume               `json:"volumes"`
	VolumeMounts       []VolumeMount          `json:"volume_mounts"`
	InitContainers     []Container            `json:"init_containers"`
	Sidecars           []Container            `json:"sidecars"`

	DBCPU            *float64 `json:"db_cpu" validate:"omitnil,gt=0,lte=1000000000"`
	DBCPULimit       *float64 `json:"db_cpu_limit" validate:"omitnil,gt=0,lte=1000000000"`
	DBMemoryMB       *int64   `json:"db_memory_mb" validate:"omitnil,gt=0,lte=1000000000"`
	DBMemoryLimitMB  *int64   `json:"db_memory_limit_mb" validate:"omitnil,gt=0,lte=1000000000"`
	DBStorageGi      *int64   `json:"db_storage_gi" validate:"omitnil,gt=0,lte=1000000000"`
	DBMaxConnections *int64   `json:"db_max_connections" validate:"omitnil,gt=0,lte=1000000000"`
}

// ListenerConfig places an external_docker deployment on its listener.
type ListenerConfig struct {
	K8sNamespace *string `json:"k8s_namespace" validate:"omitnil,dnslabel"`
}

// LocalObjectReference names a Kubernetes object in the same namespace.
type LocalObjectReference struct {
	Name string `json:"name" validate:"required,dnssub"`
}

// Volume is a pod volume. Its source objects are free-form (passed through
// to Kubernetes as given).
type Volume struct {
	Name                  string         `json:"name" validate:"required,dnslabel"`
	ConfigMap             map[string]any `json:"configMap,omitzero"`
	Secret                map[string]any `json:"secret,omitzero"`
	EmptyDir              map[string]any `json:"emptyDir,omitzero"`
	PersistentVolumeClaim map[string]any `json:"persistentVolumeClaim,omitzero"`
	NFS                   map[string]any `json:"nfs,omitzero"`
	Projected             map[string]any `json:"projected,omitzero"`
	DownwardAPI           map[string]any `json:"downwardAPI,omitzero"`
	CSI                   map[string]any `json:"csi,omitzero"`
}

// VolumeMount mounts a Volume (by name) into a container.
type VolumeMount struct {
	Name             string  `json:"name" validate:"required"`
	MountPath        string  `json:"mountPath" validate:"required,str"`
	SubPath          *string `json:"subPath,omitzero" validate:"omitnil,str"`
	MountPropagation *string `json:"mountPropagation,omitzero" validate:"omitnil,str"`
	ReadOnly         *bool   `json:"readOnly,omitzero"`
	SubPathExpr      *string `json:"subPathExpr,omitzero" validate:"omitnil,str"`
}

// Container is an init container or a sidecar.
type Container struct {
	Name            string                `json:"name" validate:"required,dnslabel"`
	Image           string                `json:"image" validate:"required,str"`
	ImagePullPolicy *string               `json:"imagePullPolicy,omitzero" validate:"omitnil,oneof=Always Never IfNotPresent"`
	Command         []string              `json:"command,omitzero"`
	Args            []string              `json:"args,omitzero"`
	WorkingDir      *string               `json:"workingDir,omitzero" validate:"omitnil,str"`
	Env             []EnvVar              `json:"env,omitzero"`
	EnvFrom         []map[string]any      `json:"envFrom,omitzero"`
	Resources       *ResourceRequirements `json:"resources,omitzero"`
	VolumeMounts    []VolumeMount         `json:"volumeMounts,omitzero"`
	SecurityContext map[string]any        `json:"securityContext,omitzero"`
	RestartPolicy   *string               `json:"restartPolicy,omitzero" validate:"omitnil,oneof=Always OnFailure"`
}

// EnvVar is a container environment variable. Value and ValueFrom are
// exclusive.
type EnvVar struct {
	Name      string         `json:"name" validate:"required,cident"`
	Value     *string        `json:"value" validate:"omitnil,maxstr"`
	ValueFrom map[string]any `json:"valueFrom"`
}

// ResourceRequirements are Kubernetes requests and limits of a container.
type ResourceRequirements struct {
	Limits   map[string]string `json:"limits"`
	Requests map[string]string `json:"requests"`
}

// Revision is an immutable snapshot of a deployment's source_revision_config,
// secrets and resource_spec, as it appears on the wire. Only Status, StatusMessage, UpdatedAt and build outputs (such as
// repo_commit_sha) change after creation. Secrets never appear here.
type Revision struct {
	ID                   string               `json:"id"`
	CreatedAt            wiretime.Time        `json:"created_at"`
	UpdatedAt            wiretime.Time        `json:"updated_at"`
	Status               RevisionStatus       `json:"status"`
	Source               Source               `json:"source"`
	SourceRevisionConfig SourceRevisionConfig `json:"source_revision_config"`
	StatusMessage        *string              `json:"status_message"`
	// TrackedPackages are the packages the client said the revision's
	// code tracks (the top-level tracked_packages of the PATCH or POST
	// .../revisions that created it; wire contract section 10), null when
	// it named none. A redeploy copies the named revision's.
	TrackedPackages []string `json:"tracked_packages"`
	// StatusHistory is every status the revision entered, with the time
	// it did, oldest first: its CREATING at created_at, then each change
	// (read-only; wire contract section 9). Never nil in values the
	// ControlPlane returns. A revision stored by a build before this field
	// answers what is known: CREATING at created_at and, when it has moved
	// on, its status at updated_at.
	StatusHistory []StatusChange `json:"status_history"`
}

// StatusChange is one entry of a revision's status_history.
type StatusChange struct {
	Status RevisionStatus `json:"status"`
	At     wiretime.Time  `json:"at"`
}

// ComputeConfig is a listener's compute configuration.
type ComputeConfig struct {
	K8sNamespaces []string `json:"k8s_namespaces"`
}

// The compute types a listener may have (wire contract section 10):
// ComputeTypeK8s names a Kubernetes cluster (a kubeconfig context) by its
// compute_id, ComputeTypeDocker a Docker engine of the server's
// configuration.
const (
	ComputeTypeK8s    = "k8s"
	ComputeTypeDocker = "docker"
)

// K8sNamespace is the Kubernetes namespace a deployment on listener l runs
// in (wire contract section 10): its listener_config.k8s_namespace, else
// the listener's first namespace, else "default". l may be nil.
func K8sNamespace(d *Deployment, l *Listener) string {
	if lc := d.SourceConfig.ListenerConfig; lc != nil && lc.K8sNamespace != nil && *lc.K8sNamespace != "" {
		return *lc.K8sNamespace
	}
	if l != nil && len(l.ComputeConfig.K8sNamespaces) > 0 {
		return l.ComputeConfig.K8sNamespaces[0]
	}
	return "default"
}

// Listener is a place where self-hosted (external_docker) deployments run.
// ComputeConfig.K8sNamespaces is never nil in values returned by the
// ControlPlane.
type Listener struct {
	ID            string        `json:"id"`
	ComputeType   string        `json:"compute_type"`
	ComputeID     string        `json:"compute_id"`
	ComputeConfig ComputeConfig `json:"compute_config"`
	// Version is the listener's version: as a create or PATCH set it, and
	// then the version its agent reports (AgentHeartbeat).
	Version   string        `json:"version"`
	CreatedAt wiretime.Time `json:"created_at"`
	UpdatedAt wiretime.Time `json:"updated_at"`
	// Status (read-only, wire contract section 11) is ListenerConnected
	// while an agent of the listener was seen (a heartbeat or a claim of
	// work) within AgentConnectedWindow, by the ControlPlane's clock when
	// the answer is made, else ListenerDisconnected (as a listener no
	// agent serves always is).
	Status ListenerStatus `json:"status"`
	// LastHeartbeatAt (read-only) is when an agent of the listener was
	// last seen, recorded at most every AgentHeartbeatInterval/2; nil
	// until one is.
	LastHeartbeatAt *wiretime.Time `json:"last_heartbeat_at"`
}

// ListenerStatus says whether a listener's agent is connected.
type ListenerStatus string

// The listener statuses (wire contract section 11).
const (
	ListenerConnected    ListenerStatus = "CONNECTED"
	ListenerDisconnected ListenerStatus = "DISCONNECTED"
)

// ListenerStatuses lists every listener status.
func ListenerStatuses() []ListenerStatus {
	return []ListenerStatus{ListenerConnected, ListenerDisconnected}
}

// Integration is a GitHub App installation of the tenant; github deployments
// name one in source_config.integration_id.
type Integration struct {
	ID             string `json:"id"`
	InstallationID int64  `json:"installation_id"`
	Name           string `json:"name"`
}

// DeploymentPage is one page of ListDeployments. Offset is the offset of the
// next page: the request offset plus len(Resources). Resources is never nil.
type DeploymentPage struct {
	Resources []Deployment `json:"resources"`
	Offset    int          `json:"offset"`
}

// RevisionPage is one page of ListRevisions, newest first.
type RevisionPage struct {
	Resources []Revision `json:"resources"`
	Offset    int        `json:"offset"`
}

// ListenerPage is one page of ListListeners, newest first.
type ListenerPage struct {
	Resources []Listener `json:"resources"`
	Offset    int        `json:"offset"`
}
