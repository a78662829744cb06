package controlplane

// This file exports the mutation hook (mutation.go) to the package's
// external tests only: it is compiled into this package's test binary and
// nowhere else.

// Mutation is a deliberate defect of the rules, for mutation tests.
type Mutation = mutation

// The defects the mutation tests check the state machine against.
const (
	MutationSpecInPlace        = mutSpecInPlace
	MutationTagNeedsV          = mutTagNeedsV
	MutationBuildOnPushTag     = mutBuildOnPushTag
	MutationTypeMutable        = mutTypeMutable
	MutationCustomURLSettable  = mutCustomURLSettable
	MutationRevisionSourceAny  = mutRevisionSourceAny
	MutationSourcelessRevision = mutSourcelessRevision
)

// WithMutation returns a copy of o (nil means defaults) with which New
// builds a ControlPlane that has defect m.
func WithMutation(o *Options, m Mutation) *Options {
	var c Options
	if o != nil {
		c = *o
	}
	c.mutation = m
	return &c
}

// ColPending is the collection of pending work, one record per unit.
const ColPending = colPending

// SetShortNeedle makes lists of a needle of 1 or 2 bytes walk the newest
// summaries first when its gram lists are more than many, at most budget
// of them (list.go), until the test ends.
func SetShortNeedle(t interface{ Cleanup(func()) }, many, budget int) {
	oldMany, oldBudget := shortNeedleMany, shortNeedleBudget
	shortNeedleMany, shortNeedleBudget = many, budget
	t.Cleanup(func() { shortNeedleMany, shortNeedleBudget = oldMany, oldBudget })
}

// SetPlaceProbes makes a needle of 6 bytes or more check up to n
// candidate places one by one (grams.go), until the test ends.
func SetPlaceProbes(t interface{ Cleanup(func()) }, n int) {
	old := placeProbes
	placeProbes = n
	t.Cleanup(func() { placeProbes = old })
}
