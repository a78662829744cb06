package controlplane_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/deployplane/deployplane/controlplane"
)

// stepRecorder is a Reporter that records the steps it is sent and
// refuses the one whose status is refuse.
type stepRecorder struct {
	steps  []controlplane.Step
	refuse controlplane.RevisionStatus
}

var errRefused = errors.New("refused")

func (r *stepRecorder) Report(_ context.Context, s controlplane.Step) error {
	if s.Status == r.refuse {
		return errRefused
	}
	r.steps = append(r.steps, s)
	return nil
}

func (r *stepRecorder) Log(context.Context, ...controlplane.LogLine) error {
	return nil
}

// TestAdvance: the statuses after from up to to, CREATING never, the last
// with the given fields, and where it stopped on a refusal.
func TestAdvance(t *testing.T) {
	url := "http://agent"
	for _, tc := range []struct {
		src      controlplane.Source
		from, to controlplane.RevisionStatus
		refuse   controlplane.RevisionStatus
		want     []controlplane.RevisionStatus
		reached  controlplane.RevisionStatus
		err      error
	}{
		{controlplane.SourceGitHub, controlplane.RevisionCreating, controlplane.RevisionBuilding, "",
			[]controlplane.RevisionStatus{controlplane.RevisionQueued, controlplane.RevisionAwaitingBuild, controlplane.RevisionBuilding}, controlplane.RevisionBuilding, nil},
		{controlplane.SourceExternalDocker, controlplane.RevisionCreating, controlplane.RevisionDeployed, "",
			[]controlplane.RevisionStatus{controlplane.RevisionQueued, controlplane.RevisionAwaitingDeploy, controlplane.RevisionDeploying, controlplane.RevisionDeployed}, controlplane.RevisionDeployed, nil},
		{controlplane.SourceInternalSource, controlplane.RevisionBuilding, controlplane.RevisionDeploying, "",
			[]controlplane.RevisionStatus{controlplane.RevisionAwaitingDeploy, controlplane.RevisionDeploying}, controlplane.RevisionDeploying, nil},
		{controlplane.SourceInternalDocker, controlplane.RevisionUnknown, controlplane.RevisionQueued, "",
			[]controlplane.RevisionStatus{controlplane.RevisionQueued}, controlplane.RevisionQueued, nil},
		{controlplane.SourceGitHub, controlplane.RevisionDeploying, controlplane.RevisionQueued, "",
			nil, controlplane.RevisionDeploying, nil},
		{controlplane.SourceGitHub, controlplane.RevisionQueued, controlplane.RevisionDeployed, controlplane.RevisionBuilding,
			[]controlplane.RevisionStatus{controlplane.RevisionAwaitingBuild}, controlplane.RevisionAwaitingBuild, errRefused},
	} {
		r := &stepRecorder{refuse: tc.refuse}
		reached, err := controlplane.Advance(context.Background(), r, tc.src, tc.from, tc.to, controlplane.Step{URL: &url})
		var got []controlplane.RevisionStatus
		for _, s := range r.steps {
			got = append(got, s.Status)
		}
		if !slices.Equal(got, tc.want) || reached != tc.reached || !errors.Is(err, tc.err) || (err == nil) != (tc.err == nil) {
			t.Errorf("Advance(%s, %s -> %s): %v, reached %s, %v; want %v, %s, %v", tc.src, tc.from, tc.to, got, reached, err, tc.want, tc.reached, tc.err)
		}
		for i, s := range r.steps {
			if last := i == len(r.steps)-1 && tc.err == nil; (s.URL != nil) != last {
				t.Errorf("Advance(%s, %s -> %s): step %s carries the last step's fields: %v", tc.src, tc.from, tc.to, s.Status, s.URL != nil)
			}
		}
	}
}
