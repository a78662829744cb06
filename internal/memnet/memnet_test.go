package memnet_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deployplane/deployplane/internal/memnet"
)

// TestServerInABubble: an HTTP server on a memnet listener answers a
// request whose handler waits an hour of fake time, exactly an hour later,
// with the client's address on the request; a closed listener refuses.
func TestServerInABubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n memnet.Network
		ln := n.Listen()
		remote := make(chan string, 1)
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			remote <- r.RemoteAddr
			time.Sleep(time.Hour)
			io.WriteString(w, "late")
		})}
		served := make(chan error, 1)
		go func() { served <- srv.Serve(ln) }()

		began := time.Now()
		resp, err := n.Client().Get("http://" + ln.Addr().String() + "/")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "late" || time.Since(began) != time.Hour {
			t.Errorf("answer %q after %v, want late after 1h", b, time.Since(began))
		}
		if r := <-remote; r == "" || r == ln.Addr().String() {
			t.Errorf("RemoteAddr %q", r)
		}

		if err := srv.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
		if _, err := n.DialContext(context.Background(), "tcp", ln.Addr().String()); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("dial after Close: %v, want connection refused", err)
		}
		if _, err := n.DialContext(context.Background(), "tcp", "127.0.0.1:1"); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("dial where nothing listens: %v, want connection refused", err)
		}
	})
}
