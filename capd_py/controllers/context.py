"""What every reconcile function gets: API clients, the container runtime, settings, events."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from capd_py.api import controllerset, features
from capd_py.api.gvk import GVK
from capd_py.api.runtime_sdk import NoRuntimeSDK, RuntimeSDK
from capd_py.controllers.services.bootstrap_templates import BootstrapTemplates
from capd_py.controllers.services.certificates import ClusterCertificates
from capd_py.controllers.services.docker_hosts import DockerHosts
from capd_py.controllers.services.docker_infra import DockerInfra
from capd_py.kube.client import Kube
from capd_py.kube.contracts import Contracts
from capd_py.kube.etcd import EtcdClients, ExecEtcdClients
from capd_py.kube.inmemory_api import InMemoryEtcdClients
from capd_py.kube.probe import CertProbe, TLSProbe
from capd_py.reconcile import inmemory_api, preflight, subnets
from capd_py.reconcile.dockercluster import DEFAULT_LB_IMAGE
from capd_py.reconcile.topology.hooks import HookCache
from capd_py.runtime.protocol import ContainerRuntime

if TYPE_CHECKING:
    from capd_py.kube.workload import WorkloadClients


@dataclass
class Settings:
    # "privileged" on real machines; "restricted" where --privileged fails (this sandbox; see docs/).
    privileged_mode: str = field(default_factory=lambda: os.environ.get("CAPD_PY_PRIVILEGED_MODE", "privileged"))
    node_image_repository: str = field(
        default_factory=lambda: os.environ.get("CAPD_PY_NODE_IMAGE_REPO", "capd-py/node"))
    haproxy_image: str = field(default_factory=lambda: os.environ.get("CAPD_PY_HAPROXY_IMAGE", DEFAULT_LB_IMAGE))
    # the docker network new clusters join instead of one of their own (upstream CAPD's manager reads DOCKER_NETWORK,
    # set from clusterctl's CAPD_DOCKER_NETWORK; a host process reads either); "" : a network per cluster
    docker_network: str = field(default_factory=lambda: os.environ.get("DOCKER_NETWORK")
                                or os.environ.get("CAPD_DOCKER_NETWORK", ""))
    resync_seconds: float = field(default_factory=lambda: float(os.environ.get("CAPD_PY_RESYNC_SECONDS", "60")))
    # Every Nth resync lists from the API server too (drops cached copies a watch gap left behind).
    relist_every: int = 10
    workers: int = field(default_factory=lambda: int(os.environ.get("CAPD_PY_WORKERS", "16")))
    # Events of other objects reach a summarising controller (Cluster, MachineSet, ...) this much later,
    # so a burst of them coalesces into one reconcile (see Manager.dispatch).
    aggregate_seconds: float = 0.25
    # Poll interval while waiting on something we do not watch (workload nodes, containers).
    poll_seconds: float = 5.0
    # Poll interval while waiting on a workload Node whose cluster's Node watch is in sync: a safety net,
    # the watch's event comes first.
    node_watch_poll_seconds: float = 10.0
    # The docker container these controllers run in, if any: `capd-py init --in-cluster` sets it to the pod's
    # node name (the management node container), which then joins every workload cluster's network.
    controllers_container: str = field(default_factory=lambda: os.environ.get("CAPD_PY_CONTROLLERS_CONTAINER", ""))
    # where workload networks' subnets come from (`BASE/PREFIX:SIZE,...`, capd_py/reconcile/subnets.py); a bad
    # value stops the controllers at start with a message naming it
    network_pool: tuple[subnets.PoolRange, ...] = field(default_factory=lambda: subnets.parse_pool(
        os.environ.get("CAPD_PY_NETWORK_POOL") or subnets.DEFAULT_POOL))
    # the management cluster's pod and service CIDRs (no workload network may take them: in-cluster controllers
    # reach workload clusters from a pod) and its docker network (`capd-py init`'s, CAPD_PY_NETWORK)
    management_cidrs: tuple[str, ...] = field(default_factory=lambda: subnets.parse_cidrs(
        os.environ.get("CAPD_PY_MANAGEMENT_CIDRS") or subnets.DEFAULT_MANAGEMENT_CIDRS, "CAPD_PY_MANAGEMENT_CIDRS"))
    management_network: str = field(default_factory=lambda: os.environ.get("CAPD_PY_NETWORK", "capd-py"))
    # where the DevCluster inMemory backend's workload clusters are served over HTTPS
    # (capd_py/kube/inmemory_api_server.py):
    # the controllers' address (upstream: the pod's POD_IP; 127.0.0.1 for a controllers process on the host) and
    # the range their ports come from (upstream's 20000-30000)
    in_memory_host: str = field(default_factory=lambda: os.environ.get("CAPD_PY_IN_MEMORY_HOST")
                                or os.environ.get("POD_IP") or "127.0.0.1")
    in_memory_ports: range = field(default_factory=lambda: inmemory_api.parse_port_range(
        os.environ.get("CAPD_PY_IN_MEMORY_PORTS") or "20000-30000"))
    # the MachineSet preflight checks run at all (upstream's --machineset-preflight-checks, default All; empty: none)
    # upstream's feature gates (`--feature-gates`, CAPD_PY_FEATURE_GATES; capd_py/api/features.py)
    feature_gates: dict[str, bool] = field(default_factory=lambda: features.parse(
        os.environ.get("CAPD_PY_FEATURE_GATES", "")))
    machineset_preflight_checks: frozenset[str] = field(default_factory=lambda: preflight.parse_checks(
        os.environ.get("CAPD_PY_MACHINESET_PREFLIGHT_CHECKS", preflight.ALL)))
    # which controllers this process runs (`--controllers`, CAPD_PY_CONTROLLERS: upstream's manager names core,
    # bootstrap, controlplane, infrastructure, or kinds; None: all), to run a part beside upstream's managers
    controllers: frozenset[str] | None = field(default_factory=lambda: controllerset.parse(
        os.environ.get("CAPD_PY_CONTROLLERS")))


    def enabled(self, gate: str) -> bool:
        return bool(self.feature_gates.get(gate, features.DEFAULTS.get(gate, False)))


@dataclass
class Ctx:
    kube: Kube
    runtime: ContainerRuntime
    settings: Settings
    workload: WorkloadClients
    log: logging.Logger = field(default_factory=lambda: logging.getLogger("capd_py"))
    extra: dict[str, Any] = field(default_factory=dict)
    # etcd of workload control planes (etcdctl in the etcd static pod); tests put a kube.etcd_fake.FakeEtcd here
    # (in-memory workload clusters, the DevCluster inMemory backend's, answer from their own FakeEtcd)
    etcd: EtcdClients = field(default_factory=lambda: InMemoryEtcdClients(ExecEtcdClients()))
    # the cluster CA / etcd / sa / front-proxy and kubeconfig secrets (KCP and KubeadmConfig)
    certificates: ClusterCertificates = field(default_factory=ClusterCertificates)
    # the kubeadm bootstrap's cloud-config templates (templates/bootstrap), read on first use
    bootstrap_templates: BootstrapTemplates = field(default_factory=BootstrapTemplates)
    # TLS probes (API server certificate expiry for spec.rollout.before.certificatesExpiryDays)
    probe: CertProbe = field(default_factory=TLSProbe)
    # Runtime SDK extensions (ExtensionConfig discovery, hook calls): capd_py/api/runtime_sdk.py
    runtime_sdk: RuntimeSDK = field(default_factory=NoRuntimeSDK)
    # lifecycle hooks that answered "not yet": not asked again before their retryAfterSeconds (topology controller)
    hook_cache: HookCache = field(default_factory=HookCache)
    # what each KCP's etcd last reported: (namespace, KCP) -> (monotonic time, the nodes it was read through, the
    # reconcile.kcp.etcdhealth.EtcdObservation); controllers/kcp/observe.py reads etcd again after ETCD_RECHECK
    etcd_reads: dict[tuple[str, str], tuple[float, frozenset[str], Any]] = field(default_factory=dict)
    # the Docker infrastructure service over `runtime`, made on first use (see `infra`)
    _infra: DockerInfra | None = field(default=None, init=False, repr=False, compare=False)
    # one DockerInfra per configured docker host (issue 32), `local` being `infra`; made on first use
    _hosts: DockerHosts | None = field(default=None, init=False, repr=False, compare=False)
    # contract discovery (references -> GVK + contract, from the providers' CRDs), made on first use
    _contracts: Contracts | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def contracts(self) -> Contracts:
        """The one contract discovery of this context; the Manager feeds it from its CRD watch."""
        if self._contracts is None:
            self._contracts = Contracts(self.kube)
        return self._contracts

    @property
    def infra(self) -> DockerInfra:
        """The one Docker infrastructure service of this context (in-flight creations, LB locks)."""
        if self._infra is None:
            self._infra = DockerInfra(self.runtime, self.settings.controllers_container, self.settings.network_pool)
        return self._infra

    @infra.setter
    def infra(self, value: DockerInfra) -> None:
        self._infra = value

    @property
    def hosts(self) -> DockerHosts:
        """The docker hosts service: a DockerInfra per configured host, `local` being `self.infra`."""
        if self._hosts is None:
            self._hosts = DockerHosts(self.infra, lambda rt: DockerInfra(rt, "", self.settings.network_pool))
        return self._hosts

    @hosts.setter
    def hosts(self, value: DockerHosts) -> None:
        self._hosts = value

    def watch_kind(self, watcher: str, g: GVK) -> None:
        """Wired by the manager: the controller `watcher` (its queue key) hears of every object of kind `g` (which
        its objects reference) from now on; the kind's watch starts on first sight."""
        fn = self.extra.get("watch_kind")
        if fn:
            fn(watcher, g)

    def enqueue(self, kind: str, namespace: str, name: str, after: float = 0.0) -> None:
        """Wired by the manager; lets one controller nudge another (e.g. DockerCluster after a CP change)."""
        fn = self.extra.get("enqueue")
        if fn:
            fn((kind, namespace, name), after)
