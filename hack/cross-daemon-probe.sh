#!/usr/bin/env bash
# What carries traffic between containers of two docker daemons on this machine (docs/multihost.md, "Failure
# domains"): a container on a network of the main daemon (A), one on a bridge network of a second daemon (B), and one
# on a macvlan network of the second daemon whose parent is A's bridge (C, A's subnet). Prints, for each pair, TCP
# connect and ping results and the TTL (64: one L2 segment; 63: routed by the host). Run under the heavy lock;
# removes everything it made (containers, networks, the second daemon and its rules).
set -uo pipefail
here=$(dirname "$0")
name=xd$RANDOM
img=capd-py/haproxy:2.6
main_net=cpx-main-$name
two_net=cpx-two-$name
mac_net=cpx-mac-$name
lbl=io.x-k8s.capd-py.probe=$name
two=""
cleanup() {
  docker rm -f "cpx-a-$name" >/dev/null 2>&1
  if [ -n "$two" ]; then
    docker -H "$two" rm -f "cpx-b-$name" "cpx-c-$name" >/dev/null 2>&1
    docker -H "$two" network rm "$two_net" "$mac_net" >/dev/null 2>&1
  fi
  docker network rm "$main_net" >/dev/null 2>&1
  bash "$here/second-dockerd.sh" stop "$name" >/dev/null 2>&1
}
trap cleanup EXIT
t0=$(date +%s.%N)
two=$(bash "$here/second-dockerd.sh" start "$name" | tail -1)
docker save "$img" | docker -H "$two" load >/dev/null
echo "second dockerd $name at $two, $img loaded: $(echo "$(date +%s.%N) - $t0" | bc) s"

listen() { echo "socat TCP-LISTEN:7000,fork,reuseaddr SYSTEM:'echo hello-from-$1'"; }
docker network create --label "$lbl" "$main_net" >/dev/null
docker run -d --name "cpx-a-$name" --label "$lbl" --network "$main_net" --entrypoint sh "$img" -c "$(listen a)" >/dev/null
docker -H "$two" network create --label "$lbl" "$two_net" >/dev/null
docker -H "$two" run -d --name "cpx-b-$name" --label "$lbl" --network "$two_net" --entrypoint sh "$img" \
  -c "$(listen b)" >/dev/null
main_subnet=$(docker network inspect -f '{{(index .IPAM.Config 0).Subnet}}' "$main_net")
main_gw=$(docker network inspect -f '{{(index .IPAM.Config 0).Gateway}}' "$main_net")
main_br=br-$(docker network inspect -f '{{.Id}}' "$main_net" | cut -c1-12)
two_subnet=$(docker -H "$two" network inspect -f '{{(index .IPAM.Config 0).Subnet}}' "$two_net")
ip_a=$(docker inspect -f "{{(index .NetworkSettings.Networks \"$main_net\").IPAddress}}" "cpx-a-$name")
ip_b=$(docker -H "$two" inspect -f "{{(index .NetworkSettings.Networks \"$two_net\").IPAddress}}" "cpx-b-$name")
# C: the second daemon's macvlan on A's bridge, an address high in A's subnet (outside what the main daemon hands out
# first); docker's macvlan driver needs the subnet and gateway given
ip_c=$(echo "$main_subnet" | awk -F'[./]' '{print $1"."$2"."$3".200"}')
if docker -H "$two" network create --label "$lbl" -d macvlan -o parent="$main_br" --subnet "$main_subnet" \
    --gateway "$main_gw" --aux-address "a=$ip_a" "$mac_net" >/dev/null 2>/tmp/cpx-mac-$name.err; then
  docker -H "$two" run -d --name "cpx-c-$name" --label "$lbl" --network "$mac_net" --ip "$ip_c" --entrypoint sh \
    "$img" -c "$(listen c)" >/dev/null || ip_c=""
else
  echo "macvlan on $main_br: $(cat /tmp/cpx-mac-$name.err)"; ip_c=""
fi
rm -f "/tmp/cpx-mac-$name.err"
echo "A main daemon $main_net $main_subnet ($main_br) $ip_a; B second daemon $two_net $two_subnet $ip_b; C macvlan $ip_c"

probe() {  # probe LABEL DOCKER-ARGS... -- CONTAINER TARGET-IP
  local label=$1; shift
  local args=()
  while [ "$1" != "--" ]; do args+=("$1"); shift; done; shift
  local c=$1 ip=$2
  local tcp ping
  tcp=$(docker "${args[@]}" exec "$c" timeout 4 socat -T2 - "TCP:$ip:7000,connect-timeout=3" 2>&1 | tr -d '\n')
  ping=$(docker "${args[@]}" exec "$c" ping -c1 -W2 "$ip" 2>&1 | grep -Eo 'ttl=[0-9]+|100% packet loss' | head -1)
  echo "$label: tcp=${tcp:-(nothing)} ping=${ping:-?}"
}
echo "--- without DOCKER-USER rules for the second daemon"
probe "B(second, bridge) -> A(main)" -H "$two" -- "cpx-b-$name" "$ip_a"
probe "A(main) -> B(second, bridge)" -- "cpx-a-$name" "$ip_b"
[ -n "$ip_c" ] && probe "C(second, macvlan on A's bridge) -> A" -H "$two" -- "cpx-c-$name" "$ip_a"
[ -n "$ip_c" ] && probe "A -> C(second, macvlan on A's bridge)" -- "cpx-a-$name" "$ip_c"
bash "$here/second-dockerd.sh" allow "$name" "$two_subnet"
echo "--- with DOCKER-USER accepting $two_subnet (second-dockerd.sh allow)"
probe "B(second, bridge) -> A(main)" -H "$two" -- "cpx-b-$name" "$ip_a"
probe "A(main) -> B(second, bridge)" -- "cpx-a-$name" "$ip_b"
echo "total $(echo "$(date +%s.%N) - $t0" | bc) s"
