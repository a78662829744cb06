package egress

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// DefaultTimeout bounds a whole request of a Client (connection, redirects
// and reading the answer) when Options.Timeout is 0.
const DefaultTimeout = 30 * time.Second

// dialTimeout bounds one connection attempt.
const dialTimeout = 30 * time.Second

// Options configure a Policy. The zero value (or nil) is the strict
// policy: https to public addresses only.
type Options struct {
	// AllowHosts lists the hosts the operator trusts: a request to one of
	// them may use http and reach any address. Each entry is a host name
	// or an IP literal, which allows every port, or host:port, which allows
	// that port only (IPv6 in brackets: "[::1]:9000"). Names match exactly,
	// case-insensitively, without a final dot.
	AllowHosts []string
	// Timeout bounds each request of Client. Default DefaultTimeout.
	Timeout time.Duration
}

// Policy decides which requests made on a tenant's behalf may go out, and
// makes the clients that apply it. It is safe for concurrent use; its
// clients share one connection pool.
type Policy struct {
	hosts     map[string]bool // canonical "host" or "host:port"
	timeout   time.Duration
	transport *transport
}

// New returns the policy opts describe (nil: the strict policy). It fails
// on a malformed AllowHosts entry.
func New(opts *Options) (*Policy, error) {
	if opts == nil {
		opts = &Options{}
	}
	p := &Policy{hosts: make(map[string]bool, len(opts.AllowHosts)), timeout: opts.Timeout}
	if p.timeout <= 0 {
		p.timeout = DefaultTimeout
	}
	for _, e := range opts.AllowHosts {
		key, err := parseAllowed(e)
		if err != nil {
			return nil, err
		}
		p.hosts[key] = true
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.Proxy = nil // a proxy would be dialled instead of the target, and checked instead of it
	base.DialContext = p.DialContext
	p.transport = &transport{p: p, base: base}
	return p, nil
}

// SplitHosts splits a comma-separated list of AllowHosts entries (a
// command-line flag), dropping spaces and empty entries.
func SplitHosts(list string) []string {
	var out []string
	for e := range strings.SplitSeq(list, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// Client returns an HTTP client that applies the policy to every request
// and every redirect, with the policy's timeout. Clients of one Policy
// share its connection pool.
func (p *Policy) Client() *http.Client {
	return &http.Client{Transport: p.transport, Timeout: p.timeout}
}

// Transport returns the policy's http.RoundTripper, for a client of one's
// own. It also has a CloseIdleConnections method.
func (p *Policy) Transport() http.RoundTripper { return p.transport }

// DialContext connects like net.Dialer.DialContext, refusing with a
// *RefusedError, before any packet is sent, every address that is not
// public unless address's host is allowed. Only TCP and UDP networks are
// dialled.
func (p *Policy) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6", "udp", "udp4", "udp6":
	default:
		return nil, &RefusedError{Host: address, Reason: "network " + strconv.Quote(network) + " is not tcp or udp"}
	}
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	d := &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
	if !p.allows(host, port) {
		// The resolver has done its work by now: this sees each address
		// the connection is about to be made to, so a name that resolves
		// (or is rebound) to a private address is caught too.
		d.ControlContext = func(_ context.Context, _, resolved string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(resolved)
			if err != nil {
				return &RefusedError{Host: address, Reason: "unexpected address " + strconv.Quote(resolved)}
			}
			if r := reason(ap.Addr()); r != "" {
				return &RefusedError{Host: address, Addr: ap.Addr(), Reason: r}
			}
			return nil
		}
	}
	return d.DialContext(ctx, network, address)
}

// CheckURL applies the parts of the policy that need no DNS to u, a URL
// a tenant gives: the scheme must be https, and the host must not be a
// non-public IP literal nor a name that is always loopback ("localhost",
// "*.localhost"), unless the host is allowed (then http is fine too). It
// returns nil or a *RefusedError. A name that passes may still be refused
// at dial time.
func (p *Policy) CheckURL(u *url.URL) error {
	host := u.Hostname()
	if (u.Scheme == "https" || u.Scheme == "http") && p.allows(host, portOf(u)) {
		return nil
	}
	if u.Scheme != "https" {
		return &RefusedError{Host: u.Host, Scheme: u.Scheme}
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if r := reason(a); r != "" {
			return &RefusedError{Host: u.Host, Addr: a, Reason: r}
		}
		return nil
	}
	if h := canonName(host); h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return &RefusedError{Host: u.Host, Reason: "localhost names are loopback (RFC 6761)"}
	}
	return nil
}

// portOf is u's port, or its scheme's default.
func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "http" {
		return "80"
	}
	return "443"
}

// allows reports whether the operator allows host (with port).
func (p *Policy) allows(host, port string) bool {
	if len(p.hosts) == 0 {
		return false
	}
	h, ok := canonHost(host)
	if !ok {
		return false
	}
	if p.hosts[h] {
		return true
	}
	n, err := strconv.Atoi(port)
	return err == nil && p.hosts[net.JoinHostPort(h, strconv.Itoa(n))]
}

// parseAllowed validates an AllowHosts entry and returns its canonical
// form: "host" or "host:port".
func parseAllowed(entry string) (string, error) {
	e := strings.TrimSpace(entry)
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("egress: allowed host %q: %s", entry, why)
	}
	host, port, err := net.SplitHostPort(e)
	switch {
	case err == nil && port == "":
		return bad("the port must be 1 to 65535")
	case err != nil:
		host, port = e, ""
		if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
			host = host[1 : len(host)-1]
		}
	}
	h, ok := canonHost(host)
	if !ok {
		return bad("want a host name, an IP address, or either with :port")
	}
	if port == "" {
		return h, nil
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return bad("the port must be 1 to 65535")
	}
	return net.JoinHostPort(h, strconv.Itoa(n)), nil
}

// canonHost is host in the form allows compares: an IP address in its
// canonical text (IPv4-mapped addresses as IPv4), or a DNS name in lower
// case without a final dot. ok is false for anything else.
func canonHost(host string) (string, bool) {
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return "", false
		}
		return a.Unmap().String(), true
	}
	h := canonName(host)
	if h == "" || len(h) > 253 {
		return "", false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 {
			return "", false
		}
		for _, c := range []byte(label) {
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return "", false
			}
		}
	}
	return h, true
}

// canonName is a DNS name in lower case without a final dot.
func canonName(host string) string {
	return strings.TrimSuffix(strings.ToLower(host), ".")
}

// transport refuses schemes other than https (but for allowed hosts)
// before handing a request to the dial-checking base transport.
type transport struct {
	p    *Policy
	base *http.Transport
}

// RoundTrip implements http.RoundTripper.
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	u := req.URL
	if u.Scheme != "https" && (u.Scheme != "http" || !t.p.allows(u.Hostname(), portOf(u))) {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, &RefusedError{Host: u.Host, Scheme: u.Scheme}
	}
	return t.base.RoundTrip(req)
}

// CloseIdleConnections closes the pool's idle connections.
func (t *transport) CloseIdleConnections() { t.base.CloseIdleConnections() }
