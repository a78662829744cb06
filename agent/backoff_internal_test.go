package agent

import (
	"testing"
	"time"
)

// The waits double from the first, stop growing at the cap, each drawn
// from [d/2, d] around its step; a Retry-After lengthens a wait up to the
// cap; reset starts again.
func TestBackoffSteps(t *testing.T) {
	p := newBackoffPolicy(&Options{MinBackoff: time.Second, MaxBackoff: 10 * time.Second})
	for range 100 {
		b := p.start()
		for i, step := range []time.Duration{1, 2, 4, 8, 10, 10, 10} {
			step *= time.Second
			if d := b.next(0); d < step/2 || d > step {
				t.Fatalf("wait %d: %s, want within [%s, %s]", i, d, step/2, step)
			}
		}
		b.reset()
		if d := b.next(0); d < time.Second/2 || d > time.Second {
			t.Fatalf("after reset: %s", d)
		}
		if d := b.next(7 * time.Second); d < 7*time.Second || d > 7*time.Second {
			t.Fatalf("Retry-After 7s at the second step: %s", d)
		}
		if d := b.next(time.Hour); d != 10*time.Second {
			t.Fatalf("Retry-After beyond the cap: %s, want the cap", d)
		}
	}
	if p := newBackoffPolicy(&Options{}); p.min != DefaultMinBackoff || p.max != DefaultMaxBackoff {
		t.Errorf("defaults: %+v", p)
	}
	if p := newBackoffPolicy(&Options{MinBackoff: time.Minute, MaxBackoff: time.Second}); p.max != time.Minute {
		t.Errorf("a cap below the first wait: %+v", p)
	}
}
