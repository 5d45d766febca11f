"""MachineSet preflight checks: the cases of upstream's machineset_preflight_test.go, with its messages."""

from __future__ import annotations

from typing import Any

import pytest

from capd_py.reconcile import preflight as pf

pytestmark = pytest.mark.unit

KCT = {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfigTemplate", "name": "bt"}


def _cluster(topology_version: str | None = None, step: str | None = None, cp: bool = True) -> dict[str, Any]:
    spec: dict[str, Any] = {"infrastructureRef": {"apiGroup": "x", "kind": "DockerCluster", "name": "c"}}
    if cp:
        spec["controlPlaneRef"] = {"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KubeadmControlPlane",
                                   "name": "cp"}
    if topology_version:
        spec["topology"] = {"classRef": {"name": "cc"}, "version": topology_version}
    md: dict[str, Any] = {"name": "c", "namespace": "ns"}
    if step:
        md["annotations"] = {pf.TOPOLOGY_UPGRADE_STEP_ANNOTATION: step}
    return {"kind": "Cluster", "metadata": md, "spec": spec}


def _cp(spec: str | None = "v1.26.2", status: str | None = "v1.26.2", versions: list[str] | None = None
        ) -> dict[str, Any]:
    cp: dict[str, Any] = {"kind": "KubeadmControlPlane", "metadata": {"name": "cp", "namespace": "ns"},
                          "spec": {}, "status": {}}
    if spec is not None:
        cp["spec"]["version"] = spec
    if status is not None:
        cp["status"]["version"] = status
    if versions is not None:
        cp["status"]["versions"] = [{"version": v, "replicas": 1} for v in versions]
    return cp


def _ms(version: str | None = None, skip: str | None = None, boot: dict[str, str] | None = KCT) -> dict[str, Any]:
    tspec: dict[str, Any] = {"clusterName": "c", "infrastructureRef": {"apiGroup": "x", "kind": "DM", "name": "m"}}
    if version:
        tspec["version"] = version
    if boot:
        tspec["bootstrap"] = {"configRef": boot}
    md: dict[str, Any] = {"name": "ms", "namespace": "ns"}
    if skip is not None:
        md["annotations"] = {pf.SKIP_ANNOTATION: skip}
    return {"kind": "MachineSet", "metadata": md, "spec": {"template": {"spec": tspec}}}


def _run(cluster: dict[str, Any], cp: dict[str, Any] | None, ms: dict[str, Any],
         tpl: dict[str, Any] | None = None, enabled: frozenset[str] = frozenset({pf.ALL})) -> pf.Outcome:
    return pf.run(cluster, cp, ms, pf.skipped(ms, tpl), enabled)


STABLE = '("ControlPlaneIsStable" preflight check failed)'


@pytest.mark.parametrize(("cluster", "cp", "ms", "want"), [
    # nothing to check
    (_cluster(cp=False), None, _ms(), []),
    (_cluster(), _cp(spec=None), _ms(), []),
    (_cluster(), _cp(status=None), _ms(skip="All"), []),
    # ControlPlaneIsStable
    (_cluster(), _cp(status=None), _ms(), [f"KubeadmControlPlane ns/cp is provisioning {STABLE}"]),
    (_cluster(), _cp(status=""), _ms(), [f"KubeadmControlPlane ns/cp is provisioning {STABLE}"]),
    (_cluster(), _cp(spec="v1.26.2", status="v1.25.0"), _ms(), [f"KubeadmControlPlane ns/cp is upgrading {STABLE}"]),
    (_cluster(), _cp(spec="v1.26.2", versions=["v1.25.0", "v1.26.2"]), _ms(),
     [f"KubeadmControlPlane ns/cp is upgrading {STABLE}"]),
    (_cluster(), _cp(spec="v1.26.2", versions=["v1.26.2"]), _ms(), []),
    (_cluster(), _cp(spec="v1.26.2", status="v1.25.0"), _ms(skip="ControlPlaneIsStable"), []),
    (_cluster(topology_version="v1.27.0"), _cp(), _ms(),
     [f"KubeadmControlPlane ns/cp has a pending version upgrade to v1.27.0 {STABLE}"]),
    (_cluster(topology_version="v1.28.0", step="v1.27.0"), _cp(), _ms(),
     [f"KubeadmControlPlane ns/cp has a pending version upgrade to v1.27.0 {STABLE}"]),
    (_cluster(topology_version="v1.28.0", step="v1.26.2"), _cp(), _ms(), []),
    (_cluster(), _cp(), _ms(), []),
    # KubernetesVersionSkew
    (_cluster(), _cp(), _ms(version="v1.27.0", skip="KubeadmVersionSkew"), [
        'MachineSet version (1.27.0) and ControlPlane version (1.26.2) do not conform to the kubernetes version skew '
        'policy as MachineSet version is higher than ControlPlane version ("KubernetesVersionSkew" preflight check '
        'failed)']),
    (_cluster(), _cp(), _ms(version="v1.22.0", skip="KubeadmVersionSkew"), [
        'MachineSet version (1.22.0) and ControlPlane version (1.26.2) do not conform to the kubernetes version skew '
        'policy as MachineSet version is more than 3 minor versions older than the ControlPlane version '
        '("KubernetesVersionSkew" preflight check failed)']),
    (_cluster(), _cp(), _ms(version="v1.27.0", skip="KubernetesVersionSkew,KubeadmVersionSkew"), []),
    (_cluster(), _cp(), _ms(version="v1.23.0", boot=None), []),
    # KubeadmVersionSkew
    (_cluster(), _cp(), _ms(version="v1.25.5"), [
        'MachineSet version (1.25.5) and ControlPlane version (1.26.2) do not conform to kubeadm version skew policy '
        'as kubeadm only supports joining with the same major+minor version as the control plane '
        '("KubeadmVersionSkew" preflight check failed)']),
    (_cluster(), _cp(), _ms(version="v1.25.5", boot={"apiGroup": "bootstrap.example.com", "kind": "Other",
                                                      "name": "x"}), []),
    (_cluster(), _cp(), _ms(version="v1.25.5", skip="KubeadmVersionSkew"), []),
    (_cluster(), _cp(), _ms(version="v1.26.0"), []),
    # ControlPlaneVersionSkew (topology Clusters only)
    (_cluster(topology_version="v1.26.2"), _cp(), _ms(version="v1.26.0"), [
        'MachineSet version (v1.26.0) is not yet the same as the ControlPlane version (v1.26.2), waiting for version '
        'to be propagated to the MachineSet ("ControlPlaneVersionSkew" preflight check failed)']),
    (_cluster(topology_version="v1.26.2"), _cp(), _ms(version="v1.26.0", skip="ControlPlaneVersionSkew"), []),
    (_cluster(), _cp(), _ms(version="v1.26.0"), []),
    (_cluster(topology_version="v1.26.2"), _cp(), _ms(version="v1.26.2"), []),
    # several at once, in upstream's order
    (_cluster(), _cp(spec="v1.26.2", status="v1.25.0"), _ms(version="v1.25.0"), [
        f"KubeadmControlPlane ns/cp is upgrading {STABLE}",
        'MachineSet version (1.25.0) and ControlPlane version (1.26.2) do not conform to kubeadm version skew policy '
        'as kubeadm only supports joining with the same major+minor version as the control plane '
        '("KubeadmVersionSkew" preflight check failed)']),
])
def test_checks_as_upstream(cluster: dict[str, Any], cp: dict[str, Any] | None, ms: dict[str, Any],
                            want: list[str]) -> None:
    out = _run(cluster, cp, ms)
    assert list(out.failures) == want and not out.error
    assert out.blocked is bool(want)


def test_invalid_versions_hold_the_operation_with_an_error() -> None:
    out = _run(_cluster(), _cp(spec="1.26.x"), _ms())
    assert out.blocked and not out.failures and "failed to parse version '1.26.x' of ControlPlane ns/cp" in out.error
    out = _run(_cluster(), _cp(), _ms(version="latest"))
    assert out.blocked and "failed to parse version 'latest' of MachineSet ns/ms" in out.error
    # a version without its v is read as upstream's ParseTolerant reads it
    assert not _run(_cluster(), _cp(spec="1.26.2", status="1.26.2"), _ms(version="1.26.1")).blocked


def test_skip_annotation_of_the_machineset_wins_over_the_bootstrap_template() -> None:
    tpl = {"metadata": {"annotations": {pf.SKIP_ANNOTATION: "All"}}}
    assert pf.skipped(_ms(), tpl) == {"All"}
    assert pf.skipped(_ms(skip=" ControlPlaneIsStable , KubeadmVersionSkew"), tpl) == {
        "ControlPlaneIsStable", "KubeadmVersionSkew"}
    assert pf.needs_bootstrap_template(_ms()) and not pf.needs_bootstrap_template(_ms(skip="All"))
    assert not pf.needs_bootstrap_template(_ms(boot=None))
    assert not _run(_cluster(), _cp(status=None), _ms(), tpl).blocked


def test_enabled_checks_from_the_flag() -> None:
    assert pf.parse_checks("All") == {"All"} and pf.parse_checks("") == frozenset()
    assert pf.parse_checks("ControlPlaneIsStable, KubernetesVersionSkew") == {"ControlPlaneIsStable",
                                                                               "KubernetesVersionSkew"}
    with pytest.raises(ValueError, match="unknown MachineSet preflight check.*Nope"):
        pf.parse_checks("ControlPlaneIsStable,Nope")
    only_skew = frozenset({pf.KUBERNETES_VERSION_SKEW})
    assert not _run(_cluster(), _cp(status=None), _ms(), enabled=only_skew).blocked
    assert _run(_cluster(), _cp(), _ms(version="v1.27.0"), enabled=only_skew).blocked
    assert not _run(_cluster(), _cp(status=None), _ms(), enabled=frozenset()).blocked


def test_messages_for_conditions() -> None:
    assert pf.scaling_up_message(1, 3, ["a", "b"]) == \
        "Scaling up from 1 to 3 replicas is blocked because:\n* a\n* b"
    m = {"metadata": {"generation": 2}, "status": {"conditions": [
        {"type": "OwnerRemediated", "status": "False", "reason": "WaitingForRemediation", "message": "",
         "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}
    st = pf.deferred_machine_status(m, pf.remediation_deferred_message(["x"]))
    c = st["conditions"][0]
    assert (c["status"], c["reason"], c["message"]) == ("False", "RemediationDeferred", "* x")
    assert pf.deferred_machine_status({**m, "status": st}, "* x") == st  # unchanged: no write
