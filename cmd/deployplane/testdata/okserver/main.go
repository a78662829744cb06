// Command okserver is the agent server of the langgraph deploy --image
// test: a static binary for a FROM scratch image that answers GET /ok on
// $PORT (default 8000) with the nonce it was built with.
package main

import (
	"fmt"
	"net/http"
	"os"
)

// nonce is set with -ldflags -X so that each test image is its own.
var nonce = "none"

func main() {
	port := os.Getenv("PORT")
	if port == "" {
		port = "8000"
	}
	http.HandleFunc("/ok", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok", nonce) })
	fmt.Println("okserver", nonce, "listening on port", port)
	if err := http.ListenAndServe(":"+port, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
