#!/usr/bin/env bash
# Build upstream clusterctl from the Go module proxy. Up to v1.13 plain `go install` (the root module has no replace
# lines); from v1.14 the root module says `replace sigs.k8s.io/cluster-api/api => ./api`, which `go install pkg@v`
# refuses, so a wrapper module requires the root module and its api module at the same version and builds
# cmd/clusterctl. Cached per version under $CAPD_PY_CACHE/clusterctl/<version>/: a second run is a no-op.
# v1.13.6 cold ~3-9 min on 2 cores; v1.14.0 (wrapper module, nearly cold) 168 s. Run it with `nice` beside other work.
#
#   hack/build-clusterctl.sh VERSION [MODULE_DIR]
#
# MODULE_DIR: build it in that Go module instead (one that requires sigs.k8s.io/cluster-api at VERSION and imports
# cmd/clusterctl from its tools.go: hack/build-upstream.sh's and hack/build-e2e-suite.sh's wrapper modules). Its
# packages and their dependencies are then compiled already, so clusterctl costs its own packages and a link (~15
# CPU-s) instead of a build of its own (~150-170 CPU-s cold: cluster-api's go.mod alone resolves golang.org/x/net,
# grpc and others at other patch versions than those modules, so the Go build cache shares nothing). The cluster-api
# code is the release's; its dependencies are at that module's versions (recorded in $OUT/VERSIONS).
set -euo pipefail
VERSION="${1:-v1.13.6}"
MODULE_DIR="${2:-}"
CACHE="${CAPD_PY_CACHE:-$HOME/.cache/capd-py}"
OUT="$CACHE/clusterctl/$VERSION"
if [[ -f "$OUT/.complete" && -x "$OUT/clusterctl" ]]; then
  echo " ✓ clusterctl $VERSION cached in $OUT" >&2
  exit 0
fi
mkdir -p "$OUT"
command -v go >/dev/null || PATH="/usr/local/go/bin:$PATH"
pkg="sigs.k8s.io/cluster-api/cmd/clusterctl"
# The same version stamps upstream's Makefile sets (hack/version.sh), so `clusterctl version` is honest.
ver="sigs.k8s.io/cluster-api/version"
ld="-s -w -X $ver.gitVersion=$VERSION -X $ver.gitTreeState=clean"
ld+=" -X $ver.gitMajor=1 -X $ver.gitMinor=$(cut -d. -f2 <<<"${VERSION#v}")"
ld+=" -X $ver.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo " • building clusterctl $VERSION ($pkg from the Go module proxy; takes a while on a cold cache)" >&2
start=$(date +%s)
if [[ -n "$MODULE_DIR" ]]; then
  (cd "$MODULE_DIR" && CGO_ENABLED=0 go build -trimpath -ldflags "$ld" -o "$OUT/clusterctl" "$pkg")
  { echo "sigs.k8s.io/cluster-api $VERSION"; echo "built in $(sed -n 's/^module //p' "$MODULE_DIR/go.mod")"
    echo "(its dependencies at that module's versions: $MODULE_DIR/go.mod)"; go version; } > "$OUT/VERSIONS"
  touch "$OUT/.complete"
  echo " ✓ clusterctl $VERSION in $OUT ($(( $(date +%s) - start )) s, in $MODULE_DIR)" >&2
  exit 0
fi
root_mod=$(go mod download -json "sigs.k8s.io/cluster-api@$VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
if ! grep -q '^replace ' "$root_mod"; then
  CGO_ENABLED=0 GOBIN="$OUT" go install -trimpath -ldflags "$ld" "$pkg@$VERSION"
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  gover=$(sed -n 's/^go \(.*\)/\1/p' "$root_mod")
  # the root module's replace targets (./api, ...) are published as their own modules, tagged <dir>/<version>
  reqs=$(sed -n 's|^replace \(sigs.k8s.io/cluster-api/[^ ]*\) => \./.*|\1|p' "$root_mod")
  {
    echo "module capd-py.local/clusterctl-build"
    echo
    echo "go $gover"
    echo
    echo "require sigs.k8s.io/cluster-api $VERSION"
    for r in $reqs; do echo "require $r $VERSION"; done
  } > "$work/go.mod"
  printf '//go:build tools\npackage tools\nimport _ "%s"\n' "$pkg" > "$work/tools.go"
  (cd "$work" && go mod tidy >/dev/null 2>tidy.log || { cat tidy.log >&2; exit 1; }
   CGO_ENABLED=0 go build -trimpath -ldflags "$ld" -o "$OUT/clusterctl" "$pkg")
fi
touch "$OUT/.complete"
echo " ✓ clusterctl $VERSION in $OUT ($(( $(date +%s) - start )) s)" >&2
