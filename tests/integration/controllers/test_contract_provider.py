"""capd-py's core drives a provider it has never seen, through the contract only (issue 25): a tiny third-party
provider defined by nothing but CRDs in groups capd-py does not know (`infrastructure.example.com`
MinimalCluster / MinimalMachine / MinimalMachineTemplate, `controlplane.example.com` MinimalControlPlane), served
at v1alpha1 and labelled `cluster.x-k8s.io/v1beta2: v1alpha1`, as upstream's contract pages describe. The test
plays the provider (writes status.initialization, spec.providerID, addresses, controlPlaneEndpoint, Ready /
Available conditions, and holds its own finalizers); the whole controllers process runs in-process against a
real kube-apiserver."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from capd_py.api import conditions as cond
from capd_py.api.gvk import CLUSTER, CRD, GVK, KUBEADM_CONTROL_PLANE, MACHINE, MACHINE_DEPLOYMENT, MACHINE_SET
from capd_py.api.labels import CLUSTER_NAME
from capd_py.controllers.manager import Manager
from capd_py.kube.client import Kube, KubeError
from capd_py.kube.crds import install_crds
from capd_py.testing.envtest import EnvTest
from capd_py.testing.inprocess import eventually, in_process_operator
from capd_py.testing.quiet import quiet_versions

pytestmark = [pytest.mark.integration, pytest.mark.docker_free]

INFRA = "infrastructure.example.com"
CP = "controlplane.example.com"
V = "v1alpha1"
MINIMAL_CLUSTER = GVK(INFRA, V, "MinimalCluster", "minimalclusters")
MINIMAL_MACHINE = GVK(INFRA, V, "MinimalMachine", "minimalmachines")
MINIMAL_MACHINE_TEMPLATE = GVK(INFRA, V, "MinimalMachineTemplate", "minimalmachinetemplates")
MINIMAL_CONTROL_PLANE = GVK(CP, V, "MinimalControlPlane", "minimalcontrolplanes")
LATE_CLUSTER = GVK(INFRA, V, "LateCluster", "lateclusters")
PROVIDER_FINALIZER = "example.com/provider"
Obj = dict[str, Any]


def provider_crd(g: GVK) -> Obj:
    """A provider CRD as the contract asks: named <plural>.<group>, labelled with the versions implementing it."""
    free = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{g.plural}.{g.group}", "labels": {"cluster.x-k8s.io/v1beta2": V}},
        "spec": {"group": g.group, "scope": "Namespaced",
                 "names": {"kind": g.kind, "listKind": f"{g.kind}List", "plural": g.plural,
                           "singular": g.kind.lower()},
                 "versions": [{"name": V, "served": True, "storage": True, "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                   "spec": free, "status": free}}}}]},
    }


@pytest.fixture
async def operator(envtest: EnvTest) -> AsyncIterator[Manager]:
    """The provider's machines have no API server behind them."""
    async with in_process_operator(envtest, workloads="none", crds=[provider_crd(g) for g in (
            MINIMAL_CLUSTER, MINIMAL_MACHINE, MINIMAL_MACHINE_TEMPLATE, MINIMAL_CONTROL_PLANE)]) as op:
        yield op.manager


def _obj(g: GVK, ns: str, name: str, spec: Obj | None = None) -> Obj:
    return {"apiVersion": g.api_version, "kind": g.kind, "metadata": {"name": name, "namespace": ns},
            "spec": spec or {}}


def _ref(g: GVK, name: str) -> Obj:
    return {"apiGroup": g.group, "kind": g.kind, "name": name}


async def _status(kube: Kube, g: GVK, ns: str, name: str, status: Obj) -> None:
    await kube.merge_patch(g, ns, name, {"status": status}, subresource="status")


def _cond(obj: Obj | None, ctype: str) -> Obj:
    return cond.get(obj or {}, ctype) or {}


async def _latency(change: Callable[[], Awaitable[object]], reached: Callable[[], Awaitable[bool]],
                   what: str, limit: float = 10.0) -> float:
    """Seconds from `change` until `reached` holds (polled every 20 ms)."""
    start = time.monotonic()
    await change()
    while not await reached():
        if time.monotonic() - start > limit:
            raise AssertionError(f"not reached within {limit:.0f}s: {what}")
        await asyncio.sleep(0.02)
    return time.monotonic() - start


async def test_minimal_provider_through_the_contract(operator: Manager, kube: Kube, namespace: str) -> None:
    ns = namespace
    await kube.create(MINIMAL_CLUSTER, _obj(MINIMAL_CLUSTER, ns, "mc"))
    await kube.create(MINIMAL_CONTROL_PLANE, _obj(MINIMAL_CONTROL_PLANE, ns, "mc-cp", {"replicas": 3}))
    await kube.create(MINIMAL_MACHINE_TEMPLATE, _obj(MINIMAL_MACHINE_TEMPLATE, ns, "workers",
                                                     {"template": {"spec": {"flavor": "small"}}}))
    await kube.create(CLUSTER, {"apiVersion": CLUSTER.api_version, "kind": "Cluster",
                                "metadata": {"name": "mc", "namespace": ns},
                                "spec": {"infrastructureRef": _ref(MINIMAL_CLUSTER, "mc"),
                                         "controlPlaneRef": _ref(MINIMAL_CONTROL_PLANE, "mc-cp")}})
    await kube.create(MACHINE_DEPLOYMENT, {
        "apiVersion": MACHINE_DEPLOYMENT.api_version, "kind": "MachineDeployment",
        "metadata": {"name": "mc-md", "namespace": ns},
        "spec": {"clusterName": "mc", "replicas": 2,
                 "selector": {"matchLabels": {"pool": "workers"}},
                 "template": {"metadata": {"labels": {"pool": "workers"}},
                              "spec": {"clusterName": "mc", "version": "v1.34.4",
                                       "bootstrap": {"dataSecretName": "mc-bootstrap"},
                                       "infrastructureRef": _ref(MINIMAL_MACHINE_TEMPLATE, "workers")}}}})

    async def cluster() -> Obj:
        c = await kube.get(CLUSTER, ns, "mc")
        assert c is not None
        return c

    # The Cluster finds both provider objects (no "does not exist"), owns and labels them.
    async def adopted() -> bool:
        c = await cluster()
        objs = [await kube.get(MINIMAL_CLUSTER, ns, "mc"), await kube.get(MINIMAL_CONTROL_PLANE, ns, "mc-cp")]
        return (_cond(c, "InfrastructureReady").get("reason") == "NotReady"
                and all(o is not None and (o["metadata"].get("labels") or {}).get(CLUSTER_NAME) == "mc"
                        and any(r.get("uid") == c["metadata"]["uid"]
                                for r in o["metadata"].get("ownerReferences") or [])
                        for o in objs))
    await eventually(adopted, 30, "MinimalCluster and MinimalControlPlane found, owned and labelled by the Cluster",
                     cluster)
    assert "does not exist" not in _cond(await cluster(), "InfrastructureReady").get("message", "")
    assert not (await cluster())["spec"].get("controlPlaneEndpoint"), "no endpoint before the infra is provisioned"

    # The MachineDeployment's MachineSet creates Machines, cloning MinimalMachines from the template.
    async def machines() -> list[Obj]:
        return await kube.list(MACHINE, ns, labels={CLUSTER_NAME: "mc"})

    async def built() -> bool:
        return len(await machines()) == 2 and len(await kube.list(MINIMAL_MACHINE, ns)) == 2
    await eventually(built, 30, "2 Machines and 2 MinimalMachines", machines)
    tpl = await kube.get(MINIMAL_MACHINE_TEMPLATE, ns, "workers")
    assert tpl is not None
    assert any(r["kind"] == "Cluster" for r in tpl["metadata"]["ownerReferences"]), "the Cluster owns the template"
    # a MachineSet of its own (no MachineDeployment) also makes the Cluster own its template, as upstream
    await kube.create(MINIMAL_MACHINE_TEMPLATE, _obj(MINIMAL_MACHINE_TEMPLATE, ns, "solo", {"template": {"spec": {}}}))
    await kube.create(MACHINE_SET, {
        "apiVersion": MACHINE_SET.api_version, "kind": "MachineSet", "metadata": {"name": "solo", "namespace": ns},
        "spec": {"clusterName": "mc", "replicas": 0, "selector": {"matchLabels": {"pool": "solo"}},
                 "template": {"metadata": {"labels": {"pool": "solo"}},
                              "spec": {"clusterName": "mc", "version": "v1.34.4",
                                       "bootstrap": {"dataSecretName": "mc-bootstrap"},
                                       "infrastructureRef": _ref(MINIMAL_MACHINE_TEMPLATE, "solo")}}}})

    async def solo_owned() -> bool:
        t = await kube.get(MINIMAL_MACHINE_TEMPLATE, ns, "solo")
        return t is not None and any(r["kind"] == "Cluster" for r in t["metadata"].get("ownerReferences") or [])
    await eventually(solo_owned, 20, "the Cluster owns a lone MachineSet's template")

    async def infra_machines_adopted() -> bool:
        for m in await machines():
            im = await kube.get(MINIMAL_MACHINE, ns, m["spec"]["infrastructureRef"]["name"])
            owner = [r for r in (im or {}).get("metadata", {}).get("ownerReferences") or [] if r.get("controller")]
            if im is None or (im["metadata"].get("labels") or {}).get(CLUSTER_NAME) != "mc" or \
                    [(r["kind"], r["uid"]) for r in owner] != [("Machine", m["metadata"]["uid"])]:
                return False
        return True
    await eventually(infra_machines_adopted, 30, "each MinimalMachine controlled by its Machine and labelled")

    # Provider: the infrastructure is provisioned. The Cluster hears of it at once (a dynamic watch of
    # MinimalCluster, no resync), copies endpoint and failure domains.
    await kube.merge_patch(MINIMAL_CLUSTER, ns, "mc", {"spec": {"controlPlaneEndpoint": {"host": "10.0.0.1",
                                                                                         "port": 6443}}})
    fds = [{"name": "fd-a", "controlPlane": True}, {"name": "fd-b", "controlPlane": False}]

    async def infra_ready() -> bool:
        c = await cluster()
        return _cond(c, "InfrastructureReady").get("status") == "True" and \
            c["spec"].get("controlPlaneEndpoint") == {"host": "10.0.0.1", "port": 6443}
    took = await _latency(lambda: _status(kube, MINIMAL_CLUSTER, ns, "mc", {
        "initialization": {"provisioned": True}, "failureDomains": fds}), infra_ready,
        "Cluster InfrastructureReady after MinimalCluster provisioned")
    assert took < 1.0, f"MinimalCluster status reached the Cluster after {took:.2f}s"
    c = await cluster()
    assert c["status"]["initialization"]["infrastructureProvisioned"] is True
    assert c["status"]["failureDomains"] == fds

    # The provider's Ready condition is mirrored once it writes one.
    await _status(kube, MINIMAL_CLUSTER, ns, "mc", {"conditions": [
        {"type": "Ready", "status": "False", "reason": "LoadBalancerDown", "message": "lb is down",
         "lastTransitionTime": "2026-01-01T00:00:00Z"}]})

    async def mirrored() -> bool:
        r = _cond(await cluster(), "InfrastructureReady")
        return (r.get("status"), r.get("reason"), r.get("message")) == ("False", "LoadBalancerDown", "lb is down")
    await eventually(mirrored, 10, "InfrastructureReady mirrors MinimalCluster's Ready", cluster)
    await _status(kube, MINIMAL_CLUSTER, ns, "mc", {"conditions": [
        {"type": "Ready", "status": "True", "reason": "Ready", "message": "",
         "lastTransitionTime": "2026-01-01T00:00:00Z"}]})

    # Provider: a machine provisioned without a providerID does not make its Machine provisioned.
    m0 = (await machines())[0]
    im0 = m0["spec"]["infrastructureRef"]["name"]
    await _status(kube, MINIMAL_MACHINE, ns, im0, {"initialization": {"provisioned": True}})

    async def waits_for_provider_id() -> bool:
        m = await kube.get(MACHINE, ns, m0["metadata"]["name"])
        return "providerID" in _cond(m, "InfrastructureReady").get("message", "")
    await eventually(waits_for_provider_id, 10, "Machine InfrastructureReady waits for spec.providerID")
    m = await kube.get(MACHINE, ns, m0["metadata"]["name"])
    assert m is not None and not (m.get("status") or {}).get("initialization", {}).get("infrastructureProvisioned")
    assert not m["spec"].get("providerID")

    # Provider: providerID and addresses: the Machine is provisioned, within a second.
    addrs = [{"type": "InternalIP", "address": "10.0.0.11"}]
    await _status(kube, MINIMAL_MACHINE, ns, im0, {"addresses": addrs})

    async def machine_provisioned() -> bool:
        m = await kube.get(MACHINE, ns, m0["metadata"]["name"])
        return m is not None and m["spec"].get("providerID") == "minimal://m0" and \
            (m.get("status") or {}).get("addresses") == addrs and \
            _cond(m, "InfrastructureReady").get("status") == "True"
    took = await _latency(lambda: kube.merge_patch(MINIMAL_MACHINE, ns, im0, {"spec": {"providerID": "minimal://m0"}}),
                          machine_provisioned, "Machine provisioned after MinimalMachine providerID")
    assert took < 1.0, f"MinimalMachine change reached its Machine after {took:.2f}s"
    m = await kube.get(MACHINE, ns, m0["metadata"]["name"])
    assert m is not None and m["status"]["initialization"]["infrastructureProvisioned"] is True
    for other in (await machines())[1:]:
        name = other["spec"]["infrastructureRef"]["name"]
        await kube.merge_patch(MINIMAL_MACHINE, ns, name, {"spec": {"providerID": f"minimal://{name}"}})
        await _status(kube, MINIMAL_MACHINE, ns, name, {"initialization": {"provisioned": True}})

    # Provider: the control plane is initialized and available; it has no Machines, its counters are its own.
    async def cp_seen() -> bool:
        c = await cluster()
        return (_cond(c, "ControlPlaneInitialized").get("status"), _cond(c, "ControlPlaneAvailable").get("status"),
                (c.get("status") or {}).get("controlPlane")) == (
            "True", "True", {"desiredReplicas": 3, "replicas": 3, "readyReplicas": 3, "availableReplicas": 2,
                             "upToDateReplicas": 3})
    took = await _latency(lambda: _status(kube, MINIMAL_CONTROL_PLANE, ns, "mc-cp", {
        "initialization": {"controlPlaneInitialized": True}, "replicas": 3, "readyReplicas": 3,
        "availableReplicas": 2, "upToDateReplicas": 3,
        "conditions": [{"type": "Available", "status": "True", "reason": "Available", "message": "",
                        "lastTransitionTime": "2026-01-01T00:00:00Z"}]}), cp_seen,
        "Cluster control plane conditions and counters from MinimalControlPlane")
    assert took < 1.0, f"MinimalControlPlane status reached the Cluster after {took:.2f}s"

    # A stable cluster writes nothing.
    async def versions() -> dict[str, str]:
        out = {}
        for g in (CLUSTER, MACHINE, MACHINE_SET, MACHINE_DEPLOYMENT, MINIMAL_CLUSTER, MINIMAL_MACHINE,
                  MINIMAL_CONTROL_PLANE):
            for o in await kube.list(g, ns):
                out[f"{g.kind}/{o['metadata']['name']}"] = o["metadata"]["resourceVersion"]
        return out
    before, after = await quiet_versions(operator, versions, window=3, timeout=60, what="the cluster converged",
                                         namespace=ns)
    assert after == before, "objects were written although nothing changed"

    # Deletion: the provider holds its own finalizers; workers go first, then the control plane, then the
    # infrastructure, each waited for; nothing is left.
    for g, name in [(MINIMAL_CLUSTER, "mc"), (MINIMAL_CONTROL_PLANE, "mc-cp"),
                    *[(MINIMAL_MACHINE, o["metadata"]["name"]) for o in await kube.list(MINIMAL_MACHINE, ns)]]:
        await kube.merge_patch(g, ns, name, {"metadata": {"finalizers": [PROVIDER_FINALIZER]}})
    await kube.delete(CLUSTER, ns, "mc")
    order: list[str] = []
    deadline = time.monotonic() + 90
    while True:
        left = {g.kind: await kube.list(g, ns) for g in (MACHINE_DEPLOYMENT, MACHINE_SET, MACHINE, MINIMAL_MACHINE,
                                                          MINIMAL_CONTROL_PLANE, MINIMAL_CLUSTER, CLUSTER)}
        for kind, objs in left.items():
            for o in objs:
                if o["metadata"].get("deletionTimestamp") and PROVIDER_FINALIZER in (o["metadata"].get("finalizers")
                                                                                     or []):
                    # the provider cleans up: the workers' machines, then (once asked) the control plane / infra
                    order.append(f"{kind}")
                    try:
                        await kube.merge_patch(MINIMAL_MACHINE if kind == "MinimalMachine" else
                                               MINIMAL_CONTROL_PLANE if kind == "MinimalControlPlane" else
                                               MINIMAL_CLUSTER, ns, o["metadata"]["name"],
                                               {"metadata": {"finalizers": None}})
                    except KubeError as e:
                        if not e.not_found:
                            raise
                    await asyncio.sleep(0.5)  # the next step must not start before this one is gone
        if not any(left.values()):
            break
        assert time.monotonic() < deadline, "not deleted within 90s: " + str(
            {k: [o["metadata"]["name"] for o in v] for k, v in left.items() if v})
        await asyncio.sleep(0.1)
    assert order == ["MinimalMachine", "MinimalMachine", "MinimalControlPlane", "MinimalCluster"], order


async def test_missing_crd_is_a_condition_naming_it(operator: Manager, kube: Kube, namespace: str) -> None:
    ns = namespace
    with pytest.raises(KubeError):  # no such CRD yet (the test below installs it)
        await kube.list(LATE_CLUSTER, ns)
    await kube.create(CLUSTER, {"apiVersion": CLUSTER.api_version, "kind": "Cluster",
                                "metadata": {"name": "late", "namespace": ns},
                                "spec": {"infrastructureRef": _ref(LATE_CLUSTER, "late")}})

    async def cluster() -> Obj:
        c = await kube.get(CLUSTER, ns, "late")
        assert c is not None
        return c

    async def says_crd_missing() -> bool:
        r = _cond(await cluster(), "InfrastructureReady")
        return r.get("status") == "False" and \
            "CustomResourceDefinition lateclusters.infrastructure.example.com does not exist" in r.get("message", "")
    await eventually(says_crd_missing, 20, "InfrastructureReady names the missing CRD", cluster)

    # a MachineSet cloning from a template whose CRD does not exist says so too
    await kube.create(MACHINE_SET, {
        "apiVersion": MACHINE_SET.api_version, "kind": "MachineSet", "metadata": {"name": "late-ms", "namespace": ns},
        "spec": {"clusterName": "late", "replicas": 1, "selector": {"matchLabels": {"pool": "late"}},
                 "template": {"metadata": {"labels": {"pool": "late"}},
                              "spec": {"clusterName": "late", "version": "v1.34.4",
                                       "bootstrap": {"dataSecretName": "late-bootstrap"},
                                       "infrastructureRef": {"apiGroup": INFRA, "kind": "LateMachineTemplate",
                                                             "name": "t"}}}}})

    async def machineset() -> Obj:
        ms = await kube.get(MACHINE_SET, ns, "late-ms")
        assert ms is not None
        return ms

    async def ms_says_crd_missing() -> bool:
        return "CustomResourceDefinition latemachinetemplates.infrastructure.example.com does not exist" in \
            _cond(await machineset(), "ScalingUp").get("message", "")
    await eventually(ms_says_crd_missing, 20, "the MachineSet names the missing template CRD", machineset)
    assert not await kube.list(MACHINE, ns)
    await kube.delete(MACHINE_SET, ns, "late-ms")

    # The CRD appears (discovery hears of it through its CRD watch, and the Cluster is reconciled again at once,
    # not at its next 5 s poll), then the object: the reference resolves.
    async def says_object_missing() -> bool:
        r = _cond(await cluster(), "InfrastructureReady")
        return r.get("message") == "LateCluster late does not exist"

    async def install() -> None:
        await install_crds(kube, crds=[provider_crd(LATE_CLUSTER)])
    await _latency(install, says_object_missing, "InfrastructureReady says the object, not the CRD, is missing",
                   limit=4.0)
    await kube.create(LATE_CLUSTER, _obj(LATE_CLUSTER, ns, "late"))
    await _status(kube, LATE_CLUSTER, ns, "late", {"initialization": {"provisioned": True}})

    async def ready() -> bool:
        return _cond(await cluster(), "InfrastructureReady").get("status") == "True"
    await eventually(ready, 20, "InfrastructureReady once the CRD and the object exist", cluster)
    await kube.delete(CLUSTER, ns, "late")

    async def gone() -> bool:
        return await kube.get(CLUSTER, ns, "late") is None and not await kube.list(LATE_CLUSTER, ns)
    await eventually(gone, 30, "Cluster and LateCluster deleted")
    await kube.delete(CRD, None, f"{LATE_CLUSTER.plural}.{LATE_CLUSTER.group}")


async def test_kubeadm_control_plane_on_a_third_party_infrastructure(operator: Manager, kube: Kube,
                                                                      namespace: str) -> None:
    """KCP clones its machines from a provider's template it resolves through the contract; the provider's
    machine reaches the Machine at once (dynamic watch), and deleting the Cluster removes it."""
    ns = namespace
    await kube.create(MINIMAL_CLUSTER, _obj(MINIMAL_CLUSTER, ns, "kc"))
    await kube.create(MINIMAL_MACHINE_TEMPLATE, _obj(MINIMAL_MACHINE_TEMPLATE, ns, "cp",
                                                     {"template": {"spec": {"flavor": "large"}}}))
    await kube.create(CLUSTER, {"apiVersion": CLUSTER.api_version, "kind": "Cluster",
                                "metadata": {"name": "kc", "namespace": ns},
                                "spec": {"infrastructureRef": _ref(MINIMAL_CLUSTER, "kc"),
                                         "controlPlaneRef": _ref(KUBEADM_CONTROL_PLANE, "kc-cp")}})
    await kube.create(KUBEADM_CONTROL_PLANE, {
        "apiVersion": KUBEADM_CONTROL_PLANE.api_version, "kind": "KubeadmControlPlane",
        "metadata": {"name": "kc-cp", "namespace": ns},
        "spec": {"replicas": 1, "version": "v1.34.4",
                 "machineTemplate": {"spec": {"infrastructureRef": _ref(MINIMAL_MACHINE_TEMPLATE, "cp")}},
                 "kubeadmConfigSpec": {"clusterConfiguration": {"apiServer": {"certSANs": ["localhost"]}}}}})
    await kube.merge_patch(MINIMAL_CLUSTER, ns, "kc", {"spec": {"controlPlaneEndpoint": {"host": "10.0.0.2",
                                                                                         "port": 6443}}})
    await _status(kube, MINIMAL_CLUSTER, ns, "kc", {"initialization": {"provisioned": True}})

    async def cp_machine() -> Obj | None:
        ms = await kube.list(MACHINE, ns, labels={CLUSTER_NAME: "kc"})
        return ms[0] if len(ms) == 1 else None

    async def cloned() -> bool:
        m = await cp_machine()
        if m is None or m["spec"]["infrastructureRef"]["kind"] != "MinimalMachine":
            return False
        im = await kube.get(MINIMAL_MACHINE, ns, m["spec"]["infrastructureRef"]["name"])
        return im is not None and im["spec"].get("flavor") == "large" and \
            [(r["kind"], r["uid"]) for r in im["metadata"].get("ownerReferences") or [] if r.get("controller")] == \
            [("Machine", m["metadata"]["uid"])] and (im["metadata"].get("labels") or {}).get(CLUSTER_NAME) == "kc"
    await eventually(cloned, 60, "a control-plane Machine with a MinimalMachine cloned from the template", cp_machine)
    tpl = await kube.get(MINIMAL_MACHINE_TEMPLATE, ns, "cp")
    assert tpl is not None and any(r["kind"] == "Cluster" for r in tpl["metadata"].get("ownerReferences") or [])

    m = await cp_machine()
    assert m is not None
    im = m["spec"]["infrastructureRef"]["name"]

    async def provisioned() -> bool:
        got = await kube.get(MACHINE, ns, m["metadata"]["name"])
        return got is not None and got["spec"].get("providerID") == "minimal://cp0" and \
            _cond(got, "InfrastructureReady").get("status") == "True"

    async def provide() -> None:
        await kube.merge_patch(MINIMAL_MACHINE, ns, im, {"spec": {"providerID": "minimal://cp0"}})
        await _status(kube, MINIMAL_MACHINE, ns, im, {"initialization": {"provisioned": True}})
    took = await _latency(provide, provisioned, "control-plane Machine provisioned")
    assert took < 1.0, f"MinimalMachine status reached its control-plane Machine after {took:.2f}s"

    await kube.delete(CLUSTER, ns, "kc")

    async def gone() -> bool:
        return (await kube.get(CLUSTER, ns, "kc") is None and not await kube.list(MACHINE, ns)
                and not await kube.list(MINIMAL_MACHINE, ns) and not await kube.list(MINIMAL_CLUSTER, ns)
                and not await kube.list(KUBEADM_CONTROL_PLANE, ns))
    await eventually(gone, 60, "Cluster, KCP, Machine, MinimalMachine and MinimalCluster deleted")
