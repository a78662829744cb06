package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/deployplane/deployplane/internal/memnet"
)

// TestMaxConns: with -max-conns 2, a third connection is not served while
// two are open, and is served once one of them closes. The server's own
// listener wrapping runs over an in-memory network in a synctest bubble,
// where a dial that the listener has not accepted is durably blocked, so
// "not accepted" is observed exactly rather than by waiting a while.
func TestMaxConns(t *testing.T) {
	c, err := parseFlags([]string{"-max-conns", "2", "-max-long-polls", "1"}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		var network memnet.Network
		ln := network.Listen()
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "ok")
		})}
		go func() { _ = srv.Serve(c.limitListener(ln)) }()
		defer srv.Close()

		const request = "GET / HTTP/1.1\r\nHost: deployplane\r\n\r\n"
		dial := func() (net.Conn, *bufio.Reader) {
			conn, err := network.DialContext(t.Context(), "tcp", ln.Addr().String())
			if err != nil {
				t.Error(err)
				return nil, nil
			}
			if _, err := io.WriteString(conn, request); err != nil {
				t.Error(err)
			}
			return conn, bufio.NewReader(conn)
		}
		answer := func(what string, r *bufio.Reader) {
			t.Helper()
			resp, err := http.ReadResponse(r, nil)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: status %d", what, resp.StatusCode)
			}
		}
		// Two connections, answered and kept open (keep-alive).
		c1, r1 := dial()
		answer("the first connection", r1)
		c2, r2 := dial()
		answer("the second connection", r2)
		defer c2.Close()

		// The third waits to be accepted while two are open.
		third := make(chan *bufio.Reader, 1)
		go func() {
			conn, r := dial()
			if conn != nil {
				defer conn.Close()
			}
			third <- r
			<-t.Context().Done()
		}()
		synctest.Wait()
		select {
		case <-third:
			t.Fatal("the third connection was accepted while two were open")
		default:
		}
		// One closes: the third is accepted and answered.
		c1.Close()
		answer("the third connection, once the first closed", <-third)
	})
}

// TestRateLimitFlags: -rate-limit and -rate-burst reach the handler, which
// answers 429 with the RateLimit headers beyond the burst. The rate is
// one request per 1000 s, so that no refill happens during the test.
func TestRateLimitFlags(t *testing.T) {
	const key = "rate-limited-key"
	url, _, _ := server(t, []string{"-db", ":memory:", "-rate-limit", "0.001", "-rate-burst", "2"},
		map[string]string{"DEPLOYPLANE_API_KEY": key})
	get := func() *http.Response {
		req, _ := http.NewRequest("GET", url+"/v2/deployments", nil)
		req.Header.Set("X-Api-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for i := range 2 {
		if resp := get(); resp.StatusCode != http.StatusOK || resp.Header.Get("RateLimit-Limit") != "2" {
			t.Fatalf("request %d: %d, RateLimit-Limit %q", i, resp.StatusCode, resp.Header.Get("RateLimit-Limit"))
		}
	}
	resp := get()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("the third request: %d, want 429", resp.StatusCode)
	}
	if ra := resp.Header.Get("Retry-After"); ra != "1000" && ra != "999" {
		t.Errorf("Retry-After %q, want about 1000", ra)
	}
	if rem := resp.Header.Get("RateLimit-Remaining"); rem != "0" {
		t.Errorf("RateLimit-Remaining %q", rem)
	}
}

// TestLoadFlags: -h documents the load flags, and nonsensical values are
// usage errors.
func TestLoadFlags(t *testing.T) {
	var stderr bytes.Buffer
	if err := run(context.Background(), []string{"-h"}, func(string) string { return "" }, io.Discard, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("run -h: %v", err)
	}
	for _, want := range []string{"-max-conns", "-max-in-flight", "-max-long-polls", "-rate-limit", "-rate-burst",
		"-max-in-flight-per-tenant", "-max-long-polls-per-tenant", "-max-uploads", "-max-uploads-per-tenant",
		"-min-upload-rate", "-public-max-body-bytes", "-public-read-timeout",
		"Retry-After", "RateLimit-Remaining", "429"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("-h does not mention %q", want)
		}
	}
	for _, args := range [][]string{
		{"-max-conns", "-1"},
		{"-max-in-flight", "-2"},
		{"-max-long-polls", "0"},
		{"-max-conns", "100", "-max-long-polls", "100"},
		{"-max-conns", "100", "-max-long-polls", "-1"},
		{"-rate-limit", "-1"},
		{"-rate-limit", "NaN"},
		{"-rate-limit", "5", "-rate-burst", "0"},
		{"-max-in-flight-per-tenant", "-2"},
		{"-max-long-polls-per-tenant", "-2"},
		{"-max-uploads", "0"},
		{"-max-uploads-per-tenant", "-2"},
		{"-min-upload-rate", "0"},
		{"-public-max-body-bytes", "0"},
		{"-public-read-timeout", "0s"},
	} {
		if err := run(context.Background(), args, func(string) string { return "" }, io.Discard, io.Discard); !errors.Is(err, errUsage) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}

// TestLoadShareFlags: the flags of each tenant's share and of public
// bodies reach the handler: a tenant's second event stream is refused
// with -max-long-polls-per-tenant 1, a sign-in form beyond
// -public-max-body-bytes is a 413, and one whose body stalls is a 408
// after -public-read-timeout.
func TestLoadShareFlags(t *testing.T) {
	url, _, _ := server(t, []string{"-db", ":memory:", "-max-long-polls-per-tenant", "1",
		"-public-max-body-bytes", "100", "-public-read-timeout", "50ms"}, map[string]string{"DEPLOYPLANE_API_KEY": "k"})
	events := func() *http.Response {
		req, _ := http.NewRequest("GET", url+"/v2/events", nil)
		req.Header.Set("X-Api-Key", "k")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	if resp := events(); resp.StatusCode != http.StatusOK {
		t.Fatalf("the first stream: %d", resp.StatusCode)
	}
	if resp := events(); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("the second stream: %d, want 503", resp.StatusCode)
	} else if b, _ := io.ReadAll(resp.Body); !strings.Contains(string(b), "this workspace already has 1 long polls open") {
		t.Errorf("the second stream: %s", b)
	}

	resp, err := http.Post(url+"/ui/signin", "application/x-www-form-urlencoded", strings.NewReader("api_key="+strings.Repeat("k", 200)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a sign-in form of 208 bytes: %d, want 413", resp.StatusCode)
	}

	host := strings.TrimPrefix(url, "http://")
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST /ui/signin HTTP/1.1\r\nHost: "+host+
		"\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 50\r\n\r\na"); err != nil {
		t.Fatal(err)
	}
	stalled, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	stalled.Body.Close()
	if stalled.StatusCode != http.StatusRequestTimeout {
		t.Errorf("a sign-in form whose body stalls: %d, want 408", stalled.StatusCode)
	}
}
