// Command fakesh stands in for /bin/sh in the base image the Docker tests
// build (nothing is pulled): `sh -c CMD` appends CMD to /fakesh.log and
// exits 0, or exits with N when CMD is "exit N", or, when CMD is "connect
// HOST:PORT", opens a TCP connection there and exits 0, or prints why it
// could not and exits 1.
package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 3 || os.Args[1] != "-c" {
		os.Exit(2)
	}
	cmd := os.Args[2]
	if n, ok := strings.CutPrefix(cmd, "exit "); ok {
		code, err := strconv.Atoi(n)
		if err != nil {
			os.Exit(2)
		}
		os.Exit(code)
	}
	if addr, ok := strings.CutPrefix(cmd, "connect "); ok {
		c, err := net.DialTimeout("tcp", addr, 30*time.Second)
		if err != nil {
			fmt.Fprintf(os.Stderr, "fakesh: %v\n", err)
			os.Exit(1)
		}
		c.Close()
		fmt.Printf("fakesh: connected to %s\n", addr)
		return
	}
	f, err := os.OpenFile("/fakesh.log", os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		os.Exit(1)
	}
	defer f.Close()
	if _, err := f.WriteString(cmd + "\n"); err != nil {
		os.Exit(1)
	}
}
