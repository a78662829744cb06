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

// fieldRule is a FieldRule with accessors over a Deployment-shaped draft.
type fieldRule struct {
	loc    []string
	create [2]CreatePolicy // indexed by sourceIndex
	patch  [2]PatchPolicy
	// get returns the field's value (dereferenced) or nil when it is
	// null/absent. Values compare with reflect.DeepEqual.
	get func(d *Deployment) any
	// set copies the field from src into dst.
	set func(dst, src *Deployment)
}

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
// external_docker}.
var rules = []fieldRule{
	{loc: []string{"name"}, create: [2]CreatePolicy{req, req}, patch: [2]PatchPolicy{pImm, pImm},
		get: func(d *Deployment) any { return nonEmpty(d.Name) },
		set: func(dst, src *Deployment) { dst.Name = src.Name }},
	{loc: []string{"source"}, create: [2]CreatePolicy{req, req}, patch: [2]PatchPolicy{pImm, pImm},
		get: func(d *Deployment) any { return nonEmpty(string(d.Source)) },
		set: func(dst, src *Deployment) { dst.Source = src.Source }},
	{loc: []string{"source_config", "integration_id"}, create: [2]CreatePolicy{req, na}, patch: [2]PatchPolicy{pImm, pNA},
		get: func(d *Deployment) any { return deref(d.SourceConfig.IntegrationID) },
		set: func(dst, src *Deployment) { dst.SourceConfig.IntegrationID = src.SourceConfig.IntegrationID }},
	{loc: []string{"source_config", "repo_url"}, create: [2]CreatePolicy{req, na}, patch: [2]PatchPolicy{pImm, pNA},
		get: func(d *Deployment) any { return deref(d.SourceConfig.RepoURL) },
		set: func(dst, src *Deployment) { dst.SourceConfig.RepoURL = src.SourceConfig.RepoURL }},
	{loc: []string{"source_config", "deployment_type"}, create: [2]CreatePolicy{opt, na}, patch: [2]PatchPolicy{pImm, pNA},
		get: func(d *Deployment) any { return deref(d.SourceConfig.DeploymentType) },
		set: func(dst, src *Deployment) { dst.SourceConfig.DeploymentType = src.SourceConfig.DeploymentType }},
	{loc: []string{"source_config", "build_on_push"}, create: [2]CreatePolicy{opt, na}, patch: [2]PatchPolicy{pIn, pNA},
		get: func(d *Deployment) any { return deref(d.SourceConfig.BuildOnPush) },
		set: func(dst, src *Deployment) { dst.SourceConfig.BuildOnPush = src.SourceConfig.BuildOnPush }},
	{loc: []string{"source_config", "custom_url"}, create: [2]CreatePolicy{ro, opt}, patch: [2]PatchPolicy{pRO, pIn},
		get: func(d *Deployment) any { return deref(d.SourceConfig.CustomURL) },
		set: func(dst, src *Deployment) { dst.SourceConfig.CustomURL = src.SourceConfig.CustomURL }},
	{loc: []string{"source_config", "resource_spec"}, create: [2]CreatePolicy{na, opt}, patch: [2]PatchPolicy{pNA, pRev},
		get: func(d *Deployment) any { return deref(d.SourceConfig.ResourceSpec) },
		set: func(dst, src *Deployment) { dst.SourceConfig.ResourceSpec = src.SourceConfig.ResourceSpec }},
	{loc: []string{"source_config", "listener_id"}, create: [2]CreatePolicy{na, opt}, patch: [2]PatchPolicy{pNA, pImm},
		get: func(d *Deployment) any { return deref(d.SourceConfig.ListenerID) },
		set: func(dst, src *Deployment) { dst.SourceConfig.ListenerID = src.SourceConfig.ListenerID }},
	{loc: []string{"source_config", "listener_config"}, create: [2]CreatePolicy{na, opt}, patch: [2]PatchPolicy{pNA, pImm},
		get: func(d *Deployment) any { return deref(d.SourceConfig.ListenerConfig) },
		set: func(dst, src *Deployment) { dst.SourceConfig.ListenerConfig = src.SourceConfig.ListenerConfig }},
	{loc: []string{"source_config", "install_command"}, create: [2]CreatePolicy{opt, na}, patch: [2]PatchPolicy{pIn, pNA},
		get: func(d *Deployment) any { return deref(d.SourceConfig.InstallCommand) },
		set: func(dst, src *Deployment) { dst.SourceConfig.InstallCommand = src.SourceConfig.InstallCommand }},
	{loc: []string{"source_config", "build_command"}, create: [2]CreatePolicy{opt, na}, patch: [2]PatchPolicy{pIn, pNA},
		get: func(d *Deployment) any { return deref(d.SourceConfig.BuildCommand) },
		set: func(dst, src *Deployment) { dst.SourceConfig.BuildCommand = src.SourceConfig.BuildCommand }},
	{loc: []string{"source_revision_config", "repo_ref"}, create: [2]CreatePolicy{req, na}, patch: [2]PatchPolicy{pRev, pNA},
		get: func(d *Deployment) any { return deref(d.SourceRevisionConfig.RepoRef) },
		set: func(dst, src *Deployment) { dst.SourceRevisionConfig.RepoRef = src.SourceRevisionConfig.RepoRef }},
	{loc: []string{"source_revision_config", "graph_config_path"}, create: [2]CreatePolicy{req, na}, patch: [2]PatchPolicy{pRev, pNA},
		get: func(d *Deployment) any { return deref(d.SourceRevisionConfig.GraphConfigPath) },
		set: func(dst, src *Deployment) {
			dst.SourceRevisionConfig.GraphConfigPath = src.SourceRevisionConfig.GraphConfigPath
		}},
	{loc: []string{"source_revision_config", "image_uri"}, create: [2]CreatePolicy{na, req}, patch: [2]PatchPolicy{pNA, pRev},
		get: func(d *Deployment) any { return deref(d.SourceRevisionConfig.ImageURI) },
		set: func(dst, src *Deployment) { dst.SourceRevisionConfig.ImageURI = src.SourceRevisionConfig.ImageURI }},
	{loc: []string{"source_revision_config", "repo_commit_sha"}, create: [2]CreatePolicy{ign, ign}, patch: [2]PatchPolicy{pIgn, pIgn},
		get: func(d *Deployment) any { return deref(d.SourceRevisionConfig.RepoCommitSHA) },
		set: func(dst, src *Deployment) {
			dst.SourceRevisionConfig.RepoCommitSHA = src.SourceRevisionConfig.RepoCommitSHA
		}},
	// secrets: an empty list is "no change" on PATCH, so it reads as unset.
	{loc: []string{"secrets"}, create: [2]CreatePolicy{opt, opt}, patch: [2]PatchPolicy{pRev, pRev},
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

// redeployed sets on d (the deployment as stored) what a revision is, from
// rev: every field that a PATCH changes through a new revision
// (PatchRevision in the table, for d's source) is the revision's, and so is
// repo_commit_sha, which goes with its source_revision_config. Every other
// field keeps d's value, the in-place ones (PatchInPlace: install_command,
// build_command, custom_url, build_on_push) included, although rev records
// the commands its build used.
func redeployed(d *Deployment, rev *revisionRecord) {
	snap := Deployment{Source: rev.Source, SourceRevisionConfig: rev.SourceRevisionConfig, Secrets: rev.Secrets,
		SourceConfig: SourceConfig{ResourceSpec: rev.ResourceSpec, InstallCommand: rev.InstallCommand, BuildCommand: rev.BuildCommand}}
	si := sourceIndex(d.Source)
	for i := range rules {
		if r := &rules[i]; r.patch[si] == PatchRevision {
			r.set(d, &snap)
		}
	}
	d.SourceRevisionConfig.RepoCommitSHA = snap.SourceRevisionConfig.RepoCommitSHA
}
