// Package testredis starts a real redis-server (Debian's package) for a
// test: on a free loopback port, from a temporary directory, stopped by
// its PID when the test ends. Without the binary the test skips and says
// why.
package testredis

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a redis-server started by Start.
type Server struct {
	// Addr is its host:port on 127.0.0.1.
	Addr string
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts redis-server with the given number of databases (its
// "databases" setting), no persistence, and no password, and waits until
// it answers PING. It skips the test when redis-server is not installed.
func Start(t testing.TB, databases int) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed (apt-get install redis-server; .ci/run does): this test needs a real Redis")
	}
	for attempt := 0; ; attempt++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", t.TempDir(),
			"--save", "", "--appendonly", "no", "--databases", strconv.Itoa(databases), "--daemonize", "no", "--logfile", "")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, done: make(chan struct{})}
		go func() { cmd.Wait(); close(s.done) }()
		t.Cleanup(s.Stop)
		if s.waitUp(t) {
			return s
		}
		if attempt == 3 {
			t.Fatal("redis-server did not start (4 attempts)")
		}
		// Another process took the port in the meantime: try another.
	}
}

// URL is the server's redis:// URL.
func (s *Server) URL() string { return "redis://" + s.Addr }

// Client is a client of database n, closed when the test ends.
func (s *Server) Client(t testing.TB, n int) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, DB: n, DisableIdentity: true})
	t.Cleanup(func() { c.Close() })
	return c
}

// waitUp waits until the server answers PING (true) or exits (false).
func (s *Server) waitUp(t testing.TB) bool {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, DisableIdentity: true, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(time.Minute) // generous: fails only on a real hang
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return true
		}
		select {
		case <-s.done:
			return false
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s does not answer after a minute: %v", s.Addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server (by the PID Start started) and waits for it to
// exit. It is idempotent.
func (s *Server) Stop() {
	select {
	case <-s.done:
	default:
		s.cmd.Process.Kill()
		<-s.done
	}
}
