package egress_test

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"

	"github.com/deployplane/deployplane/egress"
)

// A client for requests made on a tenant's behalf refuses to reach this
// machine, unless the operator allows the host.
func Example() {
	// A service on loopback, e.g. a database's HTTP admin port.
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "internal data")
	}))
	defer internal.Close()
	u, _ := url.Parse(internal.URL)
	u.Scheme = "https" // http would be refused before the dial

	strict, err := egress.New(nil)
	if err != nil {
		log.Fatal(err)
	}
	_, err = strict.Client().Get(u.String())
	var re *egress.RefusedError
	fmt.Println(errors.Is(err, egress.ErrRefused), errors.As(err, &re) && re.Reason == "loopback")

	// The operator trusts this host (tests do this for their fake servers).
	trusting, err := egress.New(&egress.Options{AllowHosts: []string{u.Host}})
	if err != nil {
		log.Fatal(err)
	}
	resp, err := trusting.Client().Get(internal.URL)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(string(body))
	// Output:
	// true true
	// internal data
}

func ExampleCheckAddr() {
	for _, a := range []string{"140.82.112.3", "169.254.169.254", "::ffff:10.0.0.1", "fd00::1", "100.64.0.1"} {
		err := egress.CheckAddr(netip.MustParseAddr(a))
		var re *egress.RefusedError
		if errors.As(err, &re) {
			fmt.Printf("%s: refused (%s)\n", a, re.Reason)
		} else {
			fmt.Printf("%s: public\n", a)
		}
	}
	// Output:
	// 140.82.112.3: public
	// 169.254.169.254: refused (link-local)
	// ::ffff:10.0.0.1: refused (private)
	// fd00::1: refused (private)
	// 100.64.0.1: refused (shared address space, CGNAT)
}

// CheckURL refuses, without any DNS lookup, what a URL alone shows to be
// out of bounds, for example when a tenant registers it.
func ExamplePolicy_CheckURL() {
	p, err := egress.New(&egress.Options{AllowHosts: []string{"sso.corp.example"}})
	if err != nil {
		log.Fatal(err)
	}
	for _, raw := range []string{
		"https://github.com/login/oauth/access_token",
		"http://github.com/login/oauth/access_token",
		"https://127.0.0.1:9000/token",
		"http://sso.corp.example/token",
	} {
		u, _ := url.Parse(raw)
		fmt.Printf("%s: %v\n", raw, p.CheckURL(u))
	}
	// Output:
	// https://github.com/login/oauth/access_token: <nil>
	// http://github.com/login/oauth/access_token: egress: refused http://github.com: only https may be used; only hosts the operator allows may be reached that way
	// https://127.0.0.1:9000/token: egress: refused 127.0.0.1:9000: 127.0.0.1 is not a public address (loopback); only hosts the operator allows may be reached that way
	// http://sso.corp.example/token: <nil>
}
