"""`capd-py move` between two real API servers (two envtests): a provisioned cluster from the default
template (its provider state written by hand: no controllers run here) moves with its secrets, status and
owner references rebuilt, leaves nothing behind, and a dry run changes nothing."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from capd_py.api import gvk
from capd_py.api.gvk import (
    CLUSTER,
    CLUSTER_RESOURCE_SET,
    CONFIG_MAP,
    DOCKER_CLUSTER,
    DOCKER_MACHINE,
    DOCKER_MACHINE_TEMPLATE,
    KUBEADM_CONFIG,
    KUBEADM_CONFIG_TEMPLATE,
    KUBEADM_CONTROL_PLANE,
    MACHINE,
    MACHINE_DEPLOYMENT,
    SECRET,
)
from capd_py.api.labels import CLUSTER_NAME, FINALIZER_DOCKER_MACHINE, FINALIZER_MACHINE, PAUSED_ANNOTATION
from capd_py.cli.apply import apply_objects
from capd_py.cli.generate import generate_cluster, parse_documents
from capd_py.cli.main import app
from capd_py.cli.move import MoveError, move
from capd_py.cli.steps import Steps
from capd_py.kube.client import Kube
from capd_py.testing.envtest import EnvTest, started_with_crds

pytestmark = [pytest.mark.integration, pytest.mark.docker_free]
NAMESPACE = gvk.GVK("", "v1", "Namespace", "namespaces", namespaced=False)
Obj = dict[str, Any]
runner = CliRunner()


@pytest.fixture(scope="module")
def target_env() -> Iterator[EnvTest]:
    with started_with_crds() as env:
        yield env


def owner(o: Obj, controller: bool = True) -> Obj:
    return {"apiVersion": o["apiVersion"], "kind": o["kind"], "name": o["metadata"]["name"],
            "uid": o["metadata"]["uid"], "controller": controller, "blockOwnerDeletion": True}


async def _status(k: Kube, g: gvk.GVK, o: Obj, status: Obj) -> Obj:
    return await k.replace(g, {**o, "status": status}, subresource="status")


async def provisioned_cluster(k: Kube, ns: str, name: str = "c1") -> dict[str, Obj]:
    """The default template's objects, plus what the controllers would have made of one control plane
    machine: owner references, certificates, bootstrap data and the provider's status."""
    await k.create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    docs = parse_documents(generate_cluster(name, namespace=ns))
    assert all(o.ok for o in await apply_objects(k, docs, default_namespace=ns))
    cluster = await k.get(CLUSTER, ns, name)
    assert cluster
    got: dict[str, Obj] = {"cluster": cluster}
    for key, g, n in (("dc", DOCKER_CLUSTER, name), ("kcp", KUBEADM_CONTROL_PLANE, f"{name}-control-plane"),
                      ("md", MACHINE_DEPLOYMENT, f"{name}-md-0"), ("dmt", DOCKER_MACHINE_TEMPLATE, f"{name}-md-0")):
        o = await k.get(g, ns, n)
        assert o
        got[key] = await k.merge_patch(g, ns, n, {"metadata": {"ownerReferences": [owner(cluster, key != "dmt")]}})
    kcp = got["kcp"]
    lab = {CLUSTER_NAME: name}
    m = await k.create(MACHINE, {
        "apiVersion": MACHINE.api_version, "kind": "Machine",
        "metadata": {"name": f"{name}-cp-a", "namespace": ns, "labels": lab, "ownerReferences": [owner(kcp)],
                     "finalizers": [FINALIZER_MACHINE]},
        "spec": {"clusterName": name, "version": "v1.34.4",
                 "bootstrap": {"configRef": {"apiGroup": gvk.BOOTSTRAP_GROUP, "kind": "KubeadmConfig",
                                             "name": f"{name}-cp-a"}},
                 "infrastructureRef": {"apiGroup": gvk.INFRA_GROUP, "kind": "DockerMachine", "name": f"{name}-cp-a"}}})
    got["machine"] = await _status(k, MACHINE, m, {"nodeRef": {"name": f"{name}-cp-a"}})
    kc = await k.create(KUBEADM_CONFIG, {
        "apiVersion": KUBEADM_CONFIG.api_version, "kind": "KubeadmConfig",
        "metadata": {"name": f"{name}-cp-a", "namespace": ns, "labels": lab,
                     "ownerReferences": [owner(kcp, False), owner(m)]}, "spec": {"format": "cloud-config"}})
    got["kc"] = await _status(k, KUBEADM_CONFIG, kc, {"dataSecretName": f"{name}-cp-a",
                                                      "initialization": {"dataSecretCreated": True}})
    dm = await k.create(DOCKER_MACHINE, {
        "apiVersion": DOCKER_MACHINE.api_version, "kind": "DockerMachine",
        "metadata": {"name": f"{name}-cp-a", "namespace": ns, "labels": lab, "ownerReferences": [owner(m)],
                     "finalizers": [FINALIZER_DOCKER_MACHINE]},
        "spec": {"providerID": f"docker:////{name}-control-plane-a"}})
    got["dm"] = await _status(k, DOCKER_MACHINE, dm, {"initialization": {"provisioned": True},
                                                      "addresses": [{"type": "InternalIP", "address": "10.0.0.2"}]})

    def secret(sname: str, owners: list[Obj]) -> Obj:
        md: Obj = {"name": sname, "namespace": ns}
        if owners:
            md["ownerReferences"] = owners
        return {"apiVersion": "v1", "kind": "Secret", "metadata": md, "data": {"value": "eA=="}}
    got["data"] = await k.create(SECRET, secret(f"{name}-cp-a", [owner(got["kc"])]))
    got["ca"] = await k.create(SECRET, secret(f"{name}-ca", [owner(kcp)]))
    got["sa"] = await k.create(SECRET, secret(f"{name}-sa", []))           # linked by its name only
    got["other"] = await k.create(SECRET, secret("unrelated", []))
    got["cluster"] = await _status(k, CLUSTER, cluster, {"initialization": {
        "infrastructureProvisioned": True, "controlPlaneInitialized": True}})
    got["kcp"] = await _status(k, KUBEADM_CONTROL_PLANE, kcp, {"initialization": {"controlPlaneInitialized": True}})
    return got


async def names(k: Kube, g: gvk.GVK, ns: str) -> list[str]:
    return sorted(o["metadata"]["name"] for o in await k.list(g, ns))


MOVED = [(CLUSTER, "c1"), (DOCKER_CLUSTER, "c1"), (KUBEADM_CONTROL_PLANE, "c1-control-plane"),
         (MACHINE_DEPLOYMENT, "c1-md-0"), (DOCKER_MACHINE_TEMPLATE, "c1-md-0"),
         (DOCKER_MACHINE_TEMPLATE, "c1-control-plane"), (MACHINE, "c1-cp-a"), (KUBEADM_CONFIG, "c1-cp-a"),
         (DOCKER_MACHINE, "c1-cp-a"), (SECRET, "c1-cp-a"), (SECRET, "c1-ca"), (SECRET, "c1-sa"),
         (CLUSTER_RESOURCE_SET, "c1-crs-0"), (CONFIG_MAP, "cni-c1-crs-0"), (KUBEADM_CONFIG_TEMPLATE, "c1-md-0")]


def test_move_between_two_api_servers(envtest: EnvTest, target_env: EnvTest) -> None:
    ns = f"mv-{secrets.token_hex(4)}"
    src = envtest.kube()
    try:
        src_objs = asyncio.run(provisioned_cluster(src, ns))
    finally:
        src.close()

    # a dry run: the tree on stdout, nothing changed
    r = runner.invoke(app, ["move", "--dry-run", "-n", ns, "--kubeconfig", str(envtest.kubeconfig_path)])
    assert r.exit_code == 0, r.stderr
    tree = r.stdout.splitlines()
    assert "Cluster/c1" in tree and "ClusterResourceSet/c1-crs-0" in tree
    assert any("Secret/c1-sa" in line for line in tree) and not any("unrelated" in line for line in tree)
    assert len(tree) == len(MOVED), r.stdout

    async def check_unchanged() -> None:
        k = envtest.kube()
        try:
            c = await k.get(CLUSTER, ns, "c1")
            assert c and not (c.get("spec") or {}).get("paused")
            assert c["metadata"]["resourceVersion"] == src_objs["cluster"]["metadata"]["resourceVersion"]
        finally:
            k.close()
    asyncio.run(check_unchanged())

    r = runner.invoke(app, ["move", "-n", ns, "--kubeconfig", str(envtest.kubeconfig_path),
                            "--to-kubeconfig", str(target_env.kubeconfig_path)])
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""
    assert "Creating 15 objects at the target" in r.stderr and "moved 15 objects" in r.stderr

    async def check() -> None:
        src, dst = envtest.kube(), target_env.kube()
        try:
            # the source has nothing of the cluster left, the unrelated secret stays
            for g, n in MOVED:
                assert await src.get(g, ns, n) is None, (g.kind, n)
            assert await src.get(SECRET, ns, "unrelated") is not None
            assert await dst.get(SECRET, ns, "unrelated") is None
            new: dict[str, Obj] = {}
            for g, n in MOVED:
                o = await dst.get(g, ns, n)
                assert o is not None, (g.kind, n)
                new[f"{g.kind}/{n}"] = o
            uids = {o["metadata"]["uid"] for o in new.values()}
            # every owner reference points at an object of the target
            for key, o in new.items():
                for ref in o["metadata"].get("ownerReferences") or []:
                    assert ref["uid"] in uids, (key, ref)
            assert not uids & {o["metadata"]["uid"] for o in src_objs.values()}
            kc = new["KubeadmConfig/c1-cp-a"]
            assert {(r["kind"], r["uid"], bool(r.get("controller"))) for r in kc["metadata"]["ownerReferences"]} == {
                ("KubeadmControlPlane", new["KubeadmControlPlane/c1-control-plane"]["metadata"]["uid"], False),
                ("Machine", new["Machine/c1-cp-a"]["metadata"]["uid"], True)}
            # the facts the controllers cannot recompute survive
            assert kc["status"]["dataSecretName"] == "c1-cp-a"
            assert kc["status"]["initialization"] == {"dataSecretCreated": True}
            dm = new["DockerMachine/c1-cp-a"]
            assert dm["status"]["initialization"] == {"provisioned": True}
            assert dm["spec"]["providerID"] == "docker:////c1-control-plane-a"
            assert dm["metadata"]["finalizers"] == [FINALIZER_DOCKER_MACHINE]
            assert new["Machine/c1-cp-a"]["status"]["nodeRef"] == {"name": "c1-cp-a"}
            assert new["KubeadmControlPlane/c1-control-plane"]["status"]["initialization"] == {
                "controlPlaneInitialized": True}
            assert new["Secret/c1-ca"]["data"] == {"value": "eA=="}
            # resumed at the target
            c = new["Cluster/c1"]
            assert not c["spec"].get("paused")
            assert c["status"]["initialization"]["controlPlaneInitialized"] is True
            assert PAUSED_ANNOTATION not in (new["ClusterResourceSet/c1-crs-0"]["metadata"].get("annotations") or {})
        finally:
            src.close()
            dst.close()
    asyncio.run(check())

    # moving it again finds nothing; a second move into a target that has it is refused
    r = runner.invoke(app, ["move", "-n", ns, "--kubeconfig", str(envtest.kubeconfig_path),
                            "--to-kubeconfig", str(target_env.kubeconfig_path)])
    assert r.exit_code == 1 and f"nothing to move in namespace {ns}" in r.stderr


def test_move_refuses_a_cluster_still_provisioning_or_paused(envtest: EnvTest, target_env: EnvTest) -> None:
    ns = f"mv-{secrets.token_hex(4)}"

    async def go() -> None:
        src, dst = envtest.kube(), target_env.kube()
        try:
            await src.create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
            docs = parse_documents(generate_cluster("young", namespace=ns))
            assert all(o.ok for o in await apply_objects(src, docs, default_namespace=ns))
            with pytest.raises(MoveError, match="infrastructure is not provisioned yet"):
                await move(src, dst, ns, Steps(quiet=True), pause_timeout=0)
            c = await src.get(CLUSTER, ns, "young")
            assert c and not c["spec"].get("paused")  # refused before anything was paused
            await _status(src, CLUSTER, c, {"initialization": {"infrastructureProvisioned": True,
                                                                "controlPlaneInitialized": True}})
            await src.merge_patch(CLUSTER, ns, "young", {"spec": {"paused": True}})
            with pytest.raises(MoveError, match="is paused"):
                await move(src, dst, ns, Steps(quiet=True), pause_timeout=0)
            assert await names(dst, CLUSTER, ns) == []
        finally:
            src.close()
            dst.close()
    asyncio.run(go())


def test_move_usage() -> None:
    r = runner.invoke(app, ["move", "-n", "x"])
    assert r.exit_code == 2 and "--to-kubeconfig is required" in r.stderr


def test_move_a_clusterclass_cluster_keeps_field_owners(envtest: EnvTest, target_env: EnvTest) -> None:
    """`--flavor development`: the ClusterClass and every template it names move with the Cluster (paused by
    annotation meanwhile, resumed at the target); the field managers survive, so the topology controller's
    server-side apply still owns what it applied."""
    ns = f"mv-{secrets.token_hex(4)}"

    async def go() -> None:
        src, dst = envtest.kube(), target_env.kube()
        try:
            await src.create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
            docs = parse_documents(generate_cluster("t1", namespace=ns, flavor="development"))
            assert all(o.ok for o in await apply_objects(src, docs, default_namespace=ns))
            c = await src.get(CLUSTER, ns, "t1")
            assert c
            await _status(src, CLUSTER, c, {"initialization": {"infrastructureProvisioned": True,
                                                                "controlPlaneInitialized": True}})
            out = await move(src, dst, ns, Steps(quiet=True), pause_timeout=0)
            templates = [d for d in docs if d["kind"].endswith("Template")]
            assert out.moved == len(docs) == len(templates) + 4
            for d in docs:
                g = gvk.of_object(d)
                assert g
                assert await src.get(g, ns, d["metadata"]["name"]) is None, d["kind"]
                moved = await dst.get(g, ns, d["metadata"]["name"])
                assert moved is not None, d["kind"]
                assert PAUSED_ANNOTATION not in (moved["metadata"].get("annotations") or {})
            cluster = await dst.get(CLUSTER, ns, "t1")
            assert cluster and not cluster["spec"].get("paused")
            assert "capd-py" in {m["manager"] for m in cluster["metadata"]["managedFields"]}
            assert cluster["spec"]["topology"]["classRef"]["name"] == "quick-start"
        finally:
            src.close()
            dst.close()
    asyncio.run(go())


def _failing_create(real_create: Any, nth: int) -> Any:
    """move's `_create`, raising at its `nth` call (the target refusing an object half-way)."""
    calls = 0

    async def flaky(target: Kube, n: Any, new_uids: dict[str, str]) -> None:
        nonlocal calls
        calls += 1
        if calls == nth:
            raise RuntimeError("the target said no")
        await real_create(target, n, new_uids)
    return flaky


def test_a_failed_copy_is_rolled_back(envtest: EnvTest, target_env: EnvTest, monkeypatch: pytest.MonkeyPatch
                                      ) -> None:
    """The target refusing an object half-way: the copies made so far are removed from the target and the
    source is resumed, every object still there."""
    from capd_py.cli import move as move_mod
    ns = f"mv-{secrets.token_hex(4)}"
    real_create = move_mod._create
    monkeypatch.setattr(move_mod, "_create", _failing_create(real_create, 6))

    async def go() -> None:
        src, dst = envtest.kube(), target_env.kube()
        try:
            before = await provisioned_cluster(src, ns)
            with pytest.raises(MoveError, match="rolled back .*the target said no"):
                await move(src, dst, ns, Steps(quiet=True), pause_timeout=0)
            for g, n in MOVED:
                assert await dst.get(g, ns, n) is None, (g.kind, n)
                assert await src.get(g, ns, n) is not None, (g.kind, n)
            c = await src.get(CLUSTER, ns, "c1")
            assert c and not c["spec"].get("paused")
            assert c["metadata"]["uid"] == before["cluster"]["metadata"]["uid"]
            crs = await src.get(CLUSTER_RESOURCE_SET, ns, "c1-crs-0")
            assert crs and PAUSED_ANNOTATION not in (crs["metadata"].get("annotations") or {})
            # and a second attempt, with the target behaving, goes through
            monkeypatch.setattr(move_mod, "_create", real_create)
            out = await move(src, dst, ns, Steps(quiet=True), pause_timeout=0)
            assert out.moved == len(MOVED)
        finally:
            src.close()
            dst.close()
    asyncio.run(go())


def test_a_cluster_on_a_docker_host_takes_the_host_entry_along(envtest: EnvTest, target_env: EnvTest,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/multihost.md: a DockerCluster placed on docker host H keeps its annotation; H's entry of
    capd-py-system/capd-py-docker-hosts and its TLS Secret are written at the target before the objects (so the
    target's controllers find the host at once), removed again by a rollback, and a target that configures H
    differently refuses the move before anything is paused."""
    from capd_py.api import dockerhosts as dh
    from capd_py.cli import hosts as hc
    from capd_py.cli import move as move_mod
    ns, h = f"mv-{secrets.token_hex(4)}", f"h{secrets.token_hex(3)}"
    host = dh.DockerHost(h, "tcp://10.0.0.7:2376", hc.tls_secret_name(h), labels={"zone": "b"}, address="10.0.0.7")
    tls = {"ca.pem": b"CA", "cert.pem": b"CERT", "key.pem": b"KEY"}
    real_create = move_mod._create

    async def go() -> None:
        src, dst = envtest.kube(), target_env.kube()
        try:
            await provisioned_cluster(src, ns)
            await src.merge_patch(DOCKER_CLUSTER, ns, "c1", {"metadata": {"annotations": {
                dh.DOCKER_HOST_ANNOTATION: h}}})
            await hc.add(src, host, tls)
            # the target names H another endpoint: refused, nothing paused, nothing written
            await hc.add(dst, dh.DockerHost(h, "tcp://10.9.9.9:2376", insecure=True))
            with pytest.raises(MoveError, match=rf"docker host '{h}' \({ns}/c1\) is configured differently"):
                await move(src, dst, ns, Steps(quiet=True), pause_timeout=0)
            c = await src.get(CLUSTER, ns, "c1")
            assert c and not c["spec"].get("paused") and await dst.get(CLUSTER, ns, "c1") is None
            dry = await move(src, dst, ns, Steps(quiet=True), dry_run=True)
            assert any("is configured differently at the target" in w for w in dry.warnings), dry.warnings
            await hc.remove(dst, h)
            dry = await move(src, dst, ns, Steps(quiet=True), dry_run=True)
            assert f"docker host {h} (tcp://10.0.0.7:2376) is added to the target's {dh.NAMESPACE}/{dh.CONFIGMAP}" \
                in dry.warnings, dry.warnings
            assert await dst.get(CONFIG_MAP, dh.NAMESPACE, dh.CONFIGMAP) is None or \
                h not in (await dst.get(CONFIG_MAP, dh.NAMESPACE, dh.CONFIGMAP) or {}).get("data", {})

            # a failure half-way: the entry and the Secret written for it go again
            monkeypatch.setattr(move_mod, "_create", _failing_create(real_create, 3))
            with pytest.raises(MoveError, match="rolled back"):
                await move(src, dst, ns, Steps(quiet=True), pause_timeout=0)
            assert h not in ((await dst.get(CONFIG_MAP, dh.NAMESPACE, dh.CONFIGMAP)) or {}).get("data", {})
            assert await dst.get(SECRET, dh.NAMESPACE, hc.tls_secret_name(h)) is None

            monkeypatch.setattr(move_mod, "_create", real_create)
            await move(src, dst, ns, Steps(quiet=True), pause_timeout=0)
            moved = await dst.get(DOCKER_CLUSTER, ns, "c1")
            assert moved and moved["metadata"]["annotations"][dh.DOCKER_HOST_ANNOTATION] == h
            _cm, there = await hc.read(dst)
            assert there[h] == host
            secret = await dst.get(SECRET, dh.NAMESPACE, hc.tls_secret_name(h))
            original = await src.get(SECRET, dh.NAMESPACE, hc.tls_secret_name(h))
            assert secret and original and secret["data"] == original["data"]
            # the source keeps its configuration (other clusters may be placed there)
            assert h in (await hc.read(src))[1]
        finally:
            for k in (src, dst):
                try:
                    await hc.remove(k, h, force=True)
                except hc.HostError:
                    pass
            src.close()
            dst.close()
    asyncio.run(go())
