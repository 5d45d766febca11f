#!/usr/bin/env bash
# timed.sh NAME CMD [ARGS...]: run CMD; then say how long it took on stderr and append a line
# "<UTC time>\t<NAME>\t<seconds>\t<exit code>\t<CPU seconds>" to $CAPD_PY_CACHE/build-times.tsv, so a cold build's
# steps (issue 40 item 4) can be read back after the fact: `column -t ~/.cache/capd-py/build-times.tsv`. The CPU
# seconds are user + system of CMD's process tree (what two steps side by side compete for); work done by dockerd for
# CMD (an image build's RUN steps) is not in them.
set -uo pipefail
name="${1:?usage: timed.sh NAME CMD [ARGS...]}"; shift
cache="${CAPD_PY_CACHE:-$HOME/.cache/capd-py}"
t0=$(date +%s.%N)
"$@"
rc=$?
# `times` in this shell (a builtin with a redirect: no fork) reports the reaped children's user and system time
times > "${TMPDIR:-/tmp}/timed.$$"
cpu=$(tail -1 "${TMPDIR:-/tmp}/timed.$$" | awk '{ n = 0; for (i = 1; i <= 2; i++) { split($i, p, "m"); n += p[1] * 60 + p[2] }
  printf "%.1f", n }')
rm -f "${TMPDIR:-/tmp}/timed.$$"
s=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
mkdir -p "$cache"
printf '%s\t%s\t%s\t%s\t%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$name" "$s" "$rc" "$cpu" >> "$cache/build-times.tsv"
echo " ⏱ $name: ${s} s (${cpu} CPU-s)" >&2
exit $rc
