// Command okserver is the agent server of the langgraph deploy --image
// test (and of the other tests that run a real image): a static binary for
// a FROM scratch image that answers GET /ok on $PORT (default 8000) with
// the nonce it was built with. With $OKSERVER_DELAY (a Go duration) it
// waits that long before it listens, so that its revision stays in
// DEPLOYING meanwhile.
package main

import (
	"fmt"
	"net/http"
	"os"
	"time"
)

// nonce is set with -ldflags -X so that each test image is its own.
var nonce = "none"

func main() {
	port := os.Getenv("PORT")
	if port == "" {
		port = "8000"
	}
	if d, err := time.ParseDuration(os.Getenv("OKSERVER_DELAY")); err == nil {
		fmt.Println("okserver", nonce, "waiting", d)
		time.Sleep(d)
	}
	http.HandleFunc("/ok", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok", nonce) })
	fmt.Println("okserver", nonce, "listening on port", port)
	if err := http.ListenAndServe(":"+port, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
