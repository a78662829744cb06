package controlplane

import (
	"strings"
	"testing"
)

// reachedEngine: a revision reached its engine when its status or a status
// of its history is BUILDING, DEPLOYING, DEPLOYED or UNKNOWN, or when its
// history is not a chain of legal transitions from CREATING (a record
// stored without a history answers CREATING and its status alone, which
// says nothing of what came between).
func TestReachedEngine(t *testing.T) {
	for _, tc := range []struct {
		src     Source
		history []RevisionStatus
		want    bool
	}{
		{SourceExternalDocker, []RevisionStatus{"CREATING"}, false},
		{SourceExternalDocker, []RevisionStatus{"CREATING", "QUEUED", "AWAITING_DEPLOY", "DEPLOY_FAILED"}, false},
		{SourceExternalDocker, []RevisionStatus{"CREATING", "QUEUED", "CREATE_FAILED"}, false},
		{SourceExternalDocker, []RevisionStatus{"CREATING", "SKIPPED"}, false},
		{SourceExternalDocker, []RevisionStatus{"CREATING", "QUEUED", "INTERRUPTED"}, false},
		{SourceGitHub, []RevisionStatus{"CREATING", "QUEUED", "AWAITING_BUILD", "BUILD_FAILED"}, false},
		{SourceGitHub, []RevisionStatus{"CREATING", "QUEUED", "AWAITING_BUILD", "BUILDING", "BUILD_FAILED"}, true},
		{SourceExternalDocker, []RevisionStatus{"CREATING", "QUEUED", "AWAITING_DEPLOY", "DEPLOYING", "DEPLOY_FAILED"}, true},
		{SourceExternalDocker, []RevisionStatus{"CREATING", "QUEUED", "AWAITING_DEPLOY", "DEPLOYING", "DEPLOYED"}, true},
		{SourceExternalDocker, []RevisionStatus{"CREATING", "UNKNOWN", "DEPLOY_FAILED"}, true},
		// Stored without a history (historyOf): nothing says it never got
		// to DEPLOYING.
		{SourceExternalDocker, []RevisionStatus{"CREATING", "DEPLOY_FAILED"}, true},
		{SourceGitHub, []RevisionStatus{"CREATING", "BUILD_FAILED"}, true},
		{SourceExternalDocker, nil, true},
	} {
		r := &revisionRecord{Revision: Revision{Source: tc.src}}
		for _, s := range tc.history {
			r.enter(s, r.UpdatedAt)
		}
		if len(tc.history) == 0 {
			r.Status = RevisionDeployFailed
		}
		if got := r.reachedEngine(); got != tc.want {
			t.Errorf("%s %v: reachedEngine %v, want %v", tc.src, tc.history, got, tc.want)
		}
	}
}

// teardownBackoff: 2 s, doubling, at most 5 min.
func TestTeardownBackoffSchedule(t *testing.T) {
	var got []string
	for n := 1; n <= 10; n++ {
		got = append(got, teardownBackoff(n).String())
	}
	want := "[2s 4s 8s 16s 32s 1m4s 2m8s 4m16s 5m0s 5m0s]"
	if s := "[" + strings.Join(got, " ") + "]"; s != want {
		t.Errorf("backoffs %s, want %s", s, want)
	}
}
