package controlplane

import "strings"

// mutation names a deliberate defect of the rules, for the mutation tests
// only (mutation_test.go, through export_test.go): each test builds a
// ControlPlane with one defect and checks that the state-machine test of
// package controlplanetest catches it. It is set per ControlPlane through
// an unexported Options field that only this package's tests can reach;
// the zero value, the only one production code ever sees, is the correct
// control plane. Each defect is switched on at exactly one place.
type mutation string

const (
	mutNone mutation = ""
	// mutSpecInPlace: a PATCH of resource_spec changes it in place,
	// without a revision (it is revision-triggering).
	mutSpecInPlace mutation = "spec-in-place"
	// mutTagNeedsV: a repo_ref is a tag only when it starts with
	// "refs/tags/v" (any "refs/tags/" ref is).
	mutTagNeedsV mutation = "tag-needs-v"
	// mutBuildOnPushTag: build_on_push true with a tag repo_ref is
	// accepted.
	mutBuildOnPushTag mutation = "build-on-push-tag"
	// mutTypeMutable: a PATCH of deployment_type changes it in place (it
	// is immutable).
	mutTypeMutable mutation = "type-mutable"
	// mutCustomURLSettable: a github create may set custom_url (it is
	// read-only for github; the service's value still replaces it).
	mutCustomURLSettable mutation = "custom-url-settable"
	// mutRevisionSourceAny: any revision_source is accepted (it must be
	// null or the deployment's source).
	mutRevisionSourceAny mutation = "revision-source-any"
	// mutSourcelessRevision: a create of internal_source or
	// internal_docker without what a revision comes from makes one
	// anyway (it must make none).
	mutSourcelessRevision mutation = "sourceless-revision"
)

// createPolicy is p, the create policy of the field at loc, altered by m.
func (m mutation) createPolicy(loc []string, p CreatePolicy) CreatePolicy {
	if m == mutCustomURLSettable && loc[len(loc)-1] == "custom_url" && p == CreateReadOnly {
		return CreateOptional
	}
	return p
}

// patchPolicy is p, the PATCH policy of the field at loc, altered by m.
func (m mutation) patchPolicy(loc []string, p PatchPolicy) PatchPolicy {
	switch {
	case m == mutSpecInPlace && loc[len(loc)-1] == "resource_spec" && p == PatchRevision:
		return PatchInPlace
	case m == mutTypeMutable && loc[len(loc)-1] == "deployment_type" && p == PatchImmutable:
		return PatchInPlace
	}
	return p
}

// isTagRef is isTagRef as altered by m.
func (m mutation) isTagRef(ref *string) bool {
	if m == mutTagNeedsV {
		return ref != nil && strings.HasPrefix(*ref, "refs/tags/v")
	}
	return isTagRef(ref)
}
