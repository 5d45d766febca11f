#!/usr/bin/env bash
# Start / stop a second docker daemon on this machine, as a second "docker host" for capd-py (docs/multihost.md).
#   hack/second-dockerd.sh start [NAME]   prints the endpoint (unix:///run/capd-py-dockerd-NAME.sock); dockerd flags
#                                         in $CAPD_PY_DOCKERD_ARGS are added (e.g. a tcp:// listener with TLS)
#   hack/second-dockerd.sh stop [NAME]    stops that daemon (its containers die with it) and removes its state
#   hack/second-dockerd.sh halt [NAME]    stops that daemon only (a docker host going away): its data root, bridge and
#                                         rules stay, so `start NAME` brings the same daemon back, and dockerd restarts
#                                         the containers whose restart policy says so (capd-py's: unless-stopped)
# It never touches the main dockerd (/var/run/docker.sock) nor its iptables chains: a dockerd started with
# --iptables=true deletes and re-creates the DOCKER chains at start (libnetwork removeIPChains), which would drop
# every published port of the main daemon's containers. So this one runs with --iptables=false --ip-masq=false and
# a default bridge of its own (below); the only host rules it needs (its bridges' traffic through the host's FORWARD chain, whose
# policy the main daemon set to DROP while br_netfilter is loaded) are added to DOCKER-USER by `allow-bridge`,
# matched on its own subnets, and removed by `stop`.
set -euo pipefail
cmd=${1:?start|halt|stop|allow}
name=${2:-2}
sock=/run/capd-py-dockerd-$name.sock
data=/var/lib/capd-py-docker-$name
exec_root=/run/capd-py-docker-$name
pidfile=/run/capd-py-dockerd-$name.pid
log=/var/log/capd-py-dockerd-$name.log
# the comment every host rule of this daemon carries, so `stop` finds them all
tag=capd-py-dockerd-$name
# Its own default bridge, made here: a dockerd started with --bridge=none deletes the link `docker0` at start
# (the main daemon's default bridge: every default-network container and image build there then fails with
# "could not find bridge docker0"; measured 2026-12-05). 15 characters at most (IFNAMSIZ); an address in
# 198.18.0.0/15 (RFC 2544 benchmarking, routed nowhere), the third octet from the name.
bridge=cpb-$(echo -n "$name" | cksum | cut -c1-8)
bridge=${bridge:0:15}
octet=$(( $(echo -n "$name" | cksum | cut -d' ' -f1) % 250 + 1 ))
case $cmd in
start)
  if [ -S "$sock" ] && docker -H "unix://$sock" info >/dev/null 2>&1; then echo "unix://$sock"; exit 0; fi
  mkdir -p "$data" "$exec_root"
  if ! ip link show "$bridge" >/dev/null 2>&1; then
    ip link add "$bridge" type bridge
    ip addr add "198.18.$octet.1/24" dev "$bridge"
    ip link set "$bridge" up
  fi
  echo "--- $(date -u +%FT%TZ) hack/second-dockerd.sh starts dockerd $name" >>"$log"
  # setsid: a session of its own, so the caller's process group ending does not take it along
  setsid dockerd --host "unix://$sock" --data-root "$data" --exec-root "$exec_root" --pidfile "$pidfile" \
    --bridge="$bridge" --iptables=false --ip-masq=false ${CAPD_PY_DOCKERD_ARGS:-} >>"$log" 2>&1 </dev/null &
  for _ in $(seq 1 60); do
    if docker -H "unix://$sock" info >/dev/null 2>&1; then echo "unix://$sock"; exit 0; fi
    sleep 0.5
  done
  echo "dockerd $name did not start; see $log" >&2; tail -20 "$log" >&2; exit 1 ;;
allow)
  # allow forwarding on one subnet of this daemon (a network's traffic between its containers, and to/from
  # the host's other bridges) ahead of the main daemon's isolation rules
  subnet=${3:?subnet}
  for dir in -s -d; do
    iptables -C DOCKER-USER $dir "$subnet" -m comment --comment "$tag" -j ACCEPT 2>/dev/null \
      || iptables -I DOCKER-USER 1 $dir "$subnet" -m comment --comment "$tag" -j ACCEPT
  done ;;
halt)
  if [ -f "$pidfile" ]; then
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || true
    # dockerd stops its containers first (their stop signal, then SIGKILL after its 15 s shutdown timeout)
    for _ in $(seq 1 90); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    if kill -0 "$pid" 2>/dev/null; then echo "dockerd $name did not stop in 45 s" >&2; exit 1; fi
  fi ;;
stop)
  # the bridges of its networks: the kernel keeps them after the daemon is gone, and a bridge left behind keeps
  # its subnet's route on this host, shadowing any later network on that subnet (found 2026-12-05: a stale
  # 172.16.0.0/20 bridge of a second daemon broke the in-cluster e2e's cluster). Its network IDs come from the
  # daemon when it runs, from its network store when it was halted.
  ids=$( { docker -H "unix://$sock" network ls -q --no-trunc 2>/dev/null || true
           grep -aoE '[0-9a-f]{64}' "$data/network/files/local-kv.db" 2>/dev/null || true; } | sort -u)
  main_ids=$(docker network ls -q --no-trunc 2>/dev/null || true)
  if [ -f "$pidfile" ]; then
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  # its rules, found by their comment (deleted by rule text, one at a time)
  while read -r rule; do
    eval "iptables ${rule/-A /-D }"
  done < <(iptables -S DOCKER-USER | grep -- "--comment $tag" || true)
  # container mounts (shm, overlay) may outlive the daemon: unmount before removing the state
  grep -E " ($data|$exec_root)/" /proc/mounts | awk '{print $2}' | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
  rm -rf "$data" "$exec_root" "$sock" "$pidfile"
  for id in $ids; do
    # never a bridge of the main daemon's (an ID both know cannot happen, but a link deleted here is gone)
    if ! grep -qx "$id" <<<"$main_ids"; then ip link del "br-${id:0:12}" 2>/dev/null || true; fi
  done
  ip link del "$bridge" 2>/dev/null || true ;;
*) echo "usage: $0 start|halt|stop|allow [NAME] [SUBNET]" >&2; exit 2 ;;
esac
