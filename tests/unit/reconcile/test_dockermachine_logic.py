from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from capd_py.api.labels import CONTAINER_MACHINE, CONTAINER_ROLE
from capd_py.reconcile import dockermachine as dmr
from capd_py.reconcile.dockermachine import Observed, Phase
from capd_py.runtime.protocol import ContainerInfo

pytestmark = pytest.mark.unit


def _dm(spec: dict[str, Any] | None = None, status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "dm", "namespace": "ns", "generation": 2}, "spec": spec or {}, "status": status or {}}


def _info(ip: str = "10.0.0.9") -> ContainerInfo:
    return ContainerInfo(id="x", name="c1-m1", image="i", status="running", labels={}, ipv4={"net": ip}, ipv6={},
                         ports={})


def test_container_name_follows_upstream() -> None:
    assert dmr.container_name("c1", "m1") == "c1-m1"
    assert dmr.container_name("c1", "c1-md-0-abc") == "c1-md-0-abc"
    assert dmr.provider_id("c1-m1") == "docker:////c1-m1"


def test_node_image() -> None:
    m = {"spec": {"version": "v1.34.4"}}
    assert dmr.node_image(_dm(), m, "capd-py/node") == "capd-py/node:v1.34.4"
    assert dmr.node_image(_dm(), {"spec": {"version": "1.34.4"}}, "capd-py/node") == "capd-py/node:v1.34.4"
    assert dmr.node_image(_dm({"customImage": "my/img:1"}), m, "capd-py/node") == "my/img:1"
    assert dmr.node_image(_dm(), {"spec": {}}, "capd-py/node") is None


def test_image_decision_present() -> None:
    m = {"spec": {"version": "v1.34.4"}}
    d = dmr.image_decision(_dm(), m, "capd-py/node:v1.34.4", True)
    assert d.ok and d.message == "" and d.requeue_after is None


@pytest.mark.parametrize("version", ["v1.30.0", "v1.36.3", "v1.37.0-rc.1"])
def test_image_decision_version_without_node_image(version: str) -> None:
    """An admitted version nobody built a node image for: a condition naming the make target, a later look."""
    m = {"spec": {"version": version}}
    image = dmr.node_image(_dm(), m, "capd-py/node")
    d = dmr.image_decision(_dm(), m, image, False)
    assert not d.ok and d.requeue_after == dmr.IMAGE_RECHECK_SECONDS
    assert f"make images K8S_VERSION={version}" in d.message and f"capd-py/node:{version}" in d.message
    assert "never pulls" in d.message
    st = dmr.status(_dm(), Observed(Phase.IMAGE_NOT_FOUND, d.message))
    assert _conds(st)["ContainerProvisioned"] == ("False", "ImageNotFound")
    assert _conds(st)["Ready"][0] == "False" and "initialization" not in st


def test_image_decision_custom_image_and_no_version() -> None:
    d = dmr.image_decision(_dm({"customImage": "my/img:1"}), {"spec": {"version": "v1.34.4"}}, "my/img:1", False)
    assert not d.ok and "my/img:1 (spec.customImage)" in d.message and "make images" not in d.message
    assert d.requeue_after == dmr.IMAGE_RECHECK_SECONDS
    d = dmr.image_decision(_dm(), {"spec": {}}, None, False)
    assert not d.ok and d.requeue_after is None and "no spec.version" in d.message


def test_node_spec_labels_mounts_privilege() -> None:
    dm = _dm({"extraMounts": [{"containerPath": "/data", "hostPath": "/tmp/d", "readOnly": True}, {"hostPath": "/x"}]})
    s = dmr.node_spec("ns", "c1", "m1", dm, "img", "net", True, "restricted")
    assert s.name == s.hostname == "c1-m1" and s.node and s.privileged_mode == "restricted"
    assert s.labels[CONTAINER_MACHINE] == "m1" and s.labels[CONTAINER_ROLE] == "control-plane"
    assert [(m.source, m.target, m.read_only) for m in s.mounts] == [("/tmp/d", "/data", True)]
    assert dmr.node_spec("ns", "c1", "m1", dm, "img", "net", False, "privileged").labels[CONTAINER_ROLE] == "worker"


@pytest.mark.parametrize("v,want", [(None, 300), ("90s", 90), ("5m", 300), ("1h30m", 5400), ("junk", 300)])
def test_bootstrap_timeout(v: str | None, want: float) -> None:
    assert dmr.bootstrap_timeout(_dm({"bootstrapTimeout": v} if v else {})) == want


def test_addresses() -> None:
    assert dmr.addresses(_info(), "net") == [
        {"type": "Hostname", "address": "c1-m1"}, {"type": "InternalIP", "address": "10.0.0.9"},
        {"type": "ExternalIP", "address": "10.0.0.9"}]
    assert dmr.addresses(None, "net") == []


def _conds(st: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in st["conditions"]}


def test_status_phases() -> None:
    st = dmr.status(_dm(), Observed(Phase.WAITING_BOOTSTRAP_DATA, "waiting"))
    c = _conds(st)
    assert c["ContainerProvisioned"] == ("False", "WaitingForBootstrapData")
    assert c["BootstrapExecSucceeded"] == ("False", "WaitingForContainer")
    assert c["Ready"][0] == "False" and "initialization" not in st

    # the node container booting while the Machine waits for its bootstrap data
    st = dmr.status(_dm(), Observed(Phase.WAITING_CONTROL_PLANE, "waiting for the control plane", _info(), "net"))
    c = _conds(st)
    assert c["ContainerProvisioned"] == ("True", "Provisioned")
    assert c["BootstrapExecSucceeded"] == ("False", "WaitingForControlPlaneInitialized")
    assert c["Ready"][0] == "False" and "initialization" not in st

    st = dmr.status(_dm(), Observed(Phase.BOOTSTRAP_FAILED, "step 2 failed", _info(), "net"))
    c = _conds(st)
    assert c["ContainerProvisioned"] == ("True", "Provisioned")
    assert c["BootstrapExecSucceeded"] == ("False", "BootstrapFailed")
    assert next(x for x in st["conditions"] if x["type"] == "BootstrapExecSucceeded")["message"] == "step 2 failed"
    assert st["addresses"][1]["address"] == "10.0.0.9"

    st = dmr.status(_dm(), Observed(Phase.PROVISIONED, "", _info(), "net", "fd1"))
    c = _conds(st)
    assert c["Ready"] == ("True", "Ready") and c["BootstrapExecSucceeded"] == ("True", "BootstrapSucceeded")
    assert st["initialization"] == {"provisioned": True} and st["failureDomain"] == "fd1"
    # idempotent
    assert dmr.status({**_dm(), "status": st}, Observed(Phase.PROVISIONED, "", _info(), "net", "fd1")) == st


def test_status_image_missing_and_deleting() -> None:
    st = dmr.status(_dm(), Observed(Phase.IMAGE_NOT_FOUND, "node image capd-py/node:v1 missing; make images"))
    cp = next(x for x in st["conditions"] if x["type"] == "ContainerProvisioned")
    assert cp["reason"] == "ImageNotFound" and "make images" in cp["message"]
    st = dmr.status(_dm(), Observed(Phase.DELETING, "deleting"))
    assert _conds(st)["ContainerProvisioned"] == ("False", "Deleting")


def test_container_deleted_keeps_provisioned_but_not_ready() -> None:
    prov = dmr.status(_dm(), Observed(Phase.PROVISIONED, "", _info(), "net"))
    st = dmr.status({**_dm(), "status": prov}, Observed(Phase.CONTAINER_DELETED, "gone"))
    assert st["initialization"] == {"provisioned": True}
    assert _conds(st)["ContainerProvisioned"] == ("False", "ContainerDeleted") and _conds(st)["Ready"][0] == "False"


def test_host_unreachable_keeps_provisioned_and_addresses_and_says_why() -> None:
    """docs/multihost.md: the docker host going away is a transient phase: provisioned and the addresses stay (the
    Machine keeps its node), ContainerProvisioned and Ready say the host does not answer."""
    prov = dmr.status(_dm(), Observed(Phase.PROVISIONED, "", _info(), "net"))
    st = dmr.status({**_dm(), "status": prov}, Observed(Phase.HOST_UNREACHABLE, "docker host: docker daemon not "
                                                                                "reachable: refused"))
    assert st["initialization"] == {"provisioned": True} and st["addresses"] == prov["addresses"]
    assert _conds(st)["ContainerProvisioned"] == ("False", "DockerHostUnreachable")
    assert _conds(st)["Ready"][0] == "False"
    assert next(c for c in st["conditions"] if c["type"] == "Ready")["message"].endswith("not reachable: refused")


def test_address_change_is_reported_and_the_old_address_kept() -> None:
    prov = dmr.status(_dm(), Observed(Phase.PROVISIONED, "", _info("10.0.0.9"), "net"))
    dm = {**_dm(), "status": prov}
    assert dmr.address_change(dm, _info("10.0.0.9"), "net", True) is None
    assert dmr.address_change(_dm(), _info("10.0.0.3"), "net", True) is None  # nothing recorded yet
    msg = dmr.address_change(dm, _info("10.0.0.3"), "net", True)
    assert msg and "10.0.0.3" in msg and "10.0.0.9" in msg and "etcd member" in msg
    st = dmr.status(dm, Observed(Phase.ADDRESS_CHANGED, msg, _info("10.0.0.3"), "net"))
    c = _conds(st)
    assert c["ContainerProvisioned"] == ("False", "ContainerAddressChanged") and c["Ready"][0] == "False"
    assert c["BootstrapExecSucceeded"] == ("True", "BootstrapSucceeded")
    assert st["addresses"] == prov["addresses"] and st["initialization"] == {"provisioned": True}
    # stays reported on the next pass (the recorded address is still the old one)
    assert dmr.address_change({**_dm(), "status": st}, _info("10.0.0.3"), "net", False)


def test_last_lines() -> None:
    assert dmr.last_lines("\n".join(str(i) for i in range(30)), 3) == "27\n28\n29"
    assert len(dmr.last_lines("x" * 5000, 1, limit=100)) == 100


def test_bootstrap_data_wait_is_quiet_only_right_after_the_control_plane_initialized() -> None:
    now = dt.datetime(2026, 1, 1, 0, 0, 10, tzinfo=dt.UTC)
    waiting_cp = _dm(status=dmr.status(_dm(), Observed(Phase.WAITING_CONTROL_PLANE, "waiting", _info(), "net")))

    def cluster(ltt: str, status: str = "True") -> dict[str, Any]:
        return {"status": {"conditions": [{"type": "ControlPlaneInitialized", "status": status, "reason": "x",
                                           "lastTransitionTime": ltt}]}}
    # initialized 4 s ago: wait the 6 s left of the grace instead of writing the intermediate status
    assert dmr.bootstrap_data_wait(waiting_cp, cluster("2026-01-01T00:00:06Z"), now) == pytest.approx(6.0)
    # initialized long ago: the bootstrap provider is late, say so
    assert dmr.bootstrap_data_wait(waiting_cp, cluster("2026-01-01T00:00:00Z"), now) is None
    # no time to go by, or the condition not True: say so at once
    assert dmr.bootstrap_data_wait(waiting_cp, {"status": {}}, now) is None
    assert dmr.bootstrap_data_wait(waiting_cp, cluster("2026-01-01T00:00:06Z", "False"), now) is None
    # a DockerMachine that never reported waiting for the control plane (made after it was initialized)
    assert dmr.bootstrap_data_wait(_dm(), cluster("2026-01-01T00:00:06Z"), now) is None


def test_machines_awaiting_provider_id_are_found_by_container_name() -> None:
    machines = [{"metadata": {"name": "md-abc"}}, {"metadata": {"name": "c1-cp-x"}}]
    assert dmr.machines_awaiting_provider_id("c1", machines, {"metadata": {"name": "c1-md-abc"}}) == ["md-abc"]
    assert dmr.machines_awaiting_provider_id("c1", machines, {"metadata": {"name": "c1-cp-x"}}) == ["c1-cp-x"]
    assert dmr.machines_awaiting_provider_id(
        "c1", machines, {"metadata": {"name": "c1-md-abc"}, "spec": {"providerID": "docker:////c1-md-abc"}}) == []
