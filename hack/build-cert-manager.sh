#!/usr/bin/env bash
# Build cert-manager from source for capd-py management clusters (upstream `clusterctl init`, and upstream Cluster
# API's e2e framework which calls it, refuse to install providers unless a cert-manager API answers; quay.io and
# GitHub's release downloads cannot be reached here: docs/clusterctl.md "cert-manager").
#
#   hack/build-cert-manager.sh [VERSION]      (default: $CAPD_PY_CERT_MANAGER_VERSION, else v1.21.1, the version
#                                              clusterctl v1.14 installs and upstream's e2e config names)
#
# What it makes, cached under $CAPD_PY_CACHE/cert-manager/<version>/ (a second run is a no-op, except that it
# rebuilds any of the three images dockerd no longer has, or has from another build, from the cached binaries):
#   images/{controller,webhook,cainjector}/  the binaries and each image's build context;
#   docker images quay.io/jetstack/cert-manager-{controller,webhook,cainjector}:<version>;
#   cert-manager.yaml, cert-manager.crds.yaml  the static manifests of the release; VERSIONS; bin/helm (when
#                                              rendering: below).
#
# Source. The root module github.com/cert-manager/cert-manager@<version> (pkg/, internal/, the Helm chart, the
# release Makefiles) comes from the Go module proxy. Two things do not; they come from CAPD_PY_CERT_MANAGER_SRC
# (a directory or a .tar.gz; default: hack/third_party/cert-manager-<version>-src.tar.gz, committed for v1.21.1,
# ~0.8 MB):
#   - cmd/: the binaries' main packages, nested modules named github.com/cert-manager/cert-manager/controller-binary
#     (etc.), a path that does not match their folder, untagged, each with `replace github.com/cert-manager/
#     cert-manager => ../../`, so no proxy can serve them (proxy.golang.org: 404 for .../cmd/controller). Made with
#     `git archive --prefix=cert-manager-<version>/ <version> cmd` in a cert-manager clone; a checkout at the tag or
#     its cmd/ folder also does. For a known version the tree's digest is checked against the tag's;
#   - goproxy/ beside cmd/ (optional): a GOPROXY=file:// directory (the layout of $GOMODCACHE/cache/download) of
#     the dependencies the Go module proxy refuses, tried before it. For v1.21.1: github.com/Venafi/vcert/v5@v5.13.7
#     (cmd/controller's; proxy.golang.org answers 403 "This module version is not available" for every vcert
#     v5.12.4-v5.14.0 from here, v5.12.0-v5.12.3 are served), its zip made from vcert's tag with
#     golang.org/x/mod/zip.CreateFromVCS. The go command checks every module against cmd/<name>/go.sum, so a
#     module from there is the very one upstream built with (its h1 hash equals go.sum's) or the build fails.
# The proxy's root module is exactly the tag's tree minus the nested modules (checked for v1.21.1: `diff -r` of `git
# archive v1.21.1` and the module zip differs only in cmd/, test/e2e, test/integration), so cmd/ goes back where it
# belongs and each binary is built in its own module exactly as upstream's make/server.mk does: `cd cmd/<name> &&
# CGO_ENABLED=0 go build -trimpath -ldflags '-w -s -X .../pkg/util.AppVersion=<version> -X
# .../pkg/util.AppGitCommit=<commit>' main.go` (static).
#
# Images. Upstream (hack/containers/Containerfile.<name>, make/containers.mk) copies the binary to
# /app/cmd/<name>/<name> (ENTRYPOINT) and licences to /licenses on gcr.io/distroless/static-debian13:nonroot
# (make/base_images.mk, hack/latest-base-images.sh: tag `nonroot`), which runs as user 65532 (numeric; the chart's
# `runAsNonRoot: true` needs a non-root numeric user) and holds /etc/passwd + /etc/group with that user, a CA
# bundle at /etc/ssl/certs/ca-certificates.crt (SSL_CERT_FILE) and tzdata. Here: FROM scratch with the same
# entrypoint, user 65532:65532, /etc/passwd + /etc/group naming root, nobody and nonroot, the licence files as
# upstream writes them, and the host's CA bundle when it has one (Debian's ca-certificates). The CA bundle is only
# used for outbound TLS to ACME servers, Vault, Venafi or cloud DNS APIs; self-signed and CA issuers, the webhook
# and the cainjector never read it (they talk to the API server with the service account's CA). No tzdata (Go
# then knows only UTC; cert-manager formats times in UTC). No acmesolver/startupapicheck images: the static
# manifest runs no startupapicheck Job (rendered with startupapicheck.enabled=false) and names the acmesolver image
# only in the controller's --acme-http01-solver-image flag, used for ACME HTTP-01 challenges, which cannot work
# offline anyway. Labels: org.opencontainers.image.source as upstream, io.x-k8s.capd-py.inputs (the binary's
# sha256, to tell a stale image).
#
# Manifest. Upstream's release (make/manifests.mk, `make static-manifests`): the chart deploy/charts/cert-manager
# is packaged with `helm package --app-version=<v> --version=<v>` (Chart.yaml version/appVersion set to <v>), then
# `helm template --kube-version="1.29.0" --api-versions="" --namespace=cert-manager --set="creator=static"
# --set="startupapicheck.enabled=false" cert-manager <tgz>` renders everything but the CRDs, the same with
# `--set="crds.enabled=true"` everything, from which hack/extractcrd keeps the CRDs; cert-manager.yaml = the
# licence header (hack/boilerplate-yaml.txt, YEAR=2022) + hack/concat-yaml.sh of deploy/manifests/namespace.yaml,
# the CRDs and the rest; cert-manager.crds.yaml = header + CRDs. This script runs those same steps with the same
# inputs and helm at the version cert-manager pins (make/_shared/tools/00_mod.mk: helm v4.2.2 for v1.21.1, built
# from the Go module proxy). The chart's defaults give the images quay.io/jetstack/cert-manager-*:<version> and
# `imagePullPolicy: IfNotPresent` (checked below), so preloaded images are used and nothing is pulled.
# Differences from the published file: the two Chart.yaml annotations upstream adds with yq before packaging
# (artifacthub.io/signKey, artifacthub.io/prerelease) are not added (the templates never read .Chart.Annotations,
# so the rendered output cannot change); nothing else is known to differ, but the published file could not be
# fetched here to compare byte for byte (GitHub is unreachable).
#
# Measured (2 cores, 2026-12-06, `nice -n 10`, idle machine): 244 s with empty Go module and build caches
# (GOMODCACHE/GOCACHE pointed at new folders: controller 141 s with the module downloads, webhook 10 s, cainjector
# 2 s, helm 63 s, the rest seconds; 174 % CPU, peak RSS 1.3 GB); 11 s into a new output folder with warm Go caches
# (binaries and manifest bit-identical to the first build's); a cached run < 1 s, re-creating an image ~2 s.
# Images: controller 83.5 MB, webhook 65.0 MB, cainjector 34.9 MB. Run it under `flock /work/heavy.lock` beside
# other heavy work.
set -euo pipefail
VERSION="${1:-${CAPD_PY_CERT_MANAGER_VERSION:-v1.21.1}}"
CACHE="${CAPD_PY_CACHE:-$HOME/.cache/capd-py}"
ROOT="$CACHE/cert-manager/$VERSION"
BINS=(controller webhook cainjector)
REPO="quay.io/jetstack"
THIRD_PARTY="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/third_party"
command -v go >/dev/null || PATH="/usr/local/go/bin:$PATH"
step() { echo " • $*" >&2; }
ok() { echo " ✓ $*" >&2; }
die() { echo " ✗ $*" >&2; exit 1; }

# the static manifests: committed, or rendered with helm (below); a wrong setting is refused before any compile
RENDER="${CAPD_PY_CERT_MANAGER_RENDER:-}"
committed="$THIRD_PARTY/cert-manager-$VERSION-manifests.tar.gz"
[[ -z "$RENDER" || "$RENDER" == check || "$RENDER" == write ]] ||
  die "CAPD_PY_CERT_MANAGER_RENDER=$RENDER: want check or write (or nothing: the committed manifests if any)"
[[ "$RENDER" != check || -f "$committed" ]] || die "no committed manifests to check: $committed"

# release tag -> its commit, and the sha256 of its cmd/ tree (in cmd/: `find . -type f | LC_ALL=C sort | xargs
# sha256sum | sha256sum`)
case "$VERSION" in
  v1.21.1) COMMIT=24e33194fb39488eff2bbf10c6dc640f407cad44
           CMD_DIGEST=0be0d214fe0897bb7dcee07f7b40e3896f9d2d2f4e5abb045e4b7f0b8a26c655 ;;
  *) COMMIT=""; CMD_DIGEST="" ;;
esac

image_label() { docker image inspect -f '{{ index .Config.Labels "io.x-k8s.capd-py.inputs" }}' "$1" 2>/dev/null || true; }
# build_image NAME: the image of images/NAME, unless dockerd has it from this very binary
build_image() {
  local name=$1 ctx="$ROOT/images/$1" tag="$REPO/cert-manager-$1:$VERSION" sum
  sum=$(sha256sum "$ctx/$name" | cut -c1-64)
  if [[ "$(image_label "$tag")" == "$sum" ]]; then ok "$tag (in dockerd)"; return 0; fi
  step "building image $tag"
  local log; log=$(mktemp)
  if ! docker build -q --label "io.x-k8s.capd-py.inputs=$sum" -t "$tag" "$ctx" >"$log" 2>&1; then
    cat "$log" >&2; rm -f "$log"; die "building $tag failed"
  fi
  rm -f "$log"
  ok "$tag ($(docker image inspect -f '{{ .Size }}' "$tag" | awk '{ printf "%.1f MB", $1 / 1e6 }'))"
}

if [[ -f "$ROOT/.complete" ]]; then
  for b in "${BINS[@]}"; do build_image "$b"; done
  ok "cert-manager $VERSION cached in $ROOT"
  exit 0
fi

# --- sources -------------------------------------------------------------------------------------------------
start=$(date +%s)
WORK="$(mktemp -d)"
trap 'chmod -R u+w "$WORK" 2>/dev/null; rm -rf "$WORK"' EXIT
# default: the bundle committed beside this script (hack/third_party/README.md says what it holds and where from)
bundled="$THIRD_PARTY/cert-manager-$VERSION-src.tar.gz"
[[ -n "${CAPD_PY_CERT_MANAGER_SRC:-}" || ! -f "$bundled" ]] || CAPD_PY_CERT_MANAGER_SRC="$bundled"
given="${CAPD_PY_CERT_MANAGER_SRC:-}"
if [[ -z "$given" ]]; then
  cat >&2 <<MSG
 ✗ cert-manager $VERSION: its binaries' main packages (cmd/controller, cmd/webhook, cmd/cainjector: nested modules
   no Go module proxy can serve) must be given: CAPD_PY_CERT_MANAGER_SRC=<a checkout of
   github.com/cert-manager/cert-manager at tag $VERSION, its cmd/ folder, or a .tar.gz holding cmd/ and, beside it,
   goproxy/ with the modules the Go module proxy refuses> (this script's header says how to make one)
MSG
  exit 1
fi
mkdir -p "$WORK/given"
if [[ -f "$given" ]]; then
  tar -xzf "$given" -C "$WORK/given" || die "CAPD_PY_CERT_MANAGER_SRC=$given: not a .tar.gz"
  given="$WORK/given"
fi
cmd=$(find "$given" -maxdepth 4 -path '*/controller/go.mod' -printf '%h\n' 2>/dev/null | head -1 | xargs -r dirname)
[[ -n "$cmd" && -f "$cmd/controller/main.go" ]] && grep -q '^module github.com/cert-manager/cert-manager/controller-binary$' \
  "$cmd/controller/go.mod" || die "CAPD_PY_CERT_MANAGER_SRC=${CAPD_PY_CERT_MANAGER_SRC}: no cert-manager cmd/ tree in it"
digest=$(cd "$cmd" && find . -type f | LC_ALL=C sort | xargs -d '\n' sha256sum | sha256sum | cut -c1-64)
if [[ -n "$CMD_DIGEST" && "$digest" != "$CMD_DIGEST" ]]; then
  die "the cmd/ tree in CAPD_PY_CERT_MANAGER_SRC is not tag $VERSION's (sha256 $digest, want $CMD_DIGEST)"
fi
[[ -n "$CMD_DIGEST" ]] || echo "   (no known digest of $VERSION's cmd/ tree: taken as given, sha256 $digest)" >&2
offline=""
if [[ -d "$cmd/../goproxy" ]]; then
  offline="$(cd "$cmd/../goproxy" && pwd)"
  export GOPROXY="file://$offline,${GOPROXY:-$(go env GOPROXY)}"
  echo "   modules the proxy refuses, from $offline: $(cd "$offline" && find . -name '*.zip' | sed 's|^\./||; s|/@v/|@|; s|\.zip$||' | tr '\n' ' ')" >&2
fi

step "fetching github.com/cert-manager/cert-manager@$VERSION from the Go module proxy"
moddir=$(cd "$WORK" && GOFLAGS=-mod=mod go mod download -json "github.com/cert-manager/cert-manager@$VERSION" \
         | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
[[ -n "$moddir" && -d "$moddir" ]] || die "the Go module proxy does not serve github.com/cert-manager/cert-manager@$VERSION"
SRC="$WORK/src"
cp -r "$moddir" "$SRC"
chmod -R u+w "$SRC"
cp -r "$cmd" "$SRC/cmd"
if [[ -z "$COMMIT" ]]; then
  COMMIT=$(git -C "${CAPD_PY_CERT_MANAGER_SRC}" rev-parse HEAD 2>/dev/null || echo unknown)
fi

# --- binaries (upstream's make/server.mk, one module per binary) ---------------------------------------------------
rm -rf "$ROOT"
mkdir -p "$ROOT/bin"
ld="-w -s -X github.com/cert-manager/cert-manager/pkg/util.AppVersion=$VERSION"
ld+=" -X github.com/cert-manager/cert-manager/pkg/util.AppGitCommit=$COMMIT"
for b in "${BINS[@]}"; do
  step "compiling $b (cmd/$b; a while on a cold Go build cache)"
  t=$(date +%s)
  mkdir -p "$ROOT/images/$b"
  (cd "$SRC/cmd/$b" && CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags "$ld" -o "$ROOT/images/$b/$b" main.go) ||
    die "compiling $b failed (a module the Go module proxy refuses, 403, goes in goproxy/ beside cmd/: see this script's header)"
  echo "   $b: $(( $(date +%s) - t )) s, $(du -m "$ROOT/images/$b/$b" | cut -f1) MB" >&2
done

# the licence header of the manifests and the images' /licenses/LICENSE (make/licenses.mk, hack/boilerplate-yaml.txt)
year=$(sed -n 's/^LICENSE_YEAR=\([0-9]*\)$/\1/p' "$SRC/make/licenses.mk")
[[ -n "$year" ]] || die "no LICENSE_YEAR in make/licenses.mk"
sed -e "s/YEAR/$year/g" < "$SRC/hack/boilerplate-yaml.txt" > "$WORK/license.yaml"

# --- the static manifests: committed, or rendered with helm ---------------------------------------------------
# Rendering needs helm compiled from source (~90 CPU-s cold, a twelfth of this script's build), and the manifests
# are a pure function of the module's chart, so the rendered pair is committed (hack/third_party/cert-manager-
# <version>-manifests.tar.gz, made by CAPD_PY_CERT_MANAGER_RENDER=write) and used when present. RENDER=check (`make
# cert-manager-manifests-check`, outside `make test`) renders with helm and fails unless the committed pair is
# byte-identical; RENDER=write renders and (re)writes the committed pair.
if [[ -z "$RENDER" && -f "$committed" ]]; then
  step "the static manifests rendered earlier ($committed; CAPD_PY_CERT_MANAGER_RENDER=check renders them again)"
  tar -xzf "$committed" -C "$ROOT" cert-manager.yaml cert-manager.crds.yaml ||
    die "$committed does not hold cert-manager.yaml and cert-manager.crds.yaml"
else
# --- helm, at the version cert-manager's release pins ---------------------------------------------------------
HELM_VERSION=$(sed -n 's/^tools += helm=\(v[0-9.]*\)$/\1/p' "$SRC/make/_shared/tools/00_mod.mk")
[[ -n "$HELM_VERSION" ]] || die "no helm version in make/_shared/tools/00_mod.mk"
HELM_MAJOR=${HELM_VERSION%%.*}
step "compiling helm $HELM_VERSION (helm.sh/helm/$HELM_MAJOR from the Go module proxy)"
t=$(date +%s)
hv="helm.sh/helm/$HELM_MAJOR/internal/version"
GOBIN="$ROOT/bin" CGO_ENABLED=0 go install -trimpath \
  -ldflags "-w -s -X $hv.version=$HELM_VERSION -X $hv.metadata= -X $hv.gitTreeState=clean" \
  "helm.sh/helm/$HELM_MAJOR/cmd/helm@$HELM_VERSION"
HELM="$ROOT/bin/helm"
echo "   helm: $(( $(date +%s) - t )) s" >&2

# --- the static manifests (upstream's make/manifests.mk) ------------------------------------------------------
step "rendering cert-manager.yaml (the chart packaged and templated as cert-manager's release does)"
mk="$SRC/make/manifests.mk"
flags='--kube-version="1.29.0" --api-versions="" --namespace=cert-manager --set="creator=static" --set="startupapicheck.enabled=false"'
grep -qF -- "$flags" "$mk" || die "make/manifests.mk no longer renders with $flags: read its static manifest targets again"
chart_src="$SRC/deploy/charts/cert-manager"
chart="$WORK/helm/cert-manager"
mkdir -p "$chart/templates"
cp "$chart_src"/templates/*.yaml "$chart_src/templates/_helpers.tpl" "$chart_src/templates/NOTES.txt" "$chart/templates/"
cp "$chart_src/values.yaml" "$chart_src/values.schema.json" "$chart_src/.helmignore" "$chart/"
sed -e "s:{{RELEASE_VERSION}}:$VERSION:g" < "$chart_src/README.template.md" > "$chart/README.md"
sed -e "s/^version: .*/version: $VERSION/" -e "s/^appVersion: .*/appVersion: $VERSION/" \
  "$chart_src/Chart.yaml" > "$chart/Chart.yaml"
"$HELM" package --app-version="$VERSION" --version="$VERSION" --destination "$WORK" "$chart" >/dev/null
tgz="$WORK/cert-manager-$VERSION.tgz"
render() {  # extra --set flags...
  "$HELM" template --kube-version="1.29.0" --api-versions="" --namespace=cert-manager --set="creator=static" "$@" \
    --set="startupapicheck.enabled=false" cert-manager "$tgz" | sed -e "1{/^---$/d;}"
}
render > "$WORK/noncrd.yaml"
render --set="crds.enabled=true" > "$WORK/all.yaml"
(cd "$SRC" && go run hack/extractcrd/main.go "$WORK/all.yaml") > "$WORK/crds.yaml"
bash "$SRC/hack/concat-yaml.sh" "$SRC/deploy/manifests/namespace.yaml" "$WORK/crds.yaml" "$WORK/noncrd.yaml" \
  | cat "$WORK/license.yaml" - > "$ROOT/cert-manager.yaml"
cat "$WORK/license.yaml" "$WORK/crds.yaml" > "$ROOT/cert-manager.crds.yaml"
if [[ "$RENDER" == check ]]; then
  mkdir -p "$WORK/committed"
  tar -xzf "$committed" -C "$WORK/committed"
  for f in cert-manager.yaml cert-manager.crds.yaml; do
    cmp -s "$WORK/committed/$f" "$ROOT/$f" || die "$f rendered now differs from $committed's: diff -u $WORK/committed/$f $ROOT/$f"
  done
  ok "the committed manifests equal helm's rendering"
elif [[ "$RENDER" == write ]]; then
  # reproducible bytes: fixed owner, mode and time, no gzip name or time
  tar --sort=name --owner=0 --group=0 --numeric-owner --mode=0644 --mtime=@0 -C "$ROOT" -cf - \
    cert-manager.yaml cert-manager.crds.yaml | gzip -9n > "$committed"
  ok "wrote $committed"
fi
fi
# what the nodes will be asked for: exactly the three images built here, never pulled
want=$(for b in "${BINS[@]}"; do echo "$REPO/cert-manager-$b:$VERSION"; done)
got=$(sed -n 's/^ *image: "\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$ROOT/cert-manager.yaml" | sort -u)
[[ "$got" == "$(sort <<<"$want")" ]] || die "cert-manager.yaml's images are not the ones built here: $got"
policies=$(sed -n 's/^ *imagePullPolicy: *//p' "$ROOT/cert-manager.yaml" | sort -u)
[[ "$policies" == "IfNotPresent" ]] || die "cert-manager.yaml's imagePullPolicy: $policies (want IfNotPresent)"
echo "   $(grep -c '^kind:' "$ROOT/cert-manager.yaml") objects ($(grep -c '^kind: CustomResourceDefinition' \
  "$ROOT/cert-manager.yaml") CRDs), $(du -k "$ROOT/cert-manager.yaml" | cut -f1) KB" >&2

# --- images --------------------------------------------------------------------------------------------------
footnote="# To view licenses for cert-manager dependencies, see the LICENSES file in the
# cert-manager repo: https://github.com/cert-manager/cert-manager/blob/$COMMIT/LICENSES"
for b in "${BINS[@]}"; do
  ctx="$ROOT/images/$b"
  { cat "$WORK/license.yaml"; echo "$footnote"; } > "$ctx/LICENSE"
  echo "$footnote" > "$ctx/LICENSES"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n%s\n' \
    'nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin' > "$ctx/passwd"
  printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' > "$ctx/group"
  ca=""
  if [[ -f /etc/ssl/certs/ca-certificates.crt ]]; then
    cp /etc/ssl/certs/ca-certificates.crt "$ctx/ca-certificates.crt"
    ca="COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt"
  fi
  cat > "$ctx/Dockerfile" <<EOF
# cert-manager $VERSION $b, built by capd-py's hack/build-cert-manager.sh (upstream: hack/containers/Containerfile.$b
# on gcr.io/distroless/static-debian13:nonroot)
FROM scratch
LABEL org.opencontainers.image.source="https://github.com/cert-manager/cert-manager"
COPY passwd group /etc/
$ca
COPY $b /app/cmd/$b/$b
COPY LICENSE /licenses/LICENSE
COPY LICENSES /licenses/LICENSES
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
USER 65532:65532
ENTRYPOINT ["/app/cmd/$b/$b"]
EOF
  ln -sf "../images/$b/$b" "$ROOT/bin/$b"
  build_image "$b"
done

{
  echo "github.com/cert-manager/cert-manager $VERSION (Go module proxy) commit $COMMIT"
  echo "cmd/ tree sha256 $digest (CAPD_PY_CERT_MANAGER_SRC=${CAPD_PY_CERT_MANAGER_SRC})"
  [[ -z "$offline" ]] || echo "modules from CAPD_PY_CERT_MANAGER_SRC's goproxy/: $(cd "$offline" && find . -name '*.zip' | sed 's|^\./||; s|/@v/|@|; s|\.zip$||' | tr '\n' ' ')"
  if [[ -n "${HELM_VERSION:-}" ]]; then echo "manifests rendered by helm.sh/helm/$HELM_MAJOR $HELM_VERSION"
  else echo "manifests from $committed (sha256 $(sha256sum "$committed" | cut -c1-64))"; fi
  go version
  for b in "${BINS[@]}"; do echo "$REPO/cert-manager-$b:$VERSION $(docker image inspect -f '{{ .Id }}' "$REPO/cert-manager-$b:$VERSION")"; done
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) in $(( $(date +%s) - start )) s"
} > "$ROOT/VERSIONS"
touch "$ROOT/.complete"
ok "cert-manager $VERSION in $ROOT ($(( $(date +%s) - start )) s)"
