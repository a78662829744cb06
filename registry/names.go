package registry

import (
	"net"
	"net/netip"
	"strings"
)

// Names is the set of names one registry answers to: the host:port
// clients are told (Options.Host), and every other spelling that reaches
// the same listener. An image reference is "of this registry" when its
// domain is one of them, compared as addresses, not as text: a tenant must
// not name another deployment's repository as localhost:8126 where the
// registry checks 127.0.0.1:8126.
//
// Two names are the same when their hosts are equal after lowercasing and
// dropping a trailing dot (IP addresses compared as addresses, so
// [0:0::1] is [::1]) and their ports are equal (443 when none is given, as
// Docker assumes). Every loopback or unspecified address (127.0.0.0/8,
// ::1, 0.0.0.0, ::) and the name localhost count as one host, since a
// listener on any of them is reached through all of them from this
// machine.
type Names struct {
	names map[string]bool // canonical host:port
	ports map[string]bool // ports of the local (loopback) names
}

// NewNames is the set holding host and each alias (host:port forms).
// Empty strings are skipped.
func NewNames(host string, aliases ...string) *Names {
	n := &Names{names: map[string]bool{}, ports: map[string]bool{}}
	for _, a := range append([]string{host}, aliases...) {
		if a == "" {
			continue
		}
		h, p := canonicalHostPort(a)
		if h == localHost {
			n.ports[p] = true
			continue
		}
		n.names[h+":"+p] = true
	}
	return n
}

// ListenAliases is the names a listener at addr (as net.Listen answers
// it, host:port) is reached by from this machine: the loopback names when
// it listens on a loopback or unspecified address, and every interface
// address and the machine's host name when on an unspecified one.
// cmd/deployplane passes them as Options.Aliases.
func ListenAliases(addr string, hostname string) []string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return []string{addr}
	}
	out := []string{addr}
	if ip.IsLoopback() || ip.IsUnspecified() {
		out = append(out, net.JoinHostPort("localhost", port))
	}
	if !ip.IsUnspecified() {
		return out
	}
	if hostname != "" {
		out = append(out, net.JoinHostPort(hostname, port))
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil {
				out = append(out, net.JoinHostPort(p.Addr().String(), port))
			}
		}
	}
	return out
}

// Match reports whether domain (the domain of an image reference,
// host[:port]) is one of the names.
func (n *Names) Match(domain string) bool {
	if n == nil || domain == "" {
		return false
	}
	h, p := canonicalHostPort(domain)
	if h == localHost {
		return n.ports[p]
	}
	return n.names[h+":"+p]
}

// localHost stands for every loopback and unspecified address.
const localHost = "\x00local"

// canonicalHostPort splits s (host, host:port, [v6]:port) into its
// canonical host and port.
func canonicalHostPort(s string) (host, port string) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		host, port = strings.Trim(s, "[]"), "443"
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if i := strings.IndexByte(host, '%'); i >= 0 {
		host = host[:i] // a zone names an interface, not another host
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		ip = ip.Unmap()
		if ip.IsLoopback() || ip.IsUnspecified() {
			return localHost, port
		}
		return ip.String(), port
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return localHost, port
	}
	return host, port
}
