// Command dbimage is the entrypoint of the test images of the
// deployments' databases: Debian's own postgres and redis-server, copied
// with their libraries into images FROM scratch (see dbimage_test.go),
// started the way the official postgres and redis images start them, so
// that the Deployer under test drives them exactly as it drives those:
//
//	dbimage -p 5432 -c max_connections=20   postgres: arguments that start
//	                                         with "-" are postgres's
//	dbimage redis-server --port 6379 ...     redis-server with its arguments
//
// For postgres it makes $PGDATA (default /var/lib/postgresql/data) the
// postgres user's (uid 999), becomes that user, runs initdb when the
// directory holds no cluster (superuser postgres, password
// $POSTGRES_PASSWORD, SCRAM for TCP logins), then execs postgres. $PGBIN
// is the directory of initdb and postgres.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

const postgresUID = 999

func main() {
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "redis-server" {
		run("/usr/bin/redis-server", args[1:])
	}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		args = append([]string{"postgres"}, args...)
	}
	if args[0] != "postgres" {
		fail("unknown command %q", args[0])
	}
	data := os.Getenv("PGDATA")
	if data == "" {
		data = "/var/lib/postgresql/data"
	}
	if err := os.MkdirAll(data, 0o700); err != nil {
		fail("%v", err)
	}
	if err := os.Chown(data, postgresUID, postgresUID); err != nil {
		fail("%v", err)
	}
	if err := os.Chmod(data, 0o700); err != nil {
		fail("%v", err)
	}
	if err := syscall.Setgid(postgresUID); err != nil {
		fail("setgid: %v", err)
	}
	if err := syscall.Setuid(postgresUID); err != nil {
		fail("setuid: %v", err)
	}
	bin := os.Getenv("PGBIN")
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); os.IsNotExist(err) {
		pw := filepath.Join(os.TempDir(), "pwfile")
		if err := os.WriteFile(pw, []byte(os.Getenv("POSTGRES_PASSWORD")+"\n"), 0o600); err != nil {
			fail("%v", err)
		}
		initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--pwfile", pw,
			"--auth-host", "scram-sha-256", "--auth-local", "trust", "--locale", "C", "-E", "UTF8")
		initdb.Stdout, initdb.Stderr = os.Stdout, os.Stderr
		if err := initdb.Run(); err != nil {
			fail("initdb: %v", err)
		}
		os.Remove(pw)
		// TCP logins from anywhere with the password, as the official
		// image allows (initdb's own lines cover loopback only).
		f, err := os.OpenFile(filepath.Join(data, "pg_hba.conf"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			fail("%v", err)
		}
		fmt.Fprintln(f, "host all all all scram-sha-256")
		f.Close()
	}
	run(filepath.Join(bin, "postgres"), append([]string{"-D", data}, args[1:]...))
}

// run replaces this process with the program.
func run(path string, args []string) {
	err := syscall.Exec(path, append([]string{path}, args...), os.Environ())
	fail("exec %s: %v", path, err)
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "dbimage: "+format+"\n", args...)
	os.Exit(1)
}
