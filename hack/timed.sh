#!/usr/bin/env bash
# timed.sh NAME CMD [ARGS...]: run CMD; then say how long it took on stderr and append a line
# "<UTC time>\t<NAME>\t<seconds>\t<exit code>" to $CAPD_PY_CACHE/build-times.tsv, so a cold build's steps
# (issue 40 item 4) can be read back after the fact: `column -t ~/.cache/capd-py/build-times.tsv`.
set -uo pipefail
name="${1:?usage: timed.sh NAME CMD [ARGS...]}"; shift
cache="${CAPD_PY_CACHE:-$HOME/.cache/capd-py}"
t0=$(date +%s.%N)
"$@"
rc=$?
s=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
mkdir -p "$cache"
printf '%s\t%s\t%s\t%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$name" "$s" "$rc" >> "$cache/build-times.tsv"
echo " ⏱ $name: ${s} s" >&2
exit $rc
