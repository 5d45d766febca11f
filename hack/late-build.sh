#!/usr/bin/env bash
# A build that `make test` runs beside pytest instead of before it (capd_py/testing/late_builds.py says why and how
# tests wait for it).
#
#   hack/late-build.sh start NAME COMMAND...   start COMMAND in the background under `nice -n 19`: its output to
#                                              $CAPD_PY_CACHE/late-builds/NAME.log, its exit status to NAME.rc when
#                                              it ends, its process id to NAME.pid (written before this returns)
#   hack/late-build.sh finish NAME             wait for it to end, show its log on stderr (as `make builds` shows
#                                              its side chain's), exit with its status
#
# Its docker work is three FROM-scratch image builds (no container, network or bridge is made), so it takes no part
# of the tests' docker host lock (capd_py/testing/host_lock.py).
set -euo pipefail
CACHE="${CAPD_PY_CACHE:-$HOME/.cache/capd-py}"
DIR="$CACHE/late-builds"
verb="${1:?usage: late-build.sh start NAME COMMAND... | finish NAME}"
name="${2:?usage: late-build.sh start NAME COMMAND... | finish NAME}"
shift 2
mkdir -p "$DIR"
case "$verb" in
  start)
    [[ $# -gt 0 ]] || { echo "late-build.sh start $name: no command" >&2; exit 2; }
    rm -f "$DIR/$name.rc" "$DIR/$name.log" "$DIR/$name.pid"
    # the status is written last, through a rename, so a reader never sees a partial one
    ( set +e; nice -n 19 "$@" > "$DIR/$name.log" 2>&1 < /dev/null; echo $? > "$DIR/$name.rc.tmp"
      mv "$DIR/$name.rc.tmp" "$DIR/$name.rc" ) > /dev/null 2>&1 &
    echo $! > "$DIR/$name.pid"
    echo " • $name builds beside the tests (nice -n 19; log: $DIR/$name.log)" >&2
    ;;
  finish)
    pid=$(cat "$DIR/$name.pid" 2>/dev/null || true)
    while [[ ! -f "$DIR/$name.rc" && -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; do sleep 1; done
    cat "$DIR/$name.log" >&2 2>/dev/null || true
    rc=$(cat "$DIR/$name.rc" 2>/dev/null || echo "none")
    rm -f "$DIR/$name.pid"
    if [[ "$rc" != 0 ]]; then echo " ✗ the late build $name ended with status $rc" >&2; exit 1; fi
    ;;
  *) echo "late-build.sh: unknown verb $verb (start or finish)" >&2; exit 2 ;;
esac
