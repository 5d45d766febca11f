"""The restricted privilege mode: one definition for capd-py's runtime, `docker run` flags and the Docker API shim."""

from __future__ import annotations

import pytest

from capd_py.api import containers as c

pytestmark = pytest.mark.unit


def test_a_privileged_host_config_becomes_restricted() -> None:
    hc = c.restricted_host_config({"Privileged": True, "SecurityOpt": ["seccomp=unconfined", "label=disable"],
                                   "Mounts": [{"Type": "volume", "Target": "/var"}], "Tmpfs": {"/run": ""}})
    assert hc["Privileged"] is False
    assert hc["CapAdd"] == ["ALL"] and hc["CapDrop"] == ["SYS_RESOURCE"]
    assert hc["SecurityOpt"] == ["label=disable", "seccomp=unconfined", "apparmor=unconfined"]
    assert hc["DeviceCgroupRules"] == ["a *:* rwm"]
    assert hc["MaskedPaths"] == [] and hc["ReadonlyPaths"] == []
    assert hc["Mounts"] == [{"Type": "volume", "Target": "/var"},
                            {"Type": "bind", "Source": "/sys/fs/cgroup", "Target": "/sys/fs/cgroup"}]
    assert hc["Tmpfs"] == {"/run": ""}


def test_cgroup_v1_nodes_get_the_host_cgroup_namespace_v2_nodes_keep_theirs() -> None:
    assert c.restricted_host_config({"Privileged": True, "CgroupnsMode": "private"})["CgroupnsMode"] == "host"
    v2 = c.restricted_host_config({"Privileged": True, "CgroupnsMode": "private"}, cgroup_v1=False)
    assert v2["CgroupnsMode"] == "private" and "Mounts" not in v2


@pytest.mark.parametrize("hc", [
    {"Mounts": [{"Type": "bind", "Source": "/sys/fs/cgroup", "Target": "/sys/fs/cgroup", "ReadOnly": True}]},
    {"Binds": ["/sys/fs/cgroup:/sys/fs/cgroup:ro"]},
])
def test_a_cgroup_mount_asked_for_is_kept(hc: dict[str, object]) -> None:
    out = c.restricted_host_config({"Privileged": True, **hc})
    assert out.get("Mounts", []) == hc.get("Mounts", []) and out.get("Binds") == hc.get("Binds")


def test_an_unprivileged_host_config_is_left_alone() -> None:
    hc = {"Privileged": False, "CapAdd": ["NET_ADMIN"]}
    assert c.restricted_host_config(hc) is hc


def test_docker_run_flags() -> None:
    assert c.restricted_flags() == [
        "--cap-add", "ALL", "--cap-drop", "SYS_RESOURCE", "--security-opt", "seccomp=unconfined",
        "--security-opt", "apparmor=unconfined", "--security-opt", "systempaths=unconfined",
        "--device-cgroup-rule", "a *:* rwm"]
