#!/usr/bin/env bash
# Builds that `make test` runs beside the tests instead of before them (capd_py/testing/late_builds.py says which,
# why, and how tests wait for them).
#
#   hack/late-build.sh start NAME COMMAND...
#        start COMMAND in the background at the lowest CPU weight: its output to $CAPD_PY_CACHE/late-builds/NAME.log,
#        its exit status to NAME.rc when it ends, the process id to wait on to NAME.pid (written before this returns)
#   hack/late-build.sh finish NAME...   wait for each to end, show its log on stderr (as `make builds` shows its side
#                                       chain's), exit 1 if one failed
#   hack/late-build.sh stop NAME...     end each that still runs (every process of its session) and forget it: `make
#                                       test` when lint or the builds before pytest failed
#
# `make test` starts them before lint and the builds: those are CPU-bound too, so the late builds get little there,
# but what they get (the idle seconds of the venv's and the builds' downloads, debootstrap's disk waits; ~2 min of
# idle cores measured in the first minutes of a cold run) is time they no longer take from the e2e tier's end.
#
# The lowest CPU weight: `nice -n 19` alone did not keep a build off the tests' CPU (measured 2026-12-07: a cold run's
# e2e tier summed 61 min against 52-58 with cert-manager compiling beside it). This kernel groups processes by
# session (sched_autogroup_enabled = 1): a session is one scheduling entity of weight 1024 whatever its tasks' nice,
# the same weight as each node container's cgroup, so the niced build inside `make test`'s session took a full
# share from the node containers. Here the build gets a session of its own whose autogroup is niced to 19 (weight
# 15): it runs in the time nothing else wants.
#
# Its docker work is three FROM-scratch image builds (no container, network or bridge is made), so it takes no part
# of the tests' docker host lock (capd_py/testing/host_lock.py).
set -euo pipefail
CACHE="${CAPD_PY_CACHE:-$HOME/.cache/capd-py}"
DIR="$CACHE/late-builds"
usage="usage: late-build.sh start NAME COMMAND... | finish NAME... | stop NAME..."
verb="${1:?$usage}"; shift
mkdir -p "$DIR"

# ended NAME: true once NAME's build has ended (its status written, or its process gone)
ended() {
  [[ -f "$DIR/$1.rc" ]] && return 0
  local pid; pid=$(cat "$DIR/$1.pid" 2>/dev/null || true)
  [[ -z "$pid" ]] || ! kill -0 "$pid" 2>/dev/null
}

case "$verb" in
  start)
    name="${1:?$usage}"; shift
    [[ $# -gt 0 ]] || { echo "late-build.sh start $name: no command" >&2; exit 2; }
    rm -f "$DIR/$name.rc" "$DIR/$name.log" "$DIR/$name.pid" "$DIR/$name.sid"
    # the status is written last, through a rename, so a reader never sees a partial one
    (
      set +e
      # a session of its own (its autogroup niced to 19, where the kernel has autogroups); --wait: the status is the
      # command's
      # the session's id (its leader's pid) in NAME.sid, for `stop`
      setsid --wait bash -c 'echo $$ > "$0"; echo 19 > /proc/self/autogroup 2>/dev/null; exec nice -n 19 "$@"' \
        "$DIR/$name.sid" "$@" > "$DIR/$name.log" 2>&1 < /dev/null
      echo $? > "$DIR/$name.rc.tmp"
      mv "$DIR/$name.rc.tmp" "$DIR/$name.rc"
    ) > /dev/null 2>&1 &
    echo $! > "$DIR/$name.pid"
    echo " • $name builds beside the tests (lowest CPU weight; log: $DIR/$name.log)" >&2
    ;;
  finish)
    [[ $# -gt 0 ]] || { echo "$usage" >&2; exit 2; }
    failed=0
    for name in "$@"; do
      while ! ended "$name"; do sleep 1; done
      echo "== the late build $name" >&2
      cat "$DIR/$name.log" >&2 2>/dev/null || true
      rc=$(cat "$DIR/$name.rc" 2>/dev/null || echo "none")
      rm -f "$DIR/$name.pid" "$DIR/$name.sid"
      if [[ "$rc" != 0 ]]; then echo " ✗ the late build $name ended with status $rc" >&2; failed=1; fi
    done
    exit $failed
    ;;
  stop)
    [[ $# -gt 0 ]] || { echo "$usage" >&2; exit 2; }
    for name in "$@"; do
      sid=$(cat "$DIR/$name.sid" 2>/dev/null || true)
      if [[ -n "$sid" ]] && ! ended "$name"; then
        pkill -TERM -s "$sid" 2>/dev/null || true
        for _ in $(seq 50); do ended "$name" && break; sleep 0.1; done
        pkill -KILL -s "$sid" 2>/dev/null || true
        echo " • the late build $name stopped" >&2
      fi
      rm -f "$DIR/$name.pid" "$DIR/$name.sid" "$DIR/$name.rc"
    done
    ;;
  *) echo "late-build.sh: unknown verb $verb ($usage)" >&2; exit 2 ;;
esac
