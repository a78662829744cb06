package deploydocker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/deployplane/deployplane/controlplane"
)

// Bounds of the log lines the Deployer writes to the control plane.
const (
	// logBatchLines and logBatchBytes: a batch of lines (a build's output,
	// a container's) is written in one store write when it reaches either.
	logBatchLines = 100
	logBatchBytes = 256 << 10
	// logFlushEvery: a batch that is not full is written after this long,
	// so that a log is followed live (langgraph-cli polls a build's log).
	logFlushEvery = time.Second
	// maxLogLine cuts one line of a container's output (the control
	// plane cuts at its own LogRetention.MaxLineBytes too).
	maxLogLine = controlplane.DefaultLogMaxLineBytes
	// logWriteTimeout bounds one write of log lines.
	logWriteTimeout = 30 * time.Second
)

// revLog is where the log lines of one revision go: the Reporter of the
// Deploy that drives it until the revision is DEPLOYED, then (and for a
// revision whose containers Reconcile adopted) Options.State.AppendLogs,
// which needs no lease. It is shared by the Deploy and by the followers
// of the revision's containers.
type revLog struct {
	d        *Deployer
	w        *controlplane.Work
	r        controlplane.Reporter // nil: adopted by Reconcile
	deployed atomic.Bool
	lost     atomic.Bool // the lease was lost: another worker drives the revision
	warned   atomic.Bool // writes fail: warned once, until one succeeds
}

// write writes lines in one store write; failures are logged (once per
// series of failures of the revision's writes, and once when a write
// succeeds again), not returned: a log that cannot be written must not
// fail a deploy. It reports whether the revision's logs are gone (the deployment
// was deleted), after which nothing more is worth writing.
func (l *revLog) write(ctx context.Context, lines []controlplane.LogLine) (gone bool) {
	if len(lines) == 0 {
		return false
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), logWriteTimeout)
	defer cancel()
	var err error
	switch {
	case (l.deployed.Load() || l.r == nil || l.lost.Load()) && l.d.o.State != nil:
		err = l.d.o.State.AppendLogs(wctx, l.w.Tenant, l.w.Deployment.ID, l.w.Revision.ID, lines...)
	case l.r != nil && !l.lost.Load():
		err = l.r.Log(wctx, lines...)
		if errors.Is(err, controlplane.ErrLeaseLost) {
			// Another worker drives the revision now and writes its own
			// steps; a container's output still belongs to the revision.
			l.lost.Store(true)
			if l.d.o.State != nil {
				err = l.d.o.State.AppendLogs(wctx, l.w.Tenant, l.w.Deployment.ID, l.w.Revision.ID, lines...)
			}
		}
	default:
		return false
	}
	if err == nil {
		if l.warned.Swap(false) {
			l.d.log.Info("deploydocker: writing the revision's log lines works again", "deployment", l.w.Deployment.ID,
				"revision", l.w.Revision.ID)
		}
		return false
	}
	if isNotFound(err) {
		return true
	}
	if !l.warned.Swap(true) {
		l.d.log.Warn("deploydocker: writing the revision's log lines", "deployment", l.w.Deployment.ID,
			"revision", l.w.Revision.ID, "lines", len(lines), "err", err)
	}
	return false
}

// revLogKey carries the revLog of a Deploy in its ctx, for logLine.
type revLogKey struct{}

// logLine is the one place the Deployer's own log lines go: the
// revision's deploy log (typ LogDeploy) or build log (LogBuild), at
// level, through the revLog that Deploy put in ctx, and Options.Logger.
// Lines are few (a step each), so each is one write, made before the
// report that follows it: a revision that ends has its log complete.
func (d *Deployer) logLine(ctx context.Context, w *controlplane.Work, typ controlplane.LogType, level controlplane.LogLevel, line string) {
	d.log.Log(ctx, slogLevel(level), "deploydocker: "+line, "tenant", w.Tenant, "deployment", w.Deployment.ID, "revision", w.Revision.ID)
	if rl, ok := ctx.Value(revLogKey{}).(*revLog); ok {
		rl.write(ctx, []controlplane.LogLine{{Type: typ, Level: level, Message: line, Time: time.Now()}})
	}
}

// logLines is logLine for several INFO lines of the deploy log, in one
// write.
func (d *Deployer) logLines(ctx context.Context, w *controlplane.Work, lines ...string) {
	now := time.Now()
	ll := make([]controlplane.LogLine, len(lines))
	for i, line := range lines {
		d.log.Log(ctx, slog.LevelInfo, "deploydocker: "+line, "tenant", w.Tenant, "deployment", w.Deployment.ID, "revision", w.Revision.ID)
		ll[i] = controlplane.LogLine{Type: controlplane.LogDeploy, Level: controlplane.LevelInfo, Message: line, Time: now}
	}
	if rl, ok := ctx.Value(revLogKey{}).(*revLog); ok {
		rl.write(ctx, ll)
	}
}

func slogLevel(l controlplane.LogLevel) slog.Level {
	switch l {
	case controlplane.LevelDebug:
		return slog.LevelDebug
	case controlplane.LevelWarning:
		return slog.LevelWarn
	case controlplane.LevelError, controlplane.LevelCritical:
		return slog.LevelError
	}
	return slog.LevelInfo
}

// batch collects log lines and writes them in batches: when logBatchLines
// lines or logBatchBytes bytes are waiting (in the caller of add), every
// logFlushEvery (tick), and on flush. Writes keep the order of add, and a
// batch is written before add returns when full, so memory is bounded and
// a slow store slows the producer instead of piling lines up.
type batch struct {
	mu    sync.Mutex
	lines []controlplane.LogLine
	bytes int
	write func(context.Context, []controlplane.LogLine) bool // true: stop (the logs are gone)
	gone  bool
}

func newBatch(write func(context.Context, []controlplane.LogLine) bool) *batch {
	return &batch{write: write}
}

// add queues a line, writing the batch when it is full.
func (b *batch) add(ctx context.Context, l controlplane.LogLine) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.gone {
		return
	}
	b.lines = append(b.lines, l)
	b.bytes += len(l.Message)
	if len(b.lines) >= logBatchLines || b.bytes >= logBatchBytes {
		b.flushLocked(ctx)
	}
}

// flush writes what is waiting.
func (b *batch) flush(ctx context.Context) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushLocked(ctx)
}

func (b *batch) flushLocked(ctx context.Context) {
	if len(b.lines) == 0 || b.gone {
		b.lines, b.bytes = b.lines[:0], 0
		return
	}
	b.gone = b.write(ctx, b.lines)
	b.lines, b.bytes = nil, 0
}

// isGone reports whether a write found the revision's logs gone.
func (b *batch) isGone() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.gone
}

// tick flushes the batch every logFlushEvery until the returned stop is
// called (or ctx is done).
func (b *batch) tick(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(logFlushEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				b.flush(ctx)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// lineWriter cuts a stream into lines for a batch: an io.Writer for
// stdcopy. A line longer than maxLogLine is cut there (the rest is
// dropped up to the line's end). With stamped, each line starts with the
// RFC 3339 timestamp Docker adds (ContainerLogsOptions.Timestamps), which
// becomes the line's time.
type lineWriter struct {
	ctx     context.Context
	b       *batch
	typ     controlplane.LogType
	level   controlplane.LogLevel // of lines that name none
	stamped bool
	buf     []byte
	cut     bool      // the current line was cut: skip to its end
	last    time.Time // the time of the last line
}

func (lw *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if !lw.cut {
			room := maxLogLine - len(lw.buf)
			if len(chunk) > room {
				lw.buf = append(lw.buf, chunk[:room]...)
				lw.cut = true
			} else {
				lw.buf = append(lw.buf, chunk...)
			}
		}
		if i < 0 {
			break
		}
		lw.emit()
		p = p[i+1:]
	}
	return n, nil
}

// end emits a last line that had no line break.
func (lw *lineWriter) end() {
	if len(lw.buf) > 0 || lw.cut {
		lw.emit()
	}
}

func (lw *lineWriter) emit() {
	msg := string(lw.buf)
	lw.buf, lw.cut = lw.buf[:0], false
	at := time.Now()
	if lw.stamped {
		if sp := strings.IndexByte(msg, ' '); sp > 0 {
			if t, err := time.Parse(time.RFC3339Nano, msg[:sp]); err == nil {
				at, msg = t, msg[sp+1:]
			}
		}
	}
	lw.last = at
	msg = strings.TrimRight(msg, "\r")
	lw.b.add(lw.ctx, controlplane.LogLine{Type: lw.typ, Time: at, Level: LevelOf(msg, lw.level), Message: msg})
}

// LevelOf is the level of a line of a container's output: the level the
// line names in its first words (DEBUG, INFO, WARN or WARNING, ERROR,
// CRITICAL or FATAL, in capitals, as Python's logging and most servers
// write it) or in a JSON "level", "levelname" or "severity" field, else
// def. Lines of a container's stdout default to INFO and of its stderr to
// ERROR, as Cloud Logging takes them.
func LevelOf(line string, def controlplane.LogLevel) controlplane.LogLevel {
	head := line
	if len(head) > 256 {
		head = head[:256]
	}
	if strings.HasPrefix(strings.TrimSpace(head), "{") {
		lower := strings.ToLower(head)
		for _, k := range []string{`"level":`, `"levelname":`, `"severity":`} {
			i := strings.Index(lower, k)
			if i < 0 {
				continue
			}
			v := strings.TrimLeft(lower[i+len(k):], ` "`)
			if j := strings.IndexAny(v, `",}`); j >= 0 {
				if l, ok := levelWord(strings.ToUpper(v[:j])); ok {
					return l
				}
			}
		}
		return def
	}
	words := strings.FieldsFunc(head, func(r rune) bool {
		return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z')
	})
	for i, w := range words {
		if i == 8 {
			break
		}
		if l, ok := levelWord(w); ok {
			return l
		}
	}
	return def
}

func levelWord(w string) (controlplane.LogLevel, bool) {
	switch w {
	case "DEBUG":
		return controlplane.LevelDebug, true
	case "INFO":
		return controlplane.LevelInfo, true
	case "WARN", "WARNING":
		return controlplane.LevelWarning, true
	case "ERROR":
		return controlplane.LevelError, true
	case "CRITICAL", "FATAL":
		return controlplane.LevelCritical, true
	}
	return "", false
}

// resumeFrom is where the output of a revision's adopted containers is
// followed from: the time of the last line of its deploy log (what an
// earlier run of the control plane wrote is there; lines it had read but
// not yet written when it died are read again if they are newer), or now
// without State.
func (d *Deployer) resumeFrom(ctx context.Context, w *controlplane.Work) time.Time {
	if d.o.State == nil {
		return time.Now()
	}
	page, err := d.o.State.ListLogs(ctx, w.Tenant, w.Deployment.ID, w.Revision.ID,
		&controlplane.LogQuery{Type: controlplane.LogDeploy, Order: "desc", Limit: new(1)})
	if err != nil {
		return time.Now()
	}
	if len(page.Logs) == 0 {
		return time.Time{}
	}
	return time.Time(page.Logs[0].Timestamp)
}

// followRetry is the wait before a container's logs are followed again
// after their stream ended while the container runs on (a restart).
const followRetry = time.Second

// follow copies a container's stdout and stderr into the revision's deploy
// log, from since (the zero time: from the container's start), until the
// container is removed or stops for good, the revision's logs are gone,
// or the Deployer is closed. A container is followed once at a time.
func (d *Deployer) follow(rl *revLog, c *ctr, since time.Time) {
	d.mu.Lock()
	if d.closed || d.following[c.id] {
		d.mu.Unlock()
		return
	}
	d.following[c.id] = true
	d.followers.Add(1)
	d.mu.Unlock()
	go func() {
		defer d.followers.Done()
		defer func() {
			d.mu.Lock()
			delete(d.following, c.id)
			d.mu.Unlock()
		}()
		d.followLogs(rl, c, since)
	}()
}

func (d *Deployer) followLogs(rl *revLog, c *ctr, since time.Time) {
	ctx := d.bg
	b := newBatch(func(ctx context.Context, lines []controlplane.LogLine) bool { return rl.write(ctx, lines) })
	stop := b.tick(ctx)
	defer func() {
		stop()
		b.flush(context.Background()) // write carries its own timeout
	}()
	out := &lineWriter{ctx: ctx, b: b, typ: controlplane.LogDeploy, level: controlplane.LevelInfo, stamped: true}
	errw := &lineWriter{ctx: ctx, b: b, typ: controlplane.LogDeploy, level: controlplane.LevelError, stamped: true}
	for {
		opts := client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Follow: true, Timestamps: true}
		if last := later(since, later(out.last, errw.last)); !last.IsZero() {
			next := last.Add(time.Nanosecond)
			opts.Since = fmt.Sprintf("%d.%09d", next.Unix(), next.Nanosecond())
		}
		rc, err := d.cli.ContainerLogs(ctx, c.id, opts)
		if err == nil {
			_, err = stdcopy.StdCopy(out, errw, rc)
			rc.Close()
			out.end()
			errw.end()
		}
		if ctx.Err() != nil || b.isGone() || cerrdefs.IsNotFound(err) {
			return
		}
		// The stream ended: the container stopped, restarts, or is gone.
		res, ierr := d.cli.ContainerInspect(ctx, c.id, client.ContainerInspectOptions{})
		if ierr != nil {
			if !cerrdefs.IsNotFound(ierr) && ctx.Err() == nil {
				d.log.Warn("deploydocker: following a container's logs", "container", c.name, "err", ierr)
			}
			return
		}
		if st := res.Container.State; st == nil || (!st.Running && !st.Restarting) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(followRetry):
		}
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
