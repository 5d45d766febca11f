#!/usr/bin/env bash
# Build upstream Cluster API's managers from the Go module proxy, to run beside (or instead of) capd-py's
# controllers: the core manager (main.go at the root of sigs.k8s.io/cluster-api), the kubeadm bootstrap and
# kubeadm control-plane managers (same module), and CAPD's manager (sigs.k8s.io/cluster-api/test,
# test/infrastructure/docker; since v1.10 it is also the in-memory provider: DevCluster/DevMachine with
# `backend.inMemory`, there is no separate in-memory manager any more).
#
# The test module's go.mod says `replace sigs.k8s.io/cluster-api => ../` and requires the root module at
# v0.0.0-00010101000000-000000000000; a replace in a dependency is ignored, so a wrapper module requires both and
# replaces the root module with the published VERSION. The proxy does not serve every test/ version the root module
# has (here: cluster-api v1.13.4-v1.13.6, cluster-api/test v1.13.7+): without TEST_VERSION the test module is taken
# at VERSION if served, else at the lowest served patch of the same minor above it (recorded in VERSIONS).
#
#   hack/build-upstream.sh [VERSION [TEST_VERSION]]      (default: $CLUSTERCTL_VERSION's v1.13.6)
#
# Cached per version under $CAPD_PY_CACHE/upstream/<version>/: bin/ (the managers), crds/ (upstream's CRD bases,
# without the conversion-webhook patches, for an API server without capd-py's CRDs), VERSIONS. A second run is a
# no-op. Beside other work run it as `nice -n 19 ionice -c3` (GOMAXPROCS=1 also limits go build's parallelism).
set -euo pipefail
HACK="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VERSION="${1:-v1.13.6}"
TEST_VERSION="${2:-${CAPD_PY_UPSTREAM_TEST_VERSION:-}}"
CACHE="${CAPD_PY_CACHE:-$HOME/.cache/capd-py}"
ROOT="$CACHE/upstream/$VERSION"
OUT="$ROOT/bin"
MANAGERS=(cluster-api-manager kubeadm-bootstrap-manager kubeadm-control-plane-manager capd-manager)
declare -A PKG=(
  [cluster-api-manager]=sigs.k8s.io/cluster-api
  [kubeadm-bootstrap-manager]=sigs.k8s.io/cluster-api/bootstrap/kubeadm
  [kubeadm-control-plane-manager]=sigs.k8s.io/cluster-api/controlplane/kubeadm
  [capd-manager]=sigs.k8s.io/cluster-api/test/infrastructure/docker
)
command -v go >/dev/null || PATH="/usr/local/go/bin:$PATH"
# upstream's webhook configurations (config/webhook/manifests.yaml of each manager, service clientConfig; the
# runner points them at the manager's local webhook server: upstream_managers.UpstreamManager.webhook_configurations)
copy_webhooks() {  # core_dir test_dir
  local d
  for d in core:"$1/config/webhook" bootstrap:"$1/bootstrap/kubeadm/config/webhook" \
           controlplane:"$1/controlplane/kubeadm/config/webhook" docker:"$2/infrastructure/docker/config/webhook"; do
    mkdir -p "$ROOT/webhooks"
    install -m 0644 "${d#*:}/manifests.yaml" "$ROOT/webhooks/${d%%:*}.yaml"
  done
}
if [[ -f "$ROOT/.complete" ]]; then
  if [[ ! -d "$ROOT/webhooks" ]]; then  # a build made before the webhook manifests were kept
    read -r _ test_version < <(grep '^sigs.k8s.io/cluster-api/test ' "$ROOT/VERSIONS")
    copy_webhooks "$(go mod download -json "sigs.k8s.io/cluster-api@$VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')" \
                  "$(go mod download -json "sigs.k8s.io/cluster-api/test@$test_version" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
  fi
  echo " ✓ upstream Cluster API $VERSION managers cached in $OUT" >&2
  exit 0
fi
start=$(date +%s)
SRC="$ROOT/src"
rm -rf "$SRC" "$OUT" "$ROOT/crds" "$ROOT/webhooks"
mkdir -p "$SRC" "$OUT"
cd "$SRC"
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=mod"

if [[ -z "$TEST_VERSION" ]]; then
  echo " • finding sigs.k8s.io/cluster-api/test for $VERSION on the module proxy" >&2
  served=$(go list -m -versions sigs.k8s.io/cluster-api/test | cut -d' ' -f2-)
  minor="${VERSION%.*}"
  TEST_VERSION=$(tr ' ' '\n' <<<"$served" | grep -x "$VERSION" || true)
  if [[ -z "$TEST_VERSION" ]]; then
    # the lowest served patch of the same minor above VERSION
    TEST_VERSION=$( { echo "$VERSION"; tr ' ' '\n' <<<"$served" | grep -E "^${minor//./\\.}\.[0-9]+$"; } |
                   sort -V | sed -n "/^${VERSION//./\\.}\$/{n;p;q}")
  fi
  [[ -n "$TEST_VERSION" ]] || { echo " ✗ the module proxy serves no sigs.k8s.io/cluster-api/test $minor.x >= $VERSION" \
                                     "(served: $served); give one: build-upstream.sh $VERSION <test-version>" >&2; exit 1; }
  [[ "$TEST_VERSION" == "$VERSION" ]] ||
    echo " • sigs.k8s.io/cluster-api/test $VERSION is not served; using $TEST_VERSION (its root module replaced by $VERSION)" >&2
fi

echo " • resolving modules: sigs.k8s.io/cluster-api $VERSION + sigs.k8s.io/cluster-api/test $TEST_VERSION" >&2
core_mod=$(go mod download -json "sigs.k8s.io/cluster-api@$VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
test_json=$(go mod download -json "sigs.k8s.io/cluster-api/test@$TEST_VERSION")
test_mod=$(sed -n 's/.*"GoMod": "\(.*\)".*/\1/p' <<<"$test_json")
test_dir=$(sed -n 's/.*"Dir": "\(.*\)".*/\1/p' <<<"$test_json")
core_dir=$(go mod download -json "sigs.k8s.io/cluster-api@$VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
gover=$(sed -n 's/^go \(.*\)/\1/p' "$core_mod" "$test_mod" | sort -V | tail -1)
cat > go.mod <<EOF
module capd-py.local/upstream-build

go $gover

require (
	sigs.k8s.io/cluster-api $VERSION
	sigs.k8s.io/cluster-api/test $TEST_VERSION
)

// the test module requires the root module at v0.0.0-00010101000000-000000000000 (its own replace => ../ does not
// apply in a dependency): every version of the root module is the published one
replace sigs.k8s.io/cluster-api => sigs.k8s.io/cluster-api $VERSION
EOF
{
  echo "//go:build tools"
  echo "package tools"
  echo "import ("
  for m in "${MANAGERS[@]}"; do echo "	_ \"${PKG[$m]}\""; done
  echo "	_ \"sigs.k8s.io/cluster-api/cmd/clusterctl\""
  echo ")"
} > tools.go
go mod tidy >/dev/null 2>tidy.log || { cat tidy.log >&2; exit 1; }

ver="sigs.k8s.io/cluster-api/version"
ld="-s -w -X $ver.gitVersion=$VERSION -X $ver.gitTreeState=clean"
ld+=" -X $ver.gitMajor=1 -X $ver.gitMinor=$(cut -d. -f2 <<<"${VERSION#v}")"
ld+=" -X $ver.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
for m in "${MANAGERS[@]}"; do
  echo " • compiling $m (${PKG[$m]}; a while on a cold Go build cache)" >&2
  t=$(date +%s)
  CGO_ENABLED=0 go build -trimpath -ldflags "$ld" -o "$OUT/$m" "${PKG[$m]}"
  echo "   $m: $(( $(date +%s) - t )) s" >&2
done

# upstream's CRD bases (generated by controller-gen; the kustomize overlays add the conversion webhook and the
# cert-manager annotation, which a bare API server does not need)
for d in core:"$core_dir/config/crd/bases" bootstrap:"$core_dir/bootstrap/kubeadm/config/crd/bases" \
         controlplane:"$core_dir/controlplane/kubeadm/config/crd/bases" \
         docker:"$test_dir/infrastructure/docker/config/crd/bases"; do
  mkdir -p "$ROOT/crds/${d%%:*}"
  cp "${d#*:}"/*.yaml "$ROOT/crds/${d%%:*}/"
  chmod 0644 "$ROOT/crds/${d%%:*}"/*.yaml
done
copy_webhooks "$core_dir" "$test_dir"
# clusterctl of the same release, in this module (hack/build-clusterctl.sh: its compiled packages are shared here)
bash "$HACK/build-clusterctl.sh" "$VERSION" "$SRC"
{
  echo "sigs.k8s.io/cluster-api $VERSION"
  echo "sigs.k8s.io/cluster-api/test $TEST_VERSION"
  go version
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) in $(( $(date +%s) - start )) s"
} > "$ROOT/VERSIONS"
touch "$ROOT/.complete"
echo " ✓ upstream Cluster API $VERSION managers in $OUT ($(( $(date +%s) - start )) s)" >&2
