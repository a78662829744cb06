package controlplane

import (
	"reflect"
	"slices"

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
type fieldRule struct {
	loc    []string
	create [2]CreatePolicy // indexed by sourceIndex
	patch  [2]PatchPolicy
	// def, when set for a source, gives the field its create default when
	// the request leaves it null.
	def [2]func(d *Deployment)
	// snap says whether the field belongs to a revision's snapshot.
	snap snapshotPolicy
	// index lists the cp_deployment_index fields whose keys depend on the
	// field's value (records.go, indexKeys); summary says that the list
	// summary does (records.go, summary). The tests check both against
	// records.go.
	index   []string
	summary bool
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

// sources in table order: index 0 is github, 1 is external_docker.
var allSources = [2]Source{SourceGitHub, SourceExternalDocker}

func sourceIndex(s Source) int {
	if s == SourceExternalDocker {
		return 1
	}
	return 0
}

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

// rules is the table: wire contract section 6 and the seed's field tables.
// Columns: path, create {github, external_docker}, patch {github,
// external_docker}, then what else the row says (create default, snapshot,
// index, summary), then the accessors.
var rules = []fieldRule{
	{loc: []string{"name"}, create: [2]CreatePolicy{req, req}, patch: [2]PatchPolicy{pImm, pImm}, summary: true,
		get: func(d *Deployment) any { return nonEmpty(d.Name) },
		set: func(dst, src *Deployment) { dst.Name = src.Name }},
	// display_name: optional, changes in place; null is "no change" on
	// PATCH and "" is too short, so once set it cannot be cleared.
	{loc: []string{"display_name"}, create: [2]CreatePolicy{opt, opt}, patch: [2]PatchPolicy{pIn, pIn},
		get: func(d *Deployment) any { return deref(d.DisplayName) },
		set: func(dst, src *Deployment) { dst.DisplayName = src.DisplayName }},
	{loc: []string{"source"}, create: [2]CreatePolicy{req, req}, patch: [2]PatchPolicy{pImm, pImm}, index: []string{idxSource, idxPush}, summary: true,
		get: func(d *Deployment) any { return nonEmpty(string(d.Source)) },
		set: func(dst, src *Deployment) { dst.Source = src.Source }},
	{loc: []string{"source_config", "integration_id"}, create: [2]CreatePolicy{req, na}, patch: [2]PatchPolicy{pImm, pNA}, index: []string{idxPush},
		get: func(d *Deployment) any { return deref(d.SourceConfig.IntegrationID) },
		set: func(dst, src *Deployment) { dst.SourceConfig.IntegrationID = src.SourceConfig.IntegrationID }},
	{loc: []string{"source_config", "repo_url"}, create: [2]CreatePolicy{req, na}, patch: [2]PatchPolicy{pImm, pNA},
		get: func(d *Deployment) any { return deref(d.SourceConfig.RepoURL) },
		set: func(dst, src *Deployment) { dst.SourceConfig.RepoURL = src.SourceConfig.RepoURL }},
	{loc: []string{"source_config", "deployment_type"}, create: [2]CreatePolicy{opt, na}, patch: [2]PatchPolicy{pImm, pNA}, index: []string{idxType}, summary: true,
		def: [2]func(*Deployment){func(d *Deployment) { d.SourceConfig.DeploymentType = new(DeploymentTypeProd) }, nil},
		get: func(d *Deployment) any { return deref(d.SourceConfig.DeploymentType) },
		set: func(dst, src *Deployment) { dst.SourceConfig.DeploymentType = src.SourceConfig.DeploymentType }},
	{loc: []string{"source_config", "build_on_push"}, create: [2]CreatePolicy{opt, na}, patch: [2]PatchPolicy{pIn, pNA}, index: []string{idxPush},
		def: [2]func(*Deployment){func(d *Deployment) { d.SourceConfig.BuildOnPush = new(false) }, nil},
		get: func(d *Deployment) any { return deref(d.SourceConfig.BuildOnPush) },
		set: func(dst, src *Deployment) { dst.SourceConfig.BuildOnPush = src.SourceConfig.BuildOnPush }},
	{loc: []string{"source_config", "custom_url"}, create: [2]CreatePolicy{ro, opt}, patch: [2]PatchPolicy{pRO, pIn},
		get: func(d *Deployment) any { return deref(d.SourceConfig.CustomURL) },
		set: func(dst, src *Deployment) { dst.SourceConfig.CustomURL = src.SourceConfig.CustomURL }},
	{loc: []string{"source_config", "resource_spec"}, create: [2]CreatePolicy{na, opt}, patch: [2]PatchPolicy{pNA, pRev}, snap: snapRestored,
		get: func(d *Deployment) any { return deref(d.SourceConfig.ResourceSpec) },
		set: func(dst, src *Deployment) { dst.SourceConfig.ResourceSpec = src.SourceConfig.ResourceSpec }},
	{loc: []string{"source_config", "listener_id"}, create: [2]CreatePolicy{na, opt}, patch: [2]PatchPolicy{pNA, pImm}, index: []string{idxListener},
		get: func(d *Deployment) any { return deref(d.SourceConfig.ListenerID) },
		set: func(dst, src *Deployment) { dst.SourceConfig.ListenerID = src.SourceConfig.ListenerID }},
	{loc: []string{"source_config", "listener_config"}, create: [2]CreatePolicy{na, opt}, patch: [2]PatchPolicy{pNA, pImm},
		get: func(d *Deployment) any { return deref(d.SourceConfig.ListenerConfig) },
		set: func(dst, src *Deployment) { dst.SourceConfig.ListenerConfig = src.SourceConfig.ListenerConfig }},
	{loc: []string{"source_config", "install_command"}, create: [2]CreatePolicy{opt, na}, patch: [2]PatchPolicy{pIn, pNA}, snap: snapRecorded,
		get: func(d *Deployment) any { return deref(d.SourceConfig.InstallCommand) },
		set: func(dst, src *Deployment) { dst.SourceConfig.InstallCommand = src.SourceConfig.InstallCommand }},
	{loc: []string{"source_config", "build_command"}, create: [2]CreatePolicy{opt, na}, patch: [2]PatchPolicy{pIn, pNA}, snap: snapRecorded,
		get: func(d *Deployment) any { return deref(d.SourceConfig.BuildCommand) },
		set: func(dst, src *Deployment) { dst.SourceConfig.BuildCommand = src.SourceConfig.BuildCommand }},
	{loc: []string{"source_revision_config", "repo_ref"}, create: [2]CreatePolicy{req, na}, patch: [2]PatchPolicy{pRev, pNA}, snap: snapRestored,
		get: func(d *Deployment) any { return deref(d.SourceRevisionConfig.RepoRef) },
		set: func(dst, src *Deployment) { dst.SourceRevisionConfig.RepoRef = src.SourceRevisionConfig.RepoRef }},
	{loc: []string{"source_revision_config", "graph_config_path"}, create: [2]CreatePolicy{req, na}, patch: [2]PatchPolicy{pRev, pNA}, snap: snapRestored,
		get: func(d *Deployment) any { return deref(d.SourceRevisionConfig.GraphConfigPath) },
		set: func(dst, src *Deployment) {
			dst.SourceRevisionConfig.GraphConfigPath = src.SourceRevisionConfig.GraphConfigPath
		}},
	{loc: []string{"source_revision_config", "image_uri"}, create: [2]CreatePolicy{na, req}, patch: [2]PatchPolicy{pNA, pRev}, snap: snapRestored,
		get: func(d *Deployment) any { return deref(d.SourceRevisionConfig.ImageURI) },
		set: func(dst, src *Deployment) { dst.SourceRevisionConfig.ImageURI = src.SourceRevisionConfig.ImageURI }},
	{loc: []string{"source_revision_config", "repo_commit_sha"}, create: [2]CreatePolicy{ign, ign}, patch: [2]PatchPolicy{pIgn, pIgn}, snap: snapRestored,
		get: func(d *Deployment) any { return deref(d.SourceRevisionConfig.RepoCommitSHA) },
		set: func(dst, src *Deployment) {
			dst.SourceRevisionConfig.RepoCommitSHA = src.SourceRevisionConfig.RepoCommitSHA
		}},
	// url: read-only, set by the deployer (Step.URL); ignored in requests.
	{loc: []string{"url"}, create: [2]CreatePolicy{ign, ign}, patch: [2]PatchPolicy{pIgn, pIgn},
		get: func(d *Deployment) any { return deref(d.URL) },
		set: func(dst, src *Deployment) { dst.URL = src.URL }},
	// secrets: an empty list is "no change" on PATCH, so it reads as unset.
	{loc: []string{"secrets"}, create: [2]CreatePolicy{opt, opt}, patch: [2]PatchPolicy{pRev, pRev}, snap: snapRestored,
		get: func(d *Deployment) any {
			if len(d.Secrets) == 0 {
				return nil
			}
			return d.Secrets
		},
		set: func(dst, src *Deployment) { dst.Secrets = src.Secrets }},
}

// locResourceSpec is the row of resource_spec, whose own checks are
// nested in validation's order.
var locResourceSpec = []string{"source_config", "resource_spec"}

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

// appliesTo names the source a field applies to, for messages.
func (r *fieldRule) appliesTo() Source {
	if r.create[0] == CreateNotApplicable && r.patch[0] == PatchNotApplicable {
		return allSources[1]
	}
	return allSources[0]
}

func notApplicable(r *fieldRule, src Source) apierr.Problem {
	return apierr.Problem{Loc: bodyLoc(r.loc), Type: apierr.TypeNotApplicableToSource,
		Msg: "Field applies only to source '" + string(r.appliesTo()) + "' and must be null for source '" + string(src) + "'"}
}

// applyCreateTable checks d (a create request seen as a Deployment) against
// the create column of source src, appending problems, and clears ignored
// fields. mut is mutNone except in the mutation tests.
func applyCreateTable(d *Deployment, src Source, ps []apierr.Problem, mut mutation) []apierr.Problem {
	si := sourceIndex(src)
	var zero Deployment
	for i := range rules {
		r := &rules[i]
		v := r.get(d)
		pol := r.create[si]
		if mut != mutNone {
			pol = mut.createPolicy(r.loc, pol) // test-only: see mutation.go
		}
		switch pol {
		case CreateNotApplicable:
			if v != nil {
				ps = append(ps, notApplicable(r, src))
			}
		case CreateRequired:
			if v == nil {
				ps = append(ps, apierr.Problem{Loc: bodyLoc(r.loc), Type: apierr.TypeMissing, Msg: "Field required"})
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
// a revision-triggering field was given. mut is mutNone except in the
// mutation tests.
func applyPatchTable(stored, patch, merged *Deployment, ps []apierr.Problem, mut mutation) (_ []apierr.Problem, trigger bool) {
	si := sourceIndex(stored.Source)
	for i := range rules {
		r := &rules[i]
		v := r.get(patch)
		if v == nil {
			continue
		}
		pol := r.patch[si]
		if mut != mutNone {
			pol = mut.patchPolicy(r.loc, pol) // test-only: see mutation.go
		}
		switch pol {
		case PatchNotApplicable:
			ps = append(ps, notApplicable(r, stored.Source))
		case PatchImmutable:
			if !reflect.DeepEqual(v, r.get(stored)) {
				ps = append(ps, apierr.Problem{Loc: bodyLoc(r.loc), Type: apierr.TypeImmutableField,
					Msg: "Field cannot be changed after creation"})
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
		SourceConfig: SourceConfig{ResourceSpec: rev.ResourceSpec, InstallCommand: rev.InstallCommand, BuildCommand: rev.BuildCommand}}
}

// newRevisionRecord is a revision of deployment id holding snap.
func newRevisionRecord(rev Revision, deploymentID string, snap *Deployment) *revisionRecord {
	rev.Source, rev.SourceRevisionConfig = snap.Source, snap.SourceRevisionConfig
	return &revisionRecord{Revision: rev, revisionSnapshot: revisionSnapshot{
		DeploymentID:   deploymentID,
		Secrets:        snap.Secrets,
		ResourceSpec:   snap.SourceConfig.ResourceSpec,
		InstallCommand: snap.SourceConfig.InstallCommand,
		BuildCommand:   snap.SourceConfig.BuildCommand,
	}}
}
