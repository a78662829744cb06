// Package testclock is a settable clock for tests: pass its Now as the clock
// of the thing under test (controlplane.Options.Clock, oauthflow's Clock),
// and move time past a lease, a token's expiry or a flow's deadline with
// Advance instead of sleeping.
package testclock

import (
	"sync"
	"time"
)

// Clock is a settable clock. It is safe for concurrent use.
type Clock struct {
	mu   sync.Mutex
	now  time.Time
	tick time.Duration
}

// New returns a Clock at start. Each reading first moves it forward by
// tick: 0 keeps it still until Advance; a microsecond keeps every
// timestamp the code under test takes distinct and increasing.
func New(start time.Time, tick time.Duration) *Clock {
	return &Clock{now: start, tick: tick}
}

// Now returns the clock's time, after moving it forward by its tick.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(c.tick)
	return c.now
}

// Advance moves the clock d forward (backward if d is negative).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
