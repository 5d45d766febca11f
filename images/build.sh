#!/usr/bin/env bash
# Build every image capd-py runs, offline: the node image for one Kubernetes version (with the
# control-plane images preloaded), the haproxy load-balancer image, and their Debian base.
# Each image carries a label with the hash of its inputs; an image whose inputs did not change is
# not rebuilt, so a second run takes seconds. Run once per version (`make images` loops over
# K8S_VERSIONS); images whose tag does not name the Kubernetes version (pause, etcd and CoreDNS when two
# versions ask for the same tag, capd-py/netd, capd-py/echo, haproxy) are keyed by content only, so
# building another version leaves them, and every node image built before, as they are.
#
# Binaries come from $CAPD_PY_K8S_BIN_DIR when set (a directory of official release binaries:
# kubelet kubeadm kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy), else
# from hack/build-k8s.sh's cache.
set -euo pipefail
K8S="${1:-v1.34.4}"
here="$(cd "$(dirname "$0")" && pwd)"
CACHE="${CAPD_PY_CACHE:-$HOME/.cache/capd-py}"
step() { echo " • $*" >&2; }
ok() { echo " ✓ $*" >&2; }
t0=$(date +%s)

KBIN="${CAPD_PY_K8S_BIN_DIR:-$CACHE/k8s/$K8S/bin}"
if [[ -z "${CAPD_PY_K8S_BIN_DIR:-}" ]]; then bash "$here/../hack/build-k8s.sh" "$K8S"; fi
bash "$here/../hack/build-addons.sh" "$K8S"
ADD="$CACHE/addons/$K8S"
for b in kubelet kubeadm kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy; do
  [[ -x "$KBIN/$b" ]] || { echo " ✗ missing $KBIN/$b" >&2; exit 1; }
done
BASE=$(bash "$here/base/build.sh")

label_of() { docker image inspect -f '{{ index .Config.Labels "io.x-k8s.capd-py.inputs" }}' "$1" 2>/dev/null || true; }
# fingerprint build outputs cheaply: size + mtime + path (binaries are rewritten on rebuild, so mtime
# moves); files from the repo by content, since every clone gives them a new mtime
fp() { stat -c '%n %s %Y' "$@" | sha256sum | cut -c1-16; }
content() { cat "$@" | sha256sum | cut -c1-16; }
# build_image TAG INPUTS_HASH CONTEXT_DIR [docker build args...]
build_image() {
  local tag=$1 inputs=$2 ctx=$3; shift 3
  if [[ "$(label_of "$tag")" == "$inputs" ]]; then ok "$tag (cached)"; return 0; fi
  step "building $tag"
  local log; log=$(mktemp)
  if ! docker build -q --label "io.x-k8s.capd-py.inputs=$inputs" -t "$tag" "$@" "$ctx" >"$log" 2>&1; then
    cat "$log" >&2; rm -f "$log"; echo " ✗ building $tag failed" >&2; return 1
  fi
  rm -f "$log"
  ok "$tag"
}

# --- control-plane component images, tagged as kubeadm will ask for them -------------------------
mapfile -t WANT < "$ADD/images.txt"
tag_for() { printf '%s\n' "${WANT[@]}" | grep "/$1:"; }
comp="$CACHE/node/$K8S/components"; rm -rf "$comp"; mkdir -p "$comp"
mk_static() {  # name inputs-hash binary...
  local name=$1 inputs=$2; shift 2
  local d="$comp/$name"; mkdir -p "$d"
  { echo "FROM scratch"; echo 'ENV PATH=/usr/local/bin:/usr/bin:/bin'
    for b in "$@"; do cp -l "$b" "$d/" 2>/dev/null || cp "$b" "$d/"; echo "COPY $(basename "$b") /usr/local/bin/"; done
  } > "$d/Dockerfile"
  build_image "$(tag_for "$name")" "$inputs" "$d"
}
# tags naming this Kubernetes version: this version's binaries (cheap fingerprint)
mk_static kube-apiserver "$(fp "$KBIN/kube-apiserver")" "$KBIN/kube-apiserver"
mk_static kube-controller-manager "$(fp "$KBIN/kube-controller-manager")" "$KBIN/kube-controller-manager"
mk_static kube-scheduler "$(fp "$KBIN/kube-scheduler")" "$KBIN/kube-scheduler"
# etcd, CoreDNS and pause tags may be shared by several Kubernetes versions (each built into its own
# $CACHE/addons/<version>): keyed by content, the same binaries under another path are not a rebuild
mk_static etcd "$(content "$ADD/etcd" "$ADD/etcdctl")" "$ADD/etcd" "$ADD/etcdctl"
d="$comp/kube-proxy"; mkdir -p "$d"; cp "$KBIN/kube-proxy" "$d/kube-proxy.real"; cp "$here/kube-proxy/kube-proxy-wrapper" "$d/kube-proxy"
printf 'ARG BASE\nFROM ${BASE}\nCOPY kube-proxy kube-proxy.real /usr/local/bin/\nENTRYPOINT ["/usr/local/bin/kube-proxy"]\n' > "$d/Dockerfile"
build_image "$(tag_for kube-proxy)" "$(fp "$KBIN/kube-proxy")-$(content "$here/kube-proxy/kube-proxy-wrapper")-$BASE" "$d" --build-arg "BASE=$BASE"
d="$comp/coredns"; mkdir -p "$d"; cp "$ADD/coredns" "$d/"
printf 'FROM scratch\nCOPY coredns /coredns\nEXPOSE 53 53/udp\nENTRYPOINT ["/coredns"]\n' > "$d/Dockerfile"
build_image "$(tag_for coredns)" "$(content "$ADD/coredns")" "$d"
d="$comp/pause"; mkdir -p "$d"; cp "$ADD/pause" "$d/"
printf 'FROM scratch\nCOPY pause /pause\nENTRYPOINT ["/pause"]\n' > "$d/Dockerfile"
build_image "$(tag_for pause)" "$(content "$ADD/pause")" "$d"
# the default CNI daemon: one image (templates name its tag) for every Kubernetes version, so its inputs
# leave kubectl out; it carries the kubectl of whichever version built it first (capd-netd only lists
# Nodes and reads a ConfigMap, which any kubectl within the skew policy does)
NETD="capd-py/netd:$(cat "$here/netd/capd-netd" | sha256sum | cut -c1-12)"
d="$comp/netd"; mkdir -p "$d"; cp "$KBIN/kubectl" "$here/netd/capd-netd" "$d/"
printf 'ARG BASE\nFROM ${BASE}\nCOPY kubectl capd-netd /usr/local/bin/\nENTRYPOINT ["/usr/local/bin/capd-netd"]\n' > "$d/Dockerfile"
build_image "$NETD" "$(content "$here/netd/capd-netd")-$BASE" "$d" --build-arg "BASE=$BASE"

# a tiny hostname-echo HTTP server, preloaded for demos and e2e tests (no registry to pull one from)
ECHO="capd-py/echo:$(sha256sum "$here/echo/main.go" | cut -c1-12)"
echo_in=$(cat "$here/echo/"{main.go,go.mod,Dockerfile} | sha256sum | cut -c1-16)
d="$comp/echo"; mkdir -p "$d"; cp "$here/echo/"{main.go,go.mod,Dockerfile} "$d/"
[[ "$(label_of "$ECHO")" == "$echo_in" ]] || (cd "$d" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o echo .)
build_image "$ECHO" "$echo_in" "$d"
docker tag "$ECHO" capd-py/echo:latest

# --- the node image ------------------------------------------------------------------------------
# Built as kind builds its node image: a plain image (binaries, units, config), then a container of it
# runs containerd alone, the component images are imported into its k8s.io namespace, containerd stops,
# and the container is committed with the image's own config restored. A node has its images the moment
# containerd starts: nothing is imported at boot. Unlike kind, the images every node runs are unpacked here
# too (UNPACK below): unpacking them at each boot cost every node 2-5 CPU-seconds of containerd (measured
# 2026-12-07: a bare node's containerd 2.5 CPU-s with pause, kube-proxy and the CNI unpacked, 0.19 without).
[[ -n "${CAPD_PY_COMPONENTS_ONLY:-}" ]] && { ok "component images of $K8S ready"; exit 0; }
# Upgrades: while a cluster moves between adjacent minors, a new node runs the old version's kube-proxy and
# CoreDNS until the control plane updates them, and an old node the new kube-proxy until it is replaced. No
# registry can serve them, so each node image also carries those of the adjacent minors in
# $CAPD_PY_UPGRADE_PEERS (`make images` passes K8S_VERSIONS, after building every version's components).
PEERS=()
minor_of() { local v=${1#v}; v=${v#*.}; echo "${v%%.*}"; }
for p in ${CAPD_PY_UPGRADE_PEERS:-}; do
  [[ "$p" == "$K8S" ]] && continue
  d=$(( $(minor_of "$p") - $(minor_of "$K8S") )); [[ $d == 1 || $d == -1 ]] || continue
  [[ -f "$CACHE/addons/$p/images.txt" ]] || { echo " ✗ $p: build its components first (make images)" >&2; exit 1; }
  for i in $(grep -E '/(kube-proxy|coredns):' "$CACHE/addons/$p/images.txt"); do
    docker image inspect "$i" >/dev/null 2>&1 || { echo " ✗ $i missing: build $p's components first" >&2; exit 1; }
    printf '%s\n' "${WANT[@]}" | grep -qxF "$i" || PEERS+=("$i")
  done
done
PRELOAD=("${WANT[@]}" "$NETD" "$ECHO" capd-py/echo:latest ${PEERS[@]+"${PEERS[@]}"})
ids=$(for i in "${PRELOAD[@]}"; do docker image inspect -f '{{.Id}}' "$i"; done | sha256sum | cut -c1-16)
files_in="$(cd "$here/node" && find files -type f -exec sha256sum {} + | sort | sha256sum | cut -c1-16)"
stage_inputs="$(fp "$KBIN/kubelet" "$KBIN/kubeadm" "$KBIN/kubectl")-$files_in-$(sha256sum "$here/netd/default-cni.yaml.in" | cut -c1-12)-$(printf '%s\n' "${PRELOAD[@]}" | sha256sum | cut -c1-12)-$BASE"
node_inputs="$stage_inputs-$ids-$(content "$0" | cut -c1-12)"
NODE="capd-py/node:$K8S"
STAGE="capd-py/node-stage:$K8S"   # the node image without its images; kept so a rebuild reuses it
ENTRYPOINT='["/usr/local/bin/capd-entrypoint"]'
if [[ "$(label_of "$NODE")" == "$node_inputs" ]]; then
  ok "$NODE (cached)"
else
  ctx="$CACHE/node/$K8S/ctx"; rm -rf "$ctx"; mkdir -p "$ctx"
  cp -a "$here/node/files" "$ctx/files"
  pause_tag=$(tag_for pause); pause_tag=${pause_tag##*:}
  sed -i "s/@PAUSE_TAG@/$pause_tag/" "$ctx/files/etc/containerd/config.toml"
  mkdir -p "$ctx/files/kind/images" "$ctx/files/kind/manifests"
  sed "s#@NETD_IMAGE@#$NETD#" "$here/netd/default-cni.yaml.in" > "$ctx/files/kind/manifests/default-cni.yaml"
  printf '%s\n' "${PRELOAD[@]}" > "$ctx/files/kind/images/list"   # what the node has (benches, checks)
  cp "$KBIN/kubelet" "$KBIN/kubeadm" "$KBIN/kubectl" "$ctx/"
  cat > "$ctx/Dockerfile" <<DOCKERFILE
ARG BASE
FROM \${BASE}
COPY kubelet kubeadm kubectl /usr/bin/
COPY files/ /
RUN systemctl enable containerd.service kubelet.service >/dev/null 2>&1 \\
 && systemctl mask getty.target console-getty.service systemd-firstboot.service systemd-udevd.service \\
      systemd-modules-load.service sys-kernel-debug.mount sys-kernel-tracing.mount >/dev/null 2>&1 \\
 && systemctl set-default multi-user.target >/dev/null 2>&1 \\
 && mkdir -p /etc/cni/net.d /var/lib/kubelet /etc/kubernetes/manifests /opt/cni \\
 && ln -s /usr/lib/cni /opt/cni/bin \\
 && echo "$K8S" > /kind/version
ENV container=docker
STOPSIGNAL SIGRTMIN+3
ENTRYPOINT $ENTRYPOINT
DOCKERFILE
  build_image "$STAGE" "$stage_inputs" "$ctx" --build-arg "BASE=$BASE"
  rm -rf "$ctx"

  step "preloading ${#PRELOAD[@]} images into $NODE's containerd"
  # the node containers' privilege mode; containerd alone needs little of it, but runs as on a node
  if [[ "$(bash "$here/../hack/privilege-mode.sh")" == privileged ]]; then priv=(--privileged); else
    priv=(--cap-add ALL --cap-drop SYS_RESOURCE --security-opt seccomp=unconfined --security-opt apparmor=unconfined
          --security-opt systempaths=unconfined --device-cgroup-rule 'a *:* rwm'); fi
  # No /var volume (unlike a node): what containerd writes under /var/lib/containerd must be committed.
  bc="capd-py-node-build-$$"
  cleanup_build() { docker rm -f -v "$bc" >/dev/null 2>&1 || true; docker volume rm -f "$bc" >/dev/null 2>&1 || true; }
  trap cleanup_build EXIT
  # containerd's overlayfs snapshots on a volume (/unpack) while it unpacks: a layer is applied onto its parents
  # through an overlay mount, whose upper dir cannot be on the container's own overlay root. A named volume: an
  # anonymous one (`-v /unpack`) is a VOLUME of the container's config, which `docker commit` keeps, and every node
  # container would get an empty /unpack volume that outlives it wherever it is removed without -v.
  docker volume create "$bc" >/dev/null
  docker run -d --name "$bc" "${priv[@]}" --tmpfs /run --tmpfs /tmp -v "$bc:/unpack" --entrypoint sleep "$STAGE" \
    infinity >/dev/null
  bx() { docker exec "$bc" "$@"; }
  bx sh -c 'cp /etc/containerd/config.toml /tmp/build.toml &&
    printf "\n[plugins.\"io.containerd.snapshotter.v1.overlayfs\"]\n  root_path = \"/unpack/overlayfs\"\n" >> /tmp/build.toml'
  docker exec -d "$bc" sh -c 'exec containerd --config /tmp/build.toml >/tmp/containerd.log 2>&1'
  for i in $(seq 1 60); do bx ctr version >/dev/null 2>&1 && break; sleep 0.5; done
  bx ctr version >/dev/null || { bx cat /tmp/containerd.log >&2; echo " ✗ containerd did not start" >&2; exit 1; }
  # pinned: containerd >= 1.7 tells kubelet's image GC to keep it (kind does the same); 1.6 ignores it
  docker save "${PRELOAD[@]}" | docker exec -i "$bc" ctr --namespace k8s.io images import \
    --label io.cri-containerd.pinned=pinned --all-platforms --no-unpack - >/dev/null
  have=$(bx ctr --namespace k8s.io images ls -q)
  # containerd names an image without a registry as docker does
  ref_of() { local first=${1%%/*}
    if [[ "$1" == */* && ( "$first" == *.* || "$first" == *:* || "$first" == localhost ) ]]; then echo "$1"; else echo "docker.io/$1"; fi; }
  for i in "${PRELOAD[@]}"; do
    grep -qxF "$(ref_of "$i")" <<<"$have" || { echo " ✗ $(ref_of "$i") missing from containerd after the import" >&2; exit 1; }
  done
  # Unpacked here: what every node runs (pause, kube-proxy, the CNI daemon) and what control planes run; the
  # rest (the adjacent minors' kube-proxy and CoreDNS, the demo app) as kind does, by the CRI on first use.
  UNPACK=("${WANT[@]}" "$NETD")
  for i in "${UNPACK[@]}"; do
    bx sh -c 'mkdir -p /tmp/m && ctr -n k8s.io images mount "$1" /tmp/m >/dev/null && ctr -n k8s.io images unmount --rm /tmp/m >/dev/null' \
      _ "$(ref_of "$i")" || { echo " ✗ unpacking $i failed" >&2; exit 1; }
  done
  # stop containerd cleanly (its bolt databases closed; PID 1 is sleep, so it stays a zombie), then drop
  # what a node recreates at boot
  bx sh -c 'p=$(pgrep -x containerd) && kill -TERM $p || exit 1
    for i in $(seq 1 100); do grep -q "^State:.*Z" /proc/$p/status 2>/dev/null || [ ! -e /proc/$p ] && exit 0; sleep 0.1; done
    exit 1' || { bx tail -5 /tmp/containerd.log >&2; echo " ✗ containerd did not stop" >&2; exit 1; }
  bx sh -c 'cd /var/lib/containerd && rm -rf io.containerd.snapshotter.v1.* io.containerd.runtime.* tmpmounts io.containerd.grpc.v1.cri'
  # The snapshots leave /var the way the blobs do (below): read in place from the image layer as the lower
  # layers of the node's containers, while the snapshotter's root (its metadata and one symlink per snapshot)
  # is in /var, which docker copies into each node's volume, where the CRI makes the containers' upper dirs.
  # A whiteout (a 0:0 character device) would become a deleted file in the committed layer: none may be there.
  bx sh -c 'set -e; S=/unpack/overlayfs/snapshots; R=/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs
    w=$(find "$S" -type c -exec stat -c "%t:%T %n" {} + | grep "^0:0 " || true)
    [ -z "$w" ] || { echo "an unpacked image has overlay whiteouts: $w" >&2; exit 1; }
    mkdir -p "$R/snapshots" /kind/containerd/snapshots
    cp -a /unpack/overlayfs/metadata.db "$R/"
    for d in "$S"/*; do id=${d##*/}; cp -a "$d" "/kind/containerd/snapshots/$id"; ln -s "/kind/containerd/snapshots/$id" "$R/snapshots/$id"; done' \
    || { echo " ✗ moving the unpacked snapshots into the image failed" >&2; exit 1; }
  # The blobs live outside /var: docker copies an image's /var into each node's fresh /var volume at
  # `docker run` (767 MB here); read in place from the image layer they cost a node nothing, and the CRI
  # unpacks what was not unpacked above into the snapshotter on the /var volume when it first runs it.
  bx sh -c 'mkdir -p /kind/containerd && mv /var/lib/containerd/io.containerd.content.v1.content /kind/containerd/content &&
    ln -s /kind/containerd/content /var/lib/containerd/io.containerd.content.v1.content'
  docker stop -t 1 "$bc" >/dev/null
  docker commit \
    --change "ENTRYPOINT $ENTRYPOINT" --change 'CMD []' --change 'ENV container=docker' \
    --change "LABEL io.x-k8s.capd-py.inputs=$node_inputs" \
    "$bc" "$NODE" >/dev/null
  cleanup_build; trap - EXIT
  ok "$NODE"
fi
# Upstream's ClusterClasses and CAPD templates name kind's node image (customImage: kindest/node:<version>);
# no registry serves it here, and ours is built the same way (kind layout, containerd preloaded), so the
# node image is tagged under that name too and those manifests run unchanged (docs/docker-provider.md).
if [[ "$(docker image inspect -f '{{.Id}}' "kindest/node:$K8S" 2>/dev/null)" != "$(docker image inspect -f '{{.Id}}' "$NODE")" ]]; then
  docker tag "$NODE" "kindest/node:$K8S"
fi
ok "kindest/node:$K8S = $NODE"

# --- the load balancer ---------------------------------------------------------------------------
build_image "capd-py/haproxy:2.6" "$(cd "$here/haproxy" && cat Dockerfile haproxy.cfg limits.cfg | sha256sum | cut -c1-16)-$BASE" \
  "$here/haproxy" --build-arg "BASE=$BASE"
# Upstream CAPD's default load balancer image (`<imageRepository>/haproxy:<imageTag>`, defaults kindest and
# v20230606-42a2262b): tagged like kindest/node so DockerClusters that leave both parts unset, or name only the
# repository kindest (upstream's e2e ClusterClass), find it. capd_py/reconcile/dockercluster.py DEFAULT_LB_IMAGE.
LB_UPSTREAM="kindest/haproxy:v20230606-42a2262b"
if [[ "$(docker image inspect -f '{{.Id}}' "$LB_UPSTREAM" 2>/dev/null)" != "$(docker image inspect -f '{{.Id}}' capd-py/haproxy:2.6)" ]]; then
  docker tag capd-py/haproxy:2.6 "$LB_UPSTREAM"
fi
ok "$LB_UPSTREAM = capd-py/haproxy:2.6"
ok "images ready in $(( $(date +%s) - t0 ))s"
docker images --format '   {{.Repository}}:{{.Tag}}\t{{.Size}}' | grep -E 'capd-py/(node|haproxy|base)' >&2
