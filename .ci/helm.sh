# .ci/helm.sh: the helm command of the chart's tests (deploy/helm/deployplane).
#
# Source this file (do not run it), then:
#
#   helm_build_bg           # optional: starts the build in the background
#   ...                     # other work
#   helm_build              # waits for it (or builds now), exports DEPLOYPLANE_TEST_HELM
#
# helm is built from its Go module (helm.sh/helm/v4, the version in .ci/helm/go.mod's tool
# directive) in the nested module .ci/helm, so that the project's own go.mod never requires it
# (nothing of helm is linked into the server), and cached under
# ${XDG_CACHE_HOME:-~/.cache}/deployplane-helm/ keyed by that module's go.mod and go.sum.
# Cold, with empty module and build caches on 2 cores: 16 minutes at a load average of 26
# beside other builds (2026-12-05), of which 229 CPU-seconds (4 minutes at most on two idle
# cores) and 540 MB of module downloads; cached, nothing.

_helm_log() { echo "helm.sh: $*" >&2; }

helm_build_bg() {
	if [ -n "${_HELM_PID:-}" ]; then return 0; fi
	local here
	here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
	_HELM_OUT=$(mktemp) _HELM_ERR=$(mktemp)
	_helm_log "building helm in the background (cached after the first run)"
	bash "$here/helm/build.sh" >"$_HELM_OUT" 2>"$_HELM_ERR" &
	_HELM_PID=$!
}

helm_build() {
	local here bin
	here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
	if [ -n "${_HELM_PID:-}" ]; then
		if ! wait "$_HELM_PID"; then
			_helm_log "building helm failed:"
			cat "$_HELM_ERR" >&2
			rm -f "$_HELM_OUT" "$_HELM_ERR"
			_HELM_PID=
			return 1
		fi
		bin=$(cat "$_HELM_OUT")
		rm -f "$_HELM_OUT" "$_HELM_ERR"
		_HELM_PID=
	else
		_helm_log "building helm (cached after the first run)"
		bin=$(bash "$here/helm/build.sh") || return 1
	fi
	export DEPLOYPLANE_TEST_HELM=$bin
	_helm_log "$("$bin" version --short 2>/dev/null || echo helm): DEPLOYPLANE_TEST_HELM=$bin"
}
