#!/usr/bin/env bash
# Build upstream cluster-autoscaler (k8s.io/autoscaler/cluster-autoscaler) with only its clusterapi cloud provider
# (`-tags clusterapi`), for the e2e autoscaler test (tests/e2e/test_autoscaler.py). Cached per version under
# $CAPD_PY_CACHE/cluster-autoscaler/<version>/: a second run is a no-op.
#
# Its go.mod has replace lines (k8s.io/* staging modules, ./apis), so `go install pkg@version` cannot build it: the
# module's source is built in place with `go build` (the replaces then apply; every dependency comes from the Go
# module proxy). The source is, in order:
#   1. $CAPD_PY_AUTOSCALER_SRC: a checkout of kubernetes/autoscaler at tag cluster-autoscaler-<version> (the
#      repository root or its cluster-autoscaler/ folder);
#   2. the Go module proxy: the module at the release commit's pseudo-version (the repository tags releases
#      `cluster-autoscaler-X.Y.Z`, not as Go module versions). The proxy this project's machines reach refused
#      that module (403 "not available") when this was written, so on a fresh machine step 1 is needed.
# Cold (empty Go module and build caches) 3 min 40 s on 2 cores, clusterapi provider only; 62 s with warm caches.
# Run it under `flock /work/heavy.lock nice -n 10` beside other work.
set -euo pipefail
VERSION="${1:-1.35.2}"
CACHE="${CAPD_PY_CACHE:-$HOME/.cache/capd-py}"
OUT="$CACHE/cluster-autoscaler/$VERSION"
if [[ -f "$OUT/.complete" && -x "$OUT/cluster-autoscaler" ]]; then
  echo " ✓ cluster-autoscaler $VERSION cached in $OUT" >&2
  exit 0
fi
command -v go >/dev/null || PATH="/usr/local/go/bin:$PATH"
# release tag -> the pseudo-version of its commit (commit time in UTC, 12 hex digits)
case "$VERSION" in
  1.35.2) PSEUDO="v0.0.0-20260722212750-2d42588803c7" ;;
  1.34.3) PSEUDO="v0.0.0-20260123184929-7a1c0e21cc0c" ;;
  *) PSEUDO="" ;;
esac
MOD="k8s.io/autoscaler/cluster-autoscaler"
WORK="$(mktemp -d)"
trap 'chmod -R u+w "$WORK" 2>/dev/null; rm -rf "$WORK"' EXIT
SRC=""
if [[ -n "${CAPD_PY_AUTOSCALER_SRC:-}" ]]; then
  SRC="$CAPD_PY_AUTOSCALER_SRC"
  [[ -f "$SRC/go.mod" ]] || SRC="$SRC/cluster-autoscaler"
  [[ -f "$SRC/go.mod" ]] && grep -q "^module $MOD\$" "$SRC/go.mod" || {
    echo "CAPD_PY_AUTOSCALER_SRC=$CAPD_PY_AUTOSCALER_SRC holds no $MOD module" >&2; exit 1; }
  cp -r "$SRC" "$WORK/src"
elif [[ -n "$PSEUDO" ]]; then
  echo " • fetching $MOD@$PSEUDO (cluster-autoscaler $VERSION) from the Go module proxy" >&2
  if dir=$(cd "$WORK" && GOFLAGS=-mod=mod go mod download -json "$MOD@$PSEUDO" 2>&1 | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p') \
      && [[ -n "$dir" ]]; then
    cp -r "$dir" "$WORK/src"
    chmod -R u+w "$WORK/src"
    # the module zip leaves out the nested ./apis module its go.mod replaces: take it from the proxy, same commit
    (cd "$WORK/src" && go mod edit -dropreplace "$MOD/apis" && go mod edit -require "$MOD/apis@$PSEUDO")
  fi
fi
if [[ ! -d "$WORK/src" ]]; then
  cat >&2 <<MSG
cluster-autoscaler $VERSION: no source. The Go module proxy does not serve $MOD${PSEUDO:+@$PSEUDO}; give a checkout
of kubernetes/autoscaler at tag cluster-autoscaler-$VERSION: CAPD_PY_AUTOSCALER_SRC=<dir> make cluster-autoscaler
MSG
  exit 1
fi
mkdir -p "$OUT"
echo " • building cluster-autoscaler $VERSION (go build -tags clusterapi; takes a while on a cold cache)" >&2
start=$(date +%s)
(cd "$WORK/src" && CGO_ENABLED=0 go build -tags clusterapi -trimpath -ldflags "-s -w" -o "$OUT/cluster-autoscaler" .)
touch "$OUT/.complete"
echo " ✓ cluster-autoscaler $VERSION in $OUT ($(( $(date +%s) - start )) s)" >&2
