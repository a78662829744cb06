// Command okserver is the agent server of the langgraph deploy --image
// test (and of the other tests that run a real image): a static binary for
// a FROM scratch image that answers GET /ok on $PORT (default 8000) with
// the nonce it was built with, and GET /say?from=NAME with $OKSERVER_SAY
// (so that a test tells which revision's container answers), printing
// "okserver said $OKSERVER_SAY to NAME" (a line of output when the test
// wants one). With $OKSERVER_GATE (a
// URL) it listens only once a GET of that URL answers 200, asking every
// 100 ms: a test holds its revision in DEPLOYING until it opens the gate.
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
	if gate := os.Getenv("OKSERVER_GATE"); gate != "" {
		fmt.Println("okserver", nonce, "waiting for its gate to open")
		for !open(gate) {
			time.Sleep(100 * time.Millisecond)
		}
	}
	http.HandleFunc("/ok", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok", nonce) })
	http.HandleFunc("/say", func(w http.ResponseWriter, r *http.Request) {
		fmt.Println("okserver said", os.Getenv("OKSERVER_SAY"), "to", r.URL.Query().Get("from"))
		fmt.Fprintln(w, os.Getenv("OKSERVER_SAY"))
	})
	fmt.Println("okserver", nonce, "listening on port", port)
	if err := http.ListenAndServe(":"+port, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// open reports whether the gate answers 200.
func open(gate string) bool {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(gate)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
