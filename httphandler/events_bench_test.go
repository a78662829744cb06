package httphandler_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/internal/benchcmp"
	"github.com/deployplane/deployplane/storemem"
)

// benchSubscribers is how many clients follow the stream in
// BenchmarkEventFanout.
const benchSubscribers = 100

// BenchmarkEventFanout: events delivered to 100 clients of GET /v2/events
// over loopback HTTP, each event a PATCH of a deployment committed through
// the ControlPlane (storemem) and read back from the event log by each
// stream, against a bare fan-out of the same bytes: a plain handler per
// client that writes, in the same text/event-stream format, what one
// producer sends to 100 channels. One op is one event delivered to all 100
// clients; events/s counts deliveries (100 per op).
func BenchmarkEventFanout(b *testing.B) {
	cp := controlplane.New(storemem.New(), nil)
	ctx := context.Background()
	d, err := cp.CreateDeployment(ctx, tenantA, &controlplane.CreateDeploymentRequest{Name: new("agent"),
		Source: new(controlplane.SourceExternalDocker), SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("r/a:1")}})
	if err != nil {
		b.Fatal(err)
	}
	// The bare fan-out sends the data of an event like the API's.
	data, err := json.Marshal(map[string]any{"change": "updated", "deployment_id": d.ID, "deployment": d})
	if err != nil {
		b.Fatal(err)
	}
	seq := 0
	benchcmp.CompareNamed(b, "bare-fanout", func(b *testing.B) {
		var mu sync.Mutex
		var subs []chan []byte
		connected := make(chan struct{}, benchSubscribers)
		srv, client := benchServer(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ch := make(chan []byte, 1024)
			mu.Lock()
			subs = append(subs, ch)
			mu.Unlock()
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			connected <- struct{}{}
			var buf bytes.Buffer
			for {
				select {
				case e := <-ch:
					buf.Reset()
					buf.Write(e)
					for more := true; more; { // what is waiting goes in one write, as the API's batches
						select {
						case e := <-ch:
							buf.Write(e)
						default:
							more = false
						}
					}
					if _, err := w.Write(buf.Bytes()); err != nil {
						return
					}
					w.(http.Flusher).Flush()
				case <-r.Context().Done():
					return
				}
			}
		}))
		done := subscribe(b, client, srv.URL+"/v2/events", b.N)
		for range benchSubscribers {
			<-connected
		}
		b.ResetTimer()
		for i := range b.N {
			var buf bytes.Buffer
			fmt.Fprintf(&buf, "event: deployment\nid: %d\ndata: %s\n\n", i+1, data)
			for _, ch := range subs {
				ch <- buf.Bytes()
			}
		}
		done.Wait()
		b.StopTimer()
		b.ReportMetric(float64(benchSubscribers*b.N)/b.Elapsed().Seconds(), "events/s")
	}, "event-stream", func(b *testing.B) {
		api := httphandler.New(cp, &httphandler.Options{Authenticator: keyTable(b), Load: &httphandler.LoadLimits{MaxLongPolls: -1}})
		srv, client := benchServer(b, api)
		b.Cleanup(func() { _ = api.Close() }) // runs before the server's Close: the streams end
		done := subscribe(b, client, srv.URL+"/v2/events", b.N)
		b.ResetTimer()
		for range b.N {
			seq++
			if _, err := cp.UpdateDeployment(ctx, tenantA, d.ID, &controlplane.UpdateDeploymentRequest{
				SourceConfig: &controlplane.SourceConfig{CustomURL: new("https://" + strconv.Itoa(seq) + ".example")}}); err != nil {
				b.Fatal(err)
			}
		}
		done.Wait()
		b.StopTimer()
		b.ReportMetric(float64(benchSubscribers*b.N)/b.Elapsed().Seconds(), "events/s")
	})
}

// subscribe connects benchSubscribers clients to url and returns once
// every one has its answer's headers; each reads until it has seen n
// events, then marks itself done on the returned WaitGroup.
func subscribe(b *testing.B, client *http.Client, url string, n int) *sync.WaitGroup {
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	var wg sync.WaitGroup
	ready := make(chan error, benchSubscribers)
	for range benchSubscribers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
			req.Header.Set("X-Api-Key", keyA)
			resp, err := client.Do(req)
			if err == nil && resp.StatusCode != 200 {
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
			ready <- err
			if err != nil {
				return
			}
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for seen := 0; seen < n && sc.Scan(); {
				if bytes.HasPrefix(sc.Bytes(), []byte("id: ")) {
					seen++
				}
			}
		}()
	}
	timeout := time.After(time.Minute)
	for range benchSubscribers {
		select {
		case err := <-ready:
			if err != nil {
				b.Fatal(err)
			}
		case <-timeout:
			b.Fatal("the subscribers did not connect")
		}
	}
	return &wg
}
