"""The docker hosts service and DockerCluster placement over fake runtimes (no I/O): one DockerInfra per host,
kept while its entry is unchanged; placement written once into the annotation; images copied from a host that has
them; the single-host default writes nothing."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import pytest

from capd_py.api import dockerhosts as dh
from capd_py.api.gvk import GVK
from capd_py.controllers import dockerhost
from capd_py.controllers.context import Ctx, Settings
from capd_py.controllers.services.docker_hosts import DockerHosts
from capd_py.controllers.services.docker_infra import DockerInfra
from capd_py.runtime.images import copy_image
from capd_py.runtime.protocol import ContainerInfo, ContainerRuntime, DaemonUnreachable, RuntimeError_
from capd_py.testing.fake_runtime import FakeRuntime

pytestmark = pytest.mark.unit

LB, NODE = "capd-py/haproxy:2.6", "capd-py/node:v1.34.4"


class MemKube:
    """get / list / merge_patch over a dict, as CachedKube answers them."""

    def __init__(self, *objs: dict[str, Any]) -> None:
        self.objs: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.patches: list[tuple[str, str, dict[str, Any]]] = []
        for o in objs:
            self.objs[(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])] = o

    async def get(self, g: GVK, ns: str, name: str) -> dict[str, Any] | None:
        return self.objs.get((g.kind, ns, name))

    async def list(self, g: GVK, ns: str | None = None) -> list[dict[str, Any]]:
        return [o for (k, n, _), o in self.objs.items() if k == g.kind and ns in (None, n)]

    async def merge_patch(self, g: GVK, ns: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        obj = self.objs[(g.kind, ns, name)]
        self.patches.append((g.kind, name, patch))
        ann = patch.get("metadata", {}).get("annotations") or {}
        obj["metadata"].setdefault("annotations", {}).update(ann)
        return obj

    async def create(self, g: GVK, obj: dict[str, Any]) -> dict[str, Any]:
        self.objs[(g.kind, obj["metadata"].get("namespace", ""), obj["metadata"].get("name", ""))] = obj
        return obj


def _configmap(**entries: str) -> dict[str, Any]:
    return {"kind": "ConfigMap", "metadata": {"namespace": dh.NAMESPACE, "name": dh.CONFIGMAP}, "data": entries}


def _dc(name: str, uid: str, host: str = "") -> dict[str, Any]:
    ann = {dh.DOCKER_HOST_ANNOTATION: host} if host else {}
    return {"kind": "DockerCluster", "metadata": {"namespace": "ns", "name": name, "uid": uid, "resourceVersion": "1",
                                                  "annotations": ann}, "spec": {}}


class Factory:
    def __init__(self, runtimes: Mapping[str, ContainerRuntime]) -> None:
        self.runtimes, self.made = runtimes, []  # type: ignore[var-annotated]

    def __call__(self, host: dh.DockerHost, tls: Mapping[str, bytes] | None) -> ContainerRuntime:
        self.made.append((host.name, dict(tls or {})))
        return self.runtimes[host.name]


def _ctx(kube: MemKube, local: FakeRuntime, runtimes: Mapping[str, ContainerRuntime]) -> tuple[Ctx, Factory]:
    ctx = Ctx(kube=kube, runtime=local, settings=Settings(), workload=None)  # type: ignore[arg-type]
    factory = Factory(runtimes)
    ctx.hosts = DockerHosts(ctx.infra, lambda rt: DockerInfra(rt), factory)
    return ctx, factory


async def test_no_configmap_means_local_and_no_write() -> None:
    kube, local = MemKube(_dc("c1", "u1")), FakeRuntime()
    ctx, factory = _ctx(kube, local, {})
    where, dc = await dockerhost.place(ctx, kube.objs[("DockerCluster", "ns", "c1")], [LB])
    assert where.host.name == "local" and where.infra is ctx.infra
    assert kube.patches == [] and factory.made == [] and dh.host_of(dc) == ""
    assert (await dockerhost.where(ctx, dc)).infra is ctx.infra


async def test_scheduler_places_once_and_copies_missing_images_from_a_host_that_has_them() -> None:
    local = FakeRuntime(images={LB, NODE})
    two = FakeRuntime(images=set())
    # local is full (2 of 2 clusters), so `two` is chosen although it lacks the images: they are copied from local
    kube = MemKube(_configmap(two="endpoint: unix:///run/capd-py-dockerd-2.sock\naddress: 192.0.2.2",
                              local="endpoint: unix:///var/run/docker.sock\ncapacity: {clusters: 2}"),
                   _dc("c1", "u1"), _dc("busy", "u0"), _dc("busy2", "u9"))
    ctx, _ = _ctx(kube, local, {"two": two, "local": local})
    where, dc = await dockerhost.place(ctx, kube.objs[("DockerCluster", "ns", "c1")], [LB, NODE])
    assert where.host.name == "two" and where.infra.runtime is two
    assert dh.host_of(dc) == "two" and len(kube.patches) == 1
    assert two.image_id(LB) == local.image_id(LB) and two.image_id(NODE) == local.image_id(NODE)
    assert two.loads == [LB, NODE] and local.saves == [LB, NODE]
    # a second pass reads the annotation: no new write, nothing copied, the same infra instance
    again, _ = await dockerhost.place(ctx, dc, [LB, NODE])
    assert again.infra is where.infra and len(kube.patches) == 1 and two.loads == [LB, NODE]
    assert (await dockerhost.where(ctx, dc)).infra is where.infra


async def test_unplaced_cluster_with_several_hosts_waits_and_unknown_host_is_reported() -> None:
    kube = MemKube(_configmap(two="endpoint: ssh://two"), _dc("c1", "u1"), _dc("c2", "u2", host="gone"))
    ctx, _ = _ctx(kube, FakeRuntime(), {"two": FakeRuntime()})
    with pytest.raises(dockerhost.NotPlaced) as e:
        await dockerhost.where(ctx, kube.objs[("DockerCluster", "ns", "c1")])
    assert e.value.reason == "NoDockerHostAvailable"
    # deletion of an unplaced one looks on local (where pre-hosts clusters live)
    got = await dockerhost.where(ctx, kube.objs[("DockerCluster", "ns", "c1")], unplaced_local=True)
    assert got.infra is ctx.infra
    with pytest.raises(dockerhost.NotPlaced, match="'gone' is not configured"):
        await dockerhost.where(ctx, kube.objs[("DockerCluster", "ns", "c2")])


async def test_invalid_configuration_is_reported_not_guessed() -> None:
    kube = MemKube(_configmap(two="endpoint: http://x"), _dc("c1", "u1"))
    ctx, _ = _ctx(kube, FakeRuntime(), {})
    with pytest.raises(dockerhost.NotPlaced) as e:
        await dockerhost.place(ctx, kube.objs[("DockerCluster", "ns", "c1")], [LB])
    assert e.value.reason == "InvalidDockerHostConfiguration" and "capd-py-docker-hosts" in e.value.message


async def test_tls_material_comes_from_the_secret_and_a_change_makes_a_new_client() -> None:
    def secret(ca: bytes) -> dict[str, Any]:
        return {"kind": "Secret", "metadata": {"namespace": dh.NAMESPACE, "name": "b-tls"},
                "data": {k: base64.b64encode(v).decode() for k, v in
                         {"ca.pem": ca, "cert.pem": b"CERT", "key.pem": b"KEY"}.items()}}
    kube = MemKube(secret(b"CA1"))
    b = dh.parse_host("b", "endpoint: tcp://10.0.0.7:2376\ntlsSecretName: b-tls")
    ctx, factory = _ctx(kube, FakeRuntime(), {"b": FakeRuntime()})
    first = await ctx.hosts.infra(kube, b)
    assert await ctx.hosts.infra(kube, b) is first
    assert factory.made == [("b", {"ca.pem": b"CA1", "cert.pem": b"CERT", "key.pem": b"KEY"})]
    kube.objs[("Secret", dh.NAMESPACE, "b-tls")] = secret(b"CA2")
    assert await ctx.hosts.infra(kube, b) is not first and len(factory.made) == 2
    del kube.objs[("Secret", dh.NAMESPACE, "b-tls")]
    with pytest.raises(RuntimeError_, match="TLS Secret capd-py-system/b-tls not found"):
        await ctx.hosts.infra(kube, b)
    assert set(ctx.hosts.known()) == {"local", "b"}


def test_copy_image_between_runtimes() -> None:
    src, dst = FakeRuntime(images={LB}), FakeRuntime(images=set())
    copy_image(src, dst, LB)
    assert dst.image_id(LB) == src.image_id(LB)
    with pytest.raises(RuntimeError_, match="not found locally"):
        copy_image(src, dst, "missing:1")



async def test_a_cluster_made_before_hosts_is_recorded_on_local_and_a_user_endpoint_does_not_pin() -> None:
    local, two = FakeRuntime(images={LB}), FakeRuntime(images={LB})
    old, new = _dc("old", "u1"), _dc("new", "u2")
    old["metadata"]["annotations"]["infrastructure.cluster.x-k8s.io/capd-py-lb-host-port"] = "40001"
    new["spec"]["controlPlaneEndpoint"] = {"host": "10.9.9.9", "port": 6443}  # given by the user
    kube = MemKube(_configmap(two="endpoint: unix:///run/two.sock"), old, new)
    kube.objs[("DockerCluster", "ns", "busy")] = _dc("busy", "u3", host="local")
    ctx, _ = _ctx(kube, local, {"two": two})
    where, dc = await dockerhost.place(ctx, old, [LB])
    assert where.host.name == "local" and dh.host_of(dc) == "local"
    where, dc = await dockerhost.place(ctx, new, [LB])
    assert where.host.name == "two" and dh.host_of(dc) == "two"  # the scheduler: local holds 2 clusters now


class GoneRuntime(FakeRuntime):
    """A docker host whose daemon went away: every call fails at the connection (requests' errors are OSErrors)."""

    def image_id(self, ref: str) -> str | None:
        raise ConnectionRefusedError(111, "Connection refused")

    def get_container(self, name: str) -> Any:
        raise FileNotFoundError(2, "No such file or directory")

    def list_containers(self, labels: dict[str, str] | None = None, network: str | None = None
                        ) -> list[ContainerInfo]:
        raise FileNotFoundError(2, "No such file or directory")


async def test_a_host_gone_is_told_apart_from_other_runtime_failures() -> None:
    """docs/multihost.md: a daemon that does not answer surfaces as DaemonUnreachable (the controllers' reason
    DockerHostUnreachable), any other runtime failure as it was (ContainerRuntimeError / ContainerError)."""
    from capd_py.runtime.protocol import DaemonUnreachable
    kube = MemKube(_configmap(two="endpoint: unix:///run/capd-py-dockerd-2.sock"), _dc("c1", "u1", host="two"))
    ctx, _ = _ctx(kube, FakeRuntime(images={LB}), {"two": GoneRuntime()})
    dc = kube.objs[("DockerCluster", "ns", "c1")]
    with pytest.raises(DaemonUnreachable, match="docker daemon not reachable: .*Connection refused") as e:
        await dockerhost.place(ctx, dc, [LB])
    assert dockerhost.unreachable(e.value)
    where = await dockerhost.where(ctx, dc)  # no docker call: the DockerMachines learn it at their first one
    with pytest.raises(DaemonUnreachable) as e2:
        await where.infra.get_container("c1-md-0")
    assert dockerhost.unreachable(e2.value)
    assert not dockerhost.unreachable(RuntimeError_("inspect image x: 500 Server Error"))


async def test_a_host_whose_client_cannot_be_made_because_it_is_away_is_unreachable_not_unknown() -> None:
    """After a controllers restart the host's client is made anew, and the SDK asks the daemon its API version: a
    daemon away then is DockerHostUnreachable (not UnknownDockerHost, which means "not configured")."""
    from capd_py.runtime.protocol import DaemonUnreachable
    kube = MemKube(_configmap(two="endpoint: unix:///run/capd-py-dockerd-2.sock"), _dc("c1", "u1", host="two"))
    ctx, _ = _ctx(kube, FakeRuntime(), {})

    def away(host: dh.DockerHost, tls: Mapping[str, bytes] | None) -> ContainerRuntime:
        raise DaemonUnreachable(f"docker host {host.name}: Error while fetching server API version")
    ctx.hosts = DockerHosts(ctx.infra, lambda rt: DockerInfra(rt), away)
    with pytest.raises(dockerhost.NotPlaced) as e:
        await dockerhost.where(ctx, kube.objs[("DockerCluster", "ns", "c1")])
    assert e.value.reason == "DockerHostUnreachable" and "API version" in e.value.message


async def test_deleting_a_cluster_whose_host_is_away_or_unknown_waits_and_says_why() -> None:
    """docs/multihost.md: the deletion keeps its finalizer (done=False: the containers are not left running
    unmanaged) and the Deleting condition names the host; it goes on once the host answers (the retry)."""
    from capd_py.controllers import dockercluster
    from capd_py.controllers.skeleton import Subject
    dc = _dc("c1", "u1", host="two")
    dc["metadata"]["labels"] = {"cluster.x-k8s.io/cluster-name": "c1"}
    dc["metadata"]["deletionTimestamp"] = "2026-12-05T06:00:00Z"
    kube = MemKube(_configmap(two="endpoint: unix:///run/capd-py-dockerd-2.sock"), dc)
    ctx, _ = _ctx(kube, FakeRuntime(), {"two": GoneRuntime()})
    out = await dockercluster.delete_docker(ctx, Subject(dc, None))
    assert out.done is False and out.requeue_after == 15 and out.status is not None
    ready = next(c for c in out.status["conditions"] if c["type"] == "Ready")
    assert ready["reason"] == "Deleting"
    assert ready["message"].startswith("cannot delete the cluster's containers: docker host two: docker daemon not "
                                       "reachable")
    dc["metadata"]["annotations"][dh.DOCKER_HOST_ANNOTATION] = "gone"
    out = await dockercluster.delete_docker(ctx, Subject(dc, None))
    assert out.done is False and out.status is not None
    assert "docker host 'gone' is not configured" in next(c for c in out.status["conditions"]
                                                          if c["type"] == "Ready")["message"]
    # the host back: the same call deletes (nothing of the cluster on it) and lets the finalizer go
    dc["metadata"]["annotations"][dh.DOCKER_HOST_ANNOTATION] = "two"
    ctx.hosts = DockerHosts(ctx.infra, lambda rt: DockerInfra(rt), Factory({"two": FakeRuntime()}))
    assert (await dockercluster.delete_docker(ctx, Subject(dc, None))).done is True


def _template(name: str, cluster: str = "", owners: tuple[str, ...] = ()) -> dict[str, Any]:
    md: dict[str, Any] = {"namespace": "ns", "name": name, "labels": {"cluster.x-k8s.io/cluster-name": cluster}
                          if cluster else {},
                          "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": o}
                                              for o in owners]}
    return {"kind": "DockerMachineTemplate", "metadata": md, "spec": {}}


def _cluster(name: str) -> dict[str, Any]:
    return {"kind": "Cluster", "metadata": {"namespace": "ns", "name": name},
            "spec": {"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerCluster",
                                           "name": name}}}


async def test_a_templates_capacity_is_its_clusters_hosts() -> None:
    from capd_py.api.containers import HostCapacity
    from capd_py.controllers import dockermachinetemplate as c_dmt
    from capd_py.controllers.skeleton import Subject
    kube = MemKube(_configmap(two="endpoint: unix:///run/two.sock\naddress: 10.0.0.2"),
                   _cluster("c1"), _dc("c1", "u1", "two"), _cluster("c2"), _dc("c2", "u2"))
    local, two = FakeRuntime(), FakeRuntime()
    local.capacity = HostCapacity(cpus=2, memory_bytes=24 * 1024 ** 3)
    two.capacity = HostCapacity(cpus=16, memory_bytes=64 * 1024 ** 3)
    ctx, _ = _ctx(kube, local, {"two": two})

    async def capacity(t: dict[str, Any]) -> dict[str, Any] | None:
        return (await c_dmt.reconcile_capacity(ctx, Subject(t, None))).status

    assert await capacity(_template("by-label", cluster="c1")) == {"capacity": {"cpu": "16", "memory": "64Gi"}}
    assert await capacity(_template("by-owner", owners=("c1",))) == {"capacity": {"cpu": "16", "memory": "64Gi"}}
    # a ClusterClass's template (no cluster) and one shared by two clusters: the management host's, as upstream
    assert await capacity(_template("class")) == {"capacity": {"cpu": "2", "memory": "24Gi"}}
    assert await capacity(_template("shared", owners=("c1", "c2"))) == {"capacity": {"cpu": "2", "memory": "24Gi"}}
    # its cluster is not placed yet while two hosts exist: nothing written, looked at again
    out = await c_dmt.reconcile_capacity(ctx, Subject(_template("waits", cluster="c2"), None))
    assert out.status is None and out.requeue_after == c_dmt.WAIT_FOR_HOST_SECONDS
    # its host is away: no traceback, no write, looked at again (the e2e's host outage logged tracebacks before)

    def away() -> HostCapacity:
        raise DaemonUnreachable("docker daemon not reachable: connection refused")
    two.host_capacity = away  # type: ignore[method-assign]
    out = await c_dmt.reconcile_capacity(ctx, Subject(_template("by-label", cluster="c1"), None))
    assert out.status is None and out.requeue_after == c_dmt.WAIT_FOR_HOST_SECONDS


async def test_a_machines_own_image_is_brought_from_a_host_that_has_it() -> None:
    custom = "capd-py/node:v1.35.4"  # a MachineDeployment at another version than the control plane's
    local, two = FakeRuntime(images={LB, NODE, custom}), FakeRuntime(images={LB, NODE})
    kube = MemKube(_configmap(two="endpoint: unix:///run/two.sock\naddress: 192.0.2.2"), _dc("c1", "u1", "two"))
    ctx, _ = _ctx(kube, local, {"two": two})
    where = await dockerhost.where(ctx, kube.objs[("DockerCluster", "ns", "c1")])
    await dockerhost.bring_images(ctx, where, [custom])
    assert two.image_id(custom) == local.image_id(custom) and two.loads == [custom] and local.saves == [custom]
    await dockerhost.bring_images(ctx, where, ["capd-py/node:nowhere"])  # no host has it: nothing, no error
    assert two.loads == [custom]
    # one host only: nothing to bring it from
    alone = FakeRuntime(images={LB})
    ctx1, _ = _ctx(MemKube(_dc("c2", "u2")), alone, {})
    await dockerhost.bring_images(ctx1, await dockerhost.where(ctx1, _dc("c2", "u2")), [NODE])
    assert alone.loads == []


async def test_a_docker_machine_looking_for_its_image_gets_it_from_another_host() -> None:
    from capd_py.controllers import dockermachine as dmc
    from capd_py.reconcile import dockermachine_decide as dd
    custom = "capd-py/node:v1.35.4"
    local, two = FakeRuntime(images={LB, NODE, custom}), FakeRuntime(images={LB, NODE})
    kube = MemKube(_configmap(two="endpoint: unix:///run/two.sock\naddress: 192.0.2.2"), _dc("c1", "u1", "two"))
    ctx, _ = _ctx(kube, local, {"two": two})
    dc = kube.objs[("DockerCluster", "ns", "c1")]
    infra = (await dockerhost.where(ctx, dc)).infra
    obs = dd.Observed({"metadata": {"namespace": "ns", "name": "m1"}}, None, None, docker_cluster=dc)
    got = await dmc._apply(ctx, infra, obs, dd.LookImage(custom))
    assert got.image_present is True and two.loads == [custom]
    missing = await dmc._apply(ctx, infra, obs, dd.LookImage("capd-py/node:v9.9.9"))  # on no host: ImageNotFound
    assert missing.image_present is False


class HaltingRuntime(FakeRuntime):
    """A docker host that answers the placement check and then goes away mid-reconcile (seen in the multihost e2e
    test: a dockerd halted while a reconcile was under way reset its connection)."""

    def get_container(self, name: str) -> Any:
        raise ConnectionResetError(104, "Connection reset by peer")


async def test_a_host_that_goes_away_during_a_reconcile_is_reported_not_raised() -> None:
    from capd_py.controllers import dockercluster
    from capd_py.controllers.skeleton import Subject
    dc = _dc("c1", "u1", host="two")
    dc["metadata"]["labels"] = {"cluster.x-k8s.io/cluster-name": "c1"}
    dc["metadata"]["ownerReferences"] = [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "c1",
                                          "uid": "cu1", "controller": True}]
    kube = MemKube(_configmap(two="endpoint: unix:///run/capd-py-dockerd-2.sock"), dc)
    ctx, _ = _ctx(kube, FakeRuntime(images={LB}), {"two": HaltingRuntime(images={LB})})
    out = await dockercluster.reconcile_docker(ctx, Subject(dc, _cluster("c1")))
    assert out.status is not None and out.requeue_after == 15
    lb = next(c for c in out.status["conditions"] if c["type"] == "LoadBalancerAvailable")
    assert lb["reason"] == "DockerHostUnreachable"
    assert lb["message"].startswith("docker host two: docker daemon not reachable: ") and "reset" in lb["message"]


class StopsOnStart(FakeRuntime):
    def start_container(self, name: str) -> None:
        raise ConnectionResetError(104, "Connection reset by peer")


async def test_a_docker_machines_host_that_goes_away_mid_step_is_reported_not_raised(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from capd_py.controllers import dockermachine as dmc
    from capd_py.controllers.skeleton import Subject
    from capd_py.reconcile import dockermachine_decide as dd
    dm = {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DockerMachine",
          "metadata": {"namespace": "ns", "name": "m1", "generation": 1}, "spec": {}}
    monkeypatch.setattr(dd, "decide", lambda o: dd.StartContainer("c1-m1"))  # the step under test
    out = await dmc._steps(_ctx(MemKube(), FakeRuntime(), {})[0], Subject(dm, None), DockerInfra(StopsOnStart()),
                           dd.Observed(dm, None, None))
    assert out.status is not None and out.requeue_after == 15
    provisioned = next(c for c in out.status["conditions"] if c["type"] == "ContainerProvisioned")
    assert provisioned["reason"] == "DockerHostUnreachable" and "reset" in provisioned["message"]
