#!/usr/bin/env bash
# Builds helm from this nested module (its go.mod's tool directive, helm.sh/helm/v4) and prints
# the binary's path. The binary is cached outside the clone, keyed by this module's go.mod and
# go.sum, so a second run on the same machine skips the build (cold: see .ci/helm.sh).
# Usage: build.sh   (prints the binary's path on stdout)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
key=$(cat "$here/go.mod" "$here/go.sum" | sha256sum | cut -c1-32)
out=${XDG_CACHE_HOME:-$HOME/.cache}/deployplane-helm/$key/helm
if [ ! -x "$out" ]; then
  mkdir -p "$(dirname "$out")"
  v=$(cd "$here" && go list -m -f '{{.Version}}' helm.sh/helm/v4)
  # The version ldflag makes `helm version` (and a chart's kubeVersion checks) report the
  # module's version, as helm's own Makefile does.
  (cd "$here" && CGO_ENABLED=0 go build -trimpath -o "$out.tmp" \
    -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$v" helm.sh/helm/v4/cmd/helm)
  mv "$out.tmp" "$out"
fi
echo "$out"
