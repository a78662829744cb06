package agent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strconv"
	"syscall"
	"time"
)

// backoffPolicy is the agent's capped exponential backoff: the first wait
// is min, each next one twice the last, at most max, each with jitter (a
// wait of d is drawn from [d/2, d]).
type backoffPolicy struct{ min, max time.Duration }

func newBackoffPolicy(o *Options) backoffPolicy {
	p := backoffPolicy{min: o.MinBackoff, max: o.MaxBackoff}
	if p.min <= 0 {
		p.min = DefaultMinBackoff
	}
	if p.max <= 0 {
		p.max = DefaultMaxBackoff
	}
	p.max = max(p.max, p.min)
	return p
}

// start returns a backoff at its first wait.
func (p backoffPolicy) start() *backoff { return &backoff{p: p} }

// backoff is the state of one series of tries.
type backoff struct {
	p   backoffPolicy
	cur time.Duration // the last wait before jitter; 0 before the first
}

// next is the wait before the next try, never shorter than at (a
// Retry-After).
func (b *backoff) next(at time.Duration) time.Duration {
	if b.cur == 0 {
		b.cur = b.p.min
	} else {
		b.cur = min(2*b.cur, b.p.max)
	}
	d := b.cur/2 + rand.N(b.cur/2+1)
	return max(d, min(at, b.p.max))
}

// reset starts the series again at the first wait.
func (b *backoff) reset() { b.cur = 0 }

// sleep waits d, or until ctx ends (false). Its timer is the runtime's,
// which testing/synctest fakes.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// trouble logs a series of failures of one kind of call once per distinct
// failure, not once per try, and once when the calls succeed again.
type trouble struct {
	log  *slog.Logger
	what string // the calls, for the log: "claiming work", ...
	last string // the kind of the last failure logged; "" when none
}

// failed logs err unless its kind is the failure logged last.
func (t *trouble) failed(err error, attrs ...any) {
	if k := failureKind(err); k != t.last {
		t.last = k
		t.log.Warn("agent: "+t.what+" failed; trying again with backoff", append(attrs, "err", err.Error())...)
	}
}

// failureKind names what went wrong, without what differs between tries
// of the same failure (a connection's local port, a request id): an
// answer's status, or how the control plane could not be reached.
func failureKind(err error) string {
	var se *statusError
	if errors.As(err, &se) {
		return "status " + strconv.Itoa(se.status)
	}
	var ne *netError
	if !errors.As(err, &ne) {
		return err.Error()
	}
	var errno syscall.Errno
	var dns *net.DNSError
	var timeout interface{ Timeout() bool }
	switch {
	case errors.As(err, &errno):
		return errno.Error()
	case errors.As(err, &dns):
		return "dns " + dns.Name
	case errors.As(err, &timeout) && timeout.Timeout():
		return "timeout"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed"
	}
	return "unreachable"
}

// ok logs, after failures, that the calls succeed again.
func (t *trouble) ok(attrs ...any) {
	if t.last != "" {
		t.last = ""
		t.log.Info("agent: "+t.what+" works again", attrs...)
	}
}
