"""The user's management cluster: one kind-like node container running a kubeadm control plane, the
capd-py CRDs, and the controllers (a host process by default, or a Deployment with `--in-cluster`).

Containers, volumes and networks made here carry `io.x-k8s.capd-py.management=<name>` so deletion finds
them all.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from capd_py.api import features
from capd_py.api.labels import CONTAINER_MANAGED, CONTAINER_ROLE, MANAGEMENT_LABEL
from capd_py.cli.kubeconfig import rewrite_server, write_private
from capd_py.cli.steps import Steps
from capd_py.cli.waiting import poll
from capd_py.reconcile import addresses, subnets
from capd_py.reconcile.dockercluster import ROLE_MANAGEMENT
from capd_py.runtime import networks
from capd_py.runtime.hostprocesses import pid_alive
from capd_py.runtime.protocol import (
    ContainerInfo,
    ContainerRuntime,
    ContainerSpec,
    Mount,
    NetworkInfo,
    PortMapping,
    RuntimeError_,
)

DEFAULT_NAME = "capd-mgmt"
DEFAULT_NODE_IMAGE = "capd-py/node:v1.34.4"
POD_SUBNET = subnets.MANAGEMENT_POD_CIDR
SERVICE_SUBNET = subnets.MANAGEMENT_SERVICE_CIDR
API_PORT = 6443
# Must match the node image's containerd (runc SystemdCgroup = true in images/node); kubelet and runc
# disagreeing makes every pod sandbox fail. systemd works on cgroup v1 hosts too.
CGROUP_DRIVER = os.environ.get("CAPD_PY_CGROUP_DRIVER", "systemd")
# On user-defined docker networks the node's resolv.conf names docker's embedded DNS, 127.0.0.11, which
# pods cannot reach (CoreDNS would forward to its own loopback and stop with "Loop detected"). As kind
# does: serve it on the gateway address instead (docker's DNAT rules re-targeted, also for PREROUTING,
# so pod traffic is translated) and point resolv.conf there.
DOCKER_DNS_FIX = r"""
set -e
grep -q '^nameserver 127.0.0.11' /etc/resolv.conf || exit 0
gw=$(ip -4 route show default | awk '{print $3; exit}')
[ -n "$gw" ] || exit 0
iptables-save -t nat > /tmp/nat.rules
sed -e "s/-d 127.0.0.11/-d $gw/g" \
    -e "s/^-A OUTPUT \(.*\) -j DOCKER_OUTPUT$/&\n-A PREROUTING \1 -j DOCKER_OUTPUT/" \
    -e "s/--to-source :53/--to-source $gw:53/g" /tmp/nat.rules | iptables-restore -T nat
sed -e "s/127.0.0.11/$gw/" /etc/resolv.conf > /tmp/resolv.conf && cat /tmp/resolv.conf > /etc/resolv.conf
"""
CGROUP_V1_KUBELET_ROOT = ("[ -f /sys/fs/cgroup/cgroup.controllers ] || for d in /sys/fs/cgroup/*/; do "
                          "mkdir -p \"${d}kubelet\" \"${d}kubelet.slice\"; done")
KUBELET_CGROUP_DROPIN = "/etc/systemd/system/kubelet.service.d/05-capd-py-cgroup-root.conf"


def kubelet_cgroup_dropin() -> str:
    # `$$`: systemd expands `${...}` in Exec lines itself
    return f"[Service]\nExecStartPre=/bin/sh -c '{CGROUP_V1_KUBELET_ROOT.replace('$', '$$')}'\n"


# --in-cluster: the host docker socket inside the node (a hostPath for the controllers pod).
DOCKER_SOCKET_IN_NODE = "/run/capd-py/docker.sock"
# What kind ignores: the node runs in a container, without swap accounting or the br_netfilter sysctl.
IGNORE_PREFLIGHT = ("SystemVerification", "Swap", "FileContent--proc-sys-net-bridge-bridge-nf-call-iptables",
                    "NumCPU", "Mem")
REPO_ROOT = Path(__file__).resolve().parents[2]


class ManagementError(Exception):
    pass


def home() -> Path:
    return Path(os.environ.get("CAPD_PY_HOME", "~/.capd-py")).expanduser()


def kubeconfig_path(name: str = DEFAULT_NAME) -> Path:
    return home() / f"{name}.kubeconfig"


def pid_path(name: str = DEFAULT_NAME) -> Path:
    return home() / ("controllers.pid" if name == DEFAULT_NAME else f"{name}-controllers.pid")


def power_path(name: str = DEFAULT_NAME) -> Path:
    """Written by `capd-py stop management` before it stops anything, removed by `start management` once done: a
    killed stop or start run again knows whether host controllers were running and must come back."""
    return home() / f"{name}.power"


def log_path(name: str = DEFAULT_NAME) -> Path:
    return home() / ("controllers.log" if name == DEFAULT_NAME else f"{name}-controllers.log")


def node_name(name: str) -> str:
    return f"{name}-control-plane"


def privileged_mode() -> str:
    """CAPD_PY_PRIVILEGED_MODE, else what hack/privilege-mode.sh finds out, else privileged."""
    env = os.environ.get("CAPD_PY_PRIVILEGED_MODE")
    if env:
        return env
    script = REPO_ROOT / "hack" / "privilege-mode.sh"
    if script.exists():
        try:
            out = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=60).stdout.strip()
            if out in ("privileged", "restricted"):
                return out
        except (OSError, subprocess.SubprocessError):
            pass
    return "privileged"


def default_runtime() -> ContainerRuntime:
    from capd_py.runtime.docker_runtime import DockerRuntime

    rt: ContainerRuntime = DockerRuntime()
    return rt


@dataclass
class ManagementCluster:
    name: str = DEFAULT_NAME
    image: str = DEFAULT_NODE_IMAGE
    host_port: int = 0                  # 0: let docker choose
    network: str = field(default_factory=lambda: os.environ.get("CAPD_PY_NETWORK", "capd-py"))
    runtime: ContainerRuntime | None = None
    steps: Steps = field(default_factory=Steps)
    ready_timeout: float = 300.0
    mount_docker_socket: bool = False   # --in-cluster: the controllers pod drives the host's docker

    def __post_init__(self) -> None:
        self._rt = self.runtime

    @property
    def rt(self) -> ContainerRuntime:
        if self._rt is None:
            self._rt = default_runtime()
        return self._rt

    @property
    def node(self) -> str:
        return node_name(self.name)

    @property
    def kubeconfig(self) -> Path:
        return kubeconfig_path(self.name)

    @property
    def labels(self) -> dict[str, str]:
        return {MANAGEMENT_LABEL: self.name, CONTAINER_MANAGED: "true", CONTAINER_ROLE: ROLE_MANAGEMENT}

    # -- helpers ---------------------------------------------------------------------------------
    def _exec(self, cmd: list[str], timeout: float = 300, what: str = "") -> str:
        res = self.rt.exec(self.node, cmd, timeout=timeout)
        if res.exit_code != 0:
            tail = "\n".join(res.output.strip().splitlines()[-25:])
            raise ManagementError(f"{what or shlex.join(cmd)} failed (exit {res.exit_code}) in {self.node}:\n{tail}")
        return res.output

    def exists(self) -> ContainerInfo | None:
        return self.rt.get_container(self.node)

    def gateway(self) -> str:
        """The node's network's gateway: the host's address as the node (its API server) sees it."""
        net = self.rt.get_network(self.network)
        if net is None or not net.gateway:
            raise ManagementError(f"docker network {self.network} has no gateway address")
        return net.gateway.split("/")[0]

    # -- create ----------------------------------------------------------------------------------
    def create(self) -> Path:
        st = self.steps
        self.rt.ping()
        existing = self.exists()
        if existing and existing.running and self.kubeconfig.exists():
            st.info(f"Management cluster {self.name!r} already exists ({self.node}); reusing it.")
            return self.kubeconfig
        if existing:
            raise ManagementError(f"container {self.node} exists but the cluster is not usable; "
                                  f"run `capd-py delete management --name {self.name}` first")
        if not self.rt.image_exists(self.image):
            raise ManagementError(f"node image {self.image} not found; build it with `images/build.sh`")
        with st.step(f"Ensuring node image ({self.image}) 🖼"):
            pass
        with st.step("Preparing nodes 📦"):
            def network() -> NetworkInfo:
                try:
                    return networks.ensure_network(self.rt, self.network, {CONTAINER_MANAGED: "true"},
                                                   network_pool(),
                                                   subnets.management_cidrs((POD_SUBNET, SERVICE_SUBNET)),
                                                   routes_image=self.image)
                except RuntimeError_ as e:
                    raise ManagementError(str(e)) from e

            def node_spec(net: NetworkInfo) -> ContainerSpec:
                # a static address (and the pinned host port the runtime gives a port asked for as 0): the API
                # server's certificate, etcd and the kubeconfig stay valid after the node is stopped and started
                taken = addresses.taken_addresses(self.rt.list_containers(None, self.network), self.network)
                return ContainerSpec(
                    ipv4=addresses.pick_static(net, taken) or "",
                    name=self.node, image=self.image, hostname=self.node, network=self.network,
                    labels=self.labels, ports=(PortMapping(API_PORT, self.host_port, "127.0.0.1"),),
                    mounts=(Mount("/var/run/docker.sock", DOCKER_SOCKET_IN_NODE),) if self.mount_docker_socket
                    else (),
                    privileged_mode=privileged_mode(), node=True, restart_policy="unless-stopped")

            # the network is shared with other management clusters: one being deleted meanwhile may remove it
            info = networks.run_joined(self.rt, network, node_spec)
            self._wait_booted()
        with st.step("Writing configuration 📜"):
            info = self.rt.get_container(self.node) or info
            ip = info.ipv4.get(self.network) or next(iter(info.ipv4.values()), "")
            if not ip:
                raise ManagementError(f"{self.node} has no IPv4 address on {self.network}")
            version = self._exec(["kubeadm", "version", "-o", "short"], what="kubeadm version").strip()
            # kubelet runs with --cgroup-root=/kubelet (kind's layout; `kubelet.slice` with the systemd
            # driver): on cgroup v1 it refuses to start unless that cgroup exists in every hierarchy.
            # The cgroups live in the container's own cgroup, which docker makes afresh at every start: create
            # them before every kubelet start, not once (the node must come back after a stop/start).
            self.rt.write_file(self.node, KUBELET_CGROUP_DROPIN, kubelet_cgroup_dropin().encode())
            self._exec(["systemctl", "daemon-reload"], what="loading the kubelet cgroup drop-in")
            self._exec(["sh", "-c", CGROUP_V1_KUBELET_ROOT], what="creating the kubelet cgroup")
            self._exec(["sh", "-c", DOCKER_DNS_FIX], what="re-pointing the node's DNS")
            self.rt.write_file(self.node, "/kind/kubeadm.conf", kubeadm_config(self.node, ip, version).encode())
        with st.step("Starting control-plane 🕹️"):
            self._exec(["kubeadm", "init", "--config=/kind/kubeadm.conf", "--skip-token-print",
                        "--ignore-preflight-errors=" + ",".join(IGNORE_PREFLIGHT), "--v=1"],
                       timeout=600, what="kubeadm init")
            kc = ["kubectl", "--kubeconfig=/etc/kubernetes/admin.conf"]
            self._exec([*kc, "taint", "nodes", "--all", "node-role.kubernetes.io/control-plane-"],
                       what="removing the control-plane taint")
            self._exec([*kc, "label", "nodes", "--all", "node.kubernetes.io/exclude-from-external-load-balancers-"],
                       what="removing the exclude-from-external-load-balancers label")
        with st.step("Installing CNI 🔌"):
            self._exec([*kc, "apply", "-f", "/kind/manifests/default-cni.yaml"], what="applying the CNI manifest")
        with st.step("Writing kubeconfig 📝"):
            self.write_kubeconfig()
        with st.step("Waiting for the node to be Ready ⏳"):
            self._wait_node_ready()
        return self.kubeconfig

    def write_kubeconfig(self) -> Path:
        info = self.exists()
        if info is None:
            raise ManagementError(f"{self.node} does not exist")
        port = info.ports.get(API_PORT)
        if not port:
            raise ManagementError(f"{self.node} does not publish port {API_PORT}")
        admin = self.rt.read_file(self.node, "/etc/kubernetes/admin.conf")
        if not admin:
            raise ManagementError(f"{self.node} has no /etc/kubernetes/admin.conf (kubeadm init did not finish)")
        return write_private(self.kubeconfig, rewrite_server(admin, f"https://127.0.0.1:{port}",
                                                             context_name=f"capd-py-{self.name}"))

    def _booted(self) -> bool | None:
        c = self.rt.get_container(self.node)
        if c is None or c.status in ("exited", "dead"):
            raise ManagementError(f"{self.node} stopped while booting:\n{self.rt.logs(self.node, tail=30)}")
        logs = self.rt.logs(self.node, tail=400)
        return True if "Reached target" in logs and "Multi-User System" in logs else None

    def _images_ready(self) -> bool | None:
        """The node image carries its images in containerd's store (put there when the image was built):
        nothing to import, only containerd to wait for; kubeadm must not try to pull."""
        r = self.rt.exec(self.node, ["ctr", "--namespace", "k8s.io", "images", "ls", "-q"], timeout=10)
        return True if r.exit_code == 0 else None

    def _wait_booted(self, timeout: float = 120) -> None:
        if not poll(self._booted, timeout, 0.5):
            raise ManagementError(f"{self.node} did not boot within {timeout:.0f}s:\n{self.rt.logs(self.node, 30)}")
        if not poll(self._images_ready, 60, 0.5):
            raise ManagementError("containerd in the node did not answer in time (journalctl -u containerd)")

    def _node_ready(self) -> bool | None:
        jp = "{.items[0].status.conditions[?(@.type=='Ready')].status}"
        r = self.rt.exec(self.node, ["kubectl", "--kubeconfig=/etc/kubernetes/admin.conf", "get", "nodes",
                                     "-o", f"jsonpath={jp}"], timeout=30)
        return True if r.exit_code == 0 and r.output.strip() == "True" else None

    def _wait_node_ready(self) -> None:
        if not poll(self._node_ready, self.ready_timeout, 1):
            raise ManagementError(f"node {self.node} not Ready after {self.ready_timeout:.0f}s")

    # -- stop / start ------------------------------------------------------------------------------
    # Workload clusters keep running meanwhile (unmanaged, as through a dockerd restart); stop them first with
    # `capd-py stop cluster` for a whole laptop shutdown. In-cluster controllers stop and start with the node.
    def stop(self, stop_timeout: float = 10.0) -> None:
        st, marker = self.steps, power_path(self.name)
        if self.exists() is None:
            raise ManagementError(f"management cluster {self.name!r} does not exist ({self.node})")
        if not marker.exists():  # the intent first: what must come back at start
            host = controllers_pid(self.name) is not None
            write_private(marker, f"state=stopped\ncontrollers={'host' if host else 'none'}\n")
        with st.step("Stopping the controllers ⏹"):
            stop_controllers(self.name)
        with st.step(f"Stopping {self.node} ⏹"):
            self.rt.stop_container(self.node, stop_timeout)

    def _api_ready(self) -> bool | None:
        r = self.rt.exec(self.node, ["kubectl", "--kubeconfig=/etc/kubernetes/admin.conf", "get", "--raw",
                                     "/readyz"], timeout=10)
        return True if r.exit_code == 0 and r.output.strip() == "ok" else None

    def start(self) -> None:
        st, marker = self.steps, power_path(self.name)
        info = self.exists()
        if info is None:
            raise ManagementError(f"management cluster {self.name!r} does not exist ({self.node})")
        fields = dict(line.split("=", 1) for line in marker.read_text().splitlines() if "=" in line) \
            if marker.exists() else {}
        with st.step(f"Starting {self.node} ▶"):
            if info.status == "paused":
                self.rt.unpause_container(self.node)
            elif not info.running:
                self.rt.start_container(self.node)
        with st.step("Waiting for the API server ⏳"):
            if not poll(self._api_ready, self.ready_timeout, 0.5):
                raise ManagementError(f"the API server of {self.node} not ready after {self.ready_timeout:.0f}s")
        if fields.get("controllers") == "host":
            with st.step("Starting the controllers 🎮"):
                start_controllers(self.kubeconfig, self.name)
                # as init: writes of capd-py's kinds go through their admission webhook, ready once it listens
                wait_webhook(installed_webhook_url(self.kubeconfig))
        marker.unlink(missing_ok=True)

    # -- delete ----------------------------------------------------------------------------------
    def delete(self) -> bool:
        """Remove the controllers process, every container and volume of this management cluster."""
        found = stop_controllers(self.name)
        for c in self.rt.list_containers(labels={MANAGEMENT_LABEL: self.name}):
            self.rt.remove_container(c.name)
            found = True
        if self.rt.get_container(self.node):
            self.rt.remove_container(self.node)
            found = True
        found = remove_volumes(self.rt, {MANAGEMENT_LABEL: self.name}) or found
        net = self.rt.get_network(self.network)
        if net and net.labels.get(CONTAINER_MANAGED) == "true":
            try:  # shared with workload clusters on it (DOCKER_NETWORK): then it stays
                self.rt.remove_network(self.network)
            except RuntimeError_:
                pass
        if self.kubeconfig.exists():
            self.kubeconfig.unlink()
            found = True
        power_path(self.name).unlink(missing_ok=True)
        return found


def kubeadm_config(node: str, ip: str, version: str, pod_subnet: str = POD_SUBNET,
                   service_subnet: str = SERVICE_SUBNET) -> str:
    """kubeadm v1beta4 + kubelet + kube-proxy configuration for a single node in a container (kind's
    choices, with cgroup v1 allowed, as this host needs)."""
    docs: list[dict[str, Any]] = [
        {"apiVersion": "kubeadm.k8s.io/v1beta4", "kind": "ClusterConfiguration",
         "kubernetesVersion": version, "clusterName": node.removesuffix("-control-plane"),
         "controlPlaneEndpoint": f"{ip}:{API_PORT}",
         "apiServer": {"certSANs": ["localhost", "127.0.0.1", "0.0.0.0", node, ip, "host.docker.internal"]},
         "controllerManager": {"extraArgs": [{"name": "enable-hostpath-provisioner", "value": "true"}]},
         "networking": {"podSubnet": pod_subnet, "serviceSubnet": service_subnet}},
        {"apiVersion": "kubeadm.k8s.io/v1beta4", "kind": "InitConfiguration",
         "localAPIEndpoint": {"advertiseAddress": ip, "bindPort": API_PORT},
         "nodeRegistration": {"name": node, "criSocket": "unix:///run/containerd/containerd.sock",
                              "kubeletExtraArgs": [{"name": "node-ip", "value": ip}]}},
        {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
         "cgroupDriver": CGROUP_DRIVER, "cgroupRoot": "/kubelet", "failSwapOn": False, "failCgroupV1": False,
         "imageGCHighThresholdPercent": 100,
         "evictionHard": {"nodefs.available": "0%", "nodefs.inodesFree": "0%", "imagefs.available": "0%"}},
        {"apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration", "mode": "iptables",
         "iptables": {"minSyncPeriod": "1s"}, "conntrack": {"maxPerCore": 0}},
    ]
    return "# generated by capd-py\n" + yaml.safe_dump_all(docs, sort_keys=False)


def remove_volumes(runtime: ContainerRuntime, labels: dict[str, str]) -> bool:
    """Docker volumes by label (a volume still in use stays). Returns whether any was removed."""
    found = False
    for v in runtime.list_volumes(labels):
        try:
            runtime.remove_volume(v)
            found = True
        except RuntimeError_:
            pass
    return found


# -- CRDs -----------------------------------------------------------------------------------------

def install_crds(kubeconfig: str | Path, timeout: float = 120, webhook_url: str | None = None,
                 webhook_service: bool = False) -> None:
    """The CRDs; with `webhook_url` (host mode) or `webhook_service` (in-cluster) serving v1beta1 too, converted
    by the controllers' webhook: its certificate Secret is made first (once), its CA goes into every caBundle, and
    upstream's defaulting/validating admission webhooks with it (kube/admission_webhook.py). Then upstream
    clusterctl's provider inventory (kube/inventory.py), so clusterctl works against the cluster."""
    from capd_py.kube import admission_webhook, components, crds, inventory
    from capd_py.kube import conversion_webhook as cw
    from capd_py.kube.client import Kube, KubeError
    from capd_py.reconcile import servingcert

    async def go(kube: Kube) -> None:
        manifests = None
        admission: list[dict[str, Any]] = []
        if webhook_url or webhook_service:
            hosts = servingcert.url_hosts(webhook_url) if webhook_url else servingcert.service_hosts()
            cert = await cw.ensure_cert(kube, hosts)
            service = components.webhook_service()
            manifests = cw.crds_serving_v1beta1(cw.webhook_conversion(
                cert.ca.cert, url=webhook_url, service=None if webhook_url else service))
            admission = admission_webhook.configurations(
                cert.ca.cert, url=webhook_url, service=None if webhook_url else service)
        await crds.install_crds(kube, wait=True, timeout=timeout, crds=manifests)
        # defaulting + validating webhooks (failurePolicy Fail) go with the conversion webhook: the same server
        # answers both; without it (v1beta2 only) nothing would answer, so none are left behind
        if admission:
            await admission_webhook.install(kube, admission)
        else:
            await admission_webhook.remove(kube)
        await inventory.install(kube, timeout=timeout)

    kube = Kube.from_kubeconfig(str(kubeconfig))
    try:
        asyncio.run(go(kube))
    except TimeoutError as e:
        raise ManagementError(f"CRDs not Established: {e}") from None
    except KubeError as e:
        raise ManagementError(f"installing the CRDs failed: {e}") from None
    finally:
        kube.close()


def host_webhook_url(kubeconfig: str | Path, address: str) -> str:
    """Host mode: the URL the management API server dials for conversions, on `address` (the `capd-py` network's
    gateway, the host as the node container sees it). The one the CRDs name already when it is on that address
    (a re-run of init, controllers maybe serving it), else port 9443, or a free port when something else holds it
    (another management cluster's controllers on the same network)."""
    from urllib.parse import urlsplit

    from capd_py.reconcile import servingcert

    url = installed_webhook_url(kubeconfig)
    if url and urlsplit(url).hostname == address:
        return url
    return servingcert.host_mode_url(address, _bindable_port(address, servingcert.DEFAULT_PORT))


def wait_webhook(url: str | None, timeout: float = 60.0) -> None:
    """Until the webhook at `url` accepts connections (the controllers' server is up); ManagementError after
    `timeout` seconds naming it."""
    import socket
    from urllib.parse import urlsplit

    if not url:
        return
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 443

    def listening() -> bool:
        try:
            with socket.create_connection((host, port), timeout=2):
                return True
        except OSError:
            return False
    if poll(lambda: True if listening() else None, timeout, 0.25) is None:
        raise ManagementError(f"the controllers' webhook at {url} does not answer after {timeout:.0f}s; see "
                              "the controllers log")


def installed_webhook_url(kubeconfig: str | Path) -> str | None:
    """The conversion webhook URL the installed CRDs name (None: not installed, v1beta2 only, or a Service)."""
    from capd_py.kube import conversion_webhook as cw
    from capd_py.kube.client import Kube, KubeError

    kube = Kube.from_kubeconfig(str(kubeconfig))
    try:
        conversion = asyncio.run(cw.served_conversion(kube)) or {}
    except KubeError as e:
        raise ManagementError(f"reading the installed CRDs failed: {e}") from None
    finally:
        kube.close()
    return str(((conversion.get("webhook") or {}).get("clientConfig") or {}).get("url") or "") or None


def _bindable_port(address: str, preferred: int) -> int:
    import socket

    for port in (preferred, 0):
        with socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET) as s:
            try:
                s.bind((address, port))
            except OSError:
                continue
            return int(s.getsockname()[1])
    raise ManagementError(f"cannot listen on {address} (the {address} address is not on this host?)")


# -- controllers as a host process ------------------------------------------------------------------

def _is_our_controllers(pid: int) -> bool:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"controllers" in cmd and any(b"capd_py" in c or b"capd-py" in c for c in cmd)


def controllers_pid(name: str = DEFAULT_NAME) -> int | None:
    p = pid_path(name)
    try:
        pid = int(p.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if pid_alive(pid) and _is_our_controllers(pid) else None


def start_controllers(kubeconfig: str | Path, name: str = DEFAULT_NAME, extra_args: list[str] | None = None,
                      wait: float = 10.0) -> int:
    """Start `capd-py controllers` in the background (own session, logs to a file, a pid file)."""
    running = controllers_pid(name)
    if running:
        return running
    log = log_path(name)
    log.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "capd_py.cli", "controllers", "--kubeconfig", str(kubeconfig), *(extra_args or [])]
    env = dict(os.environ)
    env.setdefault("CAPD_PY_PRIVILEGED_MODE", privileged_mode())
    env["CAPD_PY_FEATURE_GATES"] = feature_gates(env)
    with open(log, "ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=env, cwd=str(Path.home()))
    pid_path(name).write_text(f"{proc.pid}\n")
    # crash-on-start (bad kubeconfig, import error) is reported now: watch it for `wait` seconds
    if poll(proc.poll, wait, 0.25) is not None:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
        raise ManagementError(f"controllers exited with {proc.returncode} right after start; {log}:\n{tail}")
    return proc.pid


def stop_controllers(name: str = DEFAULT_NAME, timeout: float = 15) -> bool:
    pid = controllers_pid(name)
    pid_path(name).unlink(missing_ok=True)
    if not pid:
        return False
    os.kill(pid, signal.SIGTERM)

    def gone() -> bool | None:
        try:
            os.waitpid(pid, os.WNOHANG)  # reap it when it is our child
        except ChildProcessError:
            pass
        return None if pid_alive(pid) else True
    poll(gone, timeout, 0.2)
    if pid_alive(pid):
        os.kill(pid, signal.SIGKILL)
    return True


# -- controllers in the cluster -----------------------------------------------------------------------

def controllers_image_tag() -> str:
    from capd_py.kube.components import DEFAULT_IMAGE

    return os.environ.get("CAPD_PY_CONTROLLERS_IMAGE", DEFAULT_IMAGE)


def build_controllers_image(runtime: ContainerRuntime, tag: str | None = None) -> str:
    """Build images/controllers: a wheelhouse of capd-py + dependencies made by the host's pip, then an
    image build FROM the local capd-py/base image (no image pulls, no package index in the build); capd-py's own
    wheel goes in a directory of its own, installed in the last layer."""
    import shutil
    import tempfile

    tag = tag or controllers_image_tag()
    bases = runtime.list_images("capd-py/base")
    if not bases:
        raise ManagementError("no capd-py/base image; build it with images/base/build.sh")
    dockerfile = REPO_ROOT / "images" / "controllers" / "Dockerfile"
    if not dockerfile.exists():
        raise ManagementError(f"{dockerfile} not found (--in-cluster needs a source checkout)")
    ctx = Path(tempfile.mkdtemp(prefix="capd-py-controllers-"))
    try:
        shutil.copy(dockerfile, ctx / "Dockerfile")
        w = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--wheel-dir", str(ctx / "wheels"),
                            str(REPO_ROOT)], capture_output=True, text=True)
        if w.returncode != 0:
            raise ManagementError(f"building wheels failed:\n{w.stderr[-3000:]}")
        # capd-py's wheel apart from its dependencies' (images/controllers/Dockerfile: their layers are reused)
        own = ctx / "capd-py-wheel"
        own.mkdir()
        for wheel in (ctx / "wheels").glob("capd_py-*.whl"):
            wheel.rename(own / wheel.name)
        try:
            runtime.build_image(str(ctx), tag, {"BASE": bases[-1]})
        except RuntimeError_ as e:
            raise ManagementError(str(e)) from None
    finally:
        shutil.rmtree(ctx, ignore_errors=True)
    return tag


def load_image_into_node(runtime: ContainerRuntime, node: str, tag: str) -> None:
    """`docker save | ctr import` into the node's containerd (what `kind load docker-image` does)."""
    try:
        tarball = runtime.save_image(tag)
    except RuntimeError_ as e:
        raise ManagementError(f"saving {tag} failed: {e}") from None
    r = runtime.exec(node, ["ctr", "--namespace=k8s.io", "images", "import", "--all-platforms", "-"],
                     stdin=tarball, timeout=600)
    if r.exit_code != 0:
        raise ManagementError(f"importing {tag} into {node} failed: {r.output[-500:]}")


def feature_gates(env: dict[str, str] | None = None) -> str:
    """The controllers' `--feature-gates`: CAPD_PY_FEATURE_GATES, then clusterctl's variables (EXP_MACHINE_POOL,
    CLUSTER_TOPOLOGY, EXP_MACHINE_TAINT_PROPAGATION, ...) as `clusterctl init` reads them; ManagementError names a
    bad value or a gate capd-py cannot honour."""
    env = dict(os.environ) if env is None else env
    text = ",".join(p for p in (env.get("CAPD_PY_FEATURE_GATES", "").strip(), features.from_variables(env)) if p)
    try:
        return features.render(features.parse(text))
    except ValueError as e:
        raise ManagementError(f"feature gates: {e}") from e


def network_pool() -> tuple[subnets.PoolRange, ...]:
    """CAPD_PY_NETWORK_POOL, or the default; ManagementError names a bad value."""
    try:
        return subnets.parse_pool(os.environ.get("CAPD_PY_NETWORK_POOL") or subnets.DEFAULT_POOL)
    except ValueError as e:
        raise ManagementError(str(e)) from e


def in_cluster_manifest(image: str, privileged: str, network: str = "capd-py",
                        pool: tuple[subnets.PoolRange, ...] | None = None, gates: str = "") -> str:
    from capd_py.kube.components import controllers_manifest

    pool_text = ",".join(str(p) for p in (pool or subnets.parse_pool(subnets.DEFAULT_POOL)))
    # clusterctl's variable for upstream CAPD's DOCKER_NETWORK, as `clusterctl init` would substitute it
    return controllers_manifest(image, privileged, network, pool_text, gates,
                                json.dumps(os.environ.get("CAPD_DOCKER_NETWORK", "")))


def deploy_in_cluster(m: ManagementCluster) -> None:
    """Build the controllers image, load it into the node, apply the Deployment + RBAC, wait for it."""
    tag = build_controllers_image(m.rt)
    load_image_into_node(m.rt, m.node, tag)
    manifest = in_cluster_manifest(tag, privileged_mode(), m.network, network_pool(), feature_gates())
    m.rt.write_file(m.node, "/kind/manifests/capd-py-controllers.yaml", manifest.encode())
    kc = ["kubectl", "--kubeconfig=/etc/kubernetes/admin.conf"]
    m._exec([*kc, "apply", "-f", "/kind/manifests/capd-py-controllers.yaml"], what="applying the controllers")
    m._exec([*kc, "-n", "capd-py-system", "rollout", "status", "deployment/capd-py-controllers", "--timeout=180s"],
            timeout=200, what="waiting for the controllers Deployment")
