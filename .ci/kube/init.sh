#!/usr/bin/env bash
# Regenerates this nested module's go.mod and go.sum from the pinned versions below.
# Only needed to change a version; build.sh builds from the committed go.mod/go.sum.
# k8s.io/kubernetes points its staging modules at ./staging with replace directives, which a
# dependent module cannot see: each is replaced with its published version instead.
set -euo pipefail
cd "$(dirname "$0")"
K8S=v1.36.3 STAGING=v0.36.3 KWOK=v0.8.0 ETCD=v3.6.8
mod=$(go mod download -json k8s.io/kubernetes@$K8S | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
{ echo "module deployplane.test/kube"; echo; echo "go 1.26.0"; echo
  grep -E '=> \./staging' "$mod" | awk -v v=$STAGING '{print "replace " $1 " => " $1 " " v}'; } > go.mod
rm -f go.sum
go get k8s.io/kubernetes@$K8S sigs.k8s.io/kwok@$KWOK go.etcd.io/etcd/server/v3@$ETCD >/dev/null
go mod tidy >/dev/null
