#!/usr/bin/env bash
# A local Kubernetes cluster to try deployplane on, with one command: the real control plane
# (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) on loopback and kwok's fake
# nodes, on which pods become Running and Ready without running containers. The same cluster
# the project's tests use (.ci/kube.sh starts two of them).
#
#   bash .ci/kube/cluster.sh up DIR [NODES]   start it (NODES fake nodes of 110 pods, default 2);
#                                             DIR gets kubeconfig, a kubectl for it, logs, pids
#   bash .ci/kube/cluster.sh down DIR         stop it and remove DIR
#
# `up` prints the line to paste: export KUBECONFIG=DIR/kubeconfig. DIR/kubectl is kubectl (from
# the same binary) bound to that kubeconfig, for machines without one. The first `up` builds the
# binary from this directory's module and caches it under ~/.cache/deployplane-kube (about 12
# minutes on 2 cores, 2 GB of module downloads; later starts take seconds). Needs Go, openssl
# and curl; the cluster's context is named "local".
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
usage() { echo "usage: cluster.sh up DIR [NODES] | down DIR" >&2; exit 2; }
[ $# -ge 2 ] || usage
cmd=$1 dir=$2
case $cmd in
up)
	nodes=${3:-2}
	if [ -f "$dir/apiserver.pid" ] && kill -0 "$(cat "$dir/apiserver.pid")" 2>/dev/null; then
		echo "cluster.sh: a cluster already runs in $dir (cluster.sh down $dir stops it)" >&2
		exit 1
	fi
	# shellcheck source=../kube.sh
	source "$here/../kube.sh"
	bin=$(bash "$here/build.sh")
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	base=$(_kube_free_base $((20000 + RANDOM % 20000))) || { echo "cluster.sh: no free ports" >&2; exit 1; }
	# In a session of its own, so that closing the terminal does not stop the cluster.
	if ! CONTEXT=local setsid -w bash "$here/up.sh" "$bin" "$dir" "$base" "$nodes" >/dev/null; then
		bash "$here/down.sh" "$dir"
		echo "cluster.sh: the cluster did not start; its logs are in $dir/*.log" >&2
		exit 1
	fi
	printf '#!/bin/sh\nexec %q kubectl --kubeconfig %q "$@"\n' "$bin" "$dir/kubeconfig" >"$dir/kubectl"
	chmod +x "$dir/kubectl"
	echo "cluster.sh: the cluster runs (API server https://127.0.0.1:$((base + 2)), $nodes fake nodes); stop it with: bash .ci/kube/cluster.sh down $dir" >&2
	echo "export KUBECONFIG=$dir/kubeconfig"
	;;
down)
	[ -d "$dir" ] || exit 0
	bash "$here/down.sh" "$dir"
	rm -rf "$dir"
	;;
*) usage ;;
esac
