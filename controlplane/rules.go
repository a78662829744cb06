package controlplane

import (
	"reflect"
	"slices"
	"strings"

	"github.com/deployplane/deployplane/apierr"
)

// CreatePolicy says what POST /v2/deployments does with a field, for one
// source.
type CreatePolicy int

// The create policies.
const (
	// CreateNotApplicable: the field does not apply to the source; a
	// non-null value is 422 not_applicable_to_source.
	CreateNotApplicable CreatePolicy = iota
	// CreateRequired: a null value is 422 missing.
	CreateRequired
	// CreateOptional: the field may be null; some have defaults.
	CreateOptional
	// CreateReadOnly: the service assigns the field; a non-null value is
	// 422 read_only_field.
	CreateReadOnly
	// CreateIgnored: a read-only response field; a value in a request is
	// ignored (wire contract section 1).
	CreateIgnored
)

// PatchPolicy says what PATCH /v2/deployments/{id} does with a non-null
// field, for one source. A null field is always "no change".
type PatchPolicy int

// The patch policies.
const (
	// PatchNotApplicable: the field does not apply to the source; a
	// non-null value is 422 not_applicable_to_source.
	PatchNotApplicable PatchPolicy = iota
	// PatchImmutable: a value different from the stored one is 422
	// immutable_field; an equal value is accepted and changes nothing.
	PatchImmutable
	// PatchInPlace: the value replaces the stored one; no revision.
	PatchInPlace
	// PatchRevision: the value replaces the stored one (whole, for objects
	// and lists) and a new revision is created, even when it is equal.
	PatchRevision
	// PatchReadOnly: the service owns the field; a value is 422
	// read_only_field.
	PatchReadOnly
	// PatchIgnored: a read-only response field, ignored in requests.
	PatchIgnored
)

// FieldRule is one row of the deployment rules table: a request field and
// its policies per source. Validation, PATCH handling and the property-test
// generators all read this table.
type FieldRule struct {
	// Loc is the field's JSON path below "body", e.g.
	// ["source_config", "repo_url"].
	Loc []string
	// Create holds the create policy of each source.
	Create map[Source]CreatePolicy
	// Patch holds the patch policy of each source.
	Patch map[Source]PatchPolicy
}

// fieldRule is a row of the rules table: everything the package knows
// about one request field. FieldRule is its public part.
//
// The row is the field's one declaration; what carries the field follows
// from it. Requests: the member of CreateDeploymentRequest and
// UpdateDeploymentRequest named by loc's first element (the field itself,
// or source_config and source_revision_config, the objects that hold
// rows) is copied into the draft the checks read (requestCopies), unless
// it comes in another form (secrets, as SecretInput). The storage form:
// stored (storageform.go). Revision snapshots: snap (snapshotOf,
// redeployed). The dry-run validators (validateonly.go) run the checks the
// writes run, on the same draft. The tests walk the wire types for members
// no row declares, and round-trip every row's value through create, PATCH,
// GET, the list, the storage form and a redeploy.
type fieldRule struct {
	loc    []string
	create [nSources]CreatePolicy // indexed by sourceIndex
	patch  [nSources]PatchPolicy
	// def, when set for a source, gives the field its create default when
	// the request leaves it null.
	def [nSources]func(d *Deployment)
	// snap says whether the field belongs to a revision's snapshot.
	snap snapshotPolicy
	// index lists the cp_deployment_index fields whose keys depend on the
	// field's value (records.go, indexTerms); summary says that the list
	// summary does (records.go, summary). The tests check both against
	// records.go.
	index   []string
	summary bool
	// stored, when set, is the key of the field's own member in a stored
	// deployment record: the field's JSON, left out when null, among the
	// members that follow the name (storageform.go, rowMembers). Only
	// top-level fields have one; the others are laid out by
	// storedDeployment's members (name, source, url, secrets and the
	// objects source_config, resource_spec and source_revision_config).
	stored string
	// get returns the field's value (dereferenced) or nil when it is
	// null/absent. Values compare with reflect.DeepEqual.
	get func(d *Deployment) any
	// set copies the field from src into dst.
	set func(dst, src *Deployment)
}

// snapshotPolicy says what a revision holds of a field.
type snapshotPolicy int

const (
	// snapNone: the field is the deployment's, not a revision's.
	snapNone snapshotPolicy = iota
	// snapRecorded: a new revision records the value its build used, but
	// a redeploy leaves the deployment's current value (the commands,
	// changed in place).
	snapRecorded
	// snapRestored: the field is what a revision is (wire contract section
	// 7): a new revision records it, and a redeploy of the revision sets
	// it back on the deployment. Every PatchRevision field is one.
	snapRestored
)

// nSources is the number of columns of the table.
const nSources = 4

// sources in table order: github, external_docker, internal_source,
// internal_docker (Sources).
var allSources = [nSources]Source{SourceGitHub, SourceExternalDocker, SourceInternalSource, SourceInternalDocker}

// sourceIndex is the column of s; github's for a source the table does
// not know (the callers check the source first).
func sourceIndex(s Source) int {
	for i, a := range allSources {
		if a == s {
			return i
		}
	}
	return 0
}

// knownSource reports whether s is one of the table's sources.
func knownSource(s Source) bool { return slices.Contains(allSources[:], s) }

const (
	na  = CreateNotApplicable
	req = CreateRequired
	opt = CreateOptional
	ro  = CreateReadOnly
	ign = CreateIgnored

	pNA  = PatchNotApplicable
	pImm = PatchImmutable
	pIn  = PatchInPlace
	pRev = PatchRevision
	pRO  = PatchReadOnly
	pIgn = PatchIgnored
)

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// The create and patch columns, in the order of allSources.
type (
	cCols = [nSources]CreatePolicy
	pCols = [nSources]PatchPolicy
	dCols = [nSources]func(*Deployment)
)

// DefaultLanggraphConfigPath is graph_config_path (langgraph_config_path)
// of an internal_source deployment whose create leaves it null.
const DefaultLanggraphConfigPath = "langgraph.json"

// rules is the table: wire contract sections 6 and 10 and the seed's field
// tables. Columns: path, create {github, external_docker,
// internal_source, internal_docker}, patch (the same order), then what
// else the row says (create default, snapshot, index, summary), then the
// accessors.
var rules = []fieldRule{
	{loc: []string{"name"}, create: cCols{req, req, req, req}, patch: pCols{pImm, pImm, pImm, pImm}, summary: true,
		get: func(d *Deployment) any { return nonEmpty(d.Name) },
		set: func(dst, src *Deployment) { dst.Name = src.Name }},
	// display_name: optional, changes in place; null is "no change" on
	// PATCH and "" is too short, so once set it cannot be cleared.
	{loc: []string{"display_name"}, create: cCols{opt, opt, opt, opt}, patch: pCols{pIn, pIn, pIn, pIn}, stored: "dn",
		get: func(d *Deployment) any { return deref(d.DisplayName) },
		set: func(dst, src *Deployment) { dst.DisplayName = src.DisplayName }},
	{loc: []string{"source"}, create: cCols{req, req, req, req}, patch: pCols{pImm, pImm, pImm, pImm}, index: []string{idxSource, idxPush, idxPreview}, summary: true,
		get: func(d *Deployment) any { return nonEmpty(string(d.Source)) },
		set: func(dst, src *Deployment) { dst.Source = src.Source }},
	{loc: []string{"source_config", "integration_id"}, create: cCols{req, na, na, na}, patch: pCols{pImm, pNA, pNA, pNA}, index: []string{idxPush, idxPreview},
		get: func(d *Deployment) any { return deref(d.SourceConfig.IntegrationID) },
		set: func(dst, src *Deployment) { dst.SourceConfig.IntegrationID = src.SourceConfig.IntegrationID }},
	{loc: []string{"source_config", "repo_url"}, create: cCols{req, na, na, na}, patch: pCols{pImm, pNA, pNA, pNA},
		get: func(d *Deployment) any { return deref(d.SourceConfig.RepoURL) },
		set: func(dst, src *Deployment) { dst.SourceConfig.RepoURL = src.SourceConfig.RepoURL }},
	// deployment_type: prod by default for github, dev for the sources of
	// langgraph deploy (section 10).
	{loc: []string{"source_config", "deployment_type"}, create: cCols{opt, na, opt, opt}, patch: pCols{pImm, pNA, pImm, pImm}, index: []string{idxType}, summary: true,
		def: dCols{func(d *Deployment) { d.SourceConfig.DeploymentType = new(DeploymentTypeProd) }, nil,
			func(d *Deployment) { d.SourceConfig.DeploymentType = new(DeploymentTypeDev) },
			func(d *Deployment) { d.SourceConfig.DeploymentType = new(DeploymentTypeDev) }},
		get: func(d *Deployment) any { return deref(d.SourceConfig.DeploymentType) },
		set: func(dst, src *Deployment) { dst.SourceConfig.DeploymentType = src.SourceConfig.DeploymentType }},
	{loc: []string{"source_config", "build_on_push"}, create: cCols{opt, na, na, na}, patch: pCols{pIn, pNA, pNA, pNA}, index: []string{idxPush},
		def: dCols{func(d *Deployment) { d.SourceConfig.BuildOnPush = new(false) }, nil, nil, nil},
		get: func(d *Deployment) any { return deref(d.SourceConfig.BuildOnPush) },
		set: func(dst, src *Deployment) { dst.SourceConfig.BuildOnPush = src.SourceConfig.BuildOnPush }},
	// custom_url: the service's for github (Options.CustomURLTemplate), the
	// client's for external_docker; internal_source's and internal_docker's
	// is their deployer's address, not in requests (customURLFromDeployer).
	{loc: []string{"source_config", "custom_url"}, create: cCols{ro, opt, na, na}, patch: pCols{pRO, pIn, pNA, pNA},
		get: func(d *Deployment) any { return deref(d.SourceConfig.CustomURL) },
		set: func(dst, src *Deployment) { dst.SourceConfig.CustomURL = src.SourceConfig.CustomURL }},
	{loc: []string{"source_config", "resource_spec"}, create: cCols{na, opt, opt, opt}, patch: pCols{pNA, pRev, pRev, pRev}, snap: snapRestored,
		get: func(d *Deployment) any { return deref(d.SourceConfig.ResourceSpec) },
		set: func(dst, src *Deployment) { dst.SourceConfig.ResourceSpec = src.SourceConfig.ResourceSpec }},
	{loc: []string{"source_config", "listener_id"}, create: cCols{na, opt, na, na}, patch: pCols{pNA, pImm, pNA, pNA}, index: []string{idxListener},
		get: func(d *Deployment) any { return deref(d.SourceConfig.ListenerID) },
		set: func(dst, src *Deployment) { dst.SourceConfig.ListenerID = src.SourceConfig.ListenerID }},
	{loc: []string{"source_config", "listener_config"}, create: cCols{na, opt, na, na}, patch: pCols{pNA, pImm, pNA, pNA},
		get: func(d *Deployment) any { return deref(d.SourceConfig.ListenerConfig) },
		set: func(dst, src *Deployment) { dst.SourceConfig.ListenerConfig = src.SourceConfig.ListenerConfig }},
	// auto_rollback: optional, in place, every source (section 11).
	{loc: []string{"source_config", "auto_rollback"}, create: cCols{opt, opt, opt, opt}, patch: pCols{pIn, pIn, pIn, pIn},
		get: func(d *Deployment) any { return deref(d.SourceConfig.AutoRollback) },
		set: func(dst, src *Deployment) { dst.SourceConfig.AutoRollback = src.SourceConfig.AutoRollback }},
	{loc: []string{"source_config", "install_command"}, create: cCols{opt, na, opt, na}, patch: pCols{pIn, pNA, pIn, pNA}, snap: snapRecorded,
		get: func(d *Deployment) any { return deref(d.SourceConfig.InstallCommand) },
		set: func(dst, src *Deployment) { dst.SourceConfig.InstallCommand = src.SourceConfig.InstallCommand }},
	{loc: []string{"source_config", "build_command"}, create: cCols{opt, na, opt, na}, patch: pCols{pIn, pNA, pIn, pNA}, snap: snapRecorded,
		get: func(d *Deployment) any { return deref(d.SourceConfig.BuildCommand) },
		set: func(dst, src *Deployment) { dst.SourceConfig.BuildCommand = src.SourceConfig.BuildCommand }},
	// preview: github only, in place (wire contract section 11); the
	// deployments with one are indexed by integration (previews.go).
	{loc: []string{"source_config", "preview"}, create: cCols{opt, na, na, na}, patch: pCols{pIn, pNA, pNA, pNA}, index: []string{idxPreview},
		get: func(d *Deployment) any { return deref(d.SourceConfig.Preview) },
		set: func(dst, src *Deployment) { dst.SourceConfig.Preview = src.SourceConfig.Preview }},
	{loc: []string{"source_revision_config", "repo_ref"}, create: cCols{req, na, na, na}, patch: pCols{pRev, pNA, pNA, pNA}, snap: snapRestored,
		get: func(d *Deployment) any { return deref(d.SourceRevisionConfig.RepoRef) },
		set: func(dst, src *Deployment) { dst.SourceRevisionConfig.RepoRef = src.SourceRevisionConfig.RepoRef }},
	{loc: []string{"source_revision_config", "graph_config_path"}, create: cCols{req, na, opt, na}, patch: pCols{pRev, pNA, pRev, pNA}, snap: snapRestored,
		def: dCols{nil, nil, func(d *Deployment) { d.SourceRevisionConfig.GraphConfigPath = new(DefaultLanggraphConfigPath) }, nil},
		get: func(d *Deployment) any { return deref(d.SourceRevisionConfig.GraphConfigPath) },
		set: func(dst, src *Deployment) {
			dst.SourceRevisionConfig.GraphConfigPath = src.SourceRevisionConfig.GraphConfigPath
		}},
	// image_uri: what an external_docker deployment is; for internal_docker
	// what its revisions come from, optional on create (section 10).
	{loc: []string{"source_revision_config", "image_uri"}, create: cCols{na, req, na, opt}, patch: pCols{pNA, pRev, pNA, pRev}, snap: snapRestored,
		get: func(d *Deployment) any { return deref(d.SourceRevisionConfig.ImageURI) },
		set: func(dst, src *Deployment) { dst.SourceRevisionConfig.ImageURI = src.SourceRevisionConfig.ImageURI }},
	// source_tarball_path: what an internal_source revision builds.
	{loc: []string{"source_revision_config", "source_tarball_path"}, create: cCols{na, na, opt, na}, patch: pCols{pNA, pNA, pRev, pNA}, snap: snapRestored,
		get: func(d *Deployment) any { return deref(d.SourceRevisionConfig.SourceTarballPath) },
		set: func(dst, src *Deployment) {
			dst.SourceRevisionConfig.SourceTarballPath = src.SourceRevisionConfig.SourceTarballPath
		}},
	{loc: []string{"source_revision_config", "repo_commit_sha"}, create: cCols{ign, ign, ign, ign}, patch: pCols{pIgn, pIgn, pIgn, pIgn}, snap: snapRestored,
		get: func(d *Deployment) any { return deref(d.SourceRevisionConfig.RepoCommitSHA) },
		set: func(dst, src *Deployment) {
			dst.SourceRevisionConfig.RepoCommitSHA = src.SourceRevisionConfig.RepoCommitSHA
		}},
	// url: read-only, set by the deployer (Step.URL); ignored in requests.
	{loc: []string{"url"}, create: cCols{ign, ign, ign, ign}, patch: pCols{pIgn, pIgn, pIgn, pIgn},
		get: func(d *Deployment) any { return deref(d.URL) },
		set: func(dst, src *Deployment) { dst.URL = src.URL }},
	// secrets: an empty list is "no change" on PATCH, so it reads as unset.
	{loc: []string{"secrets"}, create: cCols{opt, opt, opt, opt}, patch: pCols{pRev, pRev, pRev, pRev}, snap: snapRestored,
		get: func(d *Deployment) any {
			if len(d.Secrets) == 0 {
				return nil
			}
			return d.Secrets
		},
		set: func(dst, src *Deployment) { dst.Secrets = src.Secrets }},
	// secret_references: as secrets (section 11); [] on PATCH is "no
	// change".
	{loc: []string{"secret_references"}, create: cCols{opt, opt, opt, opt}, patch: pCols{pRev, pRev, pRev, pRev}, snap: snapRestored, stored: "sr",
		get: func(d *Deployment) any {
			if len(d.SecretReferences) == 0 {
				return nil
			}
			return d.SecretReferences
		},
		set: func(dst, src *Deployment) { dst.SecretReferences = src.SecretReferences }},
	// agent: optional, in place (section 11); at most one deployment per
	// agent and environment (agentLinkKey).
	{loc: []string{"agent"}, create: cCols{opt, opt, opt, opt}, patch: pCols{pIn, pIn, pIn, pIn}, stored: "ag",
		index: []string{idxAgent, idxAgentEnv, idxEnv},
		get:   func(d *Deployment) any { return deref(d.Agent) },
		set:   func(dst, src *Deployment) { dst.Agent = src.Agent }},
	// is_preview: read-only, set by the service for the previews it makes.
	{loc: []string{"is_preview"}, create: cCols{ign, ign, ign, ign}, patch: pCols{pIgn, pIgn, pIgn, pIgn}, stored: "pv",
		get: func(d *Deployment) any {
			if !d.IsPreview {
				return nil
			}
			return true
		},
		set: func(dst, src *Deployment) { dst.IsPreview = src.IsPreview }},
	// pinned_revision_id: set by a PATCH only (section 11), in place, to
	// the active revision (pin.go); removed to unpin.
	{loc: []string{"pinned_revision_id"}, create: cCols{ro, ro, ro, ro}, patch: pCols{pIn, pIn, pIn, pIn}, stored: "pn",
		get: func(d *Deployment) any { return deref(d.PinnedRevisionID) },
		set: func(dst, src *Deployment) { dst.PinnedRevisionID = src.PinnedRevisionID }},
}

// jsonField is the field of struct type t whose JSON name is name.
func jsonField(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		if n, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); n == name && t.Field(i).IsExported() {
			return t.Field(i), true
		}
	}
	return reflect.StructField{}, false
}

// memberCopy copies a request's member into the draft's: the fields at
// from (in the request type) and to (in Deployment), the request's
// dereferenced when deref (a nil pointer is left out).
type memberCopy struct {
	from, to int
	deref    bool
}

// requestCopies are, per request type, the copies that make its draft
// (draftOf): one for each member whose JSON name is a row's field or holds
// rows' fields (the first element of a row's loc), when the draft's member
// of that name has its type or the type it points to. The other members
// are the checks' own: secrets come as SecretInput (checker.secrets), and
// tag_value_ids, revision_source and tracked_packages are no row's.
var requestCopies = map[reflect.Type][]memberCopy{
	reflect.TypeFor[CreateDeploymentRequest](): copiesOf(reflect.TypeFor[CreateDeploymentRequest]()),
	reflect.TypeFor[UpdateDeploymentRequest](): copiesOf(reflect.TypeFor[UpdateDeploymentRequest]()),
}

// copiesOf is the copies of request type t (requestCopies).
func copiesOf(t reflect.Type) []memberCopy {
	dt := reflect.TypeFor[Deployment]()
	var out []memberCopy
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if !slices.ContainsFunc(rules, func(r fieldRule) bool { return r.loc[0] == name }) {
			continue
		}
		df, ok := jsonField(dt, name)
		switch ft := t.Field(i).Type; {
		case !ok:
		case ft == df.Type:
			out = append(out, memberCopy{from: i, to: df.Index[0]})
		case ft.Kind() == reflect.Pointer && ft.Elem() == df.Type:
			out = append(out, memberCopy{from: i, to: df.Index[0], deref: true})
		}
	}
	return out
}

// copyRequest copies into d the members of req (a pointer to a request
// type of requestCopies) that are rows' fields.
func copyRequest(d *Deployment, req any) {
	rv, dv := reflect.ValueOf(req).Elem(), reflect.ValueOf(d).Elem()
	for _, c := range requestCopies[rv.Type()] {
		v := rv.Field(c.from)
		if c.deref {
			if v.IsNil() {
				continue
			}
			v = v.Elem()
		}
		dv.Field(c.to).Set(v)
	}
}

// revisionSourceLoc is, per source, the row a revision comes from when a
// create does not carry it (wire contract section 10): nil for github and
// external_docker, whose create requires what a revision needs.
var revisionSourceLoc = [nSources][]string{
	nil, nil,
	{"source_revision_config", "source_tarball_path"},
	{"source_revision_config", "image_uri"},
}

// hasRevisionSource reports whether d has what a revision of its source is
// made from: always for github and external_docker; a source_tarball_path
// or an image_uri for internal_source and internal_docker. A deployment
// without one has no revision yet.
func hasRevisionSource(d *Deployment) bool {
	l := revisionSourceLoc[sourceIndex(d.Source)]
	return l == nil || rules[ruleIndex(l)].get(d) != nil
}

// locResourceSpec is the row of resource_spec, whose own checks are
// nested in validation's order.
var locResourceSpec = []string{"source_config", "resource_spec"}

// locDeploymentType is the row of deployment_type, which min_scale's
// cross-field rule reads (checkScaleToZero).
var locDeploymentType = []string{"source_config", "deployment_type"}

// ruleIndex is the index of the row whose loc is loc, or -1.
func ruleIndex(loc []string) int {
	return slices.IndexFunc(rules, func(r fieldRule) bool { return slices.Equal(r.loc, loc) })
}

// ruleOfLoc is the index of the row a problem's loc (["body", ...]) is at
// or below; len(rules) for a loc below no row.
func ruleOfLoc(loc []any) int {
	for i := range rules {
		if r := rules[i].loc; len(loc) > len(r) && loc[0] == "body" {
			match := true
			for j, k := range r {
				if loc[1+j] != k {
					match = false
					break
				}
			}
			if match {
				return i
			}
		}
	}
	return len(rules)
}

func nonEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// FieldRules returns a copy of the deployment rules table, one row per
// request field, in the order validation reports problems.
func FieldRules() []FieldRule {
	out := make([]FieldRule, len(rules))
	for i, r := range rules {
		fr := FieldRule{Loc: slices.Clone(r.loc), Create: map[Source]CreatePolicy{}, Patch: map[Source]PatchPolicy{}}
		for si, s := range allSources {
			fr.Create[s] = r.create[si]
			fr.Patch[s] = r.patch[si]
		}
		out[i] = fr
	}
	return out
}

// bodyLoc is ["body", loc...].
func bodyLoc(loc []string, more ...any) []any {
	out := make([]any, 0, 1+len(loc)+len(more))
	out = append(out, "body")
	for _, l := range loc {
		out = append(out, l)
	}
	return append(out, more...)
}

// appliesTo names the sources a field applies to (those whose columns are
// not both not-applicable), for messages.
func (r *fieldRule) appliesTo() []Source {
	var out []Source
	for i, s := range allSources {
		if r.create[i] != CreateNotApplicable || r.patch[i] != PatchNotApplicable {
			out = append(out, s)
		}
	}
	return out
}

func notApplicable(r *fieldRule, src Source) apierr.Problem {
	to := r.appliesTo()
	names := make([]string, len(to))
	for i, s := range to {
		names[i] = "'" + string(s) + "'"
	}
	which := "source " + names[0]
	if len(names) > 1 {
		which = "sources " + strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
	}
	return apierr.Problem{Loc: bodyLoc(r.loc), Type: apierr.TypeNotApplicableToSource,
		Msg: "Field applies only to " + which + " and must be null for source '" + string(src) + "'"}
}

// ruleHooks replace parts of one ControlPlane's deployment rules. Only
// this package's mutation tests set them (through export_test.go), each to
// put a deliberate defect into the rules and check that the state-machine
// test catches it; production code never does, and a nil hook leaves its
// rule as written. Each hook sits where its rule is applied, so that a
// defect goes through the code it breaks.
type ruleHooks struct {
	// createPolicy and patchPolicy alter the policy p of the table's
	// field at loc, in applyCreateTable and applyPatchTable.
	createPolicy func(loc []string, p CreatePolicy) CreatePolicy
	patchPolicy  func(loc []string, p PatchPolicy) PatchPolicy
	// isTagRef, revisionSourceProblem and hasRevisionSource replace
	// their namesakes in checkTagRef, mergePatch and CreateDeployment.
	isTagRef              func(ref *string) bool
	revisionSourceProblem func(own Source, rs *Source, ps []apierr.Problem) []apierr.Problem
	hasRevisionSource     func(d *Deployment) bool
	// pinHolds replaces "a pinned deployment holds a revision before
	// DEPLOYING" in holdForPin (pin.go).
	pinHolds func(pinned bool) bool
}

// applyCreateTable checks d (a create request seen as a Deployment) against
// the create column of source src, appending problems, and clears ignored
// fields.
func applyCreateTable(d *Deployment, src Source, ps []apierr.Problem, h ruleHooks) []apierr.Problem {
	si := sourceIndex(src)
	var zero Deployment
	for i := range rules {
		r := &rules[i]
		v := r.get(d)
		pol := r.create[si]
		if h.createPolicy != nil {
			pol = h.createPolicy(r.loc, pol)
		}
		switch pol {
		case CreateNotApplicable:
			if v != nil {
				ps = append(ps, notApplicable(r, src))
			}
		case CreateRequired:
			if v == nil {
				ps = append(ps, apierr.Problem{Loc: bodyLoc(r.loc), Type: apierr.TypeMissing, Msg: apierr.MsgFieldRequired})
			}
		case CreateReadOnly:
			if v != nil {
				ps = append(ps, apierr.Problem{Loc: bodyLoc(r.loc), Type: apierr.TypeReadOnlyField,
					Msg: "Field is assigned by the service for source '" + string(src) + "' and cannot be set"})
			}
		case CreateIgnored:
			r.set(d, &zero)
		}
	}
	return ps
}

// applyPatchTable merges the non-null fields of patch into merged (a copy of
// stored) following the patch column of stored's source. It reports whether
// a revision-triggering field was given.
func applyPatchTable(stored, patch, merged *Deployment, ps []apierr.Problem, h ruleHooks) (_ []apierr.Problem, trigger bool) {
	si := sourceIndex(stored.Source)
	for i := range rules {
		r := &rules[i]
		v := r.get(patch)
		if v == nil {
			continue
		}
		pol := r.patch[si]
		if h.patchPolicy != nil {
			pol = h.patchPolicy(r.loc, pol)
		}
		switch pol {
		case PatchNotApplicable:
			ps = append(ps, notApplicable(r, stored.Source))
		case PatchImmutable:
			if !reflect.DeepEqual(v, r.get(stored)) {
				ps = append(ps, apierr.Problem{Loc: bodyLoc(r.loc), Type: apierr.TypeImmutableField,
					Msg: apierr.MsgImmutable})
			}
		case PatchInPlace:
			r.set(merged, patch)
		case PatchRevision:
			r.set(merged, patch)
			trigger = true
		case PatchReadOnly:
			ps = append(ps, apierr.Problem{Loc: bodyLoc(r.loc), Type: apierr.TypeReadOnlyField,
				Msg: "Field is assigned by the service for source '" + string(stored.Source) + "' and cannot be set"})
		case PatchIgnored:
		}
	}
	return ps, trigger
}

// removable reports whether a PATCH may remove row r's field for the
// source in column si (UpdateDeploymentRequest.Remove): a field a create
// may leave null (optional, without a create default, or one only a
// PATCH sets) that a PATCH changes, but for those of
// source_revision_config, which say what a revision is built from.
func (r *fieldRule) removable(si int) bool {
	p := r.patch[si]
	nullOnCreate := r.create[si] == CreateOptional && r.def[si] == nil || r.create[si] == CreateReadOnly
	return nullOnCreate && (p == PatchInPlace || p == PatchRevision) && r.loc[0] != "source_revision_config"
}

// Removable reports whether UpdateDeploymentRequest.Remove may name the
// field at loc (its JSON path below the body) for deployments of source
// s: the rules table's optional fields that a PATCH changes and that have
// no create default, outside source_revision_config (display_name,
// custom_url of external_docker, resource_spec, the commands, secrets,
// secret_references, agent, pinned_revision_id).
func Removable(s Source, loc []string) bool {
	i := ruleIndex(loc)
	return i >= 0 && knownSource(s) && rules[i].removable(sourceIndex(s))
}

// applyRemovals applies the removals of a PATCH (UpdateDeploymentRequest
// .Remove, those below resource_spec left to mergeSpec) to merged, for a
// deployment of source src, p being the PATCH's draft: the problems, and
// whether a revision-triggering field that was set is removed.
func applyRemovals(src Source, p, merged *Deployment, remove []string, ps []apierr.Problem) (_ []apierr.Problem, trigger bool) {
	si := sourceIndex(src)
	var zero Deployment
	for _, path := range remove {
		loc := strings.Split(path, ".")
		if strings.HasPrefix(path, strings.Join(locResourceSpec, ".")+".") {
			continue // a member of resource_spec (mergeSpec)
		}
		i := ruleIndex(loc)
		switch {
		case i < 0:
			ps = append(ps, apierr.Problem{Loc: bodyLoc(loc), Type: apierr.TypeValueError, Msg: "Field cannot be removed: no such field"})
			continue
		case rules[i].patch[si] == PatchNotApplicable:
			ps = append(ps, notApplicable(&rules[i], src))
			continue
		case !rules[i].removable(si):
			ps = append(ps, apierr.Problem{Loc: bodyLoc(loc), Type: apierr.TypeValueError,
				Msg: "Field cannot be removed for source '" + string(src) + "'"})
			continue
		case rules[i].get(p) != nil:
			ps = append(ps, apierr.Problem{Loc: bodyLoc(loc), Type: apierr.TypeValueError, Msg: "Field is both given and removed"})
			continue
		}
		if rules[i].get(merged) != nil {
			rules[i].set(merged, &zero)
			trigger = trigger || rules[i].patch[si] == PatchRevision
		}
	}
	return ps, trigger
}

// applyCreateDefaults gives the null fields of d (a valid create of
// source src) their create defaults.
func applyCreateDefaults(d *Deployment, src Source) {
	si := sourceIndex(src)
	for i := range rules {
		if r := &rules[i]; r.def[si] != nil && r.get(d) == nil {
			r.def[si](d)
		}
	}
}

// snapshotOf is what a new revision of d records: every snapshot row of
// the table (values shared with d, which the caller no longer changes).
func snapshotOf(d *Deployment) *Deployment {
	snap := &Deployment{Source: d.Source}
	for i := range rules {
		if r := &rules[i]; r.snap != snapNone {
			r.set(snap, d)
		}
	}
	if sha := snap.SourceRevisionConfig.RepoCommitSHA; sha != nil {
		snap.SourceRevisionConfig.RepoCommitSHA = new(*sha) // the deployer may set the revision's
	}
	return snap
}

// redeployed sets on d (the deployment as stored) what a revision is, from
// rev: every snapRestored row of the table. Every other field keeps d's
// value, the snapRecorded ones (install_command, build_command) included,
// although rev records the commands its build used.
func redeployed(d *Deployment, rev *revisionRecord) {
	snap := rev.snapshot()
	for i := range rules {
		if r := &rules[i]; r.snap == snapRestored {
			r.set(d, snap)
		}
	}
}

// The revision record and the snapshot rows: these two functions are the
// only place that maps one to the other. They follow records.go's
// revisionRecord (a snapshot field added there is added here).

// snapshot returns the fields rev records, Deployment-shaped.
func (rev *revisionRecord) snapshot() *Deployment {
	return &Deployment{Source: rev.Source, SourceRevisionConfig: rev.SourceRevisionConfig, Secrets: rev.Secrets,
		SecretReferences: rev.SecretReferences,
		SourceConfig:     SourceConfig{ResourceSpec: rev.ResourceSpec, InstallCommand: rev.InstallCommand, BuildCommand: rev.BuildCommand}}
}

// newRevisionRecord is a revision of deployment id holding snap.
func newRevisionRecord(rev Revision, deploymentID string, snap *Deployment) *revisionRecord {
	rev.Source, rev.SourceRevisionConfig = snap.Source, snap.SourceRevisionConfig
	return &revisionRecord{Revision: rev, revisionSnapshot: revisionSnapshot{
		DeploymentID:     deploymentID,
		Secrets:          snap.Secrets,
		SecretReferences: snap.SecretReferences,
		ResourceSpec:     snap.SourceConfig.ResourceSpec,
		InstallCommand:   snap.SourceConfig.InstallCommand,
		BuildCommand:     snap.SourceConfig.BuildCommand,
	}}
}
