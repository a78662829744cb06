# .ci/postgres.sh: a throwaway PostgreSQL cluster for the storepg tests.
#
# Source this file (do not run it), then:
#
#   pg_start            # installs PostgreSQL if needed, starts a cluster,
#                       # exports DEPLOYPLANE_TEST_POSTGRES_DSN
#   trap pg_stop EXIT   # stops the cluster and deletes its directory
#
# pg_start installs Debian's `postgresql` package when no initdb/pg_ctl is
# found (needs root and apt-get), creates a cluster in a new temporary
# directory owned by an unprivileged user (`postgres` when running as root,
# the current user otherwise), and starts it listening on 127.0.0.1 only, on a
# free port, with its unix socket inside that directory. The cluster accepts
# only password (SCRAM) logins, with a random password that appears only in
# the exported DSN.
#
# Both functions are idempotent: a second pg_start while the cluster runs does
# nothing, and pg_stop without a running cluster does nothing. Both return
# non-zero on failure and work whether or not the caller uses `set -e`.
# pg_stop leaves no process and no directory behind. Should the sourcing
# shell die without running pg_stop (SIGKILL, a CI timeout), a small watcher
# process that pg_start leaves behind stops the cluster within seconds.

# _pg_log prints a progress line on stderr.
_pg_log() { echo "postgres.sh: $*" >&2; }

# _pg_bindir prints the directory that holds initdb and pg_ctl, or nothing.
_pg_bindir() {
	local d
	if command -v pg_ctl >/dev/null 2>&1 && command -v initdb >/dev/null 2>&1; then
		d=$(dirname "$(readlink -f "$(command -v pg_ctl)")")
		if [ -x "$d/initdb" ] && [ -x "$d/postgres" ]; then
			echo "$d"
			return 0
		fi
	fi
	# Debian keeps the server binaries off PATH, one directory per major version.
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
		if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && [ -x "$d/postgres" ]; then
			echo "$d"
			return 0
		fi
	done
	return 1
}

# _pg_install installs Debian's PostgreSQL without starting any service:
# a temporary policy-rc.d forbids invoke-rc.d from starting the packaged
# "main" cluster, so nothing but our own cluster ever runs.
_pg_install() {
	if [ "$(id -u)" != 0 ]; then
		_pg_log "PostgreSQL is not installed and we are not root: install package postgresql"
		return 1
	fi
	_pg_log "installing PostgreSQL from Debian's packages"
	local policy=/usr/sbin/policy-rc.d made_policy=
	if [ ! -e "$policy" ]; then
		printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && made_policy=1
	fi
	local rc=0
	{ DEBIAN_FRONTEND=noninteractive apt-get update -q &&
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql; } >&2 || rc=$?
	if [ -n "$made_policy" ]; then rm -f "$policy"; fi
	return $rc
}

# _pg_as runs a command as the cluster's owner.
_pg_as() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u "$_PG_USER" -- "$@"
	else
		"$@"
	fi
}

# _pg_free_port prints a TCP port on 127.0.0.1 that nothing listens on now.
# (The server may still lose a race for it; pg_start then tries another.)
_pg_free_port() {
	local i port
	for i in $(seq 1 50); do
		port=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			echo "$port"
			return 0
		fi
	done
	return 1
}

# pg_start starts the throwaway cluster and exports
# DEPLOYPLANE_TEST_POSTGRES_DSN. It is a no-op when the cluster already runs.
pg_start() {
	if [ -n "${_PG_DIR:-}" ] && [ -d "${_PG_DIR:-}" ]; then
		return 0
	fi
	local bindir
	if ! bindir=$(_pg_bindir); then
		_pg_install || return 1
		bindir=$(_pg_bindir) || { _pg_log "no initdb/pg_ctl after installing postgresql"; return 1; }
	fi

	_PG_USER=$(id -un)
	if [ "$(id -u)" = 0 ]; then
		# The server refuses to run as root. Debian's package creates the
		# unprivileged system user `postgres`; create one if it is missing.
		_PG_USER=postgres
		if ! id -u "$_PG_USER" >/dev/null 2>&1; then
			useradd --system --no-create-home --shell /usr/sbin/nologin "$_PG_USER" || return 1
		fi
	fi

	_PG_BIN=$bindir
	_PG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/deployplane-pg.XXXXXXXX") || { _PG_DIR=; return 1; }
	chmod 700 "$_PG_DIR" && chown "$_PG_USER" "$_PG_DIR" || { pg_stop; return 1; }

	local password
	password=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
	printf '%s\n' "$password" >"$_PG_DIR/pwfile"
	chown "$_PG_USER" "$_PG_DIR/pwfile"
	if ! _pg_as "$_PG_BIN/initdb" -D "$_PG_DIR/data" -U postgres --pwfile="$_PG_DIR/pwfile" \
		--auth=scram-sha-256 --encoding=UTF8 --locale=C >"$_PG_DIR/initdb.log" 2>&1; then
		_pg_log "initdb failed:"; cat "$_PG_DIR/initdb.log" >&2
		pg_stop
		return 1
	fi
	rm -f "$_PG_DIR/pwfile"

	local try port=
	for try in 1 2 3 4 5; do
		port=$(_pg_free_port) || break
		if _pg_as "$_PG_BIN/pg_ctl" -D "$_PG_DIR/data" -l "$_PG_DIR/server.log" -w -t 60 start \
			-o "-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories=$_PG_DIR -c max_connections=200" \
			>/dev/null 2>&1; then
			break
		fi
		port=
	done
	if [ -z "$port" ]; then
		_pg_log "could not start the server:"; tail -n 20 "$_PG_DIR/server.log" >&2
		pg_stop
		return 1
	fi

	if ! PGPASSWORD=$password "$_PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres -d postgres \
		-c 'CREATE DATABASE deployplane_test' >&2; then
		_pg_log "could not create the test database"
		pg_stop
		return 1
	fi

	# A watcher stops the cluster if this shell dies without running
	# pg_stop (killed, say, by a CI timeout): the server runs detached and
	# would outlive it. It holds none of the shell's output open.
	local parent=$$
	(
		exec </dev/null >/dev/null 2>&1
		while kill -0 "$parent" 2>/dev/null; do sleep 2; done
		_pg_as "$_PG_BIN/pg_ctl" -D "$_PG_DIR/data" -m immediate -w -t 30 stop
		rm -rf "$_PG_DIR"
	) &
	_PG_WATCHER=$!

	export DEPLOYPLANE_TEST_POSTGRES_DSN="postgres://postgres:$password@127.0.0.1:$port/deployplane_test?sslmode=disable"
	_pg_log "PostgreSQL $("$_PG_BIN/postgres" --version | awk '{print $3}') on 127.0.0.1:$port, data in $_PG_DIR"
}

# pg_stop stops the cluster, deletes its directory and unsets
# DEPLOYPLANE_TEST_POSTGRES_DSN. It is a no-op when no cluster runs.
pg_stop() {
	if [ -z "${_PG_DIR:-}" ]; then
		return 0
	fi
	if [ -n "${_PG_WATCHER:-}" ]; then
		kill "$_PG_WATCHER" 2>/dev/null || true
		wait "$_PG_WATCHER" 2>/dev/null || true
		_PG_WATCHER=
	fi
	if [ -f "$_PG_DIR/data/postmaster.pid" ]; then
		_pg_as "$_PG_BIN/pg_ctl" -D "$_PG_DIR/data" -m fast -w -t 30 stop >/dev/null 2>&1 ||
			_pg_as "$_PG_BIN/pg_ctl" -D "$_PG_DIR/data" -m immediate -w -t 30 stop >/dev/null 2>&1 ||
			_pg_log "could not stop the server in $_PG_DIR"
	fi
	# Last resort: a postmaster that survived pg_ctl's immediate stop.
	local pid
	pid=$(head -n 1 "$_PG_DIR/data/postmaster.pid" 2>/dev/null || true)
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -rf "$_PG_DIR"
	_PG_DIR=
	unset DEPLOYPLANE_TEST_POSTGRES_DSN
	return 0
}
