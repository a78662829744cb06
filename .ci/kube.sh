# .ci/kube.sh: two throwaway Kubernetes control planes for the deployk8s tests.
#
# Source this file (do not run it), then:
#
#   kube_start              # builds (or reuses) .ci/kube's binary, starts two clusters,
#                           # exports DEPLOYPLANE_TEST_KUBECONFIG
#   trap kube_stop EXIT     # stops them by pid and deletes their directory
#
# Each cluster is etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok
# (fake nodes) on loopback, started by .ci/kube/up.sh on its own ports. The exported
# kubeconfig holds both, as the contexts kube-a and kube-b (kube-a is current). The binary
# is built from the nested module .ci/kube and cached under
# ${XDG_CACHE_HOME:-~/.cache}/deployplane-kube/ keyed by its go.sum (cold: 12 minutes on 2 idle cores, up to 29 on loaded ones; see .ci/run).

_kube_log() { echo "kube.sh: $*" >&2; }

# _kube_free_base prints a port base P with P, P+1 and P+2 free on loopback, above $1.
_kube_free_base() {
	local p=$1 i busy
	while [ "$p" -lt 60000 ]; do
		busy=
		for i in 0 1 2; do
			if (exec 3<>"/dev/tcp/127.0.0.1/$((p + i))") 2>/dev/null; then busy=1; fi
		done
		if [ -z "$busy" ]; then echo "$p"; return 0; fi
		p=$((p + 3))
	done
	return 1
}

# _kube_entry prints the flow-style list item of key $2 (clusters, users, contexts) from the
# kubeconfig $1 that up.sh wrote.
_kube_entry() { sed -n "s/^$2: \[\(.*\)\]\$/\1/p" "$1"; }

# _kube_up starts cluster $3 in directory $4 on the first free port base above $5 with $6
# nodes, and prints the base it used. A start that fails (a port taken between the check and
# the bind, a process that died) is stopped and tried again on other ports, three times in all.
_kube_up() {
	local here=$1 bin=$2 ctx=$3 d=$4 base=$5 nodes=$6 try
	for try in 1 2 3; do
		base=$(_kube_free_base "$base") || return 1
		if CONTEXT=$ctx bash "$here/kube/up.sh" "$bin" "$d" "$base" "$nodes" >/dev/null; then
			echo "$base"
			return 0
		fi
		bash "$here/kube/down.sh" "$d"
		_kube_log "$ctx did not start on ports $base-$((base + 2)) (try $try of 3)"
		base=$((base + 3 + RANDOM % 1000))
	done
	return 1
}

kube_start() {
	if [ -n "${_KUBE_DIR:-}" ]; then return 0; fi
	local missing=
	command -v openssl >/dev/null 2>&1 || missing="$missing openssl"
	command -v curl >/dev/null 2>&1 || missing="$missing curl"
	if [ -n "$missing" ]; then
		if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
			_kube_log "installing$missing from Debian's packages"
			{ DEBIAN_FRONTEND=noninteractive apt-get update -q &&
				DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing ca-certificates; } >&2 || return 1
		else
			_kube_log "missing$missing and cannot install it: the deployk8s tests will skip"
			return 0
		fi
	fi
	local here bin dir base a b
	here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
	_kube_log "building the test control plane (cached after the first run)"
	bin=$(bash "$here/kube/build.sh") || return 1
	dir=$(mktemp -d) || return 1
	_KUBE_DIR=$dir
	base=$((20000 + RANDOM % 20000))
	# kube-a has room for the scale test (DEPLOYK8S_SCALE=1000: 2,000 pods).
	base=$(_kube_up "$here" "$bin" kube-a "$dir/a" "$base" 20) || return 1
	_kube_up "$here" "$bin" kube-b "$dir/b" "$((base + 3))" 2 >/dev/null || return 1
	a=$dir/a/kubeconfig b=$dir/b/kubeconfig
	cat >"$dir/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters: [$(_kube_entry "$a" clusters), $(_kube_entry "$b" clusters)]
users: [$(_kube_entry "$a" users), $(_kube_entry "$b" users)]
contexts: [$(_kube_entry "$a" contexts), $(_kube_entry "$b" contexts)]
current-context: kube-a
KC
	export DEPLOYPLANE_TEST_KUBECONFIG=$dir/kubeconfig
	_kube_log "two clusters up (contexts kube-a, kube-b): DEPLOYPLANE_TEST_KUBECONFIG=$DEPLOYPLANE_TEST_KUBECONFIG"
}

kube_stop() {
	if [ -z "${_KUBE_DIR:-}" ]; then return 0; fi
	local here
	here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
	bash "$here/kube/down.sh" "$_KUBE_DIR/a"
	bash "$here/kube/down.sh" "$_KUBE_DIR/b"
	rm -rf "$_KUBE_DIR"
	_KUBE_DIR=
	unset DEPLOYPLANE_TEST_KUBECONFIG
}
