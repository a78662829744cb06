package deploydocker_test

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploydocker"
	"github.com/deployplane/deployplane/internal/benchcmp"
)

// BenchmarkCreateToDeployed: the time from CreateDeployment to DEPLOYED
// (the image already on the daemon; the pull still asks the registry for
// the manifest), against the bare Docker calls a deploy of one container
// needs: create (the same container: name, labels, restart policy, port
// chosen in the timed part), start, and an inspect and GET /ok every 5 ms
// until it answers 200. The Deployer runs with its default options (its
// own health-check interval), as a server does. The two alternate within
// the run; the metrics are ms/deploy (through the control plane),
// baseline-ms (bare calls), x-baseline (bare time over control-plane
// time) and pull-ms (a bare pull of the image, which every deploy makes
// and the baseline leaves out: timed apart, in the same run). Cleanup is
// not timed.
//
//	DEPLOYPLANE_TEST_DOCKER=unix:///... go test -run '^$' -bench CreateToDeployed -benchtime 10x -count 3 ./deploydocker/
func BenchmarkCreateToDeployed(b *testing.B) {
	f := newFixture(b, func(o *deploydocker.Options) { o.HealthInterval = 0 }) // the default
	ctx := context.Background()
	img := image("server:v1")
	pull, err := f.cli.ImagePull(ctx, img, client.ImagePullOptions{})
	if err != nil {
		b.Fatal(err)
	}
	if err := pull.Wait(ctx); err != nil {
		b.Fatal(err)
	}
	hc := &http.Client{Timeout: 5 * time.Second}

	bare := func() time.Duration {
		start := time.Now()
		port := freePort(b)
		res, err := f.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
			Name: uniq("bare"),
			Config: &container.Config{Image: img, Env: []string{"PORT=" + strconv.Itoa(port)},
				Labels: map[string]string{deploydocker.LabelInstance: f.instance, deploydocker.LabelPort: strconv.Itoa(port)}},
			HostConfig: &container.HostConfig{NetworkMode: "host",
				RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyUnlessStopped}},
		})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.cli.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
			b.Fatal(err)
		}
		for {
			if _, err := f.cli.ContainerInspect(ctx, res.ID, client.ContainerInspectOptions{}); err != nil {
				b.Fatal(err)
			}
			if resp, err := hc.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/ok"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
		took := time.Since(start)
		f.cli.ContainerRemove(ctx, res.ID, client.ContainerRemoveOptions{Force: true})
		return took
	}
	viaCP := func() time.Duration {
		start := time.Now()
		d := f.create(uniq("bench"), img, nil)
		for {
			rev, err := f.cp.GetRevision(ctx, tenant, d.ID, *d.LatestRevisionID)
			if err != nil {
				b.Fatal(err)
			}
			if rev.Status == controlplane.RevisionDeployed {
				break
			}
			if controlplane.IsTerminal(rev.Status) {
				b.Fatalf("%s: %s", rev.Status, deref(rev.StatusMessage))
			}
			time.Sleep(time.Millisecond)
		}
		took := time.Since(start)
		if err := f.cp.DeleteDeployment(ctx, tenant, d.ID); err != nil {
			b.Fatal(err)
		}
		for {
			if _, err := f.cp.GetDeployment(ctx, tenant, d.ID); isNotFound(err) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		return took
	}
	pullOnce := func() time.Duration {
		start := time.Now()
		pull, err := f.cli.ImagePull(ctx, img, client.ImagePullOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if err := pull.Wait(ctx); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	bare() // warm both paths up
	viaCP()
	var tb, tc, tp time.Duration
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			tb += bare()
			tc += viaCP()
		} else {
			tc += viaCP()
			tb += bare()
		}
		tp += pullOnce()
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(tc.Microseconds())/1000/n, "ms/deploy")
	b.ReportMetric(float64(tb.Microseconds())/1000/n, "baseline-ms")
	b.ReportMetric(float64(tb)/float64(tc), benchcmp.Unit)
	b.ReportMetric(float64(tp.Microseconds())/1000/n, "pull-ms")
}

// freePort is a port nothing listens on now.
func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
