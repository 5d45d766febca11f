#!/usr/bin/env bash
# Build the parity corpus generator (hack/parity) and regenerate tests/fixtures/parity/ (`make parity-corpus`).
# The build happens in $CAPD_PY_CACHE/parity/<hash of hack/parity>/ (cached: a second run only re-runs the
# generator). Upstream's internal/topology/variables package cannot be imported (internal/), so its
# non-test files are copied verbatim from the cluster-api module (the Go module cache) into the build
# directory as package capdpy.local/parity/upstreamvariables.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
CACHE="${CAPD_PY_CACHE:-$HOME/.cache/capd-py}"
command -v go >/dev/null || PATH="/usr/local/go/bin:$PATH"
hash=$(cat "$HERE"/go.mod "$HERE"/go.sum "$HERE"/*.go "$HERE"/run.sh | sha256sum | cut -c1-16)
BUILD="$CACHE/parity/$hash"
BIN="$BUILD/parity"
if [[ ! -x "$BIN" ]]; then
  echo " • building the parity generator in $BUILD" >&2
  rm -rf "$BUILD.tmp" && mkdir -p "$BUILD.tmp/upstreamvariables"
  cp "$HERE"/go.mod "$HERE"/go.sum "$HERE"/*.go "$BUILD.tmp/"
  (cd "$BUILD.tmp" && go mod download sigs.k8s.io/cluster-api)
  src="$(cd "$BUILD.tmp" && go list -m -f '{{.Dir}}' sigs.k8s.io/cluster-api)/internal/topology/variables"
  for f in "$src"/*.go; do
    case "$f" in *_test.go) continue ;; esac
    cp "$f" "$BUILD.tmp/upstreamvariables/"
  done
  chmod -R u+w "$BUILD.tmp"
  (cd "$BUILD.tmp" && CGO_ENABLED=0 go build -trimpath -o parity .)
  rm -rf "$BUILD" && mv "$BUILD.tmp" "$BUILD"
fi
cd "$ROOT"
"$BIN" -out tests/fixtures/parity "$@"
