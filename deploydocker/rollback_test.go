package deploydocker_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploydocker"
)

// A rollback while a client asks the url every 50 ms: no request fails,
// the url ends on the earlier image, and the rolled-back revision's
// containers are gone.
func TestRollbackWithoutGap(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	d := f.create(uniq("rollback"), image("server:v1"), nil)
	if first := f.wait(d.ID, *d.LatestRevisionID); first.Status != controlplane.RevisionDeployed {
		t.Fatalf("first revision %s: %s", first.Status, deref(first.StatusMessage))
	}
	img := image("server:v2")
	patched, err := f.cp.UpdateDeployment(ctx, tenant, d.ID, &controlplane.UpdateDeploymentRequest{
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: &img}})
	if err != nil {
		t.Fatal(err)
	}
	second := f.wait(d.ID, *patched.LatestRevisionID)
	if second.Status != controlplane.RevisionDeployed {
		t.Fatalf("second revision %s: %s", second.Status, deref(second.StatusMessage))
	}
	url := f.proxyURL + "/" + d.ID
	eventually(t, "url answers v2", func() bool { v, _ := get(url + "/version"); return v == "v2" })

	poll := pollVersions(url)
	back, err := f.cp.Rollback(ctx, tenant, d.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	rev := f.wait(d.ID, *back.LatestRevisionID)
	if rev.Status != controlplane.RevisionDeployed {
		t.Fatalf("the rollback's revision %s: %s", rev.Status, deref(rev.StatusMessage))
	}
	eventually(t, "the rolled-back revision's containers are removed", func() bool {
		return len(f.containers(deploydocker.LabelRevision+"="+second.ID)) == 0
	})
	eventually(t, "the client sees v1 a few times", func() bool { return poll.saw("v1") >= 3 })
	seen, failures := poll.end()
	if len(failures) > 0 {
		t.Errorf("%d requests failed during the rollback, first: %s", len(failures), failures[0])
	}
	if seen["v2"] == 0 {
		t.Errorf("the client never saw v2 (seen %v): the switch was not observed", seen)
	}
	got, _ := f.cp.GetDeployment(ctx, tenant, d.ID)
	if deref(got.ActiveRevisionID) != rev.ID || deref(got.ImageVersion) != image("server:v1") {
		t.Errorf("active %v image %v, want the rollback's revision on v1", deref(got.ActiveRevisionID), deref(got.ImageVersion))
	}
}

// versionPoller asks a url's /version every 50 ms until stopped, counting
// the versions seen and the requests that failed.
type versionPoller struct {
	mu       sync.Mutex
	failures []string
	seen     map[string]int
	stop     atomic.Bool
	wg       sync.WaitGroup
}

// pollVersions starts a versionPoller on url.
func pollVersions(url string) *versionPoller {
	p := &versionPoller{seen: map[string]int{}}
	p.wg.Go(func() {
		for !p.stop.Load() {
			v, err := get(url + "/version")
			p.mu.Lock()
			if err != nil {
				p.failures = append(p.failures, err.Error())
			} else {
				p.seen[v]++
			}
			p.mu.Unlock()
			time.Sleep(50 * time.Millisecond) // the client's pace, not a wait for a condition
		}
	})
	return p
}

// saw is how many times the poller has seen version v.
func (p *versionPoller) saw(v string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen[v]
}

// end stops the poller and returns what it saw and the failures.
func (p *versionPoller) end() (map[string]int, []string) {
	p.stop.Store(true)
	p.wg.Wait()
	return p.seen, p.failures
}
