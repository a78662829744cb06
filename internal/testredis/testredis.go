// Package testredis starts a real redis-server (Debian's package) for a
// test: on a free loopback port, from a temporary directory, with a
// random password, stopped by its PID when the test ends. Without the
// binary the test skips and says why.
package testredis

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a redis-server started by Start.
type Server struct {
	// Addr is its host:port on 127.0.0.1.
	Addr string
	// Password is the default user's password (requirepass).
	Password string
	// ACLFile is the server's ACL file, when StartACLFile started it.
	ACLFile string
	argv    []string
	cmd     *exec.Cmd
	done    chan struct{}
}

// Start starts redis-server with the given number of databases (its
// "databases" setting), no persistence, a random password for the
// default user (requirepass: no client gets in without it), and args
// (further options, e.g. "--maxmemory", "64mb"), and waits until it answers
// PING. It skips the test when redis-server is not installed.
func Start(t testing.TB, databases int, args ...string) *Server {
	t.Helper()
	b := make([]byte, 16)
	rand.Read(b)
	return start(t, databases, hex.EncodeToString(b), args...)
}

// StartACLFile is Start with the server's users kept in an ACL file (the
// aclfile setting; ACL SAVE writes it, a start reads it) in a temporary
// directory, which holds the default user and its password at first.
func StartACLFile(t testing.TB, databases int) *Server {
	t.Helper()
	b := make([]byte, 16)
	rand.Read(b)
	password := hex.EncodeToString(b)
	sum := sha256.Sum256([]byte(password))
	path := filepath.Join(t.TempDir(), "users.acl")
	if err := os.WriteFile(path, []byte("user default on #"+hex.EncodeToString(sum[:])+" ~* &* +@all\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := start(t, databases, password, "--aclfile", path)
	s.ACLFile = path
	return s
}

func start(t testing.TB, databases int, password string, args ...string) *Server {
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
		argv := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", t.TempDir(),
			"--save", "", "--appendonly", "no", "--databases", strconv.Itoa(databases), "--daemonize", "no", "--logfile", "",
			"--requirepass", password}, args...)
		s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Password: password, argv: append([]string{bin}, argv...)}
		s.run(t)
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

// run starts the server's process.
func (s *Server) run(t testing.TB) {
	t.Helper()
	cmd := exec.Command(s.argv[0], s.argv[1:]...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	s.cmd, s.done = cmd, done
}

// Restart stops the server and starts it again on the same address with
// the same settings: its keys are gone (no persistence), the users of its
// ACL file (StartACLFile) are read back.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	s.run(t)
	if !s.waitUp(t) {
		t.Fatalf("redis-server did not start again on %s", s.Addr)
	}
}

// URL is the server's redis:// URL, with the default user's password.
func (s *Server) URL() string {
	return (&url.URL{Scheme: "redis", User: url.UserPassword("", s.Password), Host: s.Addr}).String()
}

// Client is a client of database n as the default user, closed when the
// test ends.
func (s *Server) Client(t testing.TB, n int) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, Password: s.Password, DB: n, DisableIdentity: true})
	t.Cleanup(func() { c.Close() })
	return c
}

// waitUp waits until the server answers PING (true) or exits (false).
func (s *Server) waitUp(t testing.TB) bool {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, Password: s.Password, DisableIdentity: true, MaxRetries: -1})
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
