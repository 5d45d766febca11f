#!/usr/bin/env bash
# Build Kubernetes server/node binaries from the k8s.io/kubernetes Go module, offline except for the
# Go module proxy. The module zip lacks ./staging, so a wrapper module replaces every staging module
# with its published v0.<minor>.<patch>. Output is cached per version: a second run is a no-op.
set -euo pipefail
VERSION="${1:?usage: build-k8s.sh vX.Y.Z}"
CACHE="${CAPD_PY_CACHE:-$HOME/.cache/capd-py}"
OUT="$CACHE/k8s/$VERSION/bin"
BINS=(kubelet kubeadm kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy)
if [[ -f "$OUT/.complete" ]]; then
  echo " ✓ kubernetes $VERSION binaries cached in $OUT" >&2
  exit 0
fi
SRC="$CACHE/k8s/$VERSION/src"
mkdir -p "$SRC" "$OUT"
cd "$SRC"
minor="${VERSION#v1.}"; staging="v0.${minor}"
go mod download -json "k8s.io/kubernetes@$VERSION" > dl.json
modfile=$(sed -n 's/.*"GoMod": "\(.*\)".*/\1/p' dl.json)
moddir=$(sed -n 's/.*"Dir": "\(.*\)".*/\1/p' dl.json)
gover=$(sed -n 's/^go \(.*\)/\1/p' "$modfile")
{
  echo "module capd-py.local/k8s-build"
  echo "go $gover"
  echo "require k8s.io/kubernetes $VERSION"
  echo "replace ("
  sed -n '/^replace (/,/^)/p' "$modfile" | awk '/=> \.\/staging/ {print "\t" $1 " => " $1 " '"$staging"'"}'
  echo ")"
} > go.mod
{
  echo "//go:build tools"
  echo "package tools"
  echo "import ("
  for b in "${BINS[@]}"; do echo "	_ \"k8s.io/kubernetes/cmd/$b\""; done
  echo ")"
} > tools.go
echo " • resolving modules for kubernetes $VERSION" >&2
go mod tidy >/dev/null
commit=$(sed -n 's/.*"Hash": "\(.*\)".*/\1/p' dl.json | head -1); commit="${commit:-0000000000000000000000000000000000000000}"
major=1; minor_n="${minor%%.*}"
date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
ld="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ld+=" -X $pkg.gitVersion=$VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor_n"
  ld+=" -X $pkg.gitCommit=$commit -X $pkg.gitTreeState=clean -X $pkg.buildDate=$date"
done
pkgs=(); for b in "${BINS[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
echo " • compiling ${BINS[*]} (this takes a while on a cold cache)" >&2
CGO_ENABLED=0 go build -trimpath -ldflags "$ld" -o "$OUT/" "${pkgs[@]}"
cp "$moddir/build/pause/linux/pause.c" "$OUT/../pause.c"
touch "$OUT/.complete"
echo " ✓ kubernetes $VERSION binaries in $OUT" >&2
