#!/usr/bin/env bash
# Build upstream Cluster API's own e2e suite (the ginkgo specs of sigs.k8s.io/cluster-api/test/e2e) for
# `make conformance` (issue 41): the compiled test binary, kustomize (upstream's Makefile renders the e2e flavors
# with it), and the suite's data and e2e config as the published test module ships them.
#
#   hack/build-e2e-suite.sh [VERSION]      (default: $CAPD_PY_CONFORMANCE_VERSION, else v1.14.2)
#
# The test module's go.mod replaces the root module with `../` and the root module's replaces the api module with
# `./api`, which a dependency's go.mod cannot do: a wrapper module requires the three at VERSION and replaces the
# root and api modules with their published VERSION (as hack/build-upstream.sh does for CAPD). v1.14.2 is the first v1.14 patch the Go module proxy serves for both modules (2026-12-06: root
# v1.14.2 only; test v1.14.1-v1.14.4).
#
# Cached under $CAPD_PY_CACHE/conformance/<version>/: bin/e2e.test, bin/kustomize, data/ (test/e2e/data),
# config/ (test/e2e/config), VERSIONS. A second run is a no-op.
set -euo pipefail
HACK="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VERSION="${1:-${CAPD_PY_CONFORMANCE_VERSION:-v1.14.2}}"
KUSTOMIZE_VERSION="${CAPD_PY_KUSTOMIZE_VERSION:-v5.7.1}"  # upstream main pins v5.7.0 (not served); v5.8 needs go 1.27
CACHE="${CAPD_PY_CACHE:-$HOME/.cache/capd-py}"
ROOT="$CACHE/conformance/$VERSION"
OUT="$ROOT/bin"
command -v go >/dev/null || PATH="/usr/local/go/bin:$PATH"
if [[ -f "$ROOT/.complete" ]]; then
  echo " ✓ upstream Cluster API $VERSION e2e suite cached in $OUT" >&2
  exit 0
fi
start=$(date +%s)
SRC="$ROOT/src"
rm -rf "$SRC" "$OUT" "$ROOT/data" "$ROOT/config"
mkdir -p "$SRC" "$OUT"
cd "$SRC"
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=mod"

echo " • resolving modules: sigs.k8s.io/cluster-api + sigs.k8s.io/cluster-api/test $VERSION" >&2
core_mod=$(go mod download -json "sigs.k8s.io/cluster-api@$VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
test_json=$(go mod download -json "sigs.k8s.io/cluster-api/test@$VERSION")
test_mod=$(sed -n 's/.*"GoMod": "\(.*\)".*/\1/p' <<<"$test_json")
test_dir=$(sed -n 's/.*"Dir": "\(.*\)".*/\1/p' <<<"$test_json")
[[ -n "$core_mod" && -n "$test_dir" ]] || { echo " ✗ the module proxy does not serve both modules at $VERSION" >&2; exit 1; }
gover=$(sed -n 's/^go \(.*\)/\1/p' "$core_mod" "$test_mod" | sort -V | tail -1)
cat > go.mod <<EOF
module capd-py.local/conformance-build

go $gover

require (
	sigs.k8s.io/cluster-api $VERSION
	sigs.k8s.io/cluster-api/api $VERSION
	sigs.k8s.io/cluster-api/test $VERSION
)

// the test module requires the root module, and both require the api module (its own module since v1.14), at
// v0.0.0-00010101000000-000000000000 (their replaces => ../ and ./api do not apply in a dependency): every version of
// them is the published one
replace (
	sigs.k8s.io/cluster-api => sigs.k8s.io/cluster-api $VERSION
	sigs.k8s.io/cluster-api/api => sigs.k8s.io/cluster-api/api $VERSION
)
EOF
cat > tools.go <<EOF
//go:build tools

package tools

import (
	_ "sigs.k8s.io/cluster-api/cmd/clusterctl"
	_ "sigs.k8s.io/cluster-api/test/e2e"
)
EOF
go mod tidy >/dev/null 2>tidy.log || { cat tidy.log >&2; exit 1; }

echo " • compiling the e2e suite (sigs.k8s.io/cluster-api/test/e2e; a while on a cold Go build cache)" >&2
t=$(date +%s)
# the specs' files carry `//go:build e2e` (without the tag: "no test files" and no binary)
CGO_ENABLED=0 go test -c -tags e2e -trimpath -ldflags "-s -w" -o "$OUT/e2e.test" sigs.k8s.io/cluster-api/test/e2e
[[ -x "$OUT/e2e.test" ]] || { echo " ✗ go test -c wrote no $OUT/e2e.test" >&2; exit 1; }
echo "   e2e.test: $(( $(date +%s) - t )) s" >&2

echo " • compiling kustomize $KUSTOMIZE_VERSION" >&2
t=$(date +%s)
GOBIN="$OUT" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kustomize/kustomize/v5@$KUSTOMIZE_VERSION"
echo "   kustomize: $(( $(date +%s) - t )) s" >&2

# clusterctl of the same release, in this module (hack/build-clusterctl.sh: its compiled packages are shared here)
bash "$HACK/build-clusterctl.sh" "$VERSION" "$SRC"

# the suite reads its data (flavors, CNI, extension configs) and e2e config relative to the package directory
cp -r "$test_dir/e2e/data" "$ROOT/data"
cp -r "$test_dir/e2e/config" "$ROOT/config"
chmod -R u+w "$ROOT/data" "$ROOT/config"
{
  echo "sigs.k8s.io/cluster-api $VERSION"
  echo "sigs.k8s.io/cluster-api/api $VERSION"
  echo "sigs.k8s.io/cluster-api/test $VERSION"
  echo "sigs.k8s.io/kustomize/kustomize/v5 $KUSTOMIZE_VERSION"
  go version
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) in $(( $(date +%s) - start )) s"
} > "$ROOT/VERSIONS"
touch "$ROOT/.complete"
echo " ✓ upstream Cluster API $VERSION e2e suite in $OUT ($(( $(date +%s) - start )) s)" >&2
