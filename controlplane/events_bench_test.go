package controlplane_test

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"testing"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/internal/benchcmp"
	"github.com/deployplane/deployplane/storemem"
)

// BenchmarkFollowEvents: 100 followers of a tenant's event log
// (FollowEvents, Next) receive every change a producer commits (a PATCH
// over storemem), against the same commits whose wire JSON the producer
// encodes and hands to 100 channels itself: the cost of delivering through
// the store (each follower woken, reading the log, the data rendered once
// per process) instead of in memory. One op is one change delivered to all
// 100.
func BenchmarkFollowEvents(b *testing.B) {
	const followers = 100
	ctx := context.Background()
	setup := func(b *testing.B) (*controlplane.ControlPlane, *controlplane.Deployment, func() *controlplane.Deployment) {
		cp := controlplane.New(storemem.New(), nil)
		d := exampleDeployment(ctx, cp)
		seq := 0
		patch := func() *controlplane.Deployment {
			seq++
			out, err := cp.UpdateDeployment(ctx, exampleTenant, d.ID, &controlplane.UpdateDeploymentRequest{
				SourceConfig: &controlplane.SourceConfig{CustomURL: new("https://" + strconv.Itoa(seq) + ".example")}})
			if err != nil {
				b.Fatal(err)
			}
			return out
		}
		return cp, d, patch
	}
	benchcmp.CompareNamed(b, "channels", func(b *testing.B) {
		_, _, patch := setup(b)
		var wg sync.WaitGroup
		chans := make([]chan []byte, followers)
		for i := range chans {
			chans[i] = make(chan []byte, 1024)
			wg.Go(func() {
				for range b.N {
					<-chans[i]
				}
			})
		}
		b.ResetTimer()
		for range b.N {
			data, err := json.Marshal(map[string]any{"change": "updated", "deployment": patch()})
			if err != nil {
				b.Fatal(err)
			}
			for _, ch := range chans {
				ch <- data
			}
		}
		wg.Wait()
	}, "event-log", func(b *testing.B) {
		cp, _, patch := setup(b)
		var wg sync.WaitGroup
		for range followers {
			s, err := cp.FollowEvents(ctx, exampleTenant, nil)
			if err != nil {
				b.Fatal(err)
			}
			wg.Go(func() {
				for seen := 0; seen < b.N; {
					evs, err := s.Next(ctx)
					if err != nil {
						b.Error(err)
						return
					}
					seen += len(evs)
				}
			})
		}
		b.ResetTimer()
		for range b.N {
			patch()
		}
		wg.Wait()
	})
}
