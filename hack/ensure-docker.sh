#!/usr/bin/env bash
# Install Docker from Debian when absent and start dockerd in the background; safe to run repeatedly.
# Also raises the inotify limits: every node container runs systemd, kubelet and containerd, which
# exhaust the default of 128 instances after a few nodes.
set -euo pipefail
log() { echo " • $*" >&2; }
if ! command -v dockerd >/dev/null 2>&1; then
  log "installing docker.io from Debian"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq docker.io >/dev/null
fi
# the system ssh client: capd-py's ssh:// docker hosts shell out to it (docker SDK use_ssh_client), and the
# integration tests of ssh:// hosts run it against their own throwaway server (tests/integration/runtime/ssh_server.py)
if ! command -v ssh >/dev/null 2>&1; then
  log "installing openssh-client from Debian"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq openssh-client >/dev/null
fi
sysctl -qw fs.inotify.max_user_instances=8192 fs.inotify.max_user_watches=1048576 2>/dev/null \
  || log "could not raise inotify limits (not root?)"
# The default bridge's link can vanish under a running dockerd (a second dockerd given the same bridge name
# removes it when it stops; seen here 2026-12-05): every container on the default network, image builds
# included, then fails with "could not find bridge docker0". Put the link back as the daemon describes it.
repair_docker0() {
  ip link show docker0 >/dev/null 2>&1 && return 0
  local gw
  gw=$(docker network inspect bridge --format '{{range .IPAM.Config}}{{.Gateway}}/{{.Subnet}}{{end}}' 2>/dev/null) || return 0
  [ -n "$gw" ] || return 0
  log "the default bridge docker0 is missing: re-creating it (${gw%%/*}/${gw##*/})"
  ip link add docker0 type bridge && ip addr add "${gw%%/*}/${gw##*/}" dev docker0 && ip link set docker0 up \
    || log "could not re-create docker0"
}
if docker info >/dev/null 2>&1; then
  repair_docker0
  echo " ✓ dockerd is running" >&2
  exit 0
fi
log "starting dockerd"
mkdir -p /var/log
# A session of its own: started from a job whose process group is later killed (a CI step, a terminal
# tool that ends its jobs' groups), dockerd died with it and took every node container along. Appended,
# not overwritten, so the end of the previous dockerd's log survives a restart.
echo "--- $(date -u +%FT%TZ) hack/ensure-docker.sh starts dockerd" >>/var/log/capd-py-dockerd.log
nohup setsid dockerd >>/var/log/capd-py-dockerd.log 2>&1 </dev/null &
for _ in $(seq 1 60); do
  if docker info >/dev/null 2>&1; then echo " ✓ dockerd is running" >&2; exit 0; fi
  sleep 1
done
echo " ✗ dockerd did not start; see /var/log/capd-py-dockerd.log" >&2
tail -20 /var/log/capd-py-dockerd.log >&2
exit 1
