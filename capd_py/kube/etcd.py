"""The etcd of a workload cluster's control plane, behind `EtcdClient` (upstream: internal/etcd).

The real client runs `etcdctl` inside the etcd static pod of one control-plane node
(`kube-system/etcd-<node>`) over the workload API's exec websocket, with the node's healthcheck-client
certificate: nothing needs to reach etcd's port from the management cluster. Controllers get clients
from `ctx.etcd` (an `EtcdClients`); unit tests use `capd_py.kube.inmemory_etcd.FakeEtcd` instead.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Protocol

import kubernetes.client
from kubernetes.client.exceptions import ApiException
from kubernetes.stream import stream as k8s_stream
from websocket import WebSocketException

from capd_py.api.etcd import ALARM_NAMES, EtcdAlarm, EtcdMember, EtcdStatus
from capd_py.kube.client import Kube

ETCD_PKI = "/etc/kubernetes/pki/etcd"
# kubeadm has etcd listen on the loopback of the node's IP family: an IPv6 node's etcd answers on [::1] only
LOCAL_ENDPOINTS = ("https://127.0.0.1:2379", "https://[::1]:2379")
# every etcdctl command but its --endpoints
ETCDCTL_BASE = ["etcdctl", f"--cacert={ETCD_PKI}/ca.crt",
                f"--cert={ETCD_PKI}/healthcheck-client.crt", f"--key={ETCD_PKI}/healthcheck-client.key",
                "--command-timeout=15s"]
EXEC_TIMEOUT = 60.0


class EtcdError(RuntimeError):
    """etcd answered with an error (or an answer that could not be understood)."""


class EtcdClient(Protocol):
    """One etcd member's view of its cluster (the member on the node the client was made for)."""

    async def members(self) -> list[EtcdMember]: ...

    async def status(self) -> EtcdStatus: ...

    async def alarms(self) -> list[EtcdAlarm]:
        """The cluster's active alarms (every member's)."""

    async def move_leader(self, leader: EtcdMember, to: int) -> None:
        """Hand leadership from `leader` (the current leader) to member `to`."""

    async def remove_member(self, member_id: int) -> None: ...


class EtcdClients(Protocol):
    """What `Ctx.etcd` holds: a client talking to etcd through the control-plane node `node` of the
    workload cluster `workload`."""

    def for_node(self, workload: Kube, node: str) -> EtcdClient: ...


# --- the real client: etcdctl in the etcd static pod -------------------------------------------------

def _member_id(v: Any) -> int:
    """etcdctl prints IDs as numbers (or hex strings with --hex)."""
    return int(v, 16) if isinstance(v, str) else int(v or 0)


def parse_members(out: str) -> list[EtcdMember]:
    """`etcdctl member list -w json` output."""
    try:
        doc = json.loads(out)
        return [EtcdMember(_member_id(m.get("ID")), str(m.get("name") or ""), tuple(m.get("clientURLs") or ()),
                           bool(m.get("isLearner")))
                for m in doc.get("members") or []]
    except (ValueError, TypeError, AttributeError) as e:
        raise EtcdError(f"cannot parse the etcd member list: {e}") from e


def parse_status(out: str) -> EtcdStatus:
    """`etcdctl endpoint status -w json` output (one entry per endpoint; we ask one)."""
    try:
        doc = json.loads(out)
        if not doc:
            return EtcdStatus(0)
        st = doc[0]["Status"]
        return EtcdStatus(int(st["leader"]), tuple(str(e) for e in st.get("errors") or ()))
    except (ValueError, KeyError, IndexError, TypeError) as e:
        raise EtcdError(f"cannot parse the etcd endpoint status: {e}") from e


def parse_alarms(out: str) -> list[EtcdAlarm]:
    """`etcdctl alarm list -w json` output (no `alarms` key when there is none)."""
    try:
        doc = json.loads(out)
        return [EtcdAlarm(_member_id(a.get("memberID")), ALARM_NAMES.get(int(a.get("alarm") or 0), str(a.get("alarm"))))
                for a in doc.get("alarms") or []]
    except (ValueError, TypeError, AttributeError) as e:
        raise EtcdError(f"cannot parse the etcd alarm list: {e}") from e


def _exec_blocking(cfg: kubernetes.client.Configuration, pod: str, cmd: list[str],
                   timeout: float = EXEC_TIMEOUT) -> tuple[int, str, str]:
    """Run `cmd` in kube-system/`pod`; (exit code, stdout, stderr)."""
    api = kubernetes.client.ApiClient(configuration=cfg)  # own client: stream() patches the one it uses
    try:
        core = kubernetes.client.CoreV1Api(api)
        ws = k8s_stream(core.connect_get_namespaced_pod_exec, pod, "kube-system", command=cmd,
                        stderr=True, stdin=False, stdout=True, tty=False, _preload_content=False)
        ws.run_forever(timeout=timeout)
        out, err = ws.read_stdout() or "", ws.read_stderr() or ""
        try:
            rc = ws.returncode
        except Exception:  # noqa: BLE001 - no status frame (timeout / closed early): judge by stderr
            rc = 1 if err else 0
        ws.close()
        return (0 if rc is None else int(rc)), out, err
    finally:
        api.close()


class ExecEtcdClient:
    """etcdctl through the etcd static pod `etcd-<node>` of the workload cluster."""

    def __init__(self, workload: Kube, node: str, loopbacks: dict[tuple[str, str], str] | None = None):
        self._cfg = workload.api.configuration
        self.pod = f"etcd-{node}"
        # (API server, pod) -> the loopback endpoint its etcd answered on (shared by the clients of one ExecEtcdClients)
        self._loopbacks = {} if loopbacks is None else loopbacks

    async def _etcdctl(self, *args: str, endpoint: str | None = None) -> str:
        if endpoint is not None:
            return await self._run(args, endpoint)
        key = (str(getattr(self._cfg, "host", "")), self.pod)
        known = self._loopbacks.get(key, LOCAL_ENDPOINTS[0])
        failed: EtcdError | None = None
        # the loopback that answered last time first, then the other (an IPv6 node), whose failure is the one said
        for local in (known, *(e for e in LOCAL_ENDPOINTS if e != known)):
            try:
                out = await self._run(args, local)
            except EtcdError as e:
                failed = e
                continue
            self._loopbacks[key] = local
            return out
        assert failed is not None
        raise failed

    async def _run(self, args: tuple[str, ...], endpoint: str) -> str:
        try:
            rc, out, err = await asyncio.to_thread(_exec_blocking, self._cfg, self.pod,
                                                   [*ETCDCTL_BASE, f"--endpoints={endpoint}", *args])
        except ApiException as e:  # the exec itself was refused: no such Pod (yet), the API server's error
            raise EtcdError(f"etcdctl {' '.join(args)} in {self.pod}: the exec failed: {e.status} {e.reason}") from e
        except (WebSocketException, OSError) as e:  # the stream broke
            raise EtcdError(f"etcdctl {' '.join(args)} in {self.pod}: the exec stream failed: "
                            f"{e.__class__.__name__}") from e
        if rc != 0:
            # its last line ("Error: context deadline exceeded"): the lines before are timestamped log records, and
            # the message ends up in conditions, which must not change between two identical failures
            last = next((line for line in reversed(err.strip().splitlines()) if line.strip()), "")
            raise EtcdError(f"etcdctl {' '.join(args)} in {self.pod}: exit {rc}: {last.strip()[:300]}")
        return out

    async def members(self) -> list[EtcdMember]:
        return parse_members(await self._etcdctl("member", "list", "-w", "json"))

    async def status(self) -> EtcdStatus:
        return parse_status(await self._etcdctl("endpoint", "status", "-w", "json"))

    async def alarms(self) -> list[EtcdAlarm]:
        return parse_alarms(await self._etcdctl("alarm", "list", "-w", "json"))

    async def move_leader(self, leader: EtcdMember, to: int) -> None:
        # move-leader has to be sent to the leader itself
        if not leader.client_urls:
            raise EtcdError(f"etcd member {leader.name} has no client URL to move leadership through")
        await self._etcdctl("move-leader", format(to, "x"), endpoint=leader.client_urls[0])

    async def remove_member(self, member_id: int) -> None:
        await self._etcdctl("member", "remove", format(member_id, "x"))


class ExecEtcdClients:
    """The `EtcdClients` controllers use for real workload clusters."""

    def __init__(self) -> None:
        self.loopbacks: dict[tuple[str, str], str] = {}

    def for_node(self, workload: Kube, node: str) -> EtcdClient:
        return ExecEtcdClient(workload, node, self.loopbacks)
