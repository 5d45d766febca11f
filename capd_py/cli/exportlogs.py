"""`capd-py export logs NAME [DIR]`: one folder with what a bug report about a workload cluster needs, like
`kind export logs` (and upstream CAPD's e2e log collector). Prints the folder's path on stdout.

    DIR/
      capd-py-version.txt
      objects.yaml             the cluster's Cluster API objects (no Secrets; managedFields dropped)
      events.yaml              Events of those objects
      docker-host.txt          the docker host the cluster is placed on (docs/multihost.md), when not `local`
      controllers.log          the host controllers' log (`capd-py init`'s, or --controllers-log FILE)
      management/pods/...      in-cluster controllers (`init --in-cluster`): their pods' logs from the management node
      workload.txt             kubectl get nodes / pods / events, run on a control-plane node
      <node>/                  per node container:
        bootstrap.log            /var/log/capd-py-bootstrap.log (every bootstrap step's output: kubeadm ...)
        kubelet.log containerd.log journal.log   journalctl -u kubelet / -u containerd / everything
        pods/...                 /var/log/pods (every container's log)
        images.txt               ctr images ls (what containerd holds)
        inspect.json             docker inspect
        container.log            docker logs (systemd's console)
      <cluster>-lb/            haproxy.cfg, container.log (haproxy's log), inspect.json
      errors.txt               what could not be collected (the rest still is)

Everything goes through the runtime Protocol (exec, read_file, inspect_container, logs). Collection is best
effort per item: a stopped node or an unreachable management cluster leaves a line in errors.txt.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import shutil
import tarfile
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from capd_py.api.gvk import ALL_CAPI, CLUSTER, CLUSTER_CLASS, EVENT
from capd_py.api.labels import CLUSTER_NAME, CONTAINER_CLUSTER, CONTAINER_MACHINE, CONTAINER_NAMESPACE
from capd_py.reconcile import haproxy
from capd_py.reconcile.cloudinit import BOOTSTRAP_LOG
from capd_py.reconcile.dockercluster import lb_container_name
from capd_py.reconcile.imageload import LIST_COMMAND
from capd_py.runtime.protocol import ContainerRuntime, RuntimeError_

# per node: file name -> command run in the node (output saved as is)
NODE_COMMANDS: dict[str, list[str]] = {
    "kubelet.log": ["journalctl", "--no-pager", "-u", "kubelet.service"],
    "containerd.log": ["journalctl", "--no-pager", "-u", "containerd.service"],
    "journal.log": ["journalctl", "--no-pager"],
    "images.txt": LIST_COMMAND,
}
# a directory of a container as a base64 gzip tarball through exec (docker cp cannot see tmpfs mounts, and the
# exec API is text); tar's exit 1 ("file changed as we read it": logs being written) is not a failure
# tar into a file first: its exit status and last error line reach the caller (a pipe into base64 hid them: a
# failed tar of /var/log/pods arrived as "not a gzip file"). Exit 1 (a file changed while read) is a success.
TAR_SCRIPT = ('cd "$1" && t=$(mktemp) && e=$(mktemp) && { tar -chzf "$t" "$2" 2>"$e"; rc=$?; } ; '
              'if [ $rc -gt 1 ]; then tail -n 3 "$e"; rm -f "$t" "$e"; exit $rc; fi; base64 "$t"; rm -f "$t" "$e"')
WORKLOAD_SCRIPT = ("k='kubectl --kubeconfig=/etc/kubernetes/admin.conf'; "
                   "for w in 'get nodes -o wide' 'get pods -A -o wide' 'get events -A --sort-by=.lastTimestamp'; do "
                   "echo \"\\$ kubectl $w\"; $k $w 2>&1; echo; done")
DOCKER_LOG_LINES = 100000
MANAGEMENT_PODS = "capd-py-system_*"  # /var/log/pods/<namespace>_<pod>_<uid> of the in-cluster controllers


class ExportError(Exception):
    """Nothing to export (exit 1)."""


@dataclass
class Report:
    dir: Path
    errors: list[str] = field(default_factory=list)
    files: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def error(self, what: str) -> None:
        with self._lock:
            self.errors.append(what)

    def write(self, rel: str, data: str | bytes) -> None:
        p = self.dir / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, str):
            p.write_text(data)
        else:
            p.write_bytes(data)
        with self._lock:
            self.files += 1


# --- the cluster's objects (pure) ----------------------------------------------------------------------------

def _refs(value: Any, out: set[tuple[str, str]]) -> None:
    """Every {kind, name} reference anywhere in a spec."""
    if isinstance(value, dict):
        if isinstance(value.get("kind"), str) and isinstance(value.get("name"), str):
            out.add((value["kind"], value["name"]))
        for v in value.values():
            _refs(v, out)
    elif isinstance(value, list):
        for v in value:
            _refs(v, out)


def belongs(obj: dict[str, Any], cluster: str) -> bool:
    md = obj.get("metadata") or {}
    kind = obj.get("kind")
    return ((md.get("labels") or {}).get(CLUSTER_NAME) == cluster
            or (obj.get("spec") or {}).get("clusterName") == cluster
            or (kind in (CLUSTER.kind, "ClusterResourceSetBinding") and md.get("name") == cluster))


def select_objects(objs: Iterable[dict[str, Any]], cluster: str) -> list[dict[str, Any]]:
    """The cluster's objects: the Cluster, what carries its name (label, spec.clusterName), and what those
    reference (templates, the ClusterClass, the infrastructure and control plane), in kind order."""
    objs = list(objs)
    picked = [o for o in objs if belongs(o, cluster)]
    wanted: set[tuple[str, str]] = set()
    for o in picked:
        _refs(o.get("spec"), wanted)
        cls = ((o.get("spec") or {}).get("topology") or {}).get("classRef") or {}
        if o.get("kind") == CLUSTER.kind and cls.get("name"):
            wanted.add((CLUSTER_CLASS.kind, cls["name"]))
    have = {(o.get("kind"), (o.get("metadata") or {}).get("name")) for o in picked}
    picked += [o for o in objs if (o.get("kind"), (o.get("metadata") or {}).get("name")) in wanted - have]
    return picked


def clean(obj: dict[str, Any]) -> dict[str, Any]:
    """managedFields make a report twice as long and say nothing about the bug."""
    md = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
    return {**obj, "metadata": md}


def to_yaml(objs: Iterable[dict[str, Any]]) -> str:
    return yaml.safe_dump_all([clean(o) for o in objs], sort_keys=False, default_flow_style=False)


def related_events(events: Iterable[dict[str, Any]], objs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    names = {(o.get("kind"), (o.get("metadata") or {}).get("name")) for o in objs}
    return [e for e in events
            if ((e.get("involvedObject") or {}).get("kind"), (e.get("involvedObject") or {}).get("name")) in names]


async def fetch_objects(kube: Any, namespace: str, cluster: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the cluster's objects, their Events) from the management cluster."""
    objs: list[dict[str, Any]] = []
    for gvk in ALL_CAPI:
        for o in await kube.list(gvk, namespace if gvk.namespaced else None):
            objs.append({"apiVersion": gvk.api_version, "kind": gvk.kind, **o})
    picked = select_objects(objs, cluster)
    return picked, related_events(await kube.list(EVENT, namespace), picked)


# --- containers (blocking, through the runtime) -------------------------------------------------------------

def untar_b64(text: str, dest: Path) -> int:
    """Extract the base64 gzip tarball TAR_SCRIPT printed into `dest`; returns the number of files."""
    try:
        raw = base64.b64decode("".join(text.split()), validate=True)
    except (binascii.Error, ValueError) as e:
        raise RuntimeError_(f"undecodable archive: {e}") from None
    if not raw:
        return 0
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r:gz") as tf:
        members = [m for m in tf.getmembers() if m.isfile() or m.isdir()]
        tf.extractall(dest, members=members, filter="data")
        return sum(1 for m in members if m.isfile())


def copy_dir(runtime: ContainerRuntime, container: str, parent: str, pattern: str, dest: Path,
             attempts: int = 2) -> int:
    """`parent/pattern` of a container into `dest`; tried again once when tar fails (logs rotate under it)."""
    for _ in range(attempts):
        res = runtime.exec(container, ["sh", "-c", TAR_SCRIPT, "sh", parent, pattern])
        if res.exit_code == 0:
            return untar_b64(res.output, dest)
    raise RuntimeError_(f"tar of {parent}/{pattern}: exit {res.exit_code}: {res.output.strip()[-300:]}")


def _safe(report: Report, what: str, fn: Callable[[], None]) -> None:
    try:
        fn()
    except (RuntimeError_, OSError, tarfile.TarError) as e:
        report.error(f"{what}: {e}")


def collect_container(runtime: ContainerRuntime, report: Report, name: str, node: bool) -> None:
    """One container's directory: inspect + docker logs; for a node its logs and journals too."""
    def inspect() -> None:
        got = runtime.inspect_container(name)
        if got is None:
            raise RuntimeError_("no such container")
        report.write(f"{name}/inspect.json", json.dumps(got, indent=2, sort_keys=True, default=str) + "\n")
    _safe(report, f"{name}: docker inspect", inspect)
    _safe(report, f"{name}: docker logs",
          lambda: report.write(f"{name}/container.log", runtime.logs(name, tail=DOCKER_LOG_LINES)))
    info = runtime.get_container(name)
    if info is None or not info.running:
        report.error(f"{name}: not running ({info.status if info else 'gone'}): only inspect and docker logs")
        return
    if not node:
        def cfg() -> None:
            data = runtime.read_file(name, haproxy.CONFIG_PATH)
            if data is None:
                raise RuntimeError_(f"{haproxy.CONFIG_PATH} not found")
            report.write(f"{name}/haproxy.cfg", data)
        _safe(report, f"{name}: haproxy config", cfg)
        return

    def bootstrap() -> None:
        data = runtime.read_file(name, BOOTSTRAP_LOG)
        if data is None:
            raise RuntimeError_(f"{BOOTSTRAP_LOG} not found (bootstrap not started?)")
        report.write(f"{name}/bootstrap.log", data)
    _safe(report, f"{name}: bootstrap log", bootstrap)
    for fname, cmd in NODE_COMMANDS.items():
        def run(fname: str = fname, cmd: list[str] = cmd) -> None:
            res = runtime.exec(name, cmd)
            report.write(f"{name}/{fname}", res.output)
            if res.exit_code != 0:
                raise RuntimeError_(f"{' '.join(cmd)}: exit {res.exit_code}")
        _safe(report, f"{name}: {fname}", run)

    def pods() -> None:
        n = copy_dir(runtime, name, "/var/log", "pods", report.dir / name)
        with report._lock:
            report.files += n
    _safe(report, f"{name}: /var/log/pods", pods)


def collect_workload(runtime: ContainerRuntime, report: Report, control_planes: list[str]) -> None:
    """kubectl's view of the workload cluster, from the first control-plane node that answers."""
    for cp in control_planes:
        try:
            res = runtime.exec(cp, ["sh", "-c", WORKLOAD_SCRIPT])
        except RuntimeError_ as e:
            report.error(f"workload.txt from {cp}: {e}")
            continue
        report.write("workload.txt", f"# from {cp}\n{res.output}")
        return


def collect_controllers(runtime: ContainerRuntime, report: Report, log_file: Path | None,
                        management_node: str | None) -> None:
    if log_file is not None:
        if log_file.exists():
            try:
                shutil.copyfile(log_file, report.dir / "controllers.log")
                report.files += 1
            except OSError as e:
                report.error(f"controllers log {log_file}: {e}")
        else:
            report.error(f"controllers log {log_file} does not exist")
    if management_node:
        info = runtime.get_container(management_node)
        if info is not None and info.running:
            def pods() -> None:
                n = copy_dir(runtime, management_node, "/var/log/pods", MANAGEMENT_PODS,
                             report.dir / "management" / "pods")
                with report._lock:
                    report.files += n
            # no match (controllers on the host): tar exits 2, nothing to report
            try:
                pods()
            except (RuntimeError_, OSError, tarfile.TarError) as e:
                if "exit 2" not in str(e):
                    report.error(f"in-cluster controllers' pod logs: {e}")


@dataclass
class Containers:
    nodes: list[str]
    control_planes: list[str]
    lb: str | None


def find_containers(runtime: ContainerRuntime, namespace: str, cluster: str) -> Containers:
    found = runtime.list_containers(labels={CONTAINER_CLUSTER: cluster, CONTAINER_NAMESPACE: namespace})
    nodes = sorted(c.name for c in found if CONTAINER_MACHINE in c.labels)
    cps = sorted(c.name for c in found if CONTAINER_MACHINE in c.labels and c.running
                 and c.labels.get("io.x-k8s.capd-py.role") == "control-plane")
    lb = lb_container_name(cluster)
    return Containers(nodes, cps, lb if any(c.name == lb for c in found) else None)


def export(runtime: ContainerRuntime, namespace: str, cluster: str, out: Path,
           objects: tuple[list[dict[str, Any]], list[dict[str, Any]]] | Exception,
           controllers_log: Path | None, management_node: str | None, version: str = "",
           progress: Callable[[str], None] | None = None,
           management_runtime: ContainerRuntime | None = None, host: str = "") -> Report:
    """Fill `out` (created when missing). `objects` is fetch_objects' answer, or why it could not be had.
    `runtime` is the docker endpoint of the cluster's docker host (docs/multihost.md); `management_runtime` the one
    the management node runs on (the local daemon), when it differs; `host` names the cluster's docker host."""
    say = progress or (lambda _m: None)
    found = find_containers(runtime, namespace, cluster)
    have_cluster = not isinstance(objects, Exception) and any(o.get("kind") == CLUSTER.kind for o in objects[0])
    if not found.nodes and found.lb is None and not have_cluster:
        why = f" (management cluster: {objects})" if isinstance(objects, Exception) else ""
        raise ExportError(f"unknown cluster {namespace}/{cluster}: no Cluster object and no containers{why}")
    out.mkdir(parents=True, exist_ok=True)
    report = Report(out)
    report.write("capd-py-version.txt", version + "\n")
    if host:
        report.write("docker-host.txt", host + "\n")
    if isinstance(objects, Exception):
        report.error(f"Cluster API objects: {objects}")
    else:
        report.write("objects.yaml", to_yaml(objects[0]))
        report.write("events.yaml", to_yaml(objects[1]))
    jobs: list[Callable[[], None]] = [partial(collect_container, runtime, report, n, True) for n in found.nodes]
    if found.lb:
        jobs.append(partial(collect_container, runtime, report, found.lb, False))
    jobs.append(partial(collect_workload, runtime, report, found.control_planes))
    jobs.append(partial(collect_controllers, management_runtime or runtime, report, controllers_log, management_node))
    say(f"{len(found.nodes)} node(s){', the load balancer' if found.lb else ''}, the controllers")
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="export-logs") as pool:
        for f in [pool.submit(j) for j in jobs]:
            f.result()
    if report.errors:
        report.write("errors.txt", "".join(f"{e}\n" for e in report.errors))
    return report
