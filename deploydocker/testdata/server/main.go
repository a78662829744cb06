// Command server is the test image's program: a tiny HTTP server that
// listens on $PORT (default 8000) and answers what the tests ask.
//
//	GET  /ok        200, unless MODE=unhealthy (503 forever), MODE=gated
//	                (503 until POST /ready) or MODE=degrades (200 to the
//	                first $HEALTHY_CHECKS checks, default 1, then 503)
//	POST /ready     makes /ok answer 200 (MODE=gated)
//	GET  /version   $VERSION (set in the image's config)
//	GET  /env?name= the value of an environment variable
//	GET  /header?name= the value of a header of the request
//	GET  /memlimit  the cgroup memory limit, in bytes ("max" when none)
//	GET  /port      the port it listens on, which tells replicas apart
//	POST /say?line= prints the line on stdout (stderr with &stream=stderr)
//	POST /exit      exits with code 4 once the answer is sent
//
// MODE=crash exits with code 3 at once, after a line on stderr.
package main

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

func main() {
	mode := os.Getenv("MODE")
	if mode == "crash" {
		fmt.Fprintln(os.Stderr, "server: crashing on purpose")
		os.Exit(3)
	}
	port := os.Getenv("PORT")
	if port == "" {
		port = "8000"
	}
	var ready atomic.Bool
	ready.Store(mode != "gated")
	healthy := int64(1)
	fmt.Sscan(os.Getenv("HEALTHY_CHECKS"), &healthy)
	var checks atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ok", func(w http.ResponseWriter, r *http.Request) {
		if mode == "unhealthy" || !ready.Load() || mode == "degrades" && checks.Add(1) > healthy {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("POST /ready", func(w http.ResponseWriter, r *http.Request) { ready.Store(true) })
	mux.HandleFunc("GET /version", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, os.Getenv("VERSION")) })
	mux.HandleFunc("GET /env", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, os.Getenv(r.URL.Query().Get("name"))) })
	mux.HandleFunc("GET /header", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, r.Header.Get(r.URL.Query().Get("name"))) })
	mux.HandleFunc("POST /say", func(w http.ResponseWriter, r *http.Request) {
		out := os.Stdout
		if r.URL.Query().Get("stream") == "stderr" {
			out = os.Stderr
		}
		fmt.Fprintln(out, r.URL.Query().Get("line"))
	})
	mux.HandleFunc("POST /exit", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "exiting")
		w.(http.Flusher).Flush()
		go func() {
			time.Sleep(100 * time.Millisecond) // let the answer leave
			fmt.Println("server: exiting on request")
			os.Exit(4)
		}()
	})
	mux.HandleFunc("GET /port", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, port) })
	mux.HandleFunc("GET /memlimit", func(w http.ResponseWriter, r *http.Request) {
		for _, f := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
			if b, err := os.ReadFile(f); err == nil {
				fmt.Fprint(w, strings.TrimSpace(string(b)))
				return
			}
		}
		http.Error(w, "no cgroup memory file", http.StatusNotFound)
	})
	fmt.Println("server: listening on", port)
	if err := http.ListenAndServe(":"+port, mux); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
