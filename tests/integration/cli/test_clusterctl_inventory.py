"""Upstream clusterctl (the real v1.13 binary, `make clusterctl`) against capd-py management clusters made of two
real API servers (envtests): after capd-py's install path (`management.install_crds`, what `capd-py init` runs)
the provider inventory is there, `clusterctl describe cluster` and `clusterctl upgrade plan` run, and
`clusterctl move --to-kubeconfig` moves a provisioned cluster's objects intact, leaving nothing at the source.
A target without the inventory is refused by clusterctl (what happened before capd-py recorded one).

No controllers run here (the provider state is written by hand); what the Docker controllers do while clusterctl
moves is tests/integration/test_docker_provider.py's `test_upstream_clusterctl_move_keeps_the_containers`, the whole
thing with running clusters tests/e2e/test_move.py (in-memory clusters between two management clusters, and the
self-hosted docker cluster moved back out by clusterctl)."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from capd_py.api import contract
from capd_py.api.gvk import (
    BOOTSTRAP_GROUP,
    CLUSTER,
    CRD,
    DOCKER_CLUSTER,
    DOCKER_MACHINE,
    DOCKER_MACHINE_TEMPLATE,
    GVK,
    INFRA_GROUP,
    KUBEADM_CONFIG,
    KUBEADM_CONFIG_TEMPLATE,
    KUBEADM_CONTROL_PLANE,
    MACHINE,
    MACHINE_DEPLOYMENT,
    NAMESPACE,
    PROVIDER,
    SECRET,
)
from capd_py.api.labels import (
    CLUSTER_NAME,
    CONTROL_PLANE,
    FINALIZER_DOCKER_MACHINE,
    FINALIZER_MACHINE,
    PAUSED_ANNOTATION,
)
from capd_py.api.versions import CLUSTER_API_VERSION
from capd_py.cli import management as mgmt
from capd_py.cli.apply import apply_objects
from capd_py.cli.generate import generate_cluster, parse_documents
from capd_py.kube.client import Kube
from capd_py.kube.crds import load_crds
from capd_py.testing import clusterctl
from capd_py.testing.envtest import EnvTest, started_with_crds

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600), pytest.mark.docker_free]
Obj = dict[str, Any]
NOW = "2025-01-01T00:00:00Z"


@pytest.fixture(scope="module")
def target_env() -> Iterator[EnvTest]:
    with started_with_crds() as env:
        yield env


def owner(o: Obj, controller: bool = True) -> Obj:
    return {**contract.owner_ref(o, controller=controller), "blockOwnerDeletion": True}


def _cond(t: str) -> Obj:
    return {"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": NOW}


async def provisioned_cluster(k: Kube, ns: str, name: str = "c1") -> dict[str, Obj]:
    """The default template's objects as the controllers leave a running one-control-plane cluster: owner
    references (the Cluster owns the templates), the Machine's objects, certificates, status and conditions
    clusterctl reads before it moves (infrastructure provisioned, control plane initialized, a nodeRef)."""
    await k.create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    docs = parse_documents(generate_cluster(name, namespace=ns))
    assert all(o.ok for o in await apply_objects(k, docs, default_namespace=ns))
    cluster = await k.get(CLUSTER, ns, name)
    assert cluster
    got: dict[str, Obj] = {}
    for key, g, n, ctl in (("dc", DOCKER_CLUSTER, name, True),
                           ("kcp", KUBEADM_CONTROL_PLANE, f"{name}-control-plane", True),
                           ("md", MACHINE_DEPLOYMENT, f"{name}-md-0", True),
                           ("dmt", DOCKER_MACHINE_TEMPLATE, f"{name}-md-0", False),
                           ("dmt-cp", DOCKER_MACHINE_TEMPLATE, f"{name}-control-plane", False),
                           ("kct", KUBEADM_CONFIG_TEMPLATE, f"{name}-md-0", False)):
        got[key] = await k.merge_patch(g, ns, n, {"metadata": {"ownerReferences": [owner(cluster, ctl)],
                                                               "labels": {CLUSTER_NAME: name}}})
    kcp, lab = got["kcp"], {CLUSTER_NAME: name, CONTROL_PLANE: ""}
    m = await k.create(MACHINE, {
        "apiVersion": MACHINE.api_version, "kind": "Machine",
        "metadata": {"name": f"{name}-cp-a", "namespace": ns, "labels": lab, "ownerReferences": [owner(kcp)],
                     "finalizers": [FINALIZER_MACHINE]},
        "spec": {"clusterName": name, "version": "v1.34.4", "providerID": f"docker:////{name}-cp-a",
                 "bootstrap": {"configRef": {"apiGroup": BOOTSTRAP_GROUP, "kind": "KubeadmConfig",
                                             "name": f"{name}-cp-a"}, "dataSecretName": f"{name}-cp-a"},
                 "infrastructureRef": {"apiGroup": INFRA_GROUP, "kind": "DockerMachine", "name": f"{name}-cp-a"}}})
    got["machine"] = await k.replace(MACHINE, {**m, "status": {"nodeRef": {"name": f"{name}-cp-a"}}},
                                     subresource="status")
    got["kc"] = await k.create(KUBEADM_CONFIG, {
        "apiVersion": KUBEADM_CONFIG.api_version, "kind": "KubeadmConfig",
        "metadata": {"name": f"{name}-cp-a", "namespace": ns, "labels": lab,
                     "ownerReferences": [owner(kcp, False), owner(m)]}, "spec": {"format": "cloud-config"}})
    got["dm"] = await k.create(DOCKER_MACHINE, {
        "apiVersion": DOCKER_MACHINE.api_version, "kind": "DockerMachine",
        "metadata": {"name": f"{name}-cp-a", "namespace": ns, "labels": lab, "ownerReferences": [owner(m)],
                     "finalizers": [FINALIZER_DOCKER_MACHINE]},
        "spec": {"providerID": f"docker:////{name}-cp-a"}})

    def secret(sname: str, owners: list[Obj]) -> Obj:
        return {"apiVersion": "v1", "kind": "Secret", "data": {"value": "eA=="},
                "metadata": {"name": sname, "namespace": ns, "labels": {CLUSTER_NAME: name},
                             **({"ownerReferences": owners} if owners else {})}}
    got["data"] = await k.create(SECRET, secret(f"{name}-cp-a", [owner(got["kc"])]))
    got["ca"] = await k.create(SECRET, secret(f"{name}-ca", [owner(kcp)]))
    got["kubeconfig"] = await k.create(SECRET, secret(f"{name}-kubeconfig", [owner(kcp)]))
    got["other"] = await k.create(SECRET, {"apiVersion": "v1", "kind": "Secret", "data": {"value": "eA=="},
                                           "metadata": {"name": "unrelated", "namespace": ns}})
    got["cluster"] = await k.replace(CLUSTER, {**cluster, "status": {
        "initialization": {"infrastructureProvisioned": True, "controlPlaneInitialized": True},
        "conditions": [_cond("ControlPlaneInitialized"), _cond("Available")]}}, subresource="status")
    got["kcp"] = await k.replace(KUBEADM_CONTROL_PLANE, {**kcp, "status": {
        "initialization": {"controlPlaneInitialized": True}}}, subresource="status")
    return got


MOVED: list[tuple[GVK, str]] = [
    (CLUSTER, "c1"), (DOCKER_CLUSTER, "c1"), (KUBEADM_CONTROL_PLANE, "c1-control-plane"),
    (MACHINE_DEPLOYMENT, "c1-md-0"), (DOCKER_MACHINE_TEMPLATE, "c1-md-0"),
    (DOCKER_MACHINE_TEMPLATE, "c1-control-plane"), (KUBEADM_CONFIG_TEMPLATE, "c1-md-0"), (MACHINE, "c1-cp-a"),
    (KUBEADM_CONFIG, "c1-cp-a"), (DOCKER_MACHINE, "c1-cp-a"),
    (SECRET, "c1-cp-a"), (SECRET, "c1-ca"), (SECRET, "c1-kubeconfig")]


def _providers(env: EnvTest) -> list[Obj]:
    async def go() -> list[Obj]:
        k = env.kube()
        try:
            return list(await k.list(PROVIDER, None))
        finally:
            k.close()
    return asyncio.run(go())


def test_install_path_records_the_inventory(envtest: EnvTest) -> None:
    mgmt.install_crds(envtest.kubeconfig_path)
    mgmt.install_crds(envtest.kubeconfig_path)  # a second init changes nothing and does not fail
    got = {(p["metadata"]["namespace"], p["metadata"]["name"]): (p["providerName"], p["type"], p["version"])
           for p in _providers(envtest)}
    assert got == {
        ("capi-system", "cluster-api"): ("cluster-api", "CoreProvider", CLUSTER_API_VERSION),
        ("capi-kubeadm-bootstrap-system", "bootstrap-kubeadm"): ("kubeadm", "BootstrapProvider", CLUSTER_API_VERSION),
        ("capi-kubeadm-control-plane-system", "control-plane-kubeadm"):
            ("kubeadm", "ControlPlaneProvider", CLUSTER_API_VERSION),
        ("capd-system", "infrastructure-docker"): ("docker", "InfrastructureProvider", CLUSTER_API_VERSION)}

    async def crd_labels() -> None:
        k = envtest.kube()
        try:
            listed = await k.list(CRD, None, selector="clusterctl.cluster.x-k8s.io")
            # every capd-py CRD carries clusterctl's component label (its move lists CRDs by it), the
            # inventory's own CRD does not (it never moves)
            assert {c["metadata"]["name"] for c in listed} == {c["metadata"]["name"] for c in load_crds()}
        finally:
            k.close()
    asyncio.run(crd_labels())


def test_upstream_clusterctl_describe_upgrade_plan_and_move(clusterctl_binary: Path, envtest: EnvTest,
                                                          target_env: EnvTest, tmp_path: Path) -> None:
    mgmt.install_crds(envtest.kubeconfig_path)
    ns = f"cc-{secrets.token_hex(4)}"
    src_kc, dst_kc = str(envtest.kubeconfig_path), str(target_env.kubeconfig_path)
    k = envtest.kube()
    try:
        before = asyncio.run(provisioned_cluster(k, ns))
    finally:
        k.close()
    config = clusterctl.local_repository(tmp_path / "repository")

    # describe: the cluster's tree
    out = clusterctl.run(["describe", "cluster", "c1", "-n", ns, "--kubeconfig", src_kc,
                          "--grouping=false"], config, tmp_path).stdout
    for row in ("Cluster/c1", "ClusterInfrastructure - DockerCluster/c1",
                "ControlPlane - KubeadmControlPlane/c1-control-plane", "Machine/c1-cp-a"):
        assert row in out, out

    # upgrade plan: every provider of the inventory, read against the (local) repository
    out = clusterctl.run(["upgrade", "plan", "--kubeconfig", src_kc], config, tmp_path).stdout
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.strip()}
    for name, typ in (("cluster-api", "CoreProvider"), ("bootstrap-kubeadm", "BootstrapProvider"),
                      ("control-plane-kubeadm", "ControlPlaneProvider"),
                      ("infrastructure-docker", "InfrastructureProvider")):
        assert name in rows and typ in rows[name] and CLUSTER_API_VERSION in rows[name], out
    assert "You are already up to date!" in out, out

    # move into a management cluster without capd-py's inventory: clusterctl refuses (and moves nothing)
    r = clusterctl.run(["move", "-n", ns, "--kubeconfig", src_kc, "--to-kubeconfig", dst_kc], config, tmp_path,
                       check=False)
    assert r.returncode != 0 and "provider cluster-api not found in the target cluster" in r.stderr, r.stderr

    # with it (capd-py's install path at the target): the cluster moves
    mgmt.install_crds(dst_kc)
    r = clusterctl.run(["move", "-n", ns, "--kubeconfig", src_kc, "--to-kubeconfig", dst_kc, "-v", "1"], config,
                       tmp_path)
    assert "Moving Cluster API objects" in r.stdout + r.stderr and "Clusters=1" in r.stdout + r.stderr

    async def check() -> None:
        src, dst = envtest.kube(), target_env.kube()
        try:
            for g, n in MOVED:
                assert await src.get(g, ns, n) is None, f"{g.kind} {n} left at the source"
            assert await src.get(SECRET, ns, "unrelated") is not None
            assert await dst.get(SECRET, ns, "unrelated") is None
            new: dict[str, Obj] = {}
            for g, n in MOVED:
                o = await dst.get(g, ns, n)
                assert o is not None, f"{g.kind} {n} missing at the target"
                new[f"{g.kind}/{n}"] = o
            uids = {o["metadata"]["uid"] for o in new.values()}
            for key, o in new.items():
                for ref in o["metadata"].get("ownerReferences") or []:
                    assert ref["uid"] in uids, (key, ref)  # rebuilt against the target's objects
            # the objects arrive intact: spec, labels, finalizers, data
            for key, old in (("Cluster/c1", before["cluster"]), ("DockerMachine/c1-cp-a", before["dm"]),
                             ("Machine/c1-cp-a", before["machine"]),
                             ("KubeadmControlPlane/c1-control-plane", before["kcp"])):
                assert new[key]["metadata"].get("labels") == old["metadata"].get("labels"), key
                assert new[key]["metadata"].get("finalizers") == old["metadata"].get("finalizers"), key
                assert new[key]["spec"] == old["spec"] or key == "Cluster/c1", key
            assert new["DockerMachine/c1-cp-a"]["spec"]["providerID"] == "docker:////c1-cp-a"
            assert new["Secret/c1-ca"]["data"] == {"value": "eA=="}
            # resumed at the target (clusterctl drops spec.paused), status left to the target's controllers
            c = new["Cluster/c1"]
            assert not c["spec"].get("paused") and PAUSED_ANNOTATION not in (c["metadata"].get("annotations") or {})
            assert {k: v for k, v in c["spec"].items() if k != "paused"} == \
                {k: v for k, v in before["cluster"]["spec"].items() if k != "paused"}
        finally:
            src.close()
            dst.close()
    asyncio.run(check())

    # describe at the target reads the moved cluster
    out = clusterctl.run(["describe", "cluster", "c1", "-n", ns, "--kubeconfig", dst_kc], config, tmp_path).stdout
    assert "Cluster/c1" in out and "Machine/c1-cp-a" in out, out


def test_local_repository_layout(tmp_path: Path) -> None:
    config = clusterctl.local_repository(tmp_path)
    providers = yaml.safe_load(config.read_text())["providers"]
    assert {(p["name"], p["type"]) for p in providers} == {
        ("cluster-api", "CoreProvider"), ("kubeadm", "BootstrapProvider"), ("kubeadm", "ControlPlaneProvider"),
        ("docker", "InfrastructureProvider")}
    meta = yaml.safe_load((tmp_path / "infrastructure-docker" / CLUSTER_API_VERSION / "metadata.yaml").read_text())
    assert meta["releaseSeries"] == [{"major": 1, "minor": 13, "contract": "v1beta2"}]


# A third-party infrastructure provider as its release would ship it: a namespace, a CRD labelled with the contract
# version it implements, a controller Deployment (it never runs here: envtest has no nodes), a clusterctl variable.
MINIMAL_COMPONENTS = """\
apiVersion: v1
kind: Namespace
metadata:
  name: minimal-system
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: minimalclusters.infrastructure.example.com
  labels:
    cluster.x-k8s.io/v1beta2: v1alpha1
spec:
  group: infrastructure.example.com
  names: {kind: MinimalCluster, listKind: MinimalClusterList, plural: minimalclusters, singular: minimalcluster}
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: minimal-controller-manager
  namespace: minimal-system
spec:
  selector: {matchLabels: {app: minimal}}
  template:
    metadata: {labels: {app: minimal}}
    spec:
      containers:
      - name: manager
        image: example.com/minimal:${MINIMAL_TAG:=v0.1.0}
"""


def test_upstream_clusterctl_init_installs_a_third_party_provider(clusterctl_binary: Path, tmp_path: Path) -> None:
    """`clusterctl init --infrastructure minimal` with a local repository (clusterctl.yaml providers with a file
    URL) adds the provider to a capd-py management cluster: its components applied with clusterctl's labels,
    its inventory entry beside capd-py's four, which clusterctl leaves as they are (no core reinstalled)."""
    from capd_py.kube.crds import install_crds

    minimal = clusterctl.ExtraProvider("minimal", "InfrastructureProvider", "v0.1.0", MINIMAL_COMPONENTS)
    config = clusterctl.local_repository(tmp_path / "repository", extra=(minimal,))
    with started_with_crds() as env:
        kc = str(env.kubeconfig_path)
        mgmt.install_crds(kc)

        async def cert_manager() -> None:
            k = env.kube()
            try:
                await install_crds(k, crds=clusterctl.cert_manager_api_crds())
            finally:
                k.close()
        asyncio.run(cert_manager())
        before = {p["metadata"]["name"]: p["metadata"]["resourceVersion"] for p in _providers(env)}

        r = clusterctl.run(["init", "--infrastructure", "minimal", "--kubeconfig", kc], config, tmp_path)
        assert 'Installing provider="infrastructure-minimal"' in r.stdout + r.stderr, r.stdout + r.stderr

        providers = {p["metadata"]["name"]: p for p in _providers(env)}
        m = providers.pop("infrastructure-minimal")
        assert (m["metadata"]["namespace"], m["providerName"], m["type"], m["version"]) == (
            "minimal-system", "minimal", "InfrastructureProvider", "v0.1.0")
        assert {n: p["metadata"]["resourceVersion"] for n, p in providers.items()} == before

        async def components() -> None:
            k = env.kube()
            try:
                crd = await k.get(CRD, None, "minimalclusters.infrastructure.example.com")
                assert crd is not None
                assert crd["metadata"]["labels"] == {"cluster.x-k8s.io/v1beta2": "v1alpha1",
                                                     "cluster.x-k8s.io/provider": "infrastructure-minimal",
                                                     "clusterctl.cluster.x-k8s.io": ""}
                dep = await k.get(GVK("apps", "v1", "Deployment", "deployments"), "minimal-system",
                                  "minimal-controller-manager")
                assert dep is not None
                assert dep["spec"]["template"]["spec"]["containers"][0]["image"] == "example.com/minimal:v0.1.0"
            finally:
                k.close()
        asyncio.run(components())

        out = clusterctl.run(["upgrade", "plan", "--kubeconfig", kc], config, tmp_path).stdout
        assert "infrastructure-minimal" in out and "infrastructure-docker" in out, out
