package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deployplane/deployplane/internal/memnet"
)

// limitsProbe is a handler that reports what happened to its requests:
// POST /upload reads the body (with ?work, then works 90 s, and reports
// whether its context is still live), GET /download?n=N writes N bytes,
// GET /slow works 90 s and reports whether its context is still live.
type limitsProbe struct {
	ended chan probeEnd
}

// probeEnd is how a request of the probe ended: the bytes it moved, the
// error that stopped it (nil when complete), and when.
type probeEnd struct {
	n   int64
	err error
	at  time.Time
}

func (p *limitsProbe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/upload":
		n, err := io.Copy(io.Discard, r.Body)
		if err == nil && r.URL.Query().Has("work") {
			time.Sleep(90 * time.Second)
			err = r.Context().Err()
		}
		p.ended <- probeEnd{n, err, time.Now()}
		if err == nil {
			fmt.Fprint(w, n)
		}
	case "/download":
		size, _ := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
		chunk := make([]byte, 32<<10)
		var n int64
		var err error
		for n < size && err == nil {
			var m int
			m, err = w.Write(chunk[:min(int64(len(chunk)), size-n)])
			n += int64(m)
		}
		p.ended <- probeEnd{n, err, time.Now()}
	case "/slow":
		time.Sleep(90 * time.Second)
		p.ended <- probeEnd{0, r.Context().Err(), time.Now()}
		fmt.Fprint(w, "done")
	}
}

// registryPort serves the probe in a synctest bubble as the registry's
// port is served (registryLimits), over an in-memory network, where the
// port's deadlines pass in fake time, exactly. dial connects to it.
func registryPort(t *testing.T) (probe *limitsProbe, dial func() net.Conn) {
	var network memnet.Network
	ln := network.Listen()
	probe = &limitsProbe{ended: make(chan probeEnd, 1)}
	l := registryLimits(defaultRegistryMaxConns)
	srv := l.server(probe, slog.New(slog.DiscardHandler))
	go func() { _ = srv.Serve(l.listener(ln)) }()
	t.Cleanup(func() {
		srv.Close()
		// A closed connection lingers half a second (net/http's
		// closeWriteAndWait); let it pass before the bubble ends.
		time.Sleep(time.Second)
	})
	return probe, func() net.Conn {
		conn, err := network.DialContext(t.Context(), "tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
}

// awaitEnd is the probe's report of its request, or a failure if none
// comes within an hour (of fake time).
func (p *limitsProbe) awaitEnd(t *testing.T, what string) probeEnd {
	t.Helper()
	select {
	case e := <-p.ended:
		return e
	case <-time.After(time.Hour):
		t.Fatalf("%s: the handler still runs an hour later", what)
		return probeEnd{}
	}
}

// closedAfter reads conn until the server closes it, and says how long
// that took; a failure if it stays open an hour.
func closedAfter(t *testing.T, conn net.Conn, r io.Reader, what string) time.Duration {
	t.Helper()
	start := time.Now()
	_ = conn.SetReadDeadline(start.Add(time.Hour))
	_, err := io.Copy(io.Discard, r)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("%s: the connection is still open an hour later", what)
	}
	return time.Since(start)
}

// TestRegistryPortTimeouts: the registry's port has the API port's
// timeouts for headers and idle connections, but streams bodies and
// answers: an image layer may take longer than 60 s as long as it moves
// (at least 16 KiB/s on average), and is cut 60 s after it stops.
func TestRegistryPortTimeouts(t *testing.T) {
	l := registryLimits(defaultRegistryMaxConns)
	t.Run("slow headers", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			_, dial := registryPort(t)
			conn := dial()
			_, _ = io.WriteString(conn, "GET /v2/ HTTP/1.1\r\nHost: registry\r\n") // never ends
			if d := closedAfter(t, conn, conn, "headers never finished"); d != l.readHeaderTimeout {
				t.Errorf("headers never finished: closed after %s, want %s", d, l.readHeaderTimeout)
			}
		})
	})
	t.Run("idle connection", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			probe, dial := registryPort(t)
			conn := dial()
			_, _ = io.WriteString(conn, "GET /download?n=10 HTTP/1.1\r\nHost: registry\r\n\r\n")
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			probe.awaitEnd(t, "the request")
			if d := closedAfter(t, conn, br, "a kept-alive connection"); d != l.idleTimeout {
				t.Errorf("a kept-alive connection: closed after %s idle, want %s", d, l.idleTimeout)
			}
		})
	})
	t.Run("long upload", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			probe, dial := registryPort(t)
			conn := dial()
			// 4 MiB at 32 KiB/s: 128 s.
			const size = 4 << 20
			fmt.Fprintf(conn, "POST /upload HTTP/1.1\r\nHost: registry\r\nContent-Length: %d\r\n\r\n", size)
			chunk := make([]byte, 32<<10)
			for range size / len(chunk) {
				time.Sleep(time.Second)
				if _, err := conn.Write(chunk); err != nil {
					t.Fatalf("the upload was cut: %v", err)
				}
			}
			if e := probe.awaitEnd(t, "the upload"); e.err != nil || e.n != size {
				t.Fatalf("the upload: %d bytes, %v", e.n, e.err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("the answer to a 128 s upload: %v %v", resp, err)
			}
		})
	})
	t.Run("stalled upload", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			probe, dial := registryPort(t)
			conn := dial()
			_, _ = io.WriteString(conn, "POST /upload HTTP/1.1\r\nHost: registry\r\nContent-Length: 1048576\r\n\r\n")
			for range 3 {
				time.Sleep(time.Second)
				_, _ = conn.Write(make([]byte, 64<<10))
			}
			last := time.Now()
			e := probe.awaitEnd(t, "a stalled upload")
			if e.err == nil || e.at.Sub(last) != l.readTimeout {
				t.Errorf("a stalled upload: %v after %s without a byte, want a timeout after %s", e.err, e.at.Sub(last), l.readTimeout)
			}
		})
	})
	t.Run("trickling upload", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			probe, dial := registryPort(t)
			conn := dial()
			_, _ = io.WriteString(conn, "POST /upload HTTP/1.1\r\nHost: registry\r\nContent-Length: 1048576\r\n\r\n")
			start := time.Now()
			// 1 KiB/s never stops, but falls behind 16 KiB/s: the body's
			// deadline after its n-th KiB (at n s) is 60 s + n/16 s,
			// which the 64th KiB comes too late for.
			stop := make(chan struct{})
			go func() {
				for {
					select {
					case <-time.After(time.Second):
					case <-stop:
						return
					}
					if _, err := conn.Write(make([]byte, 1<<10)); err != nil {
						return
					}
				}
			}()
			e := probe.awaitEnd(t, "a trickling upload")
			close(stop)
			if want := 60*time.Second + 63*time.Second/16; e.err == nil || e.at.Sub(start) != want {
				t.Errorf("a trickling upload: %v after %s, want a timeout after %s", e.err, e.at.Sub(start), want)
			}
		})
	})
	t.Run("long download", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			probe, dial := registryPort(t)
			conn := dial()
			const size = 4 << 20
			fmt.Fprintf(conn, "GET /download?n=%d HTTP/1.1\r\nHost: registry\r\n\r\n", size)
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			// 32 KiB/s: 128 s.
			var got int64
			buf := make([]byte, 32<<10)
			for {
				n, err := io.ReadFull(resp.Body, buf)
				got += int64(n)
				if err != nil {
					break
				}
				time.Sleep(time.Second)
			}
			if e := probe.awaitEnd(t, "the download"); e.err != nil || got != size {
				t.Errorf("a 128 s download: %d of %d bytes, the handler's write %v", got, size, e.err)
			}
		})
	})
	t.Run("stalled download", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			probe, dial := registryPort(t)
			conn := dial()
			_, _ = io.WriteString(conn, "GET /download?n=4194304 HTTP/1.1\r\nHost: registry\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.ReadFull(resp.Body, make([]byte, 64<<10))
			last := time.Now() // the client reads no more
			e := probe.awaitEnd(t, "a stalled download")
			if e.err == nil || e.at.Sub(last) != l.writeTimeout {
				t.Errorf("a stalled download: %v after %s, want a timeout after %s", e.err, e.at.Sub(last), l.writeTimeout)
			}
		})
	})
	t.Run("long work after an upload", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			probe, dial := registryPort(t)
			conn := dial()
			_, _ = io.WriteString(conn, "POST /upload?work HTTP/1.1\r\nHost: registry\r\nContent-Length: 65536\r\n\r\n")
			_, _ = conn.Write(make([]byte, 64<<10))
			if e := probe.awaitEnd(t, "an upload, then 90 s of work"); e.err != nil {
				t.Errorf("a request working 90 s after its body: %v", e.err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Errorf("the answer of a request working 90 s after its body: %v %v", resp, err)
			}
		})
	})
	t.Run("long request without a body", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			probe, dial := registryPort(t)
			conn := dial()
			_, _ = io.WriteString(conn, "GET /slow HTTP/1.1\r\nHost: registry\r\n\r\n")
			if e := probe.awaitEnd(t, "a 90 s request"); e.err != nil {
				t.Errorf("a request working 90 s: its context ended: %v", e.err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Errorf("the answer of a request working 90 s: %v %v", resp, err)
			}
		})
	})
}
