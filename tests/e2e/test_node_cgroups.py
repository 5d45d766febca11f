"""Node containers never share a cgroup v1 hierarchy's cgroups.

Where docker makes no cgroup for a container in some v1 hierarchy (this sandbox: perf_event, hugetlb,
net_cls,net_prio), every node used to see that hierarchy's root, so each kubelet took the other nodes' pod
cgroups for its own orphans and tried to remove them every few seconds (a load average of 300+ with nine
nodes). The node entrypoint gives each node a cgroup of its own there and removes those of nodes that are gone.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator

import pytest

from capd_py.testing.node_docker import privilege_flags, run_node, sh, systemd_up, wait_for

pytestmark = pytest.mark.e2e

IMAGE = f"capd-py/node:{os.environ.get('CAPD_PY_K8S_VERSION', 'v1.34.4')}"
MARKER = "capd-py-test-marker"

# Every v1 hierarchy of the host, mounted from a throwaway container (the host itself may not mount them all):
# prints each cgroup named after one of the given container ids, wherever it is.
FIND_CGROUPS = r"""
awk 'NR > 1 && $2 != 0 && $4 == 1 { c = ($2 in h) ? h[$2] "," $1 : $1; h[$2] = c } END { for (k in h) print h[k] }' \
  /proc/cgroups | while read -r ctrls; do
  mkdir -p "/mnt/$ctrls" && mount -t cgroup -o "$ctrls" cgroup "/mnt/$ctrls" || exit 1
  for id in "$@"; do find "/mnt/$ctrls" -maxdepth 3 -type d -name "$id"; done
done
"""


@pytest.fixture
def names() -> Iterator[list[str]]:
    if subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True).returncode != 0:
        pytest.fail(f"{IMAGE} is missing: run `make images`")
    tag = uuid.uuid4().hex[:6]
    out = [f"capd-cgroup-test-{tag}-{i}" for i in range(3)]
    yield out
    subprocess.run(["docker", "rm", "-f", "-v", *out], capture_output=True)


def hierarchies(node: str) -> list[str]:
    """The node's cgroup v1 hierarchy mounts (not the symlinks, not stray directories)."""
    out = sh("docker", "exec", node, "sh", "-c",
             "for d in /sys/fs/cgroup/*; do [ ! -L \"$d\" ] && [ -f \"$d/cgroup.procs\" ] && echo \"$d\"; done")
    return [line for line in out.splitlines() if line and not line.endswith("/unified")]


def own_cgroup(node: str) -> str:
    """The node's cgroup path as /proc/1/cgroup names it (docker's memory cgroup of the container; systemd
    has moved itself into init.scope below it)."""
    for line in sh("docker", "exec", node, "cat", "/proc/1/cgroup").split():
        if line.split(":")[1].split(",").count("memory"):
            return line.split(":", 2)[2].removesuffix("/init.scope")
    raise AssertionError(f"{node}: no memory cgroup")


def host_cgroups_named(*ids: str) -> list[str]:
    return sh("docker", "run", "--rm", *privilege_flags(), "--entrypoint", "sh", IMAGE,
              "-c", FIND_CGROUPS, "sh", *ids).split()


def test_each_node_has_its_own_cgroup_in_every_hierarchy_and_gone_nodes_leave_none(names: list[str]) -> None:
    a, b, c = names
    id_a = run_node(a, IMAGE)
    id_b = run_node(b, IMAGE)
    for n in (a, b):
        wait_for(lambda n=n: systemd_up(n), 60, f"systemd in {n}")  # type: ignore[misc]

    # PID 1 sits in a cgroup of its own in every hierarchy, none at a root
    for n in (a, b):
        lines = sh("docker", "exec", n, "cat", "/proc/1/cgroup").split()
        at_root = [line for line in lines if line.endswith(":/")]
        assert not at_root, f"{n}: PID 1 at the root of {at_root}"

    # a cgroup made in one node is not seen by the other, in any hierarchy
    hs = hierarchies(a)
    assert hs
    for h in hs:
        sh("docker", "exec", a, "mkdir", f"{h}/{MARKER}")
    seen = sh("docker", "exec", b, "sh", "-c",
              " ".join(f"ls {h};" for h in hierarchies(b)))
    assert MARKER not in seen, f"{b} sees {a}'s cgroups"

    # the cgroups of a removed node go when the next node starts (docker removes only those it made), and a
    # live node keeps all of its own, including the path /proc/self/cgroup names (runc inside resolves it)
    for h in hs:
        sh("docker", "exec", a, "rmdir", f"{h}/{MARKER}")
        sh("docker", "exec", b, "mkdir", f"{h}/{MARKER}")
    assert host_cgroups_named(id_a), "node a has no cgroup of its own anywhere"
    b_before = sorted(host_cgroups_named(id_b, MARKER))
    sh("docker", "rm", "-f", "-v", a)
    run_node(c, IMAGE)
    wait_for(lambda: systemd_up(c), 60, f"systemd in {c}")
    assert host_cgroups_named(id_a) == [], "the removed node's cgroups were left behind"
    assert sorted(host_cgroups_named(id_b, MARKER)) == b_before, "a live node's cgroups were removed"
    own = own_cgroup(b)
    for h in hierarchies(b):
        assert MARKER in sh("docker", "exec", b, "ls", f"{h}{own}"), f"{b}: {h}{own} lost its mount"
