package egress

import (
	"errors"
	"fmt"
	"net/netip"
)

// ErrRefused matches every refusal of a Policy (a *RefusedError).
var ErrRefused = errors.New("egress: refused")

// RefusedError says why a request or a connection was refused. It matches
// ErrRefused. Its message names the host and the address, never a path or
// a query, which may carry secrets.
type RefusedError struct {
	// Host is what was asked for: a URL's host, or host:port at dial time.
	Host string
	// Scheme is the refused scheme (e.g. "http") when the scheme was the
	// reason, else "".
	Scheme string
	// Addr is the refused address when an address was the reason: the one
	// the host resolved to at dial time, or an IP literal in a URL.
	Addr netip.Addr
	// Reason names the kind of address, e.g. "loopback" or "private", or
	// what else is wrong.
	Reason string
}

// Error describes the refusal in one line.
func (e *RefusedError) Error() string {
	const hint = "; only hosts the operator allows may be reached that way"
	switch {
	case e.Scheme != "":
		return fmt.Sprintf("egress: refused %s://%s: only https may be used%s", e.Scheme, e.Host, hint)
	case e.Addr.IsValid():
		return fmt.Sprintf("egress: refused %s: %s is not a public address (%s)%s", e.Host, e.Addr, e.Reason, hint)
	default:
		return fmt.Sprintf("egress: refused %s: %s%s", e.Host, e.Reason, hint)
	}
}

// Is reports whether target is ErrRefused.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// special is one block of the IANA special-purpose address registries
// that a tenant's request may not reach.
type special struct {
	prefix netip.Prefix
	reason string
}

// specials4 are the IPv4 blocks refused beyond what netip's predicates
// name (loopback, private, link-local, multicast, unspecified).
var specials4 = []special{
	{netip.MustParsePrefix("0.0.0.0/8"), "this network"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared address space, CGNAT"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignments"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation"},
	{netip.MustParsePrefix("192.88.99.0/24"), "6to4 relay anycast"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation"},
	{netip.MustParsePrefix("255.255.255.255/32"), "broadcast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
}

// Blocks of IPv6 with special handling.
var (
	// globalUnicast6 is the only IPv6 block handed out as public unicast
	// addresses; everything outside it (but NAT64) is refused.
	globalUnicast6 = netip.MustParsePrefix("2000::/3")
	// nat64 is the well-known NAT64 prefix (RFC 6052): the address is
	// checked as the IPv4 address it carries, so that an IPv6-only
	// network with DNS64 still reaches public IPv4 hosts.
	nat64 = netip.MustParsePrefix("64:ff9b::/96")
	// specials6 are refused blocks inside globalUnicast6.
	specials6 = []special{
		{netip.MustParsePrefix("2001::/32"), "Teredo"},
		{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
		{netip.MustParsePrefix("2001::/23"), "IETF protocol assignments"},
		{netip.MustParsePrefix("2002::/16"), "6to4"},
		{netip.MustParsePrefix("3fff::/20"), "documentation"},
	}
)

// CheckAddr returns nil when addr is a public unicast address, which a
// request on a tenant's behalf may reach, and else a *RefusedError whose
// Reason names the kind of address. An IPv4-mapped IPv6 address
// (::ffff:127.0.0.1) is checked as its IPv4 address, and so is a NAT64
// address (64:ff9b::/96).
func CheckAddr(addr netip.Addr) error {
	if r := reason(addr); r != "" {
		return &RefusedError{Host: addr.String(), Addr: addr, Reason: r}
	}
	return nil
}

// reason is CheckAddr's verdict: "" for a public address, else why not.
func reason(addr netip.Addr) string {
	if !addr.IsValid() {
		return "not an IP address"
	}
	addr = addr.Unmap()
	if addr.Is6() && nat64.Contains(addr.WithZone("")) {
		b := addr.As16()
		if r := reason(netip.AddrFrom4([4]byte(b[12:]))); r != "" {
			return "NAT64 of " + r
		}
		return ""
	}
	switch {
	case addr.IsUnspecified():
		return "unspecified"
	case addr.IsLoopback():
		return "loopback"
	case addr.IsPrivate():
		return "private"
	case addr.IsLinkLocalUnicast():
		return "link-local"
	case addr.IsMulticast():
		return "multicast"
	}
	if addr.Is4() {
		for _, s := range specials4 {
			if s.prefix.Contains(addr) {
				return s.reason
			}
		}
		return ""
	}
	addr = addr.WithZone("")
	if !globalUnicast6.Contains(addr) {
		return "reserved"
	}
	for _, s := range specials6 {
		if s.prefix.Contains(addr) {
			return s.reason
		}
	}
	return ""
}
