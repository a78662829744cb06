// Package memnet is an in-memory network for tests: listeners whose
// connections are net.Pipe pairs, and HTTP clients that dial them.
//
// It exists for tests that run an HTTP server inside a testing/synctest
// bubble. A goroutine blocked on a loopback socket is not durably blocked,
// so while one waits for an answer the bubble's fake clock cannot advance
// (and synctest.Wait cannot return); a goroutine blocked on a net.Pipe, or
// in Accept here, is durably blocked. With a server serving a Listener of a
// Network and clients using its Client, a long poll's timeout, a server's
// ReadTimeout or a reconcile loop's delays pass in fake time, exactly.
//
// Create the Network inside the bubble: channels made outside a bubble do
// not block durably inside it.
package memnet

import (
	"context"
	"net"
	"net/http"
	"sync"
	"syscall"
)

// Network is a set of listeners, each at its own address. The zero value is
// ready to use; it is safe for concurrent use.
type Network struct {
	mu        sync.Mutex
	listeners map[string]*Listener
	port      int
}

// Listen returns a new listener at a fresh address 127.0.0.1:port of this
// network (nothing is bound on the host: the address is only a name here).
func (n *Network) Listen() *Listener {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.listeners == nil {
		n.listeners = make(map[string]*Listener)
	}
	n.port++
	l := &Listener{
		net:    n,
		addr:   &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 10000 + n.port},
		conns:  make(chan net.Conn),
		closed: make(chan struct{}),
	}
	n.listeners[l.addr.String()] = l
	return l
}

// DialContext connects to the listener at addr, once it accepts. An
// address where no listener is open is refused with an error that wraps
// syscall.ECONNREFUSED, as a loopback port would.
func (n *Network) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	n.mu.Lock()
	l := n.listeners[addr]
	if l != nil {
		n.port++
	}
	client := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000 + n.port}
	n.mu.Unlock()
	refused := &net.OpError{Op: "dial", Net: network, Addr: client, Err: syscall.ECONNREFUSED}
	if l == nil {
		return nil, refused
	}
	s, c := net.Pipe()
	select {
	case l.conns <- &conn{Conn: s, local: l.addr, remote: client}:
		return &conn{Conn: c, local: client, remote: l.addr}, nil
	case <-l.closed:
		s.Close()
		c.Close()
		return nil, refused
	case <-ctx.Done():
		s.Close()
		c.Close()
		return nil, &net.OpError{Op: "dial", Net: network, Addr: l.addr, Err: ctx.Err()}
	}
}

// Transport returns a new HTTP transport that dials n.
func (n *Network) Transport() *http.Transport {
	return &http.Transport{DialContext: n.DialContext}
}

// Client returns a new HTTP client whose transport dials n.
func (n *Network) Client() *http.Client {
	return &http.Client{Transport: n.Transport()}
}

// Listener is a net.Listener of a Network.
type Listener struct {
	net    *Network
	addr   *net.TCPAddr
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

// Accept waits for the next connection; after Close it returns an error
// that wraps net.ErrClosed.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.addr, Err: net.ErrClosed}
	}
}

// Close stops accepting: pending and later dials are refused. Connections
// already accepted stay open.
func (l *Listener) Close() error {
	l.once.Do(func() {
		close(l.closed)
		l.net.mu.Lock()
		delete(l.net.listeners, l.addr.String())
		l.net.mu.Unlock()
	})
	return nil
}

// Addr is the listener's address, a *net.TCPAddr on 127.0.0.1.
func (l *Listener) Addr() net.Addr { return l.addr }

// conn is one end of a pipe, with the addresses of a TCP connection (a
// net.Pipe's are both "pipe", which code that parses RemoteAddr rejects).
type conn struct {
	net.Conn
	local, remote net.Addr
}

func (c *conn) LocalAddr() net.Addr  { return c.local }
func (c *conn) RemoteAddr() net.Addr { return c.remote }
