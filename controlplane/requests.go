package controlplane

// CreateDeploymentRequest is the body of POST /v2/deployments. Which fields
// are required, optional or refused depends on Source, as FieldRules says.
// Read-only fields (repo_commit_sha) are ignored.
type CreateDeploymentRequest struct {
	Name *string `json:"name"`
	// DisplayName (optional) is a label of 1 to 256 characters.
	DisplayName          *string               `json:"display_name"`
	Source               *Source               `json:"source"`
	SourceConfig         *SourceConfig         `json:"source_config"`
	SourceRevisionConfig *SourceRevisionConfig `json:"source_revision_config"`
	Secrets              []SecretInput         `json:"secrets"`
	// SecretReferences (optional) take variables from secrets the
	// compute holds (Deployment.SecretReferences).
	SecretReferences []SecretReference `json:"secret_references"`
	// Agent (optional) links the deployment to an agent's environment.
	Agent *DeploymentAgent `json:"agent"`
	// PinnedRevisionID is refused on create (422 read_only_field): a
	// deployment has no revision to pin before its first.
	PinnedRevisionID *string `json:"pinned_revision_id"`
	// TagValueIDs (extension, optional) are UUIDs of the tag values the
	// deployment carries; the list filter tag_value_ids matches them.
	TagValueIDs []string `json:"tag_value_ids"`
}

// UpdateDeploymentRequest is the body of PATCH /v2/deployments/{id} and of
// POST /v2/deployments/{id}/revisions. Null and absent are the same. Name and
// Source are accepted only when equal to the stored values. Secrets nil or
// empty means "no change".
type UpdateDeploymentRequest struct {
	Name *string `json:"name"`
	// DisplayName, when not null, replaces the stored label in place (no
	// revision); null or absent is no change, so it cannot be cleared.
	DisplayName          *string               `json:"display_name"`
	Source               *Source               `json:"source"`
	SourceConfig         *SourceConfig         `json:"source_config"`
	SourceRevisionConfig *SourceRevisionConfig `json:"source_revision_config"`
	Secrets              []SecretInput         `json:"secrets"`
	// SecretReferences, when not empty, replaces the stored list whole
	// and makes a revision, like Secrets.
	SecretReferences []SecretReference `json:"secret_references"`
	// Agent, when not null, replaces the stored link in place.
	Agent *DeploymentAgent `json:"agent"`
	// PinnedRevisionID, when not null, pins the deployment to its active
	// revision, which it must name (Deployment.PinnedRevisionID); Remove
	// unpins.
	PinnedRevisionID *string `json:"pinned_revision_id"`
	// Remove lists the fields the PATCH removes, by JSON path below the
	// body ("display_name", "source_config.custom_url", "secrets",
	// "agent"): a removable field (Removable) becomes null, a list none;
	// removing a revision-triggering field that was set makes a revision.
	// With MergeResourceSpec it may also name a member of resource_spec
	// ("source_config.resource_spec.cpu", "source_config.resource_spec.
	// labels.team"). A field both given and removed, or one that cannot be
	// removed, is 422 at its loc. It has no JSON form: the HTTP API fills
	// it from the nulls of a JSON merge patch (RFC 7396, Content-Type
	// application/merge-patch+json), where a body of plain JSON keeps
	// null as "no change".
	Remove []string `json:"-"`
	// MergeResourceSpec merges source_config.resource_spec into the
	// stored one (RFC 7396: the request's members replace the stored
	// ones, objects such as labels merge member by member, Remove takes
	// members out) rather than replacing it whole, the default of wire
	// contract section 6. Either way the PATCH makes a revision. The HTTP
	// API sets it for a JSON merge patch.
	MergeResourceSpec bool `json:"-"`
	// RevisionSource (langgraph deploy sends it) is null or the
	// deployment's own source; any other value is 422 at ["body",
	// "revision_source"] (wire contract section 10).
	RevisionSource *Source `json:"revision_source"`
	// TrackedPackages is null or at most MaxTrackedPackages names of 1 to
	// MaxTrackedPackageChars characters, kept on the revision the request
	// creates (Revision.TrackedPackages) and not on the deployment.
	TrackedPackages []string `json:"tracked_packages"`
}

// The bounds of tracked_packages (wire contract section 10).
const (
	MaxTrackedPackages     = 100
	MaxTrackedPackageChars = 214
)

// SecretInput is a secret as a request body gives it. Both fields are
// required (the seed's Secret): a missing or null value is 422 missing at
// ["body", "secrets", i, "value"], so Value is a pointer to tell an absent
// value from an empty one, which is allowed. Answers carry Secret.
type SecretInput struct {
	Name  string  `json:"name" validate:"required,cident"`
	Value *string `json:"value" validate:"required,secretval"`
}

// CreateListenerRequest is the body of POST /v2/listeners. ComputeType (must
// be "k8s") and ComputeID (unique per tenant) are required.
type CreateListenerRequest struct {
	ComputeType   *string        `json:"compute_type"`
	ComputeID     *string        `json:"compute_id"`
	ComputeConfig *ComputeConfig `json:"compute_config"`
	Version       *string        `json:"version"`
}

// UpdateListenerRequest is the body of PATCH /v2/listeners/{id}. ComputeType
// and ComputeID are immutable (accepted when equal); ComputeConfig replaces
// the stored one whole; Version changes in place.
type UpdateListenerRequest struct {
	ComputeType   *string        `json:"compute_type"`
	ComputeID     *string        `json:"compute_id"`
	ComputeConfig *ComputeConfig `json:"compute_config"`
	Version       *string        `json:"version"`
}

// CreateIntegrationRequest registers a GitHub App installation for the
// tenant. Both fields are required; installation_id is unique per tenant.
type CreateIntegrationRequest struct {
	InstallationID *int64  `json:"installation_id"`
	Name           *string `json:"name"`
}

// DefaultPageLimit is the page size when a query gives no limit;
// MaxPageLimit is the largest accepted.
const (
	DefaultPageLimit = 20
	MaxPageLimit     = 100
)

// ListDeploymentsQuery is the query of GET /v2/deployments (wire contract
// section 5), typed. Zero values mean "no filter"; filters combine with AND.
// Validate reports bad values at ["query", name].
type ListDeploymentsQuery struct {
	// Limit is 1..100; nil means DefaultPageLimit.
	Limit *int
	// Offset is >= 0: the number of matching deployments to skip.
	Offset int
	// NameContains matches a case-insensitive substring of the name.
	NameContains string
	// Status matches the deployment status exactly.
	Status DeploymentStatus
	// RemoteReconciled, when set, matches the deployments whose
	// remote_reconciled is that value (Deployment.RemoteReconciled).
	RemoteReconciled *bool
	// TagValueIDs matches deployments carrying any of these tag value ids.
	TagValueIDs []string
	// ImageVersion matches the image version exactly.
	ImageVersion string
	// DeploymentType matches source_config.deployment_type exactly.
	DeploymentType DeploymentType
	// DeploymentIDs matches deployments with one of these ids.
	DeploymentIDs []string
	// Name matches the name exactly (case-sensitive): at most one
	// deployment, names being unique per tenant.
	Name string
	// AgentID matches deployments linked to that agent (agent.agent_id).
	AgentID string
	// AgentEnvironment matches deployments linked to an agent in that
	// environment (agent.environment).
	AgentEnvironment AgentEnvironment
	// ListenerID, when set, matches deployments placed on that listener
	// (source_config.listener_id), through the listener index. It is a Go
	// filter only: the HTTP list of deployments has no such parameter.
	ListenerID string
}

// ListRevisionsQuery is the query of GET /v2/deployments/{id}/revisions.
type ListRevisionsQuery struct {
	// Limit is 1..100; nil means DefaultPageLimit.
	Limit *int
	// Offset is >= 0.
	Offset int
	// Status matches revisions whose status is any of these.
	Status []RevisionStatus
	// RemoteReconciled, when set, matches revisions of deployments whose
	// remote_reconciled is that value (Deployment.RemoteReconciled).
	RemoteReconciled *bool
}

// ListListenersQuery is the query of GET /v2/listeners.
type ListListenersQuery struct {
	// Limit is 1..100; nil means DefaultPageLimit.
	Limit *int
	// Offset is >= 0.
	Offset int
}
