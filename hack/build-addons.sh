#!/usr/bin/env bash
# Build what kubeadm's control plane runs besides Kubernetes itself: etcd (+etcdctl), CoreDNS and pause,
# at the versions the given kubeadm expects. Cached; a second run is a no-op.
set -euo pipefail
K8S="${1:?usage: build-addons.sh vX.Y.Z}"
CACHE="${CAPD_PY_CACHE:-$HOME/.cache/capd-py}"
KBIN="$CACHE/k8s/$K8S/bin"
[[ -f "$KBIN/.complete" ]] || { echo " ✗ build kubernetes $K8S first (hack/build-k8s.sh)" >&2; exit 1; }
# Ask kubeadm itself which tags it will ask for, so the images match exactly.
images=$("$KBIN/kubeadm" config images list --kubernetes-version "$K8S" 2>/dev/null)
etcd_tag=$(sed -n 's#.*/etcd:\(.*\)#\1#p' <<<"$images"); ETCD="v${etcd_tag%%-*}"
COREDNS=$(sed -n 's#.*/coredns:\(.*\)#\1#p' <<<"$images")
OUT="$CACHE/addons/$K8S"
CORE_DNS_LEFT_OUT="route53 azure clouddns trace"
mkdir -p "$OUT"
printf '%s\n' "$images" > "$OUT/images.txt"

if [[ ! -f "$OUT/.etcd-$ETCD" ]]; then
  echo " • building etcd $ETCD" >&2
  src="$CACHE/src/etcd-$ETCD"; mkdir -p "$src"; cd "$src"
  printf 'module capd-py.local/etcd-build\n\ngo 1.24\n\nrequire (\n\tgo.etcd.io/etcd/server/v3 %s\n\tgo.etcd.io/etcd/etcdctl/v3 %s\n)\n' "$ETCD" "$ETCD" > go.mod
  printf '//go:build tools\npackage tools\nimport (\n\t_ "go.etcd.io/etcd/server/v3"\n\t_ "go.etcd.io/etcd/etcdctl/v3"\n)\n' > tools.go
  go mod tidy >/dev/null 2>&1
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$OUT/etcd" go.etcd.io/etcd/server/v3
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$OUT/etcdctl" go.etcd.io/etcd/etcdctl/v3
  touch "$OUT/.etcd-$ETCD"
fi
echo " ✓ etcd $ETCD" >&2

if [[ ! -f "$OUT/.coredns-$COREDNS" ]]; then
  # CoreDNS with every in-tree plugin of its plugin.cfg but the cloud DNS backends (route53, azure, clouddns) and
  # the DataDog tracer (trace): their SDKs were ~2/3 of a cold build (3 min on 2 cores), and a node's CoreDNS
  # serves cluster DNS only. Plugins register themselves by import; the directive order is CoreDNS's own.
  echo " • building coredns $COREDNS (without $CORE_DNS_LEFT_OUT)" >&2
  src="$CACHE/src/coredns-$COREDNS"; mkdir -p "$src"; cd "$src"
  cfg="$(go mod download -json "github.com/coredns/coredns@$COREDNS" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')/plugin.cfg"
  {
    printf 'package main\n\nimport (\n\t"github.com/coredns/coredns/coremain"\n'
    grep -v '^#' "$cfg" | grep ':' | while IFS=: read -r name pkg; do
      [[ " $CORE_DNS_LEFT_OUT " == *" $name "* ]] && continue
      [[ "$pkg" == */* ]] || pkg="github.com/coredns/coredns/plugin/$pkg"
      printf '\t_ "%s"\n' "$pkg"
    done
    printf ')\n\nfunc main() { coremain.Run() }\n'
  } > main.go
  printf 'module capd-py.local/coredns-build\n\ngo 1.24\n\nrequire github.com/coredns/coredns %s\n' "$COREDNS" > go.mod
  go mod tidy >/dev/null 2>&1
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$OUT/coredns" .
  touch "$OUT/.coredns-$COREDNS"
fi
echo " ✓ coredns $COREDNS" >&2

if [[ ! -x "$OUT/pause" ]]; then
  gcc -Os -static -o "$OUT/pause" "$CACHE/k8s/$K8S/pause.c"
  strip "$OUT/pause"
fi
echo " ✓ pause" >&2
