"""The DockerMachine state machine (capd_py/reconcile/dockermachine_decide.py): one row per state, what `decide`
answers for it. The rows follow the order of a machine's life: owner and cluster, the container, systemd, the images
pre-loaded, the bootstrap data, the bootstrap script, provisioned."""

from __future__ import annotations

import base64
import datetime as dt
from dataclasses import dataclass, replace
from typing import Any

import pytest

from capd_py.api.containers import ContainerInfo
from capd_py.api.labels import CLUSTER_NAME, CONTROL_PLANE
from capd_py.reconcile import cloudinit, imageload
from capd_py.reconcile import dockercluster as dcr
from capd_py.reconcile import dockermachine as dmr
from capd_py.reconcile import dockermachine_decide as dd
from capd_py.reconcile.dockermachine import Phase

pytestmark = pytest.mark.unit

NOW = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)
NS, CL, M = "ns", "c1", "m1"
CNAME = "c1-m1"
NET = "capd-py-ns-c1"
PROVISIONED = {"initialization": {"provisioned": True},
               "addresses": [{"type": "InternalIP", "address": "10.0.0.9"}]}
CLOUD_CONFIG = "#cloud-config\nruncmd:\n- echo hi\n"


def b64(s: str) -> str:
    return base64.b64encode(s.encode()).decode()


def dm(spec: dict[str, Any] | None = None, status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": M, "namespace": NS, "generation": 1, "labels": {CLUSTER_NAME: CL}},
            "spec": spec or {}, "status": status or {}}


def machine(cp: bool = False, data: bool = True, deleting: bool = False) -> dict[str, Any]:
    labels = {CLUSTER_NAME: CL, **({CONTROL_PLANE: ""} if cp else {})}
    md: dict[str, Any] = {"name": M, "namespace": NS, "labels": labels}
    if deleting:
        md["deletionTimestamp"] = "2026-01-01T11:00:00Z"
    boot = {"dataSecretName": "m1-bootstrap"} if data else {}
    return {"metadata": md, "spec": {"clusterName": CL, "version": "v1.34.4", "bootstrap": boot}}


def cluster(infra: bool = True, cp_initialized: bool = True) -> dict[str, Any]:
    init = {"infrastructureProvisioned": infra, "controlPlaneInitialized": cp_initialized}
    return {"metadata": {"name": CL, "namespace": NS}, "spec": {}, "status": {"initialization": init}}


def container(running: bool = True, ip: str = "10.0.0.9", ours: bool = True) -> ContainerInfo:
    labels = dmr.machine_labels(NS, CL, M, False) if ours else {}
    return ContainerInfo(id="x", name=CNAME, image="i", status="running" if running else "exited", labels=labels,
                         ipv4={NET: ip}, ipv6={}, ports={})


def probe(phase: str, **kw: Any) -> cloudinit.BootstrapState:
    return cloudinit.BootstrapState(phase, **kw)


# a DockerCluster on docker host `two` with one failure domain there and one on `three`
DC_TWO = {"metadata": {"name": CL, "namespace": NS, "annotations": {"capd-py.dev/docker-host": "two"}},
          "spec": {"failureDomains": [{"name": "fd-a", "attributes": {"capd-py.dev/docker-host": "two"}},
                                      {"name": "fd-b", "attributes": {"capd-py.dev/docker-host": "three"}}]}}

# a booted node container, its bootstrap data named, systemd up
BASE = dd.Observed(dm(), machine(), cluster(), container=container(), now=NOW, poll_seconds=5.0)
UP = replace(BASE, systemd_ready=True)
DATA = {"value": b64(CLOUD_CONFIG), "format": b64("cloud-config")}


@dataclass(frozen=True)
class Row:
    id: str
    observed: dd.Observed
    action: type
    phase: Phase | None = None
    requeue_after: float | None = None


ROWS = [
    # owner and cluster
    Row("no owner Machine", replace(BASE, machine=None, container=None), dd.WaitFor),
    Row("no Cluster", replace(BASE, cluster=None, container=None), dd.WaitFor, requeue_after=5.0),
    # the container
    Row("deleting control plane Machine: out of the load balancer first",
        replace(BASE, machine=machine(cp=True, deleting=True)), dd.SyncLoadBalancer),
    Row("container of that name is not ours", replace(BASE, container=container(ours=False)), dd.Fail,
        Phase.NAME_CONFLICT, 30),
    Row("provisioned, container gone: not recreated", replace(BASE, dm=dm(status=PROVISIONED), container=None),
        dd.Fail, Phase.CONTAINER_DELETED),
    Row("providerID only (after clusterctl move), container gone",
        replace(BASE, dm=dm(spec={"providerID": f"docker:////{CNAME}"}), container=None), dd.Fail,
        Phase.CONTAINER_DELETED),
    Row("cluster infrastructure not provisioned", replace(BASE, cluster=cluster(infra=False), container=None),
        dd.Report, Phase.WAITING_CLUSTER_INFRA, 5.0),
    Row("node image not looked at", replace(BASE, container=None), dd.LookImage),
    Row("its failure domain names another docker host: no container (docs/multihost.md)",
        replace(BASE, container=None, machine={**machine(), "spec": {**machine()["spec"], "failureDomain": "fd-b"}},
                docker_cluster=DC_TWO), dd.Fail, Phase.FAILURE_DOMAIN_HOST, 60),
    Row("its failure domain is on the cluster's docker host: created as usual",
        replace(BASE, container=None, machine={**machine(), "spec": {**machine()["spec"], "failureDomain": "fd-a"}},
                docker_cluster=DC_TWO), dd.LookImage),
    Row("node image missing locally", replace(BASE, container=None, image_present=False), dd.Fail,
        Phase.IMAGE_NOT_FOUND, dmr.IMAGE_RECHECK_SECONDS),
    Row("no version, no customImage: no image to choose",
        replace(BASE, machine={**machine(), "spec": {"clusterName": CL}}, container=None), dd.Fail,
        Phase.IMAGE_NOT_FOUND),
    Row("image present: create", replace(BASE, container=None, image_present=True), dd.CreateContainer),
    Row("creating failed", replace(BASE, container=None, image_present=True, runtime_error="creating: boom"),
        dd.Fail, Phase.CONTAINER_ERROR, 10),
    Row("container stopped: start it", replace(BASE, container=container(running=False)), dd.StartContainer),
    Row("starting failed", replace(BASE, container=container(running=False), runtime_error="starting: boom"),
        dd.Fail, Phase.CONTAINER_ERROR, 10),
    # provisioned
    Row("provisioned: providerID and Node", replace(BASE, dm=dm(status=PROVISIONED)), dd.SetProviderID),
    Row("provisioned, came back with another address",
        replace(BASE, dm=dm(status=PROVISIONED), container=container(ip="10.0.0.3")), dd.Fail, Phase.ADDRESS_CHANGED),
    # the bootstrap data
    Row("worker, control plane not initialized", replace(BASE, machine=machine(data=False),
                                                         cluster=cluster(cp_initialized=False)),
        dd.Report, Phase.WAITING_CONTROL_PLANE),
    Row("control plane initialized, no bootstrap data yet", replace(BASE, machine=machine(data=False)), dd.Report,
        Phase.WAITING_BOOTSTRAP_DATA),
    Row("control plane initialized a moment ago: wait quietly",
        replace(BASE, machine=machine(data=False),
                dm=dm(status={"conditions": [{"type": dmr.BOOTSTRAP_EXEC_SUCCEEDED, "status": "False",
                                              "reason": Phase.WAITING_CONTROL_PLANE.value}]}),
                cluster={**cluster(), "status": {"conditions": [
                    {"type": "ControlPlaneInitialized", "status": "True", "lastTransitionTime": "2026-01-01T11:59:58Z"}
                ]}}),
        dd.WaitFor, requeue_after=8.0),
    # systemd
    Row("systemd not probed", BASE, dd.ProbeSystemd),
    Row("systemd still booting", replace(BASE, systemd_ready=False), dd.Report, Phase.WAITING_SYSTEMD, 1),
    Row("container does not answer", replace(BASE, exec_error="no such container"), dd.Report, Phase.WAITING_SYSTEMD,
        2),
    # before the bootstrap: images
    Row("bootstrap not probed", UP, dd.ProbeBootstrap),
    Row("images to pre-load, not looked at",
        replace(UP, dm=dm(spec={"preLoadImages": ["a:1"]}), bootstrap=probe("none")), dd.LookLocalImages),
    Row("spec.preLoadImages image missing locally",
        replace(UP, dm=dm(spec={"preLoadImages": ["a:1"]}), bootstrap=probe("none"), local_image_ids={"a:1": None}),
        dd.Fail, Phase.PRELOAD_IMAGES_FAILED, imageload.PRELOAD_RECHECK_SECONDS),
    Row("images present locally: load them",
        replace(UP, dm=dm(spec={"preLoadImages": ["a:1"]}), bootstrap=probe("none"), local_image_ids={"a:1": "sha"}),
        dd.PreloadImages),
    Row("recorded image gone locally: an Event, then on",
        replace(UP, cluster={**cluster(), "metadata": {"name": CL, "namespace": NS, "annotations": {
            imageload.RECORDED_ANNOTATION: "b:1"}}}, bootstrap=probe("none"), local_image_ids={"b:1": None}),
        dd.PreloadImages),
    Row("loading failed", replace(UP, dm=dm(spec={"preLoadImages": ["a:1"]}), bootstrap=probe("none"),
                                  local_image_ids={"a:1": "sha"},
                                  preloaded=(imageload.Outcome(CNAME, "a:1", "sha", "failed", "ctr: boom"),)),
        dd.Fail, Phase.PRELOAD_IMAGES_FAILED, imageload.PRELOAD_RECHECK_SECONDS),
    # before the bootstrap: its data
    Row("bootstrap data not read", replace(UP, bootstrap=probe("none")), dd.ReadBootstrapData),
    Row("bootstrap data secret missing", replace(UP, bootstrap=probe("none"), bootstrap_data={}), dd.Report,
        Phase.WAITING_BOOTSTRAP_DATA, 5.0),
    Row("bootstrap data not cloud-config",
        replace(UP, bootstrap=probe("none"), bootstrap_data={**DATA, "format": b64("ignition")}), dd.Fail,
        Phase.INVALID_BOOTSTRAP_DATA),
    Row("bootstrap data not YAML", replace(UP, bootstrap=probe("unknown"), bootstrap_data={"value": b64("{: [")}),
        dd.Fail, Phase.INVALID_BOOTSTRAP_DATA),
    Row("ready to bootstrap: launch", replace(UP, bootstrap=probe("none"), bootstrap_data=DATA), dd.Bootstrap),
    Row("images loaded, ready to bootstrap",
        replace(UP, dm=dm(spec={"preLoadImages": ["a:1"]}), bootstrap=probe("none"), local_image_ids={"a:1": "sha"},
                preloaded=(imageload.Outcome(CNAME, "a:1", "sha", "loaded"),), bootstrap_data=DATA), dd.Bootstrap),
    # the bootstrap script
    Row("launched, not started yet: running", replace(UP, bootstrap=probe("none"), done=frozenset({dd.Bootstrap})),
        dd.Report, Phase.BOOTSTRAPPING, 1),
    Row("running", replace(UP, bootstrap=probe("running", step="2/5 kubeadm init", elapsed=30.0)), dd.Report,
        Phase.BOOTSTRAPPING, 1),
    Row("running past spec.bootstrapTimeout",
        replace(UP, dm=dm(spec={"bootstrapTimeout": "1m"}), bootstrap=probe("running", step="2/5 x", elapsed=61.0)),
        dd.Report, Phase.BOOTSTRAP_TIMEOUT, 10),
    Row("a step failed", replace(UP, bootstrap=probe("failed", step="3/5 kubeadm join", failed_step=3, exit_code=1)),
        dd.Fail, Phase.BOOTSTRAP_FAILED),
    Row("the script died", replace(UP, bootstrap=probe("died", step="3/5 kubeadm join")), dd.Fail,
        Phase.BOOTSTRAP_FAILED),
    Row("done: provisioned", replace(UP, bootstrap=probe("done")), dd.SetProviderID),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_decide(row: Row) -> None:
    got = dd.decide(row.observed)
    assert type(got) is row.action, got
    if row.phase is not None:
        assert got.phase == row.phase, got  # type: ignore[union-attr]
    if isinstance(got, dd.WaitFor | dd.Report | dd.Fail):
        assert got.requeue_after == row.requeue_after, got


def test_every_action_has_a_row() -> None:
    actions = {*dd.ENDS, dd.LookImage, dd.ProbeSystemd, dd.ProbeBootstrap, dd.LookLocalImages, dd.ReadBootstrapData,
               dd.SyncLoadBalancer, dd.CreateContainer, dd.StartContainer, dd.PreloadImages, dd.Bootstrap}
    assert {r.action for r in ROWS} == actions


def test_what_the_actions_carry() -> None:
    create = dd.decide(replace(BASE, container=None, image_present=True))
    assert isinstance(create, dd.CreateContainer)
    assert create.spec.name == CNAME and create.spec.image == "capd-py/node:v1.34.4" and create.spec.network == NET
    assert dd.decide(replace(BASE, machine=machine(cp=True, deleting=True))) == dd.SyncLoadBalancer(M)
    launch = dd.decide(replace(UP, bootstrap=probe("none"), bootstrap_data=DATA))
    assert isinstance(launch, dd.Bootstrap) and cloudinit.SCRIPT_PATH in launch.files and launch.steps >= 1
    assert dd.decide(replace(UP, bootstrap=probe("done"))) == dd.SetProviderID(f"docker:////{CNAME}", container())
    recorded = {**cluster(), "metadata": {"name": CL, "namespace": NS,
                                          "annotations": {imageload.RECORDED_ANNOTATION: "b:1,c:1"}}}
    ids = {"b:1": None, "c:1": "s"}
    skipped = dd.decide(replace(UP, cluster=recorded, bootstrap=probe("none"), local_image_ids=ids))
    assert skipped == dd.PreloadImages({"c:1": "s"}, ("b:1",))


def test_steps_done_once_per_pass() -> None:
    """A step applied in this pass is not asked for again: the decision moves on."""
    deleting = replace(BASE, machine=machine(cp=True, deleting=True))
    assert isinstance(dd.decide(replace(deleting, done=frozenset({dd.SyncLoadBalancer}))), dd.ProbeSystemd)
    stopped = replace(BASE, container=container(running=False), done=frozenset({dd.StartContainer}))
    assert isinstance(dd.decide(stopped), dd.ProbeSystemd)  # the exec then says whether it answers


def test_after_error() -> None:
    o = replace(BASE, container=None, image_present=True)
    create = dd.decide(o)
    after = dd.after_error(o, create, "no space left")
    assert after is not None and after.runtime_error == f"creating container {CNAME}: no space left"
    assert dd.after_error(BASE, dd.StartContainer(CNAME), "x").runtime_error == f"starting container {CNAME}: x"  # type: ignore[union-attr]
    a: dd.Action
    for a in (dd.ProbeSystemd(), dd.ProbeBootstrap(), dd.Bootstrap({}, 0), dd.PreloadImages({}),
              dd.LookLocalImages(("a",))):
        assert dd.after_error(BASE, a, "gone").exec_error == "gone"  # type: ignore[union-attr]
    for a in (dd.LookImage("i"), dd.SyncLoadBalancer(M), dd.ReadBootstrapData("s")):
        assert dd.after_error(BASE, a, "x") is None  # not a state: the pass fails and is retried


def test_status_and_news() -> None:
    st = dd.status(BASE, Phase.BOOTSTRAPPING, "bootstrap running", container())
    conds = {c["type"]: c for c in st["conditions"]}
    assert conds[dmr.CONTAINER_PROVISIONED]["status"] == "True"
    assert conds[dmr.BOOTSTRAP_EXEC_SUCCEEDED]["reason"] == Phase.BOOTSTRAPPING.value
    assert "Paused" not in conds  # the reconcile skeleton's
    assert st["addresses"][1] == {"type": "InternalIP", "address": "10.0.0.9"}
    assert dd.is_news(dm(), Phase.BOOTSTRAP_FAILED)
    failed = dm(status={"conditions": [{"type": dmr.BOOTSTRAP_EXEC_SUCCEEDED, "status": "False",
                                        "reason": Phase.BOOTSTRAP_FAILED.value}]})
    assert not dd.is_news(failed, Phase.BOOTSTRAP_FAILED)
    assert dd.is_news(failed, Phase.NAME_CONFLICT)  # another condition
    assert dcr.ours(container(), NS, CL) and not dcr.ours(container(ours=False), NS, CL)
