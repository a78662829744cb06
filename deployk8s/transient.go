package deployk8s

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"time"

	k8serrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"

	"github.com/deployplane/deployplane/controlplane"
)

// Transient errors: the API server did not answer (connection refused or
// reset, a timeout, a connection lost), or answered that it cannot now
// (429, 500, 502, 503, 504). A rollout retries them with backoff; they
// never end a revision.

// Backoff between two tries after a transient error.
const (
	retryFirst = 250 * time.Millisecond
	retryMax   = 10 * time.Second
)

// isTransient: err says the API server could not answer now, not that it
// refused what was asked.
func isTransient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var st k8serrors.APIStatus
	if errors.As(err, &st) {
		switch st.Status().Code {
		case 429, 500, 502, 503, 504:
			return true
		}
		return k8serrors.IsServerTimeout(err) || k8serrors.IsTimeout(err) || k8serrors.IsTooManyRequests(err)
	}
	var op *net.OpError
	var ne net.Error
	switch {
	case errors.As(err, &op),
		errors.As(err, &ne) && ne.Timeout(),
		errors.Is(err, context.DeadlineExceeded), // the client's own request timeout
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		utilnet.IsConnectionRefused(err), utilnet.IsConnectionReset(err), utilnet.IsProbableEOF(err),
		utilnet.IsHTTP2ConnectionLost(err):
		return true
	}
	return false
}

// errUnreachable: the cluster did not answer for the whole rollout
// deadline. Deploy then returns with the revision as it is, to be called
// again later (the control plane's PollInterval): the revision waits for
// the cluster, it does not fail for it.
var errUnreachable = errors.New("deployk8s: the cluster did not answer")

// outage follows the transient errors of one rollout: how long the
// cluster has not answered, and the backoff.
type outage struct {
	since time.Time // zero: the cluster answers
	wait  time.Duration
}

// retry calls fn until it returns something other than a transient error,
// waiting between tries with exponential backoff (retryFirst to
// retryMax). The deploy log says when the cluster stops and starts
// answering. When it has not answered for Options.ProgressDeadline, retry
// returns errUnreachable.
func (x *run) retry(ctx context.Context, what string, fn func(context.Context) error) error {
	for {
		err := fn(ctx)
		if !isTransient(err) || ctx.Err() != nil {
			x.answered(ctx)
			return err
		}
		if err := x.unanswered(ctx, what, err); err != nil {
			return err
		}
	}
}

// unanswered records a transient error and waits before the next try; it
// returns errUnreachable after Options.ProgressDeadline without an
// answer, or ctx's error.
func (x *run) unanswered(ctx context.Context, what string, err error) error {
	if err := x.noAnswer(ctx, what, err, time.Now()); err != nil {
		return err
	}
	o := &x.outage
	t := time.NewTimer(o.wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	o.wait = min(2*o.wait, retryMax)
	return nil
}

// noAnswer records that the cluster has not answered since since (err
// the last error), saying so in the logs the first time; it returns
// errUnreachable once that is Options.ProgressDeadline ago.
func (x *run) noAnswer(ctx context.Context, what string, err error, since time.Time) error {
	o := &x.outage
	if o.since.IsZero() {
		o.since, o.wait = since, retryFirst
		// The deploy log is the tenant's: the cause, which names the
		// API server's address, goes to the server's log.
		x.d.log.Warn("deployk8s: the cluster did not answer; trying again", "cluster", x.d.o.Cluster,
			"deployment", x.w.Deployment.ID, "revision", x.w.Revision.ID, "while", what, "err", err)
		x.logf(ctx, controlplane.LevelWarning, "cluster %s did not answer while %s; trying again until it does", x.d.o.Cluster, what)
	}
	if time.Since(o.since) >= x.d.o.ProgressDeadline {
		x.d.log.Warn("deployk8s: the cluster has not answered for the progress deadline; the revision waits for it",
			"cluster", x.d.o.Cluster, "deployment", x.w.Deployment.ID, "revision", x.w.Revision.ID, "err", err)
		x.logf(ctx, controlplane.LevelWarning, "cluster %s has not answered for %s; the revision waits for it", x.d.o.Cluster,
			x.d.o.ProgressDeadline)
		return errUnreachable
	}
	return nil
}

// answered ends an outage: the cluster answered.
func (x *run) answered(ctx context.Context) {
	if !x.outage.since.IsZero() {
		x.logf(ctx, controlplane.LevelInfo, "cluster %s answers again after %s", x.d.o.Cluster, time.Since(x.outage.since).Round(time.Millisecond))
		x.outage = outage{}
	}
}
