#!/usr/bin/env bash
# Print the privilege mode node containers can use here: "privileged" when `docker run --privileged`
# works, else "restricted" (all capabilities but SYS_RESOURCE, unconfined seccomp/apparmor), which is
# what sandboxes without CAP_SYS_RESOURCE need. Cached per boot.
set -u
cache=/run/capd-py-privilege-mode
if [[ -f $cache ]]; then cat $cache; exit 0; fi
img=$(docker images --format '{{.Repository}}:{{.Tag}}' 'capd-py/base' 2>/dev/null | head -1)
[[ -n "$img" ]] || { echo privileged; exit 0; }
if docker run --rm --privileged --entrypoint /bin/true "$img" >/dev/null 2>&1; then mode=privileged; else mode=restricted; fi
mkdir -p /run 2>/dev/null; echo $mode > $cache 2>/dev/null || true
echo $mode
