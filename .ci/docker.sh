# .ci/docker.sh: a throwaway Docker daemon for the deploydocker tests.
#
# Source this file (do not run it), then:
#
#   docker_start            # installs docker.io if needed, starts a daemon,
#                           # exports DEPLOYPLANE_TEST_DOCKER
#   trap docker_stop EXIT   # stops the daemon and deletes its directory
#
# docker_start installs Debian's `docker.io` package when no dockerd is found
# (needs root and apt-get; the packaged service is not started), then starts
# its own dockerd with its data root, exec root, pid file and socket in a new
# temporary directory: no bridge, no iptables and no masquerading (containers
# use host networking, so the tests reach them on 127.0.0.1 and never use a
# bridge's private addresses), the vfs storage driver (works on any file
# system, overlay or not). It waits until the daemon answers and exports
# DEPLOYPLANE_TEST_DOCKER=unix://<dir>/docker.sock, which the tests use as
# their DOCKER_HOST. DOCKER_SOCKET_DIR, when set, is the directory to use
# instead of a new temporary one (it must not exist).
#
# Both functions are idempotent: a second docker_start while the daemon runs
# does nothing, and docker_stop without a running daemon does nothing. Both
# return non-zero on failure and work whether or not the caller uses
# `set -e`. docker_stop stops the daemon by its PID (and the containers it
# ran with it), leaving no process and no directory behind. Should the
# sourcing shell die without running docker_stop (SIGKILL, a CI timeout), a
# small watcher process that docker_start leaves behind stops the daemon
# within seconds.

# _docker_log prints a progress line on stderr.
_docker_log() { echo "docker.sh: $*" >&2; }

# _docker_install installs Debian's docker.io without starting its service:
# a temporary policy-rc.d forbids invoke-rc.d from starting anything.
_docker_install() {
	if [ "$(id -u)" != 0 ]; then
		_docker_log "dockerd is not installed and we are not root: install package docker.io"
		return 1
	fi
	_docker_log "installing docker.io from Debian's packages"
	local policy=/usr/sbin/policy-rc.d made_policy=
	if [ ! -e "$policy" ]; then
		printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && made_policy=1
	fi
	local rc=0
	{ DEBIAN_FRONTEND=noninteractive apt-get update -q &&
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends docker.io; } >&2 || rc=$?
	if [ -n "$made_policy" ]; then rm -f "$policy"; fi
	return $rc
}

# _docker_kill stops the daemon whose pid file is in $1 and waits for it.
_docker_kill() {
	local dir=$1 pid i
	pid=$(cat "$dir/docker.pid" 2>/dev/null || true)
	if [ -z "$pid" ] && [ -f "$dir/dockerd.pid" ]; then
		pid=$(cat "$dir/dockerd.pid")
	fi
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		for i in $(seq 1 150); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.2
		done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	# The daemon's containerd and shims run under the exec root; kill what
	# is left of them by the pids they wrote there.
	local f
	for f in $(find "$dir/exec" -name '*.pid' 2>/dev/null); do
		pid=$(cat "$f" 2>/dev/null || true)
		if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
	done
	# Mounts left under the data root (vfs makes none, but containers' shm
	# and the like) must go before the directory can be removed.
	grep -o " $dir/[^ ]*" /proc/mounts 2>/dev/null | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
	rm -rf "$dir"
}

# docker_start starts the throwaway daemon and exports
# DEPLOYPLANE_TEST_DOCKER. It is a no-op when the daemon already runs.
docker_start() {
	if [ -n "${_DOCKER_DIR:-}" ] && [ -d "${_DOCKER_DIR:-}" ]; then
		return 0
	fi
	if ! command -v dockerd >/dev/null 2>&1; then
		_docker_install || return 1
		command -v dockerd >/dev/null 2>&1 || { _docker_log "no dockerd after installing docker.io"; return 1; }
	fi
	if [ "$(id -u)" != 0 ]; then
		_docker_log "dockerd needs root (rootless Docker is not set up by this script)"
		return 1
	fi
	if [ -n "${DOCKER_SOCKET_DIR:-}" ]; then
		mkdir -p "$DOCKER_SOCKET_DIR" && _DOCKER_DIR=$DOCKER_SOCKET_DIR || return 1
	else
		_DOCKER_DIR=$(mktemp -d "${TMPDIR:-/tmp}/deployplane-docker.XXXXXXXX") || { _DOCKER_DIR=; return 1; }
	fi
	mkdir -p "$_DOCKER_DIR/data" "$_DOCKER_DIR/exec"
	local sock="$_DOCKER_DIR/docker.sock"
	# setsid: the daemon gets its own session, so a Ctrl-C in the shell
	# does not reach it before docker_stop does.
	setsid dockerd \
		--host "unix://$sock" \
		--data-root "$_DOCKER_DIR/data" \
		--exec-root "$_DOCKER_DIR/exec" \
		--pidfile "$_DOCKER_DIR/docker.pid" \
		--bridge=none --iptables=false --ip-masq=false \
		--storage-driver=vfs \
		>"$_DOCKER_DIR/dockerd.log" 2>&1 </dev/null &
	echo $! >"$_DOCKER_DIR/dockerd.pid"

	local i ok=
	for i in $(seq 1 150); do
		if DOCKER_HOST="unix://$sock" docker version >/dev/null 2>&1; then
			ok=1
			break
		fi
		if ! kill -0 "$(cat "$_DOCKER_DIR/dockerd.pid")" 2>/dev/null; then
			break
		fi
		sleep 0.2
	done
	if [ -z "$ok" ]; then
		_docker_log "dockerd did not start:"; tail -n 20 "$_DOCKER_DIR/dockerd.log" >&2
		docker_stop
		return 1
	fi

	# A watcher stops the daemon if this shell dies without running
	# docker_stop: the daemon runs in its own session and would outlive it.
	local parent=$$ dir=$_DOCKER_DIR
	(
		exec </dev/null >/dev/null 2>&1
		while kill -0 "$parent" 2>/dev/null; do sleep 2; done
		_docker_kill "$dir"
	) &
	_DOCKER_WATCHER=$!

	export DEPLOYPLANE_TEST_DOCKER="unix://$sock"
	_docker_log "dockerd $(DOCKER_HOST="unix://$sock" docker version --format '{{.Server.Version}} (API {{.Server.APIVersion}})' 2>/dev/null) on $DEPLOYPLANE_TEST_DOCKER"
}

# docker_stop stops the daemon, deletes its directory and unsets
# DEPLOYPLANE_TEST_DOCKER. It is a no-op when no daemon runs.
docker_stop() {
	if [ -z "${_DOCKER_DIR:-}" ]; then
		return 0
	fi
	if [ -n "${_DOCKER_WATCHER:-}" ]; then
		kill "$_DOCKER_WATCHER" 2>/dev/null || true
		wait "$_DOCKER_WATCHER" 2>/dev/null || true
		_DOCKER_WATCHER=
	fi
	_docker_kill "$_DOCKER_DIR"
	_DOCKER_DIR=
	unset DEPLOYPLANE_TEST_DOCKER
	return 0
}
