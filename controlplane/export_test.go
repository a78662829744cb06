package controlplane

import (
	"strconv"
	"strings"

	"github.com/deployplane/deployplane/apierr"
)

// This file gives the package's external tests what they need of its
// internals: it is compiled into this package's test binary and nowhere
// else.

// Mutation names a deliberate defect of the rules, for the mutation tests
// (mutation_test.go): each builds a ControlPlane with one defect and checks
// that the state-machine test of package controlplanetest catches it.
type Mutation string

// The defects the mutation tests check the state machine against.
const (
	// MutationSpecInPlace: a PATCH of resource_spec changes it in place,
	// without a revision (it is revision-triggering).
	MutationSpecInPlace Mutation = "spec-in-place"
	// MutationTagNeedsV: a repo_ref is a tag only when it starts with
	// "refs/tags/v" (any "refs/tags/" ref is).
	MutationTagNeedsV Mutation = "tag-needs-v"
	// MutationBuildOnPushTag: build_on_push true with a tag repo_ref is
	// accepted.
	MutationBuildOnPushTag Mutation = "build-on-push-tag"
	// MutationTypeMutable: a PATCH of deployment_type changes it in place
	// (it is immutable).
	MutationTypeMutable Mutation = "type-mutable"
	// MutationCustomURLSettable: a github create may set custom_url (it is
	// read-only for github; the service's value still replaces it).
	MutationCustomURLSettable Mutation = "custom-url-settable"
	// MutationRevisionSourceAny: any revision_source is accepted (it must
	// be null or the deployment's source).
	MutationRevisionSourceAny Mutation = "revision-source-any"
	// MutationSourcelessRevision: a create of internal_source or
	// internal_docker without what a revision comes from makes one anyway
	// (it must make none).
	MutationSourcelessRevision Mutation = "sourceless-revision"
	// MutationPinIgnored: a pinned deployment's revision deploys (it must
	// wait before DEPLOYING until the pin is removed).
	MutationPinIgnored Mutation = "pin-ignored"
)

// mutations are the rule hooks (rules.go) that put each defect in.
var mutations = map[Mutation]ruleHooks{
	MutationPinIgnored: {pinHolds: func(bool) bool { return false }},
	MutationSpecInPlace: {patchPolicy: func(loc []string, p PatchPolicy) PatchPolicy {
		if loc[len(loc)-1] == "resource_spec" && p == PatchRevision {
			return PatchInPlace
		}
		return p
	}},
	MutationTagNeedsV: {isTagRef: func(ref *string) bool {
		return ref != nil && strings.HasPrefix(*ref, "refs/tags/v")
	}},
	// No ref is a tag: the rule never applies.
	MutationBuildOnPushTag: {isTagRef: func(*string) bool { return false }},
	MutationTypeMutable: {patchPolicy: func(loc []string, p PatchPolicy) PatchPolicy {
		if loc[len(loc)-1] == "deployment_type" && p == PatchImmutable {
			return PatchInPlace
		}
		return p
	}},
	MutationCustomURLSettable: {createPolicy: func(loc []string, p CreatePolicy) CreatePolicy {
		if loc[len(loc)-1] == "custom_url" && p == CreateReadOnly {
			return CreateOptional
		}
		return p
	}},
	MutationRevisionSourceAny: {revisionSourceProblem: func(_ Source, _ *Source, ps []apierr.Problem) []apierr.Problem {
		return ps
	}},
	MutationSourcelessRevision: {hasRevisionSource: func(*Deployment) bool { return true }},
}

// WithMutation returns a copy of o (nil means defaults) with which New
// builds a ControlPlane that has defect m. It panics for an unknown m.
func WithMutation(o *Options, m Mutation) *Options {
	h, ok := mutations[m]
	if !ok {
		panic("controlplane: unknown mutation " + strconv.Quote(string(m)))
	}
	var c Options
	if o != nil {
		c = *o
	}
	c.hooks = h
	return &c
}
