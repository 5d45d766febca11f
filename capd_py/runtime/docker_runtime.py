"""`ContainerRuntime` over the `docker` SDK (blocking; async callers use asyncio.to_thread).

Node containers are systemd machines: tmpfs /run and /tmp, an anonymous volume for /var (labelled like
the container so leftovers can be found), /lib/modules read-only and the host cgroup tree. Two privilege
modes:
- "privileged": `--privileged` (real laptops / CI hosts);
- "restricted": every capability except SYS_RESOURCE, unconfined seccomp/apparmor/systempaths and a
  device cgroup rule allowing all devices, for sandboxes where `--privileged` is refused.
Nothing is ever pulled: a missing image is reported, not fetched.

Addresses that survive restarts: networks are made with an explicit subnet (capd-py chooses it, see
capd_py/runtime/networks.py) whose upper half is docker's dynamic range, so containers can be created with a
static address in the lower half (capd_py/reconcile/addresses.py); a published port asked for as 0 is pinned to a
concrete free port at creation, so docker does not choose another one at the next start.
"""

from __future__ import annotations

import base64
import logging
import os
import posixpath
import socket
import struct
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import Any

import docker
import docker.errors
from docker.types import IPAMConfig, IPAMPool
from docker.types import Mount as DockerMount
from tenacity import Retrying, retry_if_result, stop_after_delay, wait_fixed

from capd_py.api.containers import (
    CGROUP_MOUNT,
    RESTRICTED_CAP_ADD,
    RESTRICTED_CAP_DROP,
    RESTRICTED_DEVICE_CGROUP_RULES,
    RESTRICTED_SECURITY_OPT,
)
from capd_py.reconcile import addresses
from capd_py.runtime import hostroutes
from capd_py.runtime.protocol import (
    ContainerInfo,
    ContainerSpec,
    DaemonUnreachable,
    ExecResult,
    HostCapacity,
    Mount,
    NetworkGone,
    NetworkInfo,
    PortMapping,
    RuntimeError_,
    SubnetTaken,
)

log = logging.getLogger("capd_py.runtime.docker")
# how long the docker host's routes read by a helper container are used (a route appears when a network is made;
# docker's own networks are listed anyway, so only foreign routes - a VPN, another daemon's bridge - may be late)
ROUTES_TTL = 60.0
# the label of capd-py's short-lived helper containers (removed when they exit)
HELPER_LABEL = "io.x-k8s.capd-py.helper"
_ROUTES_SEPARATOR = "--- ipv6_route ---"
_ROUTES_SCRIPT = f"cat /proc/net/route; echo '{_ROUTES_SEPARATOR}'; cat /proc/net/ipv6_route 2>/dev/null; true"
# how many free host ports are tried when the one picked was taken between the pick and the start
PORT_ATTEMPTS = 5


def _free_port(host_ip: str) -> int:
    """A port nothing listens on at `host_ip` now (what kind does for its API server port)."""
    with socket.socket(socket.AF_INET6 if ":" in host_ip else socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host_ip or "127.0.0.1", 0))
        return int(s.getsockname()[1])


def _container_error(what: str, network: str, e: docker.errors.APIError) -> RuntimeError_:
    """The error of a failed container create/start: NetworkGone when docker says the container's network does not
    exist (removed by another process since the caller made sure of it)."""
    text = f"{what}: {e.explanation or e}"
    if network and f"network {network} not found" in str(e.explanation or e):
        return NetworkGone(text)
    return RuntimeError_(text)


def _port_taken(e: Exception) -> bool:
    # not docker's "Address already in use" for a static IP another container holds: only a host port
    text = str(e)
    return "port is already allocated" in text or "bind: address already in use" in text


def _label_filters(labels: dict[str, str] | None) -> dict[str, Any]:
    if not labels:
        return {}
    return {"label": [f"{k}={v}" if v != "" else k for k, v in labels.items()]}


# what `_host_config` adds to every node container itself (ContainerSpec.node): not part of spec.mounts
_NODE_TMPFS = ("/tmp", "/run")
_NODE_MOUNTS = ("/var", "/lib/modules", CGROUP_MOUNT)


def spec_of(attrs: dict[str, Any]) -> ContainerSpec:
    """The ContainerSpec that `_run` turns into a container configured as `attrs` (`docker inspect`) is: the
    inverse of `_host_config` / `_run` for what capd-py sets (the image's own env, command and entrypoint are
    left to the image, which capd-py's node and load balancer containers do not override)."""
    cfg = attrs.get("Config") or {}
    hc = attrs.get("HostConfig") or {}
    mounts = [m for m in hc.get("Mounts") or [] if isinstance(m, dict)]
    tmpfs = dict(hc.get("Tmpfs") or {})
    node = all(t in tmpfs for t in _NODE_TMPFS) and any(
        m.get("Target") == "/var" and m.get("Type") == "volume" and not m.get("Source") for m in mounts)
    out: list[Mount] = []
    for m in mounts:
        target = str(m.get("Target") or "")
        if node and target in _NODE_MOUNTS:
            continue
        kind = str(m.get("Type") or "bind")
        out.append(Mount(source=str(m.get("Source") or ""), target=target, read_only=bool(m.get("ReadOnly")),
                         kind=kind))
    out += [Mount(source="", target=t, kind="tmpfs") for t in sorted(tmpfs) if not (node and t in _NODE_TMPFS)]
    ports: list[PortMapping] = []
    for key, binds in sorted((hc.get("PortBindings") or {}).items()):
        port, _, proto = str(key).partition("/")
        for b in binds or []:
            ports.append(PortMapping(int(port), int(b.get("HostPort") or 0), b.get("HostIp") or "0.0.0.0",
                                     proto or "tcp"))
            break
    network = str(hc.get("NetworkMode") or "")
    if network in ("default", "bridge", "host", "none"):
        network = ""
    ipam = (((attrs.get("NetworkSettings") or {}).get("Networks") or {}).get(network) or {}).get("IPAMConfig") or {}
    restart = str((hc.get("RestartPolicy") or {}).get("Name") or "")
    return ContainerSpec(
        name=str(attrs.get("Name") or "").lstrip("/"), image=str(cfg.get("Image") or ""),
        hostname=str(cfg.get("Hostname") or ""), network=network, labels=dict(cfg.get("Labels") or {}),
        mounts=tuple(out), ports=tuple(ports),
        privileged_mode="privileged" if hc.get("Privileged") else "restricted", node=node,
        restart_policy="" if restart == "no" else restart,
        ipv4=str(ipam.get("IPv4Address") or ""), ipv6=str(ipam.get("IPv6Address") or ""),
        sysctls=dict(hc.get("Sysctls") or {}))


class DockerRuntime:
    """`fallback_restricted`: when a "privileged" node container cannot start because the host refuses
    the capabilities (sandboxes without CAP_SYS_RESOURCE), retry it in "restricted" mode, and use that
    mode directly from then on (a reduction of privileges, logged once)."""

    def __init__(self, client: docker.DockerClient | None = None, fallback_restricted: bool = True):
        self.client = client or docker.from_env(timeout=120)
        self.api = self.client.api
        self.fallback_restricted = fallback_restricted
        self._privileged_refused = False
        # https: a tcp:// host with TLS (DOCKER_HOST=tcp://...:2376 with DOCKER_TLS_VERIFY too)
        self._tls = str(getattr(self.api, "base_url", "") or "").startswith("https://")
        self._host_netns: bool | None = None
        self._routes_lock = threading.Lock()
        self._routes_cache: tuple[float, list[hostroutes.Route] | None] = (0.0, None)
        self._routes_warned = False

    # -- basics ---------------------------------------------------------------------------------
    def ping(self) -> None:
        try:
            self.client.ping()
        except docker.errors.DockerException as e:
            raise DaemonUnreachable(f"docker daemon not reachable: {e}") from e

    def host_capacity(self) -> HostCapacity:
        try:
            info = self.client.info()
        except docker.errors.DockerException as e:
            raise RuntimeError_(f"docker info: {e}") from e
        return HostCapacity(cpus=int(info.get("NCPU") or 0), memory_bytes=int(info.get("MemTotal") or 0))

    def image_exists(self, ref: str) -> bool:
        return self.image_id(ref) is not None

    # -- containers -----------------------------------------------------------------------------
    @staticmethod
    def _info(attrs: dict[str, Any]) -> ContainerInfo:
        cfg = attrs.get("Config") or {}
        st = attrs.get("State") or {}
        nets = (attrs.get("NetworkSettings") or {}).get("Networks") or {}
        ports: dict[int, int] = {}
        static = {n: ((v.get("IPAMConfig") or {}).get("IPv4Address") or "") for n, v in nets.items()}
        for key, binds in ((attrs.get("NetworkSettings") or {}).get("Ports") or {}).items():
            port, _, proto = key.partition("/")
            if proto != "tcp" or not binds:
                continue
            for b in binds:
                if b.get("HostPort"):
                    ports[int(port)] = int(b["HostPort"])
                    break
        return ContainerInfo(
            id=attrs.get("Id", ""),
            name=(attrs.get("Name") or "").lstrip("/"),
            image=cfg.get("Image", ""),
            status=st.get("Status", "unknown"),
            labels=dict(cfg.get("Labels") or {}),
            ipv4={n: v.get("IPAddress") for n, v in nets.items() if v.get("IPAddress")},
            ipv6={n: v.get("GlobalIPv6Address") for n, v in nets.items() if v.get("GlobalIPv6Address")},
            ports=ports,
            created=attrs.get("Created", ""),
            static_ipv4={n: ip for n, ip in static.items() if ip},
        )

    def _inspect(self, name: str) -> dict[str, Any] | None:
        try:
            attrs = self.api.inspect_container(name)
        except docker.errors.NotFound:
            return None
        except docker.errors.APIError as e:
            raise RuntimeError_(f"inspect container {name}: {e}") from e
        # docker resolves ID prefixes too; only an exact name is ours
        if (attrs.get("Name") or "").lstrip("/") != name and attrs.get("Id") != name:
            return None
        return dict(attrs)

    def list_containers(self, labels: dict[str, str] | None = None,
                        network: str | None = None) -> list[ContainerInfo]:
        filters = _label_filters(labels)
        if network:
            filters["network"] = [network]
        try:
            summaries = self.api.containers(all=True, filters=filters)
        except docker.errors.APIError as e:
            raise RuntimeError_(f"list containers: {e}") from e
        out = []
        for s in summaries:
            attrs = self._inspect(s["Id"])
            if attrs is not None:
                out.append(self._info(attrs))
        return out

    def get_container(self, name: str) -> ContainerInfo | None:
        attrs = self._inspect(name)
        return self._info(attrs) if attrs else None

    def _host_config(self, spec: ContainerSpec) -> dict[str, Any]:
        kw: dict[str, Any] = {}
        mounts: list[DockerMount] = []
        if spec.node:
            kw["tmpfs"] = {"/tmp": "", "/run": ""}
            mounts.append(DockerMount(target="/var", source=None, type="volume", labels=dict(spec.labels)))
            if os.path.isdir("/lib/modules"):
                mounts.append(DockerMount(target="/lib/modules", source="/lib/modules", type="bind", read_only=True))
            mounts.append(DockerMount(target=CGROUP_MOUNT, source=CGROUP_MOUNT, type="bind"))
        for m in spec.mounts:
            if m.kind == "tmpfs":
                kw.setdefault("tmpfs", {})[m.target] = ""
            elif m.kind == "volume":
                mounts.append(DockerMount(target=m.target, source=m.source or None, type="volume",
                                          read_only=m.read_only, labels=dict(spec.labels) if not m.source else None))
            else:
                mounts.append(DockerMount(target=m.target, source=m.source, type="bind", read_only=m.read_only))
        if mounts:
            kw["mounts"] = mounts
        if spec.ports:
            kw["port_bindings"] = {
                f"{p.container_port}/{p.protocol}": (p.host_ip, p.host_port) for p in spec.ports}
        if spec.restart_policy:
            kw["restart_policy"] = {"Name": spec.restart_policy}
        if spec.node:
            if spec.privileged_mode == "privileged":
                kw["privileged"] = True
            else:
                kw["cap_add"] = list(RESTRICTED_CAP_ADD)
                kw["cap_drop"] = list(RESTRICTED_CAP_DROP)
                kw["security_opt"] = list(RESTRICTED_SECURITY_OPT)
                kw["device_cgroup_rules"] = list(RESTRICTED_DEVICE_CGROUP_RULES)
        if spec.network:
            kw["network_mode"] = spec.network
        if spec.sysctls:
            kw["sysctls"] = dict(spec.sysctls)
        hc = dict(self.api.create_host_config(**kw))
        if spec.node and spec.privileged_mode != "privileged":
            # `--security-opt systempaths=unconfined`: no masked or read-only /proc and /sys paths
            hc["MaskedPaths"] = []
            hc["ReadonlyPaths"] = []
        return hc

    def run_container(self, spec: ContainerSpec) -> ContainerInfo:
        """Create and start; an existing container of that name is an error (callers adopt first)."""
        if not self.image_exists(spec.image):
            raise RuntimeError_(f"image {spec.image} not found locally (capd-py never pulls)")
        privileged = spec.node and spec.privileged_mode == "privileged"
        if privileged and self._privileged_refused:
            spec = replace(spec, privileged_mode="restricted")
        try:
            return self._run_pinned(spec)
        except RuntimeError_ as e:
            # Another thread may have found out (and set the flag) while this one was creating its container:
            # fall back whenever the refusal is seen, or the half-created privileged container stays behind.
            if not (privileged and self.fallback_restricted and "apply caps" in str(e)):
                raise
            if not self._privileged_refused:
                log.warning("--privileged refused by this host (%s); using the restricted privilege mode", e)
            self._privileged_refused = True
            self.remove_container(spec.name)
            return self._run_pinned(replace(spec, privileged_mode="restricted"))

    def _run_pinned(self, spec: ContainerSpec) -> ContainerInfo:
        """`_run` with every port asked for as 0 pinned to a free host port: the binding is part of the
        container's configuration, so the port stays the same across restarts. A port taken by someone else
        between the pick and the start is retried with another."""
        if not any(p.host_port == 0 for p in spec.ports):
            return self._run(spec)
        for attempt in range(PORT_ATTEMPTS):
            pinned = replace(spec, ports=tuple(replace(p, host_port=p.host_port or _free_port(p.host_ip))
                                               for p in spec.ports))
            try:
                return self._run(pinned)
            except RuntimeError_ as e:
                if not _port_taken(e) or attempt == PORT_ATTEMPTS - 1:
                    raise
                log.info("host port of %s was taken before it started (%s); trying another", spec.name, e)
                self.remove_container(spec.name)
        raise AssertionError("unreachable")

    def create_container(self, spec: ContainerSpec) -> ContainerInfo:
        """Create without starting (snapshot restores fill the storage first); host ports as given."""
        if not self.image_exists(spec.image):
            raise RuntimeError_(f"image {spec.image} not found locally (capd-py never pulls)")
        return self._run(spec, start=False)

    def container_spec(self, name: str) -> ContainerSpec | None:
        attrs = self._inspect(name)
        return spec_of(attrs) if attrs else None

    def _run(self, spec: ContainerSpec, start: bool = True) -> ContainerInfo:
        kw: dict[str, Any] = {
            "image": spec.image, "name": spec.name, "labels": dict(spec.labels),
            "host_config": self._host_config(spec), "detach": True, "tty": spec.node,
            "environment": dict(spec.env) or None,
        }
        if spec.hostname:
            kw["hostname"] = spec.hostname
        if spec.command:
            kw["command"] = list(spec.command)
        if spec.entrypoint:
            kw["entrypoint"] = list(spec.entrypoint)
        if spec.ports:
            kw["ports"] = [(p.container_port, p.protocol) for p in spec.ports]
        if spec.network:
            kw["networking_config"] = self.api.create_networking_config(
                {spec.network: self.api.create_endpoint_config(aliases=[spec.hostname or spec.name],
                                                               ipv4_address=spec.ipv4 or None,
                                                               ipv6_address=spec.ipv6 or None)})
        try:
            created = self.api.create_container(**kw)
        except docker.errors.APIError as e:
            raise _container_error(f"create container {spec.name}", spec.network, e) from e
        if not start:
            info = self.get_container(spec.name)
            if info is None:
                raise RuntimeError_(f"container {spec.name} vanished right after create")
            return info
        try:
            self.api.start(created["Id"])
        except docker.errors.APIError as e:
            # never started, nothing to keep: left behind it would be retried with the same configuration
            # (the static address another container took, say) instead of made again from a fresh one
            try:
                self.api.remove_container(created["Id"], v=True, force=True)
            except docker.errors.APIError as gone:
                log.warning("removing %s after its failed start: %s", spec.name, gone)
            raise _container_error(f"start container {spec.name}", spec.network, e) from e
        info = self.get_container(spec.name)
        if info is None:
            raise RuntimeError_(f"container {spec.name} vanished right after start")
        return info

    def start_container(self, name: str) -> None:
        try:
            self.api.start(name)
        except docker.errors.APIError as e:
            raise RuntimeError_(f"start container {name}: {e.explanation or e}") from e

    def stop_container(self, name: str, timeout: float = 10.0) -> None:
        try:
            # the HTTP call lasts up to `timeout` + the shutdown: the client's own timeout must exceed it
            self.api.stop(name, timeout=max(0, round(timeout)))
        except docker.errors.APIError as e:
            if e.status_code == 304:  # already stopped
                return
            raise RuntimeError_(f"stop container {name}: {e.explanation or e}") from e

    def pause_container(self, name: str) -> None:
        try:
            self.api.pause(name)
        except docker.errors.APIError as e:
            if "already paused" in str(e):  # docker 20.10 answers 409 or 500 depending on the call
                return
            raise RuntimeError_(f"pause container {name}: {e.explanation or e}") from e

    def unpause_container(self, name: str) -> None:
        try:
            self.api.unpause(name)
        except docker.errors.APIError as e:
            if "is not paused" in str(e):  # docker 20.10: 500 "Container <id> is not paused"
                return
            raise RuntimeError_(f"unpause container {name}: {e.explanation or e}") from e

    def storage_paths(self, name: str) -> dict[str, str]:
        attrs = self._inspect(name)
        if attrs is None:
            raise RuntimeError_(f"no container {name}")
        driver = attrs.get("GraphDriver") or {}
        upper = (driver.get("Data") or {}).get("UpperDir") or ""
        if driver.get("Name") != "overlay2" or not upper:
            raise RuntimeError_(f"{name}: storage driver {driver.get('Name')!r}: snapshots need overlay2")
        out = {"/": upper}
        for m in attrs.get("Mounts") or []:
            if m.get("Type") == "volume" and m.get("Source"):
                out[str(m["Destination"])] = str(m["Source"])
        missing = [p for p in out.values() if not os.path.isdir(p)]
        if missing:
            raise RuntimeError_(f"{name}: {missing[0]} is not on this host (snapshots need a local docker daemon)")
        return out

    def remove_container(self, name: str) -> None:
        try:
            self.api.remove_container(name, v=True, force=True)
        except docker.errors.NotFound:
            return
        except docker.errors.APIError as e:
            if e.status_code == 409 and "already in progress" in str(e):
                return
            raise RuntimeError_(f"remove container {name}: {e.explanation or e}") from e

    def kill(self, name: str, signal: str = "SIGHUP") -> None:
        try:
            self.api.kill(name, signal=signal)
        except docker.errors.APIError as e:
            raise RuntimeError_(f"signal {signal} to {name}: {e.explanation or e}") from e

    # -- exec and files -------------------------------------------------------------------------
    def exec(self, name: str, cmd: list[str], stdin: bytes | None = None,
             timeout: float | None = None) -> ExecResult:
        if stdin is not None and self._tls:
            # a TLS connection cannot be half-closed from Python (SSLSocket.shutdown drops the TLS layer; no
            # close_notify-then-read), so the daemon would never see the end of stdin and the exec would wait out
            # the client's timeout (measured: 120 s per write_file on a tcp:// host). The command reads exactly
            # the bytes sent instead, and ends on its own.
            cmd = ["sh", "-c", 'head -c "$0" | "$@"', str(len(stdin)), *cmd]
        try:
            ex = self.api.exec_create(name, cmd, stdout=True, stderr=True, stdin=stdin is not None, tty=False)
            if stdin is None:
                out = self.api.exec_start(ex["Id"], stream=False, demux=False)
                text = out.decode("utf-8", "replace") if isinstance(out, bytes) else str(out)
            else:
                text = self._exec_with_stdin(ex["Id"], stdin, timeout)
            code = self.api.exec_inspect(ex["Id"]).get("ExitCode")
        except docker.errors.APIError as e:
            raise RuntimeError_(f"exec in {name}: {e.explanation or e}") from e
        return ExecResult(exit_code=int(code if code is not None else -1), output=text)

    def _exec_with_stdin(self, exec_id: str, data: bytes, timeout: float | None) -> str:
        sock = self.api.exec_start(exec_id, socket=True)
        raw: socket.socket = getattr(sock, "_sock", sock)
        raw.settimeout(timeout)
        ssh = getattr(raw, "proc", None)  # an ssh:// host: the SDK's SSHSocket, the system ssh's pipes
        try:
            raw.sendall(data)
            if ssh is not None:
                # its write side is the ssh client's stdin (the socket object itself is never connected, so
                # shutdown() is ENOTCONN); closing it sends EOF down the channel and dial-stdio half-closes on
                ssh.stdin.close()
            elif not self._tls:  # over TLS the command reads exactly what was sent (exec)
                raw.shutdown(socket.SHUT_WR)
            buf = b""
            while True:
                chunk = raw.recv(65536)
                if not chunk:
                    break
                buf += chunk
        finally:
            try:
                sock.close()
            except OSError:
                pass
            if ssh is not None:  # ended by the stream's end; the SDK's close() skips it once stdin is closed
                ssh.terminate()
                ssh.wait(10)
                socket.socket.close(raw)  # the never-connected fd under it
        # demultiplex the stdout/stderr frame stream (8-byte headers: type, 0, 0, 0, big-endian size)
        out = bytearray()
        i = 0
        while i + 8 <= len(buf):
            size = struct.unpack(">I", buf[i + 4:i + 8])[0]
            out += buf[i + 8:i + 8 + size]
            i += 8 + size
        # wait (up to 5 s) for the exec to be reported finished so ExitCode is set
        Retrying(retry=retry_if_result(bool), stop=stop_after_delay(5), wait=wait_fixed(0.05),
                 retry_error_callback=lambda _state: True)(lambda: self.api.exec_inspect(exec_id).get("Running"))
        return out.decode("utf-8", "replace")

    # put_archive/get_archive cannot see tmpfs mounts (/run, /tmp of node containers), so files go
    # through exec: stdin for writes, base64 for reads (binary-safe over the text exec API).
    def write_file(self, name: str, path: str, content: bytes, mode: int = 0o644) -> None:
        d = posixpath.dirname(path) or "/"
        script = 'mkdir -p "$1" && cat > "$2.capd-py.tmp" && chmod "$3" "$2.capd-py.tmp" && mv -f "$2.capd-py.tmp" "$2"'
        res = self.exec(name, ["sh", "-c", script, "sh", d, path, f"{mode:o}"], stdin=content)
        if res.exit_code != 0:
            raise RuntimeError_(f"write {path} in {name}: exit {res.exit_code}: {res.output.strip()[-500:]}")

    def read_file(self, name: str, path: str) -> bytes | None:
        res = self.exec(name, ["sh", "-c", 'test -f "$1" || exit 44; base64 "$1"', "sh", path])
        if res.exit_code == 44:
            return None
        if res.exit_code != 0:
            raise RuntimeError_(f"read {path} in {name}: exit {res.exit_code}: {res.output.strip()[-500:]}")
        try:
            return base64.b64decode("".join(res.output.split()), validate=True)
        except ValueError as e:
            raise RuntimeError_(f"read {path} in {name}: undecodable output") from e

    def logs(self, name: str, tail: int = 200) -> str:
        try:
            out = self.api.logs(name, stdout=True, stderr=True, tail=tail)
        except docker.errors.NotFound:
            return ""
        except docker.errors.APIError as e:
            raise RuntimeError_(f"logs of {name}: {e.explanation or e}") from e
        return bytes(out).decode("utf-8", "replace")

    # -- networks and volumes -------------------------------------------------------------------
    @staticmethod
    def _net(attrs: dict[str, Any]) -> NetworkInfo:
        subnet = gateway = ip_range = ""
        configs = (attrs.get("IPAM") or {}).get("Config") or []
        for c in configs:
            if ":" not in (c.get("Subnet") or ""):  # prefer IPv4
                subnet, gateway, ip_range = c.get("Subnet", ""), c.get("Gateway", ""), c.get("IPRange", "")
                break
        return NetworkInfo(name=attrs.get("Name", ""), id=attrs.get("Id", ""), subnet=subnet, gateway=gateway,
                           labels=dict(attrs.get("Labels") or {}), ip_range=ip_range or "",
                           subnets=tuple(c["Subnet"] for c in configs if c.get("Subnet")))

    def _named(self, name: str) -> list[dict[str, Any]]:
        """The networks called exactly `name`, oldest first (docker lets two processes racing make two of one name:
        found 2026-12-08 on a fresh machine, two `capd-py init` at once; then every container naming it fails
        "network capd-py is ambiguous")."""
        try:
            nets = self.api.networks(names=[name])
        except docker.errors.APIError as e:
            raise RuntimeError_(f"list networks: {e}") from e
        return sorted((n for n in nets if n.get("Name") == name), key=lambda n: (n.get("Created", ""), n["Id"]))

    def get_network(self, name: str) -> NetworkInfo | None:
        named = self._named(name)
        return self._net(self.api.inspect_network(named[0]["Id"])) if named else None

    def _one_of(self, name: str) -> NetworkInfo | None:
        """The network `name`, converged on, as kind does (removeDuplicateNetworks): of several networks of one
        name the oldest is kept and the others removed, so that every racer ends on the same one (a removal another
        racer did first, or one with containers on it, is left). None when there is none."""
        named = self._named(name)
        for dup in named[1:]:
            try:
                self.api.remove_network(dup["Id"])
            except docker.errors.APIError as e:
                log.info("network %s: duplicate %s left (%s)", name, dup["Id"][:12], e.explanation or e)
        return self._net(self.api.inspect_network(named[0]["Id"])) if named else None

    def create_network(self, name: str, labels: dict[str, str], subnet: str, subnet6: str = "") -> NetworkInfo:
        """The network `name` (used as it is when it exists), else made with `subnet`, its upper half docker's
        dynamic range (the lower half takes static addresses) and its first host address the gateway."""
        got = self._one_of(name)
        if got is not None:
            return got
        # the gateway given explicitly: without it docker puts the bridge on the first address of the dynamic
        # range, leaving the first host address to be handed out as if it were free
        pools = [IPAMPool(subnet=s, iprange=addresses.dynamic_range(s), gateway=addresses.first_host(s))
                 for s in (subnet, subnet6) if s]
        options = {"com.docker.network.bridge.enable_ip_masquerade": "true"}
        try:
            self.api.create_network(name, driver="bridge", labels=dict(labels), check_duplicate=True,
                                    options=options, ipam=IPAMConfig(pool_configs=pools),
                                    enable_ipv6=bool(subnet6) or ":" in subnet)
        except docker.errors.APIError as e:
            text = str(e.explanation or e)
            if e.status_code == 409 or self.get_network(name):  # lost a race: someone created it in between
                pass
            elif "overlap" in text.lower():  # another network took the subnet since it was chosen
                raise SubnetTaken(f"create network {name} with subnet {subnet}: {text}") from e
            else:
                raise RuntimeError_(f"create network {name}: {text}") from e
        got = self._one_of(name)
        if got is None:
            raise RuntimeError_(f"network {name} vanished right after create")
        return got

    def host_routes(self, image: str = "", docker_bridges: bool = True) -> list[str]:
        """The CIDRs routed on the docker host (main table). Read from /proc when this process shares the host's
        network namespace; otherwise (a pod or container on the host, another machine) by a short-lived
        container of `image` (one present on that host) on the host's network, at most every ROUTES_TTL
        seconds. [] when neither can be done (logged once)."""
        return hostroutes.cidrs(self._host_routes(image), docker_bridges)

    def _host_routes(self, image: str) -> list[hostroutes.Route]:
        if self._shares_host_netns():
            return _own_routes()
        if not image:
            return self._routes_unknown("no helper image given")
        with self._routes_lock:
            at, routes = self._routes_cache
            if routes is not None and time.monotonic() - at < ROUTES_TTL:
                return routes
            if self.image_id(image) is None:  # nothing is pulled: no registry may be reachable
                return self._routes_unknown(f"image {image} is not on the docker host")
            try:
                out = self.client.containers.run(
                    image, entrypoint=["sh", "-c", _ROUTES_SCRIPT], network_mode="host", remove=True,
                    labels={HELPER_LABEL: "routes"}, stdout=True, stderr=False)
            except docker.errors.DockerException as e:
                return self._routes_unknown(f"helper container of {image}: {e}")
            v4, _, v6 = out.decode("ascii", "replace").partition(_ROUTES_SEPARATOR)
            routes = hostroutes.parse_ipv4(v4.strip()) + hostroutes.parse_ipv6(v6)
            self._routes_cache = (time.monotonic(), routes)
            return routes

    def _shares_host_netns(self) -> bool:
        """Whether this process sees the docker host's routes in its own /proc: the daemon is local (a unix
        socket) and the route of the daemon's default bridge is here (a pod or container on the same host has
        a namespace of its own, without it). Decided once."""
        if self._host_netns is None:
            local = str(getattr(self.api, "base_url", "")).startswith("http+docker://")
            bridge = self.get_network("bridge") if local else None
            mine = hostroutes.cidrs(_own_routes()) if bridge is not None else []
            self._host_netns = bridge is not None and bool(bridge.subnet) and bridge.subnet in mine
        return self._host_netns

    def _routes_unknown(self, why: str) -> list[hostroutes.Route]:
        if not self._routes_warned:
            self._routes_warned = True
            log.warning("the docker host's routes cannot be read (%s): network subnets are chosen without them", why)
        return []

    def remove_network(self, name: str) -> None:
        got = self.get_network(name)
        if got is None:
            return
        try:
            self.api.remove_network(got.id)
        except docker.errors.NotFound:
            return
        except docker.errors.APIError as e:
            raise RuntimeError_(f"remove network {name}: {e.explanation or e}") from e

    def list_networks(self, labels: dict[str, str] | None = None) -> list[NetworkInfo]:
        try:
            nets = self.api.networks(filters=_label_filters(labels))
        except docker.errors.APIError as e:
            raise RuntimeError_(f"list networks: {e}") from e
        return [self._net(n) for n in nets]  # the listing carries IPAM and labels already

    def connect_network(self, network: str, container: str) -> None:
        c = self.get_container(container)
        if c is None:
            raise RuntimeError_(f"connect {container} to {network}: no such container")
        if network in c.ipv4:
            return
        try:
            self.api.connect_container_to_network(container, network)
        except docker.errors.APIError as e:
            # lost a race with another connect: docker answers 403 "endpoint ... already exists"
            if "already exists" not in str(e.explanation or e):
                raise RuntimeError_(f"connect {container} to {network}: {e.explanation or e}") from e

    def disconnect_network(self, network: str, container: str) -> None:
        c = self.get_container(container)
        if c is None or network not in c.ipv4:
            return
        try:
            self.api.disconnect_container_from_network(container, network, force=True)
        except docker.errors.NotFound:
            return
        except docker.errors.APIError as e:
            raise RuntimeError_(f"disconnect {container} from {network}: {e.explanation or e}") from e

    def list_volumes(self, labels: dict[str, str] | None = None) -> list[str]:
        try:
            res = self.api.volumes(filters=_label_filters(labels))
        except docker.errors.APIError as e:
            raise RuntimeError_(f"list volumes: {e}") from e
        return sorted(v["Name"] for v in (res or {}).get("Volumes") or [])

    def remove_volume(self, name: str) -> None:
        try:
            self.api.remove_volume(name, force=True)
        except docker.errors.NotFound:
            return
        except docker.errors.APIError as e:
            raise RuntimeError_(f"remove volume {name}: {e.explanation or e}") from e

    # -- images ---------------------------------------------------------------------------------
    def list_images(self, repository: str) -> list[str]:
        try:
            images = self.client.images.list(name=repository)
        except docker.errors.APIError as e:
            raise RuntimeError_(f"list images {repository}: {e.explanation or e}") from e
        return sorted(t for i in images for t in i.tags if t.rpartition(":")[0] == repository)

    def build_image(self, context_dir: str, tag: str, build_args: dict[str, str] | None = None) -> None:
        """Build `context_dir`/Dockerfile as `tag`; base images must be local (nothing is pulled)."""
        try:
            self.client.images.build(path=context_dir, tag=tag, buildargs=dict(build_args or {}), pull=False,
                                     rm=True, forcerm=True)
        except docker.errors.BuildError as e:
            lines = [str(c.get("stream") or c.get("error") or "") for c in e.build_log or []]
            raise RuntimeError_(f"building {tag} failed: {e.msg}\n{''.join(lines)[-3000:]}") from e
        except docker.errors.APIError as e:
            raise RuntimeError_(f"building {tag} failed: {e.explanation or e}") from e

    def save_image(self, ref: str) -> bytes:
        try:
            return b"".join(self.client.images.get(ref).save(named=True))
        except docker.errors.ImageNotFound as e:
            raise RuntimeError_(f"image {ref} not found locally") from e
        except docker.errors.APIError as e:
            raise RuntimeError_(f"saving image {ref}: {e.explanation or e}") from e

    def save_image_chunks(self, ref: str) -> Iterator[bytes]:
        try:
            image = self.client.images.get(ref)
            # named=True would name the tarball after the image's *first* tag: an image tagged both
            # capd-py/haproxy:2.6 and kindest/haproxy:... copied for the latter arrived under the former only
            yield from image.save(named=ref if ref in image.tags else True)
        except docker.errors.ImageNotFound as e:
            raise RuntimeError_(f"image {ref} not found locally") from e
        except docker.errors.APIError as e:
            raise RuntimeError_(f"saving image {ref}: {e.explanation or e}") from e

    def load_image(self, chunks: Iterable[bytes]) -> None:
        try:
            for msg in self.api.load_image(chunks):  # progress and the final "Loaded image" line
                if isinstance(msg, dict) and msg.get("error"):
                    raise RuntimeError_(f"loading image: {msg['error']}")
        except docker.errors.APIError as e:
            raise RuntimeError_(f"loading image: {e.explanation or e}") from e

    def image_id(self, ref: str) -> str | None:
        try:
            return str(self.api.inspect_image(ref)["Id"])
        except docker.errors.ImageNotFound:
            return None
        except docker.errors.APIError as e:
            if e.status_code == 404:
                return None
            raise RuntimeError_(f"inspect image {ref}: {e.explanation or e}") from e

    def inspect_container(self, name: str) -> dict[str, Any] | None:
        return self._inspect(name)


def _own_routes() -> list[hostroutes.Route]:
    """The routes of this process's network namespace."""
    out: list[hostroutes.Route] = []
    for name, parse in (("route", hostroutes.parse_ipv4), ("ipv6_route", hostroutes.parse_ipv6)):
        try:
            with open(f"/proc/net/{name}", encoding="ascii") as f:
                out += parse(f.read())
        except OSError:
            continue
    return out
