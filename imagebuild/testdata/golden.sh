#!/usr/bin/env bash
# Regenerates testdata/golden/*.Dockerfile with the real langgraph CLI
# (../shared/clients/langgraph from the repository root; see its README).
# Run from imagebuild/: testdata/golden.sh
set -euo pipefail
cli=$(cd ../.. && pwd)/../shared/clients/langgraph
[ -x "$cli" ] || { echo "no langgraph CLI at $cli" >&2; exit 1; }
out=$(pwd)/testdata/golden
mkdir -p "$out"
for p in pyapp pypkg flatagent jsapp pyenv jsenv; do
  (cd testdata/projects/$p && "$cli" dockerfile -c langgraph.json "$out/$p.Dockerfile" >/dev/null)
done
for p in pyapp jsapp; do
  (cd testdata/projects/$p && "$cli" dockerfile -c langgraph.json --base-image registry.example/base "$out/$p.base.Dockerfile" >/dev/null)
done
# The monorepo JavaScript build (install and build commands) is what
# `langgraph build --install-command ... --build-command ...` generates when
# run at the repository root: config_to_docker with build_context.
(cd testdata/projects/jsmono && PYTHONPATH=$(dirname "$(ls -d ~/.cache/deployplane-clients/*/langgraph-cli | head -1)")/langgraph-cli \
  /usr/bin/python3 -c '
import pathlib, sys
from langgraph_cli.config import validate_config_file, config_to_docker
p = pathlib.Path("apps/agent/langgraph.json").resolve()
text, _ = config_to_docker(p, validate_config_file(p), install_command="npm ci && npm run prep", build_command="npm run build", build_context=str(pathlib.Path.cwd()))
sys.stdout.write(text)' >"$out/jsmono.Dockerfile")
