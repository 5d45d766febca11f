"""The objects of a new control-plane Machine: infrastructure clone, KubeadmConfig, Machine."""

from __future__ import annotations

from typing import Any

import pytest

from capd_py.api.labels import CLONED_FROM_GROUP_KIND, CLONED_FROM_NAME, CLUSTER_NAME, CONTROL_PLANE_NAME
from capd_py.reconcile import machineset
from capd_py.reconcile.kcp import desiredstate as ds

try:
    from kcp_fixtures import CLUSTER, kcp
except ImportError:  # pragma: no cover - when run as a package
    from .kcp_fixtures import CLUSTER, kcp  # type: ignore[no-redef]

pytestmark = pytest.mark.unit

TEMPLATE: dict[str, Any] = {
    "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DockerMachineTemplate",
    "metadata": {"name": "cp-v1", "namespace": "ns"},
    "spec": {"template": {"metadata": {"labels": {"tier": "cp"}, "annotations": {"note": "x"}},
                          "spec": {"extraMounts": [{"containerPath": "/a", "hostPath": "/b"}]}}},
}


def build(k: dict[str, Any] | None = None, *, init: bool = False, fd: str = "") -> ds.DesiredMachine:
    out = ds.desired_machine(k or kcp(), CLUSTER, TEMPLATE, "c1-cp-abcde", init=init, failure_domain=fd)
    assert isinstance(out, ds.DesiredMachine)
    return out


def test_infrastructure_machine_is_the_template_clone_the_machineset_would_make() -> None:
    want = build()
    owner = {"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane",
             "name": "c1-cp", "uid": "kcp-uid", "controller": True, "blockOwnerDeletion": True}
    same = machineset.clone_from_template(TEMPLATE, "c1-cp-abcde", "ns", "c1", owner,
                                          extra_labels=ds.machine_labels(kcp(), "c1"))
    assert want.infra == same
    assert want.infra_gvk.kind == "DockerMachine" and want.infra["kind"] == "DockerMachine"
    md = want.infra["metadata"]
    assert md["labels"]["tier"] == "cp" and md["labels"][CONTROL_PLANE_NAME] == "c1-cp"
    assert md["annotations"] == {"note": "x", CLONED_FROM_NAME: "cp-v1",
                                 CLONED_FROM_GROUP_KIND: "DockerMachineTemplate.infrastructure.cluster.x-k8s.io"}
    assert want.infra["spec"] == TEMPLATE["spec"]["template"]["spec"]
    assert want.infra["spec"] is not TEMPLATE["spec"]["template"]["spec"]  # a copy


def test_init_or_join_config() -> None:
    init = build(init=True).config
    assert "initConfiguration" in init["spec"] and "joinConfiguration" not in init["spec"]
    join = build().config
    assert "initConfiguration" not in join["spec"] and join["spec"]["joinConfiguration"]["controlPlane"] == {}
    assert join["metadata"]["labels"][CLUSTER_NAME] == "c1"
    assert join["metadata"]["ownerReferences"][0]["uid"] == "kcp-uid"


def test_machine_points_at_both_and_carries_the_machine_template() -> None:
    ref = kcp()["spec"]["machineTemplate"]["spec"]["infrastructureRef"]
    k = kcp(machineTemplate={"metadata": {"labels": {"extra": "1"}, "annotations": {"a": "b"}},
                             "spec": {"infrastructureRef": ref,
                                      "readinessGates": [{"conditionType": "X"}], "deletion": {}}})
    m = build(k, fd="fd-a").machine
    assert m["spec"]["bootstrap"]["configRef"] == {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig",
                                                   "name": "c1-cp-abcde"}
    assert m["spec"]["infrastructureRef"] == {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                              "kind": "DockerMachine", "name": "c1-cp-abcde"}
    assert m["spec"]["version"] == "v1.34.4" and m["spec"]["clusterName"] == "c1"
    assert m["spec"]["failureDomain"] == "fd-a"
    assert m["spec"]["readinessGates"] == [{"conditionType": "X"}] and "deletion" not in m["spec"]  # empty: unset
    assert m["metadata"]["labels"]["extra"] == "1" and m["metadata"]["annotations"] == {
        "a": "b", "pre-terminate.delete.hook.machine.cluster.x-k8s.io/kcp-cleanup": ""}  # etcd member removal hook
    assert "failureDomain" not in build().machine["spec"]


def test_problems() -> None:
    assert isinstance(ds.template_gvk(kcp(machineTemplate={})), str)
    odd = kcp(machineTemplate={"spec": {"infrastructureRef": {"apiGroup": "x.io", "kind": "T", "name": "n"}}})
    assert "unknown kind" in str(ds.template_gvk(odd))
    tg = ds.template_gvk(kcp())
    assert not isinstance(tg, str) and tg[0].kind == "DockerMachineTemplate" and tg[1]["name"] == "cp-v1"
    unknown = {**TEMPLATE, "kind": "FooMachineTemplate"}
    assert ds.desired_machine(kcp(), CLUSTER, unknown, "n", init=False, failure_domain="") == \
        "unknown infrastructure machine kind FooMachine"
