package deploydb

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// checkTimeout bounds one readiness check (a connection and one command).
const checkTimeout = 5 * time.Second

// PingPostgres connects to the PostgreSQL server at uri (a postgres://
// URL, as DATABASE_URI) and runs SELECT 1: the server is up, accepts the
// URL's role and password, and serves its database. A server still
// starting answers an error (the database system is starting up).
func PingPostgres(ctx context.Context, uri string) error {
	cfg, err := pgx.ParseConfig(uri)
	if err != nil {
		return fmt.Errorf("parsing the database URI: %w", err) // pgconn redacts the password
	}
	cfg.ConnectTimeout = checkTimeout
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		return err
	}
	if one != 1 {
		return fmt.Errorf("SELECT 1 answered %d", one)
	}
	return nil
}

// PingRedis connects to the Redis server at uri (a redis:// URL, as
// REDIS_URI, whose path names the database number) and sends PING,
// which must answer PONG: the server is up, accepts the URL's
// credentials, and has the database (SELECT n succeeded on connect).
func PingRedis(ctx context.Context, uri string) error {
	o, err := redis.ParseURL(uri)
	if err != nil {
		return fmt.Errorf("parsing the Redis URI: %w", err)
	}
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout = checkTimeout, checkTimeout, checkTimeout
	o.DisableIdentity = true // no CLIENT SETINFO: PING is the whole check
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	c, closeC, err := dialRedis(ctx, o)
	if err != nil {
		return err
	}
	defer closeC()
	got, err := c.Ping(ctx).Result()
	if err != nil {
		return err
	}
	if got != "PONG" {
		return fmt.Errorf("PING answered %q", got)
	}
	return nil
}

// dialRedis dials the Redis server of o once and answers a client of that
// one connection, which tries each command once (the caller's loop
// retries), and the function that closes both. It dials itself: a server
// that is not listening (yet, or any more) is the common case while it
// starts, and the client's own dialer would log each failure on the
// process's stderr.
func dialRedis(ctx context.Context, o *redis.Options) (*redis.Client, func(), error) {
	conn, err := (&net.Dialer{Timeout: o.DialTimeout}).DialContext(ctx, o.Network, o.Addr)
	if err != nil {
		return nil, nil, err
	}
	oc := *o
	oc.MaxRetries = -1
	oc.PoolSize = 1
	var handed atomic.Bool
	oc.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if handed.Swap(true) {
			return nil, errors.New("deploydb: this Redis client has one connection")
		}
		if oc.TLSConfig != nil {
			return tls.Client(conn, oc.TLSConfig), nil
		}
		return conn, nil
	}
	oc.DialerRetries = 1
	c := redis.NewClient(&oc)
	return c, func() {
		c.Close()
		if !handed.Load() {
			conn.Close()
		}
	}, nil
}

// Check is one readiness check, named for the log and the error.
type Check struct {
	// What is checked, e.g. "the deployment's database at 127.0.0.1:5432".
	What string
	// Check answers nil once the service is ready.
	Check func(ctx context.Context) error
}

// Wait runs each check until it answers nil, in order. A check that
// fails is tried again soon at first and then less often: after 5 ms, or
// an eighth of the time it has waited so far when that is longer, and at
// most after interval (so a server that comes up is found within an
// eighth of its start-up time, or interval). log (may be nil) gets a line
// when a check starts waiting, when what it answers changes, at most
// every progressEvery while it keeps failing the same way, and when it
// passes. When ctx is done first, Wait returns an error naming the check
// and its last answer; a check whose error is Permanent returns at once.
func Wait(ctx context.Context, interval time.Duration, log func(string), checks ...Check) error {
	if log == nil {
		log = func(string) {}
	}
	if interval <= 0 {
		interval = DefaultInterval
	}
	for _, c := range checks {
		if err := wait(ctx, interval, log, c); err != nil {
			return err
		}
	}
	return nil
}

// firstRetry is the shortest wait after a failed check in Wait: a
// server that is not listening yet usually is a few milliseconds later,
// and a fixed interval would keep the deploy waiting for the rest of it.
// The wait grows with the time waited so far (by retryShare of it), so a
// slow start is not asked every few milliseconds.
const (
	firstRetry = 5 * time.Millisecond
	retryShare = 8
)

// progressEvery is how often a check that keeps failing the same way is
// logged again.
const progressEvery = 10 * time.Second

func wait(ctx context.Context, interval time.Duration, log func(string), c Check) error {
	start := time.Now()
	var last string
	var lastLogged time.Time
	for tries := 1; ; tries++ {
		err := c.Check(ctx)
		if err == nil {
			if tries > 1 {
				log(fmt.Sprintf("%s answers (after %s)", c.What, time.Since(start).Round(time.Millisecond)))
			} else {
				log(c.What + " answers")
			}
			return nil
		}
		if errors.Is(err, ErrPermanent) {
			return fmt.Errorf("%s: %w", c.What, err)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s did not answer: %v", c.What, err)
		}
		if msg := err.Error(); msg != last || time.Since(lastLogged) >= progressEvery {
			log(fmt.Sprintf("waiting for %s (%s): %s", c.What, time.Since(start).Round(time.Second), msg))
			last, lastLogged = msg, time.Now()
		}
		t := time.NewTimer(min(interval, max(firstRetry, time.Since(start)/retryShare)))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%s did not answer: %v", c.What, err)
		case <-t.C:
		}
	}
}

// ErrPermanent marks an error that waiting does not cure (a missing
// privilege, a deployment id that makes no name): errors.Is(err,
// ErrPermanent) holds for it, and Wait and Ensure return it at once.
var ErrPermanent = errors.New("deploydb: permanent error")

// Permanent marks err as one that waiting does not cure (see
// ErrPermanent); its text is err's.
func Permanent(err error) error { return permanentError{err} }

type permanentError struct{ err error }

func (e permanentError) Error() string        { return e.err.Error() }
func (e permanentError) Unwrap() error        { return e.err }
func (e permanentError) Is(target error) bool { return target == ErrPermanent }
