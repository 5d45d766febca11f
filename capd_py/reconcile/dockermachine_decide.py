"""The DockerMachine state machine as one pure function: `decide(observed) -> action`.

The controller (capd_py/controllers/dockermachine.py) reads what a pass starts from (the DockerMachine, its owner
Machine, the Cluster and DockerCluster, the node container) into an `Observed`, then asks `decide` what comes next.
The answer is one of three families:
- a look: something the decision needs and the controller has not looked at yet (is the node image there, has
  systemd booted, how far is the bootstrap, which images are local, the bootstrap data). The controller looks,
  records the answer in the Observed (`dataclasses.replace`) and asks again;
- a step: an effect after which the pass goes on (sync the load balancer, create or start the container, pre-load
  images, launch the bootstrap). The controller applies it, records what changed (and the step in `done`) and asks
  again; a step that fails on the container runtime is recorded with `after_error`, and the next answer reports it;
- an end: what the pass leaves behind (`WaitFor`, `Report`, `Fail`, `SetProviderID`).
Nothing here does I/O; the order of the checks is the state machine, one table row per state in
tests/unit/reconcile/test_dockermachine_decide.py.
"""

from __future__ import annotations

import base64
import datetime as _dt
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from capd_py.api import conditions as cond
from capd_py.api import contract
from capd_py.api import dockerhosts as dh
from capd_py.api.containers import ContainerInfo, ContainerSpec
from capd_py.api.infrakinds import docker_spec
from capd_py.api.labels import CLUSTER_NAME
from capd_py.reconcile import cloudinit, coreutil, imageload, placement
from capd_py.reconcile import dockercluster as dcr
from capd_py.reconcile import dockermachine as dmr
from capd_py.reconcile.dockermachine import Phase

Obj = dict[str, Any]


# --- actions ------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class LookImage:
    """Is the node image present in the local docker daemon?"""
    image: str


@dataclass(frozen=True)
class ProbeSystemd:
    """Has systemd finished booting in the node container?"""


@dataclass(frozen=True)
class ProbeBootstrap:
    """How far is the bootstrap script (cloudinit.probe_command)?"""


@dataclass(frozen=True)
class LookLocalImages:
    """The docker daemon's image IDs of the images to pre-load."""
    refs: tuple[str, ...]


@dataclass(frozen=True)
class ReadBootstrapData:
    """The Machine's bootstrap data Secret."""
    secret: str


@dataclass(frozen=True)
class SyncLoadBalancer:
    """A deleting control plane Machine's container leaves the load balancer before anything else happens."""
    without: str  # the Machine's name


@dataclass(frozen=True)
class CreateContainer:
    spec: ContainerSpec


@dataclass(frozen=True)
class StartContainer:
    name: str


@dataclass(frozen=True)
class PreloadImages:
    """Load `load` ({reference: local ID}) into the node's containerd (reporting PreLoadingImages meanwhile); tell,
    in an Event, about the recorded images that are `skipped` (gone from the local daemon)."""
    load: Mapping[str, str]
    skipped: tuple[str, ...] = ()


@dataclass(frozen=True)
class Bootstrap:
    """Write the bootstrap script's files into the container and launch it detached."""
    files: Mapping[str, bytes]
    steps: int


@dataclass(frozen=True)
class WaitFor:
    """Nothing to write: wait (for what `reason` says) and look again after `requeue_after`, or when a watched
    object changes (None)."""
    reason: str
    requeue_after: float | None = None


@dataclass(frozen=True)
class Report:
    """Write the status for `phase`; look again after `requeue_after` (None: a watched change brings us back)."""
    phase: Phase
    message: str = ""
    requeue_after: float | None = None
    container: ContainerInfo | None = None


@dataclass(frozen=True)
class Fail:
    """A real failure: the status for `phase` and an Event (`event`) when the condition did not say so already."""
    phase: Phase
    message: str
    event: str
    requeue_after: float | None = None
    container: ContainerInfo | None = None


@dataclass(frozen=True)
class SetProviderID:
    """Provisioned: spec.providerID, the Provisioned status, and the workload Node's providerID."""
    provider_id: str
    container: ContainerInfo


Look = LookImage | ProbeSystemd | ProbeBootstrap | LookLocalImages | ReadBootstrapData
Step = SyncLoadBalancer | CreateContainer | StartContainer | PreloadImages | Bootstrap
End = WaitFor | Report | Fail | SetProviderID
Action = Look | Step | End
ENDS = (WaitFor, Report, Fail, SetProviderID)
MAX_STEPS = 16  # looks and steps in one pass: the longest path through `decide` takes about ten


# --- what the controller observed ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Observed:
    dm: Obj
    machine: Obj | None                 # the owner Machine (None: no owner reference yet, or not there)
    cluster: Obj | None
    docker_cluster: Obj | None = None
    container: ContainerInfo | None = None  # the container named for this machine, whoever made it
    now: _dt.datetime = field(default_factory=coreutil.utcnow)
    # settings
    node_image_repository: str = "capd-py/node"
    privileged_mode: str = "restricted"
    poll_seconds: float = 5.0
    # looked at during the pass (None: not yet)
    image_present: bool | None = None
    systemd_ready: bool | None = None
    bootstrap: cloudinit.BootstrapState | None = None
    local_image_ids: Mapping[str, str | None] | None = None
    preloaded: tuple[imageload.Outcome, ...] | None = None
    bootstrap_data: Mapping[str, str] | None = None  # the Secret's data ({} when it does not exist)
    # the steps applied in this pass, and what went wrong
    done: frozenset[type] = frozenset()
    runtime_error: str | None = None   # creating or starting the container failed
    exec_error: str | None = None      # the container did not answer an exec

    @property
    def namespace(self) -> str:
        return str(self.dm["metadata"].get("namespace") or "")

    @property
    def cluster_name(self) -> str:
        return cluster_name_of(self.dm, self.machine)

    @property
    def machine_name(self) -> str:
        return str(contract.dig(self.machine, "metadata", "name") or "")

    @property
    def container_name(self) -> str:
        return dmr.container_name(self.cluster_name, self.machine_name)

    @property
    def control_plane(self) -> bool:
        return dmr.is_control_plane(self.machine)

    @property
    def network(self) -> str:
        return dcr.network_name(self.namespace, self.cluster_name, self.docker_cluster)

    @property
    def family(self) -> str:
        return dcr.cluster_family(self.cluster)


def cluster_name_of(dm: Obj, machine: Obj | None) -> str:
    """The Machine's spec.clusterName, else the DockerMachine's cluster-name label."""
    c = contract.dig(machine, "spec", "clusterName")
    return str(c or ((dm.get("metadata") or {}).get("labels") or {}).get(CLUSTER_NAME) or "")


def cp_initialized(cluster: Obj | None) -> bool:
    return cluster is not None and (contract.control_plane_initialized(cluster)
                                    or cond.is_true(cluster, "ControlPlaneInitialized"))


# --- the decision -------------------------------------------------------------------------------------------------

def decide(o: Observed) -> Action:
    dm, machine, cluster, info = o.dm, o.machine, o.cluster, o.container
    if machine is None or not o.cluster_name:
        return WaitFor("the Machine owner reference")
    if cluster is None:
        return WaitFor(f"Cluster {o.cluster_name}", o.poll_seconds)
    cname, cp = o.container_name, o.control_plane
    if cp and info is not None and coreutil.is_deleting(machine) and SyncLoadBalancer not in o.done:
        # the Machine is going (its etcd member goes next, in the control plane's pre-terminate hook): no new API
        # connection may reach it from now on
        return SyncLoadBalancer(o.machine_name)
    if info is not None and not dcr.ours(info, o.namespace, o.cluster_name):
        return Fail(Phase.NAME_CONFLICT, f"a container named {cname} exists that capd-py did not create for "
                    f"{o.namespace}/{o.cluster_name}; remove or rename it", "ContainerNameConflict", 30)
    # bootstrapped before (the sentinel may be gone after a container restart). A providerID is set only once
    # provisioned, and it is all that remains after upstream clusterctl move, which creates objects without status
    # (as upstream CAPD: a DockerMachine with a providerID is provisioned)
    provisioned = contract.infra_provisioned(dm) or bool(contract.provider_id(dm))
    if info is None and provisioned:
        # like upstream: a provisioned machine whose container vanished is not silently recreated (the new node
        # would lack its kubeadm state); it is reported so remediation can replace the Machine
        return Fail(Phase.CONTAINER_DELETED, f"container {cname} of this provisioned machine no longer exists; "
                    "delete the Machine to replace it", "ContainerDeleted")
    if o.runtime_error:
        return Fail(Phase.CONTAINER_ERROR, o.runtime_error, "ContainerError", 10)
    if info is None:
        refused = placement.machine_domain_refusal(docker_spec(o.docker_cluster or {}).get("failureDomains"),
                                                   dh.host_of(o.docker_cluster) or dh.LOCAL,
                                                   str(contract.dig(machine, "spec", "failureDomain") or ""))
        if refused:
            return Fail(Phase.FAILURE_DOMAIN_HOST, refused, Phase.FAILURE_DOMAIN_HOST.value, 60)
        return _create(o)
    if not info.running and StartContainer not in o.done:
        return StartContainer(cname)

    if provisioned:
        moved = dmr.address_change(dm, info, o.network, cp, o.family)
        if moved:
            return Fail(Phase.ADDRESS_CHANGED, moved, "ContainerAddressChanged", container=info)
        return SetProviderID(dmr.provider_id(cname), info)
    secret = contract.dig(machine, "spec", "bootstrap", "dataSecretName")
    if not secret:
        if not cp and not cp_initialized(cluster):
            return Report(Phase.WAITING_CONTROL_PLANE, "waiting for the control plane to initialize", container=info)
        quiet = dmr.bootstrap_data_wait(dm, cluster, o.now)
        if quiet is not None:
            return WaitFor("the bootstrap data, which follows the control plane's initialization", quiet)
        # the Machine changes when its bootstrap data appears
        return Report(Phase.WAITING_BOOTSTRAP_DATA, "waiting for the bootstrap data secret", container=info)
    return _bootstrap(o, str(secret), info)


def _create(o: Observed) -> Action:
    """No container yet: wait for the cluster's infrastructure and the node image, then create it. Unlike upstream
    CAPD, the container is created and boots while the Machine still waits for its bootstrap data (a worker waits
    for the control plane): the join then starts on a booted node."""
    dm, machine = o.dm, o.machine
    infra_ready = bool(contract.dig(o.cluster, "status", "initialization", "infrastructureProvisioned")) \
        or contract.infra_provisioned(o.docker_cluster)
    if not infra_ready:
        return Report(Phase.WAITING_CLUSTER_INFRA, "waiting for the cluster infrastructure", o.poll_seconds)
    image = dmr.node_image(dm, machine, o.node_image_repository)
    if image is not None and o.image_present is None:
        return LookImage(image)
    img = dmr.image_decision(dm, machine, image, bool(o.image_present))
    if not img.ok or image is None:
        # not an admission error: any supported version is accepted, its node image may come later
        return Fail(Phase.IMAGE_NOT_FOUND, img.message, "ImageNotFound", img.requeue_after)
    return CreateContainer(dmr.node_spec(o.namespace, o.cluster_name, o.machine_name, dm, image, o.network,
                                         o.control_plane, o.privileged_mode, o.family))


def _bootstrap(o: Observed, secret: str, info: ContainerInfo) -> Action:
    """The container runs and the bootstrap data is named: systemd, pre-loaded images, the bootstrap script."""
    if o.exec_error:
        return Report(Phase.WAITING_SYSTEMD, f"container {o.container_name} not reachable yet: {o.exec_error}", 2,
                      info)
    if o.systemd_ready is None:
        return ProbeSystemd()
    if not o.systemd_ready:
        return Report(Phase.WAITING_SYSTEMD, "waiting for systemd to boot in the container", 1, info)
    st = o.bootstrap
    if st is None:
        return ProbeBootstrap()
    if st.phase in ("none", "unknown") and Bootstrap not in o.done:
        return _start(o, secret, info)
    if st.phase == "done":
        return SetProviderID(dmr.provider_id(o.container_name), info)
    if st.phase == "failed":
        msg = (f"bootstrap step {st.failed_step} failed with exit code {st.exit_code} "
               f"({st.step.split(' ', 1)[-1] if st.step else 'unknown step'}); full log in the container at "
               f"{cloudinit.BOOTSTRAP_LOG}; last lines:\n{dmr.last_lines(st.tail)}")
        return Fail(Phase.BOOTSTRAP_FAILED, msg, "BootstrapFailed", container=info)
    if st.phase == "died":
        msg = (f"the bootstrap script stopped without reporting a result (killed?) during step "
               f"{st.step or 'unknown'}; full log in the container at {cloudinit.BOOTSTRAP_LOG}; last lines:\n"
               f"{dmr.last_lines(st.tail)}")
        return Fail(Phase.BOOTSTRAP_FAILED, msg, "BootstrapFailed", container=info)
    timeout = dmr.bootstrap_timeout(o.dm)
    if st.elapsed > timeout:
        msg = (f"bootstrap still running after {int(st.elapsed)}s (bootstrapTimeout {int(timeout)}s), at step "
               f"{st.step}; last lines:\n{dmr.last_lines(st.tail)}")
        return Report(Phase.BOOTSTRAP_TIMEOUT, msg, 10, info)
    # the end of a bootstrap is on the critical path twice (control plane, then workers): look every second
    return Report(Phase.BOOTSTRAPPING, dmr.probe_message(st.step), 1, info)


def _start(o: Observed, secret: str, info: ContainerInfo) -> Action:
    """Not bootstrapped yet: before the bootstrap (as upstream), the DockerMachine's spec.preLoadImages and the
    images `capd-py load image` recorded on the Cluster go from the local docker daemon into the node's containerd
    (those it has already are skipped by the load); then the bootstrap data becomes the script, launched once."""
    wanted = imageload.boot_images(o.dm, o.cluster)
    if wanted:
        if o.local_image_ids is None:
            return LookLocalImages(tuple(wanted))
        d = imageload.boot_decision(wanted, o.local_image_ids)
        if d.blocked:  # a spec.preLoadImages image is missing locally: nothing is pulled
            return Fail(Phase.PRELOAD_IMAGES_FAILED, d.message, "PreLoadImagesFailed", d.requeue_after, info)
        if (d.load or d.skipped) and o.preloaded is None:
            return PreloadImages(dict(d.load), tuple(d.skipped))
        if o.preloaded and not all(x.ok for x in o.preloaded):
            return Fail(Phase.PRELOAD_IMAGES_FAILED, f"pre-loading images: {imageload.failed_message(o.preloaded)}",
                        "PreLoadImagesFailed", imageload.PRELOAD_RECHECK_SECONDS, info)
    if o.bootstrap_data is None:
        return ReadBootstrapData(secret)
    data = o.bootstrap_data
    if "value" not in data:
        return Report(Phase.WAITING_BOOTSTRAP_DATA, f"waiting for bootstrap data secret {secret}", o.poll_seconds,
                      info)
    try:
        fmt = base64.b64decode(data["format"]).decode() if data.get("format") else "cloud-config"
    except ValueError as e:  # not base64, not text
        return Fail(Phase.INVALID_BOOTSTRAP_DATA, f"bootstrap data format: {e}", "InvalidBootstrapData", container=info)
    if fmt not in ("cloud-config", ""):
        return Fail(Phase.INVALID_BOOTSTRAP_DATA, f"bootstrap data format {fmt!r} is not supported (only "
                    "cloud-config)", "InvalidBootstrapData", container=info)
    try:
        steps = cloudinit.to_steps(base64.b64decode(data["value"]))
    except (cloudinit.CloudInitError, ValueError) as e:
        return Fail(Phase.INVALID_BOOTSTRAP_DATA, f"bootstrap data: {e}", "InvalidBootstrapData", container=info)
    return Bootstrap(cloudinit.render_script(steps), len(steps))


def after_error(o: Observed, action: Action, error: str) -> Observed | None:
    """What a step or look that failed on the container runtime leaves for the next decision; None when the
    failure is not part of the state machine (the controller lets it fail the pass)."""
    if isinstance(action, CreateContainer):
        return replace(o, runtime_error=f"creating container {o.container_name}: {error}")
    if isinstance(action, StartContainer):
        return replace(o, runtime_error=f"starting container {o.container_name}: {error}")
    if isinstance(action, ProbeSystemd | ProbeBootstrap | LookLocalImages | PreloadImages | Bootstrap):
        return replace(o, exec_error=error)
    return None


# --- what an end writes -------------------------------------------------------------------------------------------

def status(o: Observed, phase: Phase, message: str = "", container: ContainerInfo | None = None) -> Obj:
    """The DockerMachine's status for `phase` (dockermachine.status with this pass's network and failure domain)."""
    fd = contract.dig(o.machine, "spec", "failureDomain")
    return dmr.status(o.dm, dmr.Observed(phase, message, container, o.network, fd, family=o.family))


def is_news(dm: Obj, phase: Phase) -> bool:
    """Whether a failure is new (its condition does not say so yet): its Event is recorded once."""
    ctype = dmr.BOOTSTRAP_EXEC_SUCCEEDED if phase.name.startswith(("BOOTSTRAP", "INVALID", "PRELOAD")) \
        else dmr.CONTAINER_PROVISIONED
    prev = cond.get(dm, ctype)
    return prev is None or prev.get("reason") != phase.value
