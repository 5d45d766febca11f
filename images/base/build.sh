#!/usr/bin/env bash
# Debian bookworm rootfs from debootstrap, imported as a docker image. Everything a node needs that
# Debian ships; Kubernetes itself is layered on top by images/node. Cached by a hash of this file.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
CACHE="${CAPD_PY_CACHE:-$HOME/.cache/capd-py}"
PACKAGES=(systemd systemd-sysv dbus containerd runc containernetworking-plugins iptables conntrack
  socat ethtool iproute2 iputils-ping kmod ca-certificates procps util-linux mount ebtables
  libseccomp2 ipset haproxy curl)
hash=$(sed "/docker import/d" "$0" | sha256sum | cut -c1-12)
TAG="capd-py/base:bookworm-$hash"
if docker image inspect "$TAG" >/dev/null 2>&1; then
  echo " ✓ base image $TAG cached" >&2; echo "$TAG"; exit 0
fi
command -v debootstrap >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
tarball="$CACHE/base/rootfs-$hash.tar"
if [[ ! -f "$tarball" ]]; then
  root=$(mktemp -d)
  trap 'rm -rf "$root"' EXIT
  echo " • debootstrap bookworm minbase (${#PACKAGES[@]} extra packages)" >&2
  inc=$(IFS=,; echo "${PACKAGES[*]}")
  debootstrap --variant=minbase --include="$inc" bookworm "$root" http://deb.debian.org/debian >"$CACHE/base.log" 2>&1 \
    || { tail -30 "$CACHE/base.log" >&2; exit 1; }
  # Trim what a node never reads; keeps the image smaller and faster to copy into volumes.
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* \
    "$root"/usr/share/man/* "$root"/usr/share/locale/* "$root"/usr/share/info/*
  mkdir -p "$(dirname "$tarball")"
  tar -C "$root" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
fi
echo " • importing $TAG" >&2
docker import -c 'ENV container=docker' -c 'ENTRYPOINT ["/sbin/init"]' \
  "$tarball" "$TAG" >/dev/null
echo " ✓ base image $TAG" >&2
echo "$TAG"
