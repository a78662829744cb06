package storepg_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storepg"
)

// How breakProxy breaks a connection at its next COMMIT.
const (
	loseNothing = iota
	// loseCommit closes the connection instead of forwarding the COMMIT:
	// the server aborts the transaction.
	loseCommit
	// loseAnswer forwards the COMMIT, swallows the server's answer and
	// closes the connection once the server has committed.
	loseAnswer
	// holdCommit closes the client's side instead of forwarding the
	// COMMIT but keeps the server's side open, so that the server counts
	// the transaction in progress until the backend is ended.
	holdCommit
	// loseAnswerAndServer is loseAnswer, after which the proxy refuses
	// every connection, so the Store cannot ask what became of the COMMIT.
	loseAnswerAndServer
)

// breakProxy forwards TCP connections to a PostgreSQL server, reading the
// client's messages, and can break the connection that sends the next
// COMMIT in one of the ways above. It speaks plaintext only.
type breakProxy struct {
	ln     net.Listener
	target string
	mode   atomic.Int32
	down   atomic.Bool // refuse every connection and message
	conns  sync.WaitGroup
	closed chan struct{} // closed when the test ends
}

func newBreakProxy(t *testing.T, target string) *breakProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &breakProxy{ln: ln, target: target, closed: make(chan struct{})}
	go p.serve()
	t.Cleanup(func() {
		close(p.closed)
		ln.Close()
		p.conns.Wait()
	})
	return p
}

func (p *breakProxy) serve() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.down.Load() {
			client.Close()
			continue
		}
		p.conns.Add(1)
		go func() {
			defer p.conns.Done()
			p.forward(client)
		}()
	}
}

// forward relays one connection until either side closes it or the proxy
// breaks it.
func (p *breakProxy) forward(client net.Conn) {
	defer client.Close()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer server.Close()
	var swallow atomic.Bool // drop what the server sends
	serverDone := make(chan struct{})
	swallowed := make(chan struct{}) // closed once the server answered while swallowing
	go func() {
		defer close(serverDone)
		buf := make([]byte, 32<<10)
		answered := false
		for {
			n, err := server.Read(buf)
			if n > 0 && swallow.Load() && !answered {
				answered = true
				close(swallowed)
			}
			if n > 0 && !swallow.Load() {
				if _, werr := client.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				client.Close()
				return
			}
		}
	}()

	// Untyped messages first: SSL or GSS encryption requests (answered 'N'
	// by the server, as the client asked for plaintext), then the startup
	// message.
	for {
		msg, err := readMessage(client, false)
		if err != nil || send(server, msg) != nil {
			return
		}
		code := binary.BigEndian.Uint32(msg[4:8])
		if code != 80877103 && code != 80877104 {
			break
		}
	}
	for {
		msg, err := readMessage(client, true)
		if err != nil || p.down.Load() {
			return
		}
		// A simple-protocol query (type 'Q') of COMMIT, as txn.commit
		// sends it.
		if msg[0] == 'Q' && strings.HasPrefix(string(msg[5:]), "COMMIT") {
			switch p.mode.Swap(loseNothing) {
			case loseCommit:
				return
			case holdCommit:
				client.Close()
				select { // until the server ends the connection
				case <-serverDone:
				case <-p.closed:
				}
				return
			case loseAnswerAndServer:
				p.down.Store(true)
				swallow.Store(true)
				send(server, msg)
				p.committed(swallowed, serverDone)
				return
			case loseAnswer:
				swallow.Store(true)
				send(server, msg)
				p.committed(swallowed, serverDone)
				return
			}
		}
		if send(server, msg) != nil {
			return
		}
	}
}

// committed waits until the server has answered the COMMIT the proxy
// forwarded (the answer is swallowed: the client never learns the
// outcome), the server ended the connection, or the proxy is closed.
func (p *breakProxy) committed(swallowed, serverDone <-chan struct{}) {
	select {
	case <-swallowed:
	case <-serverDone:
	case <-p.closed:
	}
}

// readMessage reads one protocol message: a type byte (if typed), a
// big-endian length that counts itself, and the body.
func readMessage(r io.Reader, typed bool) ([]byte, error) {
	head := 4
	if typed {
		head = 5
	}
	msg := make([]byte, head)
	if _, err := io.ReadFull(r, msg); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(msg[head-4:]))
	if n < 4 {
		return nil, errors.New("bad message length")
	}
	msg = append(msg, make([]byte, n-4)...)
	_, err := io.ReadFull(r, msg[head:])
	return msg, err
}

// send writes msg to w.
func send(w io.Writer, msg []byte) error {
	_, err := w.Write(msg)
	return err
}

// openThroughProxy opens a Store over schema whose connections go through a
// new breakProxy.
func openThroughProxy(t *testing.T, schema string) (*storepg.Store, *breakProxy) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	p := newBreakProxy(t, net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = "127.0.0.1", uint16(p.ln.Addr().(*net.TCPAddr).Port)
	cfg.ConnConfig.TLSConfig, cfg.ConnConfig.Fallbacks = nil, nil
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := storepg.OpenPool(context.Background(), pool, &storepg.Options{Schema: schema})
	if err != nil {
		t.Fatalf("OpenPool: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, p
}

// TestLostCommit breaks the connection of an Update at its COMMIT, before
// the server gets it (and the server notices, or does not until the Store
// ends its backend) and after the server has answered, and checks that
// every way the increment happens exactly once and Update reports success:
// a COMMIT that never arrived is retried, and one whose answer was lost is
// recognised as committed (pg_xact_status) rather than retried or reported
// as a failure.
func TestLostCommit(t *testing.T) {
	cases := []struct {
		name        string
		mode        int32
		wantRetries int64
	}{
		{"request", loseCommit, 1},
		{"request, server unaware", holdCommit, 1},
		{"answer", loseAnswer, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			schema := newSchema(t, nil)
			s, proxy := openThroughProxy(t, schema)
			direct := openSchema(t, schema, nil)
			proxy.mode.Store(c.mode)
			runs := 0
			err := s.Update(context.Background(), func(tx store.Tx) error {
				runs++
				return increment(tx)
			})
			if err != nil {
				t.Fatalf("Update = %v; want nil", err)
			}
			if proxy.mode.Load() != loseNothing {
				t.Fatal("the proxy saw no COMMIT; the test broke nothing")
			}
			if got := counter(t, direct); got != 1 {
				t.Errorf("counter = %d; want 1 (exactly one increment)", got)
			}
			if got := s.Retries(); got != c.wantRetries {
				t.Errorf("Retries() = %d (closure ran %d times); want %d", got, runs, c.wantRetries)
			}
		})
	}
}

// TestLostCommitOutcomeUnknown loses the answer to a COMMIT and then the
// server itself: Update cannot learn whether the commit took effect, and
// must say so with store.ErrOutcomeUnknown rather than report a plain
// failure (here the server did commit, so "failed" would be a lie).
func TestLostCommitOutcomeUnknown(t *testing.T) {
	schema := newSchema(t, nil)
	s, proxy := openThroughProxy(t, schema)
	direct := openSchema(t, schema, nil)
	proxy.mode.Store(loseAnswerAndServer)
	err := s.Update(context.Background(), func(tx store.Tx) error { return increment(tx) })
	if !errors.Is(err, store.ErrOutcomeUnknown) {
		t.Fatalf("Update = %v; want an error wrapping store.ErrOutcomeUnknown", err)
	}
	if got := counter(t, direct); got != 1 {
		t.Errorf("counter = %d; want 1 (the server committed)", got)
	}
}
