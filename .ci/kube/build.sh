#!/usr/bin/env bash
# Builds kube (etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok in one
# binary) from this nested module and prints its path. The binary is cached outside the clone,
# keyed by this module's go.sum, so a second run on the same machine skips the build: cold
# it takes up to 29 minutes and 2 GB of module downloads on 2 loaded cores; cached, nothing.
# Usage: build.sh   (prints the binary's path on stdout)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
key=$(cat "$here/go.mod" "$here/go.sum" "$here/main.go" | sha256sum | cut -c1-32)
out=${XDG_CACHE_HOME:-$HOME/.cache}/deployplane-kube/$key/kube
if [ ! -x "$out" ]; then
  mkdir -p "$(dirname "$out")"
  K8S=$(cd "$here" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
  v=${K8S#v}; major=${v%%.*}; minor=$(echo "$v" | cut -d. -f2)
  # The version ldflags make the server report its real version (client-go reads it).
  (cd "$here" && CGO_ENABLED=0 go build -trimpath -o "$out.tmp" -ldflags "-s -w \
    -X k8s.io/component-base/version.gitVersion=$K8S -X k8s.io/component-base/version.gitMajor=$major \
    -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/client-go/pkg/version.gitVersion=$K8S" .)
  mv "$out.tmp" "$out"
fi
echo "$out"
