package main

import (
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
)

// proc is a process of the built command (a server or an agent), its
// standard error kept in a watcher.
type proc struct {
	cmd    *exec.Cmd
	stderr *watcher
	done   chan struct{} // closed once the process has exited
	err    error         // Wait's, once done is closed
}

// startProc starts the built command with args and an environment of PATH,
// HOME (a directory of the test's: no ~/.kube/config) and env only. It is
// killed at the end of the test if still running.
func startProc(t *testing.T, env map[string]string, args ...string) *proc {
	t.Helper()
	return startProcTee(t, nil, env, args...)
}

// startProcTee is startProc, the process's output also copied to tee
// when not nil.
func startProcTee(t *testing.T, tee io.Writer, env map[string]string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	p := &proc{cmd: cmd, stderr: newWatcher(), done: make(chan struct{})}
	var out io.Writer = p.stderr
	if tee != nil {
		out = io.MultiWriter(p.stderr, tee)
	}
	cmd.Stderr, cmd.Stdout = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	return p
}

// startServerProc starts a server process on a free port with args and
// env (its output also copied to tee when not nil), and answers its URL.
func startServerProc(t *testing.T, tee io.Writer, env map[string]string, args ...string) (*proc, string) {
	t.Helper()
	p := startProcTee(t, tee, env, append([]string{"-addr", "127.0.0.1:0"}, args...)...)
	select {
	case url := <-p.stderr.addr:
		return p, url
	case <-p.done:
		t.Fatalf("the server exited: %v\n%s", p.err, p.stderr)
	case <-nearDeadline(t):
		t.Fatalf("the server did not start:\n%s", p.stderr)
	}
	return nil, ""
}

// kill9 kills the process with SIGKILL and waits until it is gone.
func (p *proc) kill9(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
}

// exited waits until the process exits on its own and answers its exit
// code; it fails the test shortly before the test's deadline.
func (p *proc) exited(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
	case <-nearDeadline(t):
		t.Fatalf("the process is still running:\n%s", p.stderr)
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		t.Fatalf("waiting for the process: %v", p.err)
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
