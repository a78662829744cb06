package egress_test

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/deployplane/deployplane/egress"
)

func TestCheckAddr(t *testing.T) {
	for _, tc := range []struct {
		addr   string
		reason string // "" means public: allowed
	}{
		// IPv4: public.
		{"1.1.1.1", ""},
		{"8.8.8.8", ""},
		{"140.82.112.3", ""},
		{"100.63.255.255", ""}, // just below CGNAT
		{"100.128.0.0", ""},    // just above CGNAT
		{"172.15.255.255", ""}, // just below 172.16/12
		{"172.32.0.0", ""},     // just above it
		{"223.255.255.255", ""},
		// IPv4: refused.
		{"0.0.0.0", "unspecified"},
		{"0.1.2.3", "this network"},
		{"127.0.0.1", "loopback"},
		{"127.255.255.254", "loopback"},
		{"10.0.0.1", "private"},
		{"172.16.0.1", "private"},
		{"172.31.255.255", "private"},
		{"192.168.1.1", "private"},
		{"100.64.0.1", "shared address space, CGNAT"},
		{"100.127.255.255", "shared address space, CGNAT"},
		{"169.254.169.254", "link-local"}, // cloud metadata
		{"192.0.0.170", "IETF protocol assignments"},
		{"192.0.2.1", "documentation"},
		{"198.51.100.7", "documentation"},
		{"203.0.113.9", "documentation"},
		{"192.88.99.1", "6to4 relay anycast"},
		{"198.18.0.1", "benchmarking"},
		{"198.19.255.255", "benchmarking"},
		{"224.0.0.1", "multicast"},
		{"239.255.255.250", "multicast"},
		{"240.0.0.1", "reserved"},
		{"255.255.255.255", "broadcast"},
		// IPv6: public.
		{"2606:4700:4700::1111", ""},
		{"2a00:1450:4001:80b::200e", ""},
		{"2001:4860:4860::8888", ""}, // above 2001::/23
		// IPv6: refused.
		{"::", "unspecified"},
		{"::1", "loopback"},
		{"fc00::1", "private"},
		{"fd12:3456:789a::1", "private"},
		{"fe80::1", "link-local"},
		{"fe80::1%eth0", "link-local"},
		{"ff02::1", "multicast"},
		{"ff05::1:3", "multicast"},
		{"fec0::1", "reserved"}, // deprecated site-local
		{"::2", "reserved"},
		{"100::1", "reserved"}, // discard-only
		{"2001::1", "Teredo"},
		{"2001:db8::1", "documentation"},
		{"2001:2::1", "IETF protocol assignments"},
		{"2002:7f00:1::1", "6to4"},
		{"3fff::1", "documentation"},
		{"64:ff9b:1::1", "reserved"}, // local-use NAT64
		// IPv4-mapped IPv6: judged by the IPv4 address.
		{"::ffff:127.0.0.1", "loopback"},
		{"::ffff:10.1.2.3", "private"},
		{"::ffff:169.254.169.254", "link-local"},
		{"::ffff:8.8.8.8", ""},
		// NAT64: judged by the IPv4 address it carries.
		{"64:ff9b::8.8.8.8", ""},
		{"64:ff9b::127.0.0.1", "NAT64 of loopback"},
		{"64:ff9b::192.168.0.1", "NAT64 of private"},
	} {
		addr := netip.MustParseAddr(tc.addr)
		err := egress.CheckAddr(addr)
		if tc.reason == "" {
			if err != nil {
				t.Errorf("CheckAddr(%s) = %v, want nil (public)", tc.addr, err)
			}
			continue
		}
		var re *egress.RefusedError
		if !errors.As(err, &re) || !errors.Is(err, egress.ErrRefused) {
			t.Errorf("CheckAddr(%s) = %v, want a *RefusedError matching ErrRefused", tc.addr, err)
			continue
		}
		if re.Reason != tc.reason || re.Addr != addr {
			t.Errorf("CheckAddr(%s): reason %q, addr %v; want %q, %v", tc.addr, re.Reason, re.Addr, tc.reason, addr)
		}
	}
	if err := egress.CheckAddr(netip.Addr{}); !errors.Is(err, egress.ErrRefused) {
		t.Errorf("CheckAddr(zero Addr) = %v, want ErrRefused", err)
	}
}
