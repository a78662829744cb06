package egress_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/deployplane/deployplane/egress"
)

// countingServer is an HTTP server on loopback that counts the
// connections it accepts.
type countingServer struct {
	*httptest.Server
	conns atomic.Int64
}

func newCountingServer(t *testing.T, tls bool, h http.Handler) *countingServer {
	t.Helper()
	s := &countingServer{Server: httptest.NewUnstartedServer(h)}
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	if tls {
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	return s
}

func (s *countingServer) port() string {
	_, port, _ := net.SplitHostPort(s.Listener.Addr().String())
	return port
}

var hello = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") })

func mustPolicy(t *testing.T, allow ...string) *egress.Policy {
	t.Helper()
	p, err := egress.New(&egress.Options{AllowHosts: allow})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// refused asserts that err is a refusal and returns it.
func refused(t *testing.T, what string, err error) *egress.RefusedError {
	t.Helper()
	var re *egress.RefusedError
	if !errors.Is(err, egress.ErrRefused) || !errors.As(err, &re) {
		t.Fatalf("%s: error %v, want an egress refusal", what, err)
	}
	return re
}

// A loopback address is refused when the connection is dialled, whether
// the URL names it or a name resolves to it: the server sees no
// connection at all.
func TestClientRefusesLoopbackAtDialTime(t *testing.T) {
	srv := newCountingServer(t, true, hello)
	client := mustPolicy(t).Client()
	for _, host := range []string{"127.0.0.1", "localhost"} {
		_, err := client.Get("https://" + net.JoinHostPort(host, srv.port()) + "/token")
		re := refused(t, host, err)
		if !re.Addr.IsLoopback() || re.Reason != "loopback" {
			t.Errorf("%s: refused %v (%q), want a loopback address", host, re.Addr, re.Reason)
		}
		var oe *net.OpError
		if !errors.As(err, &oe) || oe.Op != "dial" {
			t.Errorf("%s: error %v, want it to come from the dial", host, err)
		}
		if strings.Contains(re.Error(), "/token") {
			t.Errorf("%s: the refusal names the path: %v", host, re)
		}
	}
	// A trusting client connects: had the refused dials reached the
	// server, their connections would have been accepted before this one.
	trusting := srv.Client()
	if resp, err := trusting.Get(srv.URL); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	if n := srv.conns.Load(); n != 1 {
		t.Errorf("the server accepted %d connections, want only the trusting client's", n)
	}
}

// http is refused before anything is resolved or dialled, unless the host
// is allowed.
func TestClientRefusesHTTP(t *testing.T) {
	srv := newCountingServer(t, false, hello)
	for _, u := range []string{srv.URL, "http://example.com/token", "ftp://example.com/x"} {
		_, err := mustPolicy(t).Client().Get(u)
		if re := refused(t, u, err); re.Scheme == "" {
			t.Errorf("%s: refused for %q, want for its scheme", u, re.Reason)
		}
	}
	if n := srv.conns.Load(); n != 0 {
		t.Errorf("the server accepted %d connections, want 0", n)
	}
}

// Allowed hosts may use http and reach loopback; an entry with a port
// allows that port only.
func TestClientAllowedHosts(t *testing.T) {
	srv := newCountingServer(t, false, hello)
	other := newCountingServer(t, false, hello)
	hostPort := srv.Listener.Addr().String()
	for _, tc := range []struct {
		allow []string
		url   string
		ok    bool
	}{
		{[]string{hostPort}, srv.URL, true},
		{[]string{"127.0.0.1"}, srv.URL, true},
		{[]string{"127.0.0.1"}, other.URL, true},
		{[]string{hostPort}, other.URL, false},
		{[]string{"localhost:" + srv.port()}, "http://localhost:" + srv.port(), true},
		{[]string{"localhost:" + srv.port()}, srv.URL, false}, // the entry names a host, not its addresses
		{[]string{"::ffff:127.0.0.1"}, srv.URL, true},
		{[]string{"example.com"}, srv.URL, false},
	} {
		resp, err := mustPolicy(t, tc.allow...).Client().Get(tc.url)
		if tc.ok {
			if err != nil {
				t.Errorf("allow %v, GET %s: %v", tc.allow, tc.url, err)
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) != "hello" {
				t.Errorf("allow %v, GET %s: %q", tc.allow, tc.url, b)
			}
			continue
		}
		refused(t, "allow "+strings.Join(tc.allow, ",")+", GET "+tc.url, err)
	}
}

// Every redirect is checked like the first request.
func TestClientChecksRedirects(t *testing.T) {
	target := newCountingServer(t, false, hello)
	for _, to := range []string{target.URL, "http://localhost:" + target.port(), "https://localhost:" + target.port()} {
		start := newCountingServer(t, false, http.RedirectHandler(to, http.StatusTemporaryRedirect))
		_, err := mustPolicy(t, start.Listener.Addr().String()).Client().Post(start.URL, "text/plain", strings.NewReader("secret"))
		refused(t, "redirect to "+to, err)
		if start.conns.Load() != 1 {
			t.Errorf("redirect to %s: the allowed server accepted %d connections, want 1", to, start.conns.Load())
		}
	}
	if n := target.conns.Load(); n != 0 {
		t.Errorf("the redirect target accepted %d connections, want 0", n)
	}
}

func TestDialContextNetworks(t *testing.T) {
	p := mustPolicy(t)
	for _, network := range []string{"unix", "unixgram", "ip4:icmp"} {
		if _, err := p.DialContext(context.Background(), network, "/tmp/x.sock"); !errors.Is(err, egress.ErrRefused) {
			t.Errorf("DialContext(%q) = %v, want ErrRefused", network, err)
		}
	}
	if _, err := p.DialContext(context.Background(), "udp", "127.0.0.1:53"); !errors.Is(err, egress.ErrRefused) {
		t.Errorf("DialContext(udp loopback) = %v, want ErrRefused", err)
	}
}

func TestNewAllowHosts(t *testing.T) {
	for _, ok := range []string{"auth.corp", "AUTH.corp.", "127.0.0.1", "::1", "[::1]", "[::1]:9000", "127.0.0.1:8443",
		"localhost:1", "xn--bcher-kva.example", "my_host.internal", " spaced.example "} {
		if _, err := egress.New(&egress.Options{AllowHosts: []string{ok}}); err != nil {
			t.Errorf("New(AllowHosts %q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "http://auth.corp", "auth.corp/path", "*.corp", "user@host", "host:0", "host:65536",
		"host:http", "fe80::1%eth0", "a..b", "bücher.example", "host:", ":80", "a b"} {
		if _, err := egress.New(&egress.Options{AllowHosts: []string{bad}}); err == nil {
			t.Errorf("New(AllowHosts %q) accepted it", bad)
		}
	}
	if _, err := egress.New(nil); err != nil {
		t.Errorf("New(nil): %v", err)
	}
}

func TestSplitHosts(t *testing.T) {
	got := egress.SplitHosts(" a.example, 127.0.0.1:9000,,[::1]:1 ,")
	if diff := cmp.Diff([]string{"a.example", "127.0.0.1:9000", "[::1]:1"}, got); diff != "" {
		t.Errorf("SplitHosts (-want +got):\n%s", diff)
	}
	if got := egress.SplitHosts(""); got != nil {
		t.Errorf("SplitHosts(\"\") = %q, want nil", got)
	}
}

func TestCheckURL(t *testing.T) {
	strict := mustPolicy(t)
	allowing := mustPolicy(t, "127.0.0.1:8080", "auth.corp", "::1")
	type want struct {
		scheme string // refused for the scheme
		addr   string // refused for this address
		reason string // refused for this reason
	}
	for _, tc := range []struct {
		p    *egress.Policy
		url  string
		want *want
	}{
		{strict, "https://github.com/login/oauth/access_token", nil},
		{strict, "https://oauth2.googleapis.com:443/token", nil},
		{strict, "https://8.8.8.8/token", nil},
		{strict, "https://[2606:4700::1]/token", nil},
		{strict, "https://intranet/token", nil}, // a name: judged at dial time
		{strict, "http://github.com/token", &want{scheme: "http"}},
		{strict, "ftp://github.com/token", &want{scheme: "ftp"}},
		{strict, "http://127.0.0.1:8080/token", &want{scheme: "http"}},
		{strict, "https://127.0.0.1/token", &want{addr: "127.0.0.1", reason: "loopback"}},
		{strict, "https://169.254.169.254/latest/meta-data", &want{addr: "169.254.169.254", reason: "link-local"}},
		{strict, "https://10.0.0.5/token", &want{addr: "10.0.0.5", reason: "private"}},
		{strict, "https://100.100.100.200/token", &want{addr: "100.100.100.200", reason: "shared address space, CGNAT"}},
		{strict, "https://[::1]:8443/token", &want{addr: "::1", reason: "loopback"}},
		{strict, "https://[::ffff:127.0.0.1]/token", &want{addr: "::ffff:127.0.0.1", reason: "loopback"}},
		{strict, "https://[fd00::1]/token", &want{addr: "fd00::1", reason: "private"}},
		{strict, "https://[fe80::1%25eth0]/token", &want{addr: "fe80::1%eth0", reason: "link-local"}},
		{strict, "https://0.0.0.0/token", &want{addr: "0.0.0.0", reason: "unspecified"}},
		{strict, "https://localhost/token", &want{reason: "localhost names are loopback (RFC 6761)"}},
		{strict, "https://api.LOCALHOST./token", &want{reason: "localhost names are loopback (RFC 6761)"}},
		{allowing, "http://127.0.0.1:8080/token", nil},
		{allowing, "https://127.0.0.1:8080/token", nil},
		{allowing, "http://127.0.0.1:8081/token", &want{scheme: "http"}},
		{allowing, "https://127.0.0.1:8081/token", &want{addr: "127.0.0.1", reason: "loopback"}},
		{allowing, "http://Auth.Corp/token", nil},
		{allowing, "http://auth.corp:9999/token", nil},
		{allowing, "http://sso.auth.corp/token", &want{scheme: "http"}},
		{allowing, "http://[::1]:1234/token", nil},
		{allowing, "ftp://auth.corp/x", &want{scheme: "ftp"}},
	} {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		err = tc.p.CheckURL(u)
		if tc.want == nil {
			if err != nil {
				t.Errorf("CheckURL(%s) = %v, want nil", tc.url, err)
			}
			continue
		}
		re := refused(t, tc.url, err)
		got := want{scheme: re.Scheme, reason: re.Reason}
		if re.Addr.IsValid() {
			got.addr = re.Addr.String()
		}
		if got != *tc.want {
			t.Errorf("CheckURL(%s) = %+v, want %+v", tc.url, got, *tc.want)
		}
	}
}

// The refusal's message says what was refused and why, and never the
// path or query.
func TestRefusedErrorMessage(t *testing.T) {
	for _, tc := range []struct {
		err  *egress.RefusedError
		want string
	}{
		{&egress.RefusedError{Host: "127.0.0.1:8080", Scheme: "http"},
			"egress: refused http://127.0.0.1:8080: only https may be used; only hosts the operator allows may be reached that way"},
		{&egress.RefusedError{Host: "localhost:443", Addr: netip.MustParseAddr("::1"), Reason: "loopback"},
			"egress: refused localhost:443: ::1 is not a public address (loopback); only hosts the operator allows may be reached that way"},
		{&egress.RefusedError{Host: "/tmp/s", Reason: `network "unix" is not tcp or udp`},
			`egress: refused /tmp/s: network "unix" is not tcp or udp; only hosts the operator allows may be reached that way`},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q\nwant      %q", got, tc.want)
		}
	}
}
