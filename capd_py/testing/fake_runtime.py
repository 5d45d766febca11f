"""An in-memory ContainerRuntime for unit tests and benchmarks. Thread-safe (callers use to_thread).

- Records every exec as (container, argv) in `execs`.
- `exec_results`: a list of (substring, ExecResult); the first whose substring occurs in the joined argv
  answers that exec. Defaults: `systemctl is-system-running` -> "running"; everything else exit 0.
- Files live in a per-container dict (`files[name][path]`); write_file/read_file use it, and so do the
  bootstrap script conventions: when an exec carries the launch tag `capd-py-bootstrap-launch`, the
  fake "runs" the script whose header line (`# capd-py-bootstrap done=... rc=... log=... lock=...`)
  names where the outcome goes. It succeeds unless a `fail_bootstrap_on` substring occurs in any file
  of the container, in which case it records a failure of step 1 with exit code 1.
- Images: `images` holds local references (`all_images`: every reference exists); `build_image` adds the
  tag and records the build in `builds`; `save_image` returns a small stand-in tarball naming the reference
  and its ID (`image_id`: `image_ids[ref]`, else derived from the reference) and counts it in `saves`.
- Each container has a containerd (`ctr_images[name]`: containerd image name -> config digest) answering
  `ctr --namespace=k8s.io images ls` / `content get` / `images import -` (stand-in tarballs) as the node's does.
- Volumes: `volumes[name]` is the volume's labels; node containers get one, removed with the container.
- Label selection (containers, networks, volumes): a wanted value of "" matches any value.
- `probe`-style shell commands (`if [ -f <done> ]; ...`) are answered from the files too.
"""

from __future__ import annotations

import hashlib
import ipaddress
import itertools
import json
import re
import shlex
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from capd_py.reconcile import addresses, imageload
from capd_py.reconcile.cloudinit import LAUNCH_TAG
from capd_py.runtime.protocol import (
    ContainerInfo,
    ContainerSpec,
    ExecResult,
    HostCapacity,
    NetworkGone,
    NetworkInfo,
    RuntimeError_,
    SubnetTaken,
)

__all__ = ["LAUNCH_TAG", "FakeRuntime"]
_TARBALL = re.compile(r"^fake image tarball of (\S+) (\S+)$", re.M)
_HEADER = re.compile(r"^# capd-py-bootstrap done=(\S+) rc=(\S+) log=(\S+) lock=(\S+)", re.M)


def _selected(have: dict[str, str] | None, want: dict[str, str] | None) -> bool:
    """The Protocol's label selection: every wanted key present; a wanted value of "" matches any value."""
    have = have or {}
    return all(k in have and (v == "" or have[k] == v) for k, v in (want or {}).items())


@dataclass
class _Container:
    info: ContainerInfo
    spec: ContainerSpec
    files: dict[str, bytes] = field(default_factory=dict)
    volumes: list[str] = field(default_factory=list)
    signals: list[str] = field(default_factory=list)


class FakeRuntime:
    def __init__(self, images: set[str] | None = None, all_images: bool = True):
        self.images = set(images or ())
        self.all_images = all_images and images is None
        self.containers: dict[str, _Container] = {}
        self.networks: dict[str, NetworkInfo] = {}
        self.volumes: dict[str, dict[str, str]] = {}
        self.execs: list[tuple[str, list[str]]] = []
        self.exec_results: list[tuple[str, ExecResult]] = []
        self.exec_hook: Callable[[str, list[str], bytes | None], ExecResult | None] | None = None
        self.fail_bootstrap_on: list[str] = []
        self.systemd_ready = True
        self.created: list[str] = []      # names passed to run_container, in order (duplicates visible)
        self.builds: list[tuple[str, str, dict[str, str]]] = []  # (context dir, tag, build args) per build_image
        self.image_ids: dict[str, str] = {}
        self.saves: list[str] = []       # references passed to save_image, in order
        self.loads: list[str] = []       # references load_image brought in, in order
        self.ctr_images: dict[str, dict[str, str]] = {}
        self._lock = threading.RLock()
        self.storage: dict[str, dict[str, str]] = {}   # storage_paths' answers
        self._ids = itertools.count(1)
        self._nets = itertools.count(20)
        self.routes: list[str] = []      # what host_routes() answers
        self.bridge_routes: list[str] = []   # and these too unless asked without docker's bridges' routes
        self.capacity = HostCapacity(cpus=4, memory_bytes=8 * 1024 ** 3)  # what host_capacity() answers

    # -- helpers for tests ----------------------------------------------------------------------
    def files(self, name: str) -> dict[str, bytes]:
        return self.containers[name].files

    def signals(self, name: str) -> list[str]:
        return self.containers[name].signals

    def set_status(self, name: str, status: str) -> None:
        with self._lock:
            c = self.containers[name]
            c.info = replace(c.info, status=status)

    # -- protocol -------------------------------------------------------------------------------
    def ping(self) -> None:
        return None

    def host_capacity(self) -> HostCapacity:
        return self.capacity

    def image_exists(self, ref: str) -> bool:
        return self.all_images or ref in self.images

    def list_containers(self, labels: dict[str, str] | None = None,
                        network: str | None = None) -> list[ContainerInfo]:
        with self._lock:
            return [c.info for c in self.containers.values() if _selected(c.info.labels, labels)
                    and (network is None or c.spec.network == network)]

    def get_container(self, name: str) -> ContainerInfo | None:
        with self._lock:
            c = self.containers.get(name)
            return c.info if c else None

    def run_container(self, spec: ContainerSpec) -> ContainerInfo:
        return self._make(spec, "running")

    def create_container(self, spec: ContainerSpec) -> ContainerInfo:
        return self._make(spec, "created")

    def container_spec(self, name: str) -> ContainerSpec | None:
        with self._lock:
            c = self.containers.get(name)
            if c is None:
                return None
            ports = tuple(replace(p, host_port=c.info.ports.get(p.container_port, p.host_port)) for p in c.spec.ports)
            return replace(c.spec, ports=ports)

    def _make(self, spec: ContainerSpec, status: str) -> ContainerInfo:
        with self._lock:
            self.created.append(spec.name)
            if spec.name in self.containers:
                raise RuntimeError_(f"container name {spec.name} already in use")
            if not self.image_exists(spec.image):
                raise RuntimeError_(f"image {spec.image} not found locally (capd-py never pulls)")
            n = next(self._ids)
            ipv4: dict[str, str] = {}
            ipv6: dict[str, str] = {}
            if spec.network:
                net = self.networks.get(spec.network)
                if net is None:  # as docker says it (runtime/docker_runtime.py)
                    raise NetworkGone(f"start container {spec.name}: network {spec.network} not found")
                if spec.ipv4:
                    if not addresses.in_static_range(net, spec.ipv4):
                        raise RuntimeError_(f"address {spec.ipv4} is not a static address of {spec.network}")
                    if any(spec.ipv4 in addresses.taken_addresses([o.info], spec.network)
                           for o in self.containers.values()):
                        raise RuntimeError_(f"start container {spec.name}: Address already in use")
                    ipv4[spec.network] = spec.ipv4
                else:  # dynamic: from the upper half, like docker's ip-range
                    ipv4[spec.network] = _dynamic_address(net, n)
                if net.subnet6:
                    ipv6[spec.network] = spec.ipv6 or addresses.paired_ipv6(net, ipv4[spec.network])
            ports = {p.container_port: p.host_port or 40000 + n for p in spec.ports}
            info = ContainerInfo(id=f"fake{n:060d}", name=spec.name, image=spec.image, status=status,
                                 labels=dict(spec.labels), ipv4=ipv4, ipv6=ipv6, ports=ports,
                                 static_ipv4={spec.network: spec.ipv4} if spec.ipv4 else {})
            c = _Container(info=info, spec=spec)
            if spec.node:
                vol = f"vol{n:060d}"
                self.volumes[vol] = dict(spec.labels)
                c.volumes.append(vol)
            self.containers[spec.name] = c
            return info

    def start_container(self, name: str) -> None:
        with self._lock:
            if name not in self.containers:
                raise RuntimeError_(f"no container {name}")
            self.set_status(name, "running")

    def stop_container(self, name: str, timeout: float = 10.0) -> None:
        with self._lock:
            if name not in self.containers:
                raise RuntimeError_(f"no container {name}")
            if self.containers[name].info.status != "exited":
                self.set_status(name, "exited")

    def pause_container(self, name: str) -> None:
        with self._lock:
            c = self.containers.get(name)
            if c is None or c.info.status not in ("running", "paused"):
                raise RuntimeError_(f"container {name} is not running")
            self.set_status(name, "paused")

    def unpause_container(self, name: str) -> None:
        with self._lock:
            c = self.containers.get(name)
            if c is None or c.info.status not in ("running", "paused"):
                raise RuntimeError_(f"container {name} is not running")
            self.set_status(name, "running")

    def storage_paths(self, name: str) -> dict[str, str]:
        # a test that snapshots gives each container real folders here (container name -> {mount: path})
        with self._lock:
            if name not in self.containers:
                raise RuntimeError_(f"no container {name}")
            paths = self.storage.get(name)
            if paths is None:
                raise RuntimeError_(f"{name}: the fake runtime has no storage folders for it")
            return dict(paths)

    def remove_container(self, name: str) -> None:
        with self._lock:
            c = self.containers.pop(name, None)
            if c:
                for v in c.volumes:
                    self.volumes.pop(v, None)

    def kill(self, name: str, signal: str = "SIGHUP") -> None:
        with self._lock:
            c = self.containers.get(name)
            if c is None or not c.info.running:
                raise RuntimeError_(f"container {name} is not running")
            c.signals.append(signal)

    def exec(self, name: str, cmd: list[str], stdin: bytes | None = None,
             timeout: float | None = None) -> ExecResult:
        with self._lock:
            c = self.containers.get(name)
            if c is None or not c.info.running:
                raise RuntimeError_(f"container {name} is not running")
            self.execs.append((name, list(cmd)))
            if self.exec_hook:
                r = self.exec_hook(name, list(cmd), stdin)
                if r is not None:
                    return r
            joined = shlex.join(cmd)
            for sub, res in self.exec_results:
                if sub in joined:
                    return res
            if tuple(cmd[:2]) == imageload.CTR:
                return self._ctr(name, cmd[2:], stdin)
            if "systemctl is-system-running" in joined:
                return ExecResult(0, "running\n" if self.systemd_ready else "starting\n")
            if LAUNCH_TAG in cmd:
                return self._launch(c)
            if len(cmd) >= 3 and cmd[0] == "sh" and cmd[2].startswith("if [ -f ") and "---" in cmd[2]:
                return self._probe(c, cmd[2])
            return ExecResult(0, "")

    @staticmethod
    def _manifest_digest(config: str) -> str:
        return "sha256:" + hashlib.sha256(f"manifest of {config}".encode()).hexdigest()

    def _ctr(self, name: str, args: list[str], stdin: bytes | None) -> ExecResult:
        have = self.ctr_images.setdefault(name, {})
        if args[:2] == ["images", "ls"]:
            rows = [f"{ref} application/vnd.docker.distribution.manifest.v2+json {self._manifest_digest(cfg)} "
                    "1.0 MiB linux/amd64 -" for ref, cfg in sorted(have.items())]
            return ExecResult(0, "\n".join(["REF TYPE DIGEST SIZE PLATFORMS LABELS", *rows]) + "\n")
        if args[:2] == ["content", "get"] and len(args) == 3:
            for cfg in have.values():
                if self._manifest_digest(cfg) == args[2]:
                    return ExecResult(0, json.dumps({"schemaVersion": 2, "config": {"digest": cfg}}))
            return ExecResult(1, f"ctr: {args[2]}: not found\n")
        if args[:2] == ["images", "import"]:
            found = _TARBALL.findall((stdin or b"").decode("utf-8", "replace"))
            if not found:
                return ExecResult(1, "ctr: unrecognized image format\n")
            for ref, iid in found:
                have[imageload.normalize(ref)] = iid
            return ExecResult(0, "".join(f"unpacking {imageload.normalize(r)} ({i})...done\n" for r, i in found))
        return ExecResult(0, "")

    def _script(self, c: _Container) -> tuple[str, tuple[str, ...]] | None:
        for path, data in c.files.items():
            m = _HEADER.search(data.decode("utf-8", "replace"))
            if m:
                return path, m.groups()
        return None

    def _launch(self, c: _Container) -> ExecResult:
        found = self._script(c)
        if found is None:
            return ExecResult(2, "no bootstrap script")
        _, (done, rc, log, lock) = found
        if lock in c.files:
            return ExecResult(0, "already\n")
        c.files[lock] = b""
        bad = [s for s in self.fail_bootstrap_on if any(s.encode() in d for d in c.files.values())]
        if bad:
            c.files[log] = f"[capd-py] step 1: simulated failure on {bad[0]}\nboom: {bad[0]}\n".encode()
            c.files[rc] = b"1 1\n"
        else:
            c.files[log] = b"[capd-py] bootstrap succeeded\n"
            c.files[done] = b"success\n"
        return ExecResult(0, "launched\n")

    def _probe(self, c: _Container, sh: str) -> ExecResult:
        found = self._script(c)
        paths = re.findall(r"\[ -[fd] (\S+) \]", sh)
        done, rc, lock = (paths + ["", "", ""])[:3]
        log = found[1][2] if found else ""
        tail = c.files.get(log, b"").decode("utf-8", "replace")
        if done in c.files:
            head = "done"
        elif rc in c.files:
            head = "failed " + c.files[rc].decode().strip()
        elif lock in c.files:
            head = "running 0 0"
        else:
            head = "none"
        return ExecResult(0, f"{head}\nstep \n---\n{tail}")

    def write_file(self, name: str, path: str, content: bytes, mode: int = 0o644) -> None:
        with self._lock:
            c = self.containers.get(name)
            if c is None or not c.info.running:
                raise RuntimeError_(f"container {name} is not running")
            c.files[path] = bytes(content)

    def read_file(self, name: str, path: str) -> bytes | None:
        with self._lock:
            c = self.containers.get(name)
            if c is None or not c.info.running:
                raise RuntimeError_(f"container {name} is not running")
            return c.files.get(path)

    def logs(self, name: str, tail: int = 200) -> str:
        return "Reached target Multi-User System.\n" if name in self.containers else ""

    def create_network(self, name: str, labels: dict[str, str], subnet: str, subnet6: str = "") -> NetworkInfo:
        with self._lock:
            if name in self.networks:
                return self.networks[name]
            mine = [ipaddress.ip_network(s, strict=False) for s in (subnet, subnet6) if s]
            for other in self.networks.values():
                if any(a.version == b.version and a.overlaps(b)  # type: ignore[arg-type]
                       for a in mine for b in (ipaddress.ip_network(o, strict=False)
                                               for o in other.subnets or (other.subnet,) if o)):
                    raise SubnetTaken(f"create network {name}: Pool overlaps with other one on this address space")
            n = next(self._nets)
            net = mine[0]
            self.networks[name] = NetworkInfo(name=name, id=f"net{n:061d}", subnet=str(net),
                                              gateway=addresses.first_host(str(net)), labels=dict(labels),
                                              ip_range=addresses.dynamic_range(str(net)),
                                              subnets=tuple(str(m) for m in mine))
            return self.networks[name]

    def host_routes(self, image: str = "", docker_bridges: bool = True) -> list[str]:
        return [*self.routes, *(self.bridge_routes if docker_bridges else ())]

    def get_network(self, name: str) -> NetworkInfo | None:
        return self.networks.get(name)

    def remove_network(self, name: str) -> None:
        with self._lock:
            if any(name in c.info.ipv4 for c in self.containers.values()):
                raise RuntimeError_(f"network {name} has active endpoints")
            self.networks.pop(name, None)

    def list_networks(self, labels: dict[str, str] | None = None) -> list[NetworkInfo]:
        return [n for n in self.networks.values() if _selected(n.labels, labels)]

    def connect_network(self, network: str, container: str) -> None:
        with self._lock:
            net = self.networks.get(network)
            c = self.containers.get(container)
            if net is None or c is None:
                what = "network" if net is None else "container"
                raise RuntimeError_(f"connect {container} to {network}: no such {what}")
            if network not in c.info.ipv4:
                n = int(c.info.id.removeprefix("fake"))
                ipv4 = {**c.info.ipv4, network: _dynamic_address(net, n)}
                c.info = replace(c.info, ipv4=ipv4)

    def disconnect_network(self, network: str, container: str) -> None:
        with self._lock:
            c = self.containers.get(container)
            if c is not None and network in c.info.ipv4:
                c.info = replace(c.info, ipv4={k: v for k, v in c.info.ipv4.items() if k != network})

    def list_volumes(self, labels: dict[str, str] | None = None) -> list[str]:
        return sorted(v for v, lb in self.volumes.items() if _selected(lb, labels))

    def remove_volume(self, name: str) -> None:
        with self._lock:
            if any(name in c.volumes for c in self.containers.values()):
                raise RuntimeError_(f"volume {name} is in use")
            self.volumes.pop(name, None)

    def list_images(self, repository: str) -> list[str]:
        return sorted(i for i in self.images if i.rpartition(":")[0] == repository)

    def build_image(self, context_dir: str, tag: str, build_args: dict[str, str] | None = None) -> None:
        with self._lock:
            self.builds.append((context_dir, tag, dict(build_args or {})))
            self.images.add(tag)

    def save_image(self, ref: str) -> bytes:
        iid = self.image_id(ref)
        if iid is None:
            raise RuntimeError_(f"image {ref} not found locally")
        with self._lock:
            self.saves.append(ref)
        return f"fake image tarball of {ref} {iid}".encode()

    def save_image_chunks(self, ref: str) -> Iterator[bytes]:
        data = self.save_image(ref)
        yield data[:10]
        yield data[10:]

    def load_image(self, chunks: Iterable[bytes]) -> None:
        """Loads a stand-in tarball of `save_image` (of this or another fake): its reference and ID appear."""
        text = b"".join(chunks).decode()
        if not text.startswith("fake image tarball of "):
            raise RuntimeError_("loading image: not a tarball of a FakeRuntime")
        ref, iid = text.removeprefix("fake image tarball of ").split(" ")
        with self._lock:
            self.images.add(ref)
            self.image_ids[ref] = iid
            self.loads.append(ref)

    def image_id(self, ref: str) -> str | None:
        if not self.image_exists(ref) and ref not in self.image_ids:
            return None
        return self.image_ids.get(ref) or "sha256:" + hashlib.sha256(ref.encode()).hexdigest()

    def inspect_container(self, name: str) -> dict[str, Any] | None:
        with self._lock:
            c = self.containers.get(name)
            return {"Id": c.info.id, "Name": f"/{name}", "Config": {"Image": c.info.image, "Labels": c.info.labels},
                    "State": {"Status": c.info.status}, "capd-py-fake": asdict(c.info)} if c else None


def _dynamic_address(net: NetworkInfo, n: int) -> str:
    """The n-th address of the network's dynamic range (docker's ip-range; the subnet's upper half without one)."""
    dyn = ipaddress.ip_network(net.ip_range or addresses.dynamic_range(net.subnet), strict=False)
    return str(dyn.network_address + 2 + n % (dyn.num_addresses - 3))
