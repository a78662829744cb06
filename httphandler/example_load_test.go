package httphandler_test

import (
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/storemem"
)

// A handler that sheds load beyond 64 requests in service and lets each
// API key send 2 requests at once, then one a second: the third request
// of a burst is a 429 saying when to come back.
func ExampleLoadLimits() {
	keys, _ := httphandler.NewKeyTable([]httphandler.Key{{
		SHA256:  httphandler.HashKey("the-key"),
		Tenants: []string{"0194c0de-0000-7000-8000-000000000001"},
	}})
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC) // a still clock, for the example's output
	h := httphandler.New(controlplane.New(storemem.New(), nil), &httphandler.Options{
		Authenticator: keys,
		Load: &httphandler.LoadLimits{
			MaxInFlight: 64,
			RateLimit:   &httphandler.RateLimit{PerSecond: 1, Burst: 2, Now: func() time.Time { return now }},
		},
	})
	for range 3 {
		req := httptest.NewRequest("GET", "/v2/deployments", nil)
		req.Header.Set("X-Api-Key", "the-key")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		fmt.Printf("%d RateLimit-Remaining=%s RateLimit-Reset=%s Retry-After=%s\n", rec.Code,
			rec.Header().Get("RateLimit-Remaining"), rec.Header().Get("RateLimit-Reset"), rec.Header().Get("Retry-After"))
	}
	// Output:
	// 200 RateLimit-Remaining=1 RateLimit-Reset=1 Retry-After=
	// 200 RateLimit-Remaining=0 RateLimit-Reset=2 Retry-After=
	// 429 RateLimit-Remaining=0 RateLimit-Reset=2 Retry-After=1
}
