package controlplane_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deployplane/deployplane/controlplane"
)

// unhealthy records the reports WatchHealth makes.
type unhealthy struct{ reasons []string }

func (u *unhealthy) ReportUnhealthy(_ context.Context, _, _, _, reason string) error {
	u.reasons = append(u.reasons, reason)
	return nil
}

// WatchHealth reports a revision once after the given number of failed
// looks in a row (a good look starts the count again), and not at all
// when the window ends first or the revision stops serving.
func TestWatchHealth(t *testing.T) {
	w := &controlplane.Work{Tenant: "t", HealthWatchSeconds: 60}
	for _, tt := range []struct {
		name    string
		looks   string // per look: o ok, x failing, e ended
		reports int
	}{
		{"three failures in a row", "oxxx", 1},
		{"a good look in between", "xxoxxoxxo", 0},
		{"the revision no longer serves", "xxe", 0},
		{"never failing", "oooo", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				u := &unhealthy{}
				n := 0
				look := func(context.Context) (string, bool) {
					if n >= len(tt.looks) {
						return "", true
					}
					c := tt.looks[n]
					n++
					switch c {
					case 'x':
						return "GET /ok answered 503", true
					case 'e':
						return "", false
					}
					return "", true
				}
				start := time.Now()
				if err := controlplane.WatchHealth(context.Background(), w, 5*time.Second, 3, look, u); err != nil {
					t.Fatal(err)
				}
				if len(u.reasons) != tt.reports {
					t.Fatalf("%d reports (%v), want %d", len(u.reasons), u.reasons, tt.reports)
				}
				if tt.reports > 0 && !strings.Contains(u.reasons[0], "3 looks in a row") {
					t.Errorf("reason %q", u.reasons[0])
				}
				if tt.reports == 0 && tt.looks[len(tt.looks)-1] != 'e' && time.Since(start) != 60*time.Second {
					t.Errorf("the watch ended after %s, want the window, 60s", time.Since(start))
				}
			})
		})
	}
}
