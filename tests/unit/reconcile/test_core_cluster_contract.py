"""The Cluster's contract semantics with any provider (issue 25): endpoint and failure domains copied once the
infrastructure is provisioned, the control plane's own endpoint, Ready mirrored with the initialization fields as
fallback, fields read by the provider's contract version, a missing CRD named."""

from __future__ import annotations

from typing import Any

import pytest

from capd_py.reconcile import cluster as rc
from capd_py.testing import builders

pytestmark = pytest.mark.unit

EP = {"host": "10.0.0.1", "port": 6443}


def cluster(endpoint: dict | None = None, status: dict | None = None) -> dict[str, Any]:
    return builders.cluster(uid="u", generation=1, infra=("infrastructure.example.com", "MinimalCluster"),
                            control_plane=("controlplane.example.com", "MinimalControlPlane"), endpoint=endpoint,
                            status=status or {})


def infra(provisioned: bool | None = None, ready: bool | None = None, endpoint: dict | None = None,
          conditions: list | None = None, fds: Any = None) -> dict[str, Any]:
    st: dict[str, Any] = {}
    if provisioned is not None:
        st["initialization"] = {"provisioned": provisioned}
    if ready is not None:
        st["ready"] = ready
    if conditions is not None:
        st["conditions"] = conditions
    if fds is not None:
        st["failureDomains"] = fds
    return {"apiVersion": "infrastructure.example.com/v1alpha1", "kind": "MinimalCluster",
            "metadata": {"name": "c1"}, "spec": {"controlPlaneEndpoint": endpoint or EP}, "status": st}


def cp(initialized: bool = False, endpoint: dict | None = None, **status: Any) -> dict[str, Any]:
    o: dict[str, Any] = {"apiVersion": "controlplane.example.com/v1alpha1", "kind": "MinimalControlPlane",
                         "metadata": {"name": "c1-cp"}, "spec": {"replicas": 3},
                         "status": {"initialization": {"controlPlaneInitialized": initialized}, **status}}
    if endpoint:
        o["spec"]["controlPlaneEndpoint"] = endpoint
    return o


def cond(st: dict, ctype: str) -> dict:
    return next(c for c in st["conditions"] if c["type"] == ctype)


def test_endpoint_copied_only_once_the_infrastructure_is_provisioned() -> None:
    assert rc.spec_patch(rc.Observed(cluster(), infra=infra(provisioned=False))) is None
    assert rc.spec_patch(rc.Observed(cluster(), infra=infra(provisioned=True))) == \
        {"spec": {"controlPlaneEndpoint": EP}}
    # a user-set endpoint wins
    assert rc.spec_patch(rc.Observed(cluster(endpoint={"host": "x", "port": 1}), infra=infra(provisioned=True))) is None


def test_control_planes_own_endpoint_used_once_initialized() -> None:
    own = {"host": "cp.example.com", "port": 443}
    no_ep_infra = infra(provisioned=True)
    no_ep_infra["spec"] = {}
    assert rc.spec_patch(rc.Observed(cluster(), infra=no_ep_infra, control_plane=cp(False, own))) is None
    assert rc.spec_patch(rc.Observed(cluster(), infra=no_ep_infra, control_plane=cp(True, own))) == \
        {"spec": {"controlPlaneEndpoint": own}}


def test_fields_read_by_contract_version() -> None:
    # a v1beta1-contract provider reports status.ready; the v1beta2 contract's field is not read for it, and
    # status.ready is not read for a v1beta2-contract provider
    old = infra(ready=True)
    assert rc.spec_patch(rc.Observed(cluster(), infra=old, infra_contract="v1beta1")) == \
        {"spec": {"controlPlaneEndpoint": EP}}
    assert rc.spec_patch(rc.Observed(cluster(), infra=old, infra_contract="v1beta2")) is None
    st = rc.compute_status(rc.Observed(cluster(), infra=infra(provisioned=True, fds={"a": {"controlPlane": True}}),
                                       infra_contract="v1beta1"))
    assert cond(st, "InfrastructureReady")["status"] == "False"  # v1beta1 reads status.ready, which is unset
    st = rc.compute_status(rc.Observed(cluster(), infra=infra(ready=True, fds={"a": {"controlPlane": True}}),
                                       infra_contract="v1beta1"))
    assert cond(st, "InfrastructureReady")["status"] == "True"
    assert st["failureDomains"] == [{"name": "a", "controlPlane": True}]
    v1b1_cp = {"apiVersion": "controlplane.example.com/v1alpha1", "kind": "MinimalControlPlane",
               "metadata": {"name": "c1-cp"}, "spec": {"replicas": 3},
               "status": {"initialized": True, "replicas": 3, "readyReplicas": 3,
                          "v1beta2": {"readyReplicas": 2, "availableReplicas": 2, "upToDateReplicas": 1}}}
    st = rc.compute_status(rc.Observed(cluster(), infra=infra(provisioned=True), control_plane=v1b1_cp,
                                       cp_contract="v1beta1"))
    assert cond(st, "ControlPlaneInitialized")["status"] == "True"
    assert st["controlPlane"] == {"desiredReplicas": 3, "replicas": 3, "readyReplicas": 2, "availableReplicas": 2,
                                  "upToDateReplicas": 1}


def test_failure_domains_copied_once_provisioned() -> None:
    fds = [{"name": "fd1", "controlPlane": True}]
    st = rc.compute_status(rc.Observed(cluster(), infra=infra(provisioned=False, fds=fds)))
    assert "failureDomains" not in st
    st = rc.compute_status(rc.Observed(cluster(), infra=infra(provisioned=True, fds=fds)))
    assert st["failureDomains"] == fds


def test_ready_mirrored_when_the_provider_writes_it_else_initialization() -> None:
    lb_down = [{"type": "Ready", "status": "False", "reason": "LoadBalancerDown", "message": "lb down",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    st = rc.compute_status(rc.Observed(cluster(), infra=infra(provisioned=True, conditions=lb_down)))
    c = cond(st, "InfrastructureReady")
    assert (c["status"], c["reason"], c["message"]) == ("False", "LoadBalancerDown", "lb down")
    assert st["initialization"]["infrastructureProvisioned"] is True  # provisioned all the same
    ok = [{"type": "Ready", "status": "True", "reason": "NoReasonReported", "message": "",
           "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    assert cond(rc.compute_status(rc.Observed(cluster(), infra=infra(provisioned=True, conditions=ok))),
                "InfrastructureReady")["reason"] == "Ready"
    c = cond(rc.compute_status(rc.Observed(cluster(), infra=infra(provisioned=False))), "InfrastructureReady")
    assert (c["status"], c["reason"]) == ("False", "NotReady")
    c = cond(rc.compute_status(rc.Observed(cluster(), infra=infra(provisioned=True))), "InfrastructureReady")
    assert (c["status"], c["reason"]) == ("True", "Ready")


def test_control_plane_counters_from_the_control_plane_object_without_machines() -> None:
    st = rc.compute_status(rc.Observed(cluster(), infra=infra(provisioned=True), control_plane=cp(
        True, replicas=3, readyReplicas=3, availableReplicas=3, upToDateReplicas=3, conditions=[
            {"type": "Available", "status": "True", "reason": "Available", "message": "",
             "lastTransitionTime": "2026-01-01T00:00:00Z"}])))
    assert st["controlPlane"] == {"desiredReplicas": 3, "replicas": 3, "readyReplicas": 3, "availableReplicas": 3,
                                  "upToDateReplicas": 3}
    assert cond(st, "ControlPlaneAvailable")["status"] == "True"
    assert cond(st, "ControlPlaneInitialized")["status"] == "True"


def test_missing_crd_named_in_the_conditions() -> None:
    why = "MinimalCluster c1: CustomResourceDefinition minimalclusters.infrastructure.example.com does not exist"
    cp_why = "MinimalControlPlane c1-cp does not exist"
    st = rc.compute_status(rc.Observed(cluster(), infra_missing=why, cp_missing=cp_why))
    c = cond(st, "InfrastructureReady")
    assert (c["status"], c["reason"], c["message"]) == ("False", "ObjectDoesNotExist", why)
    assert cond(st, "ControlPlaneAvailable")["message"] == cp_why
    assert cond(st, "ControlPlaneInitialized")["message"] == cp_why


def test_control_plane_available_mirrored_else_initialized() -> None:
    st = rc.compute_status(rc.Observed(cluster(), infra=infra(provisioned=True), control_plane=cp(False)))
    c = cond(st, "ControlPlaneAvailable")
    assert (c["status"], c["reason"], c["message"]) == (
        "False", "NotAvailable", "MinimalControlPlane status.initialization.controlPlaneInitialized is false")
    c = cond(rc.compute_status(rc.Observed(cluster(), infra=infra(provisioned=True), control_plane=cp(True))),
             "ControlPlaneAvailable")
    assert (c["status"], c["reason"]) == ("True", "Available")
    etcd_down = [{"type": "Available", "status": "False", "reason": "EtcdQuorumLost", "message": "2 of 3 down",
                  "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    c = cond(rc.compute_status(rc.Observed(cluster(), infra=infra(provisioned=True),
                                           control_plane=cp(True, conditions=etcd_down))), "ControlPlaneAvailable")
    assert (c["status"], c["reason"], c["message"]) == ("False", "EtcdQuorumLost", "2 of 3 down")
