package testclock_test

import (
	"testing"
	"time"

	"github.com/deployplane/deployplane/internal/testclock"
)

func TestClock(t *testing.T) {
	start := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	still := testclock.New(start, 0)
	if got := still.Now(); !got.Equal(start) || !still.Now().Equal(start) {
		t.Errorf("a clock without a tick moved: %v", got)
	}
	still.Advance(time.Hour)
	if got := still.Now(); !got.Equal(start.Add(time.Hour)) {
		t.Errorf("after Advance(1h): %v, want %v", got, start.Add(time.Hour))
	}
	still.Advance(-30 * time.Minute)
	if got := still.Now(); !got.Equal(start.Add(30 * time.Minute)) {
		t.Errorf("after Advance(-30m): %v, want %v", got, start.Add(30*time.Minute))
	}
	ticking := testclock.New(start, time.Microsecond)
	a, b := ticking.Now(), ticking.Now()
	if !a.Equal(start.Add(time.Microsecond)) || !b.Equal(a.Add(time.Microsecond)) {
		t.Errorf("ticking readings %v, %v; want start+1µs, start+2µs", a, b)
	}
}
