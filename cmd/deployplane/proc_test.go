package main

import (
	"errors"
	"io"
	"net"
	"os/exec"
	"strconv"
	"testing"
)

// startServerProc starts a server process (the built command) on a free
// port with env (processEnv's) and args, its output copied to tee as well
// when not nil, and answers its URL. The test's end kills it.
func startServerProc(t *testing.T, tee io.Writer, env []string, args ...string) (*proc, string) {
	t.Helper()
	p := &proc{cmd: exec.Command(binary(t), append([]string{"-addr", "127.0.0.1:0"}, args...)...), log: newWatcher(), done: make(chan struct{})}
	var out io.Writer = p.log
	if tee != nil {
		out = io.MultiWriter(p.log, tee)
	}
	p.cmd.Env, p.cmd.Stderr, p.cmd.Stdout = env, out, out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	select {
	case url := <-p.log.addr:
		return p, url
	case <-p.done:
		t.Fatalf("the server exited: %v\n%s", p.err, p.log)
	case <-nearDeadline(t):
		t.Fatalf("the server did not start:\n%s", p.log)
	}
	return nil, ""
}

// exitCode waits until the process exits on its own and answers its exit
// code.
func (p *proc) exitCode(t *testing.T) int {
	t.Helper()
	p.wait(t)
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		t.Fatalf("waiting for %s: %v", p.cmd.Args, p.err)
	}
	return 0
}

// freeAddr answers a loopback address whose port was free a moment ago,
// for a process that must listen on the same address again after a
// restart.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}
