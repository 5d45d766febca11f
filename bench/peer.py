"""Peer benchmark (issue 28 item 3): upstream Cluster API v1.13's own controllers against capd-py's, on this machine,
in one run, alternating, several rounds; medians and the ratio printed.

    .venv/bin/python bench/peer.py scale [--clusters 100] [--machines 10] [--rounds 3] [--sides capd-py,upstream]

`scale` -- controllers only: N classic clusters (1 control-plane Machine + M-1 workers of one MachineDeployment)
applied at once to a fresh envtest API server (etcd + kube-apiserver, `$CAPD_PY_CACHE`) per side and round:
- capd-py: its CRDs as `capd-py init` installs them (v1beta1 through the conversion webhook, the defaulting and
  validating webhooks), every controller in one child process (`capd-py controllers` minus docker: the in-memory
  FakeRuntime + fake workload clusters, capd_py/testing/fake_workload.py), the webhooks served by it;
- upstream: upstream's CRD bases and webhook configurations, its core, kubeadm bootstrap, kubeadm control-plane
  managers and CAPD's manager as the in-memory provider (`make upstream`), four host processes, upstream's
  default flags (`--kube-api-qps 100`, concurrency, ...).
Both apply the same objects (capd-py's default template without its CNI ClusterResourceSet; on the upstream side
DockerCluster/DockerMachineTemplate become DevCluster/DevMachineTemplate with `backend.inMemory: {}`: no
provisioning delays, as capd-py's fake has none). What differs and cannot be made equal: upstream's in-memory
workload clusters are real HTTPS API servers and an etcd gRPC endpoint inside CAPD's process; capd-py's fake
workloads are an in-memory store behind its Kube interface (no TLS, no HTTP).

Measured the same way for both, by the API server (its apiserver_request_total before and after) and /proc:
first apply -> every Machine Running and every Cluster Available; writes (POST/PUT/PATCH/DELETE, dry runs out,
the bench's own creates subtracted) per Machine and per worker Machine, Events apart; API-server CPU seconds per
write; CPU seconds of the controllers, kube-apiserver and etcd until Available; peak RSS (VmHWM) of the
controllers' processes; writes during a stable window after Available.

    .venv/bin/python bench/peer.py clusters [--rounds 2]

`clusters` -- real workload clusters from capd-py's default template (1 CP + 1 W, then 3 CP + 2 W and its
MachineDeployment scaled by +3), apply -> Cluster Available (MD +3: scale -> 5 available replicas), each side on a
fresh management plane (envtest + kube-controller-manager):
- capd-py: `capd-py controllers` (every controller, its webhooks), as the e2e tier runs it;
- upstream: upstream's CRD bases + webhook configurations, its core, kubeadm bootstrap and kubeadm control-plane
  managers and CAPD's manager (Docker backend). CAPD creates every container `--privileged`, which this host refuses;
  it reaches docker through capd_py/testing/docker_shim.py (the restricted mode instead, as capd-py's own runtime
  uses here). Node image: capd-py's, tagged kindest/node:<version>; load balancer kindest/haproxy.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import ExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import cpu_seconds, machine, peak_rss_mib, rss_mib  # noqa: E402

from capd_py.api import conditions as cond  # noqa: E402
from capd_py.api.gvk import CLUSTER, GVK, MACHINE  # noqa: E402
from capd_py.cli.generate import generate_cluster, parse_documents  # noqa: E402
from capd_py.kube import admission_webhook  # noqa: E402
from capd_py.kube.client import Kube, KubeError  # noqa: E402
from capd_py.kube.conversion_webhook import crds_serving_v1beta1, webhook_conversion  # noqa: E402
from capd_py.kube.crds import install_crds  # noqa: E402
from capd_py.kube.transport import Unreachable  # noqa: E402
from capd_py.reconcile.servingcert import host_mode_url, new_webhook_ca  # noqa: E402
from capd_py.testing import upstream_managers as um  # noqa: E402
from capd_py.testing.envtest import EnvTest, free_port, stop_process_group  # noqa: E402

NAMESPACE = "bench"
NS_GVK = GVK("", "v1", "Namespace", "namespaces", namespaced=False)
WRITE_VERBS = {"POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY"}
UPSTREAM_ROLES = ("core", "kubeadm-bootstrap", "kubeadm-control-plane", "in-memory")
_SAMPLE = re.compile(r'^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>[0-9.e+]+)$')
_LABEL = re.compile(r'(\w+)="([^"]*)"')
Obj = dict[str, Any]


# -- the objects ---------------------------------------------------------------------------------------------
def capd_py_objects(i: int, machines: int) -> list[Obj]:
    """capd-py's default template for cluster c<i> without the CNI ClusterResourceSet (the upstream side has no CNI)."""
    docs = parse_documents(generate_cluster(f"c{i:03d}", namespace=NAMESPACE, control_plane_machine_count=1,
                                            worker_machine_count=machines - 1, env={}))
    out = [d for d in docs if d["kind"] not in ("ConfigMap", "ClusterResourceSet")]
    for d in out:
        if d["kind"] == "Cluster":
            (d["metadata"].get("labels") or {}).pop("cni", None)
    return out


def upstream_objects(i: int, machines: int) -> list[Obj]:
    """The same objects for upstream's in-memory provider: Dev* kinds with `backend.inMemory`."""
    out = []
    for d in copy.deepcopy(capd_py_objects(i, machines)):
        if d["kind"] == "DockerCluster":
            # an annotation: v1.13's in-memory DevCluster backend panics on a nil annotations map
            # (inmemorycluster_backend.go:81; upstream's own in-memory flavor is a topology, whose controller
            # always annotates)
            d = {"apiVersion": d["apiVersion"], "kind": "DevCluster",
                 "metadata": {"name": d["metadata"]["name"], "namespace": NAMESPACE,
                              "annotations": {"bench.capd-py.dev/peer": "upstream"}},
                 "spec": {"backend": {"inMemory": {}}}}
        elif d["kind"] == "DockerMachineTemplate":
            d = {"apiVersion": d["apiVersion"], "kind": "DevMachineTemplate",
                 "metadata": {"name": d["metadata"]["name"], "namespace": NAMESPACE},
                 "spec": {"template": {"spec": {"backend": {"inMemory": {}}}}}}
        out.append(json.loads(json.dumps(d).replace('"kind": "DockerCluster"', '"kind": "DevCluster"')
                              .replace('"kind": "DockerMachineTemplate"', '"kind": "DevMachineTemplate"')))
    return out


def _gvk(o: Obj) -> GVK:
    group, _, version = o["apiVersion"].rpartition("/")
    plural = o["kind"].lower() + ("es" if o["kind"].endswith("s") else "s")
    return GVK(group, version, o["kind"], plural, namespaced=True)


# -- API server counters -------------------------------------------------------------------------------------
async def request_counts(kube: Kube) -> Counter[tuple[str, str, str]]:
    """apiserver_request_total summed by (verb, resource, subresource), dry runs left out."""
    assert kube._transport is not None
    status, _, data = await kube._transport.request("GET", "/metrics")
    if status != 200:
        raise RuntimeError(f"GET /metrics: {status}")
    out: Counter[tuple[str, str, str]] = Counter()
    for line in data.decode().splitlines():
        m = _SAMPLE.match(line)
        if not m:
            continue
        labels = dict(_LABEL.findall(m["labels"]))
        if labels.get("dry_run"):
            continue
        out[(labels.get("verb", ""), labels.get("resource", ""), labels.get("subresource", ""))] += int(
            float(m["value"]))
    return out


def writes_of(delta: Counter[tuple[str, str, str]]) -> tuple[int, int, Counter[str]]:
    """(writes but Events, Events written, writes by resource[/subresource])."""
    by: Counter[str] = Counter()
    events = 0
    for (verb, res, sub), n in delta.items():
        if verb not in WRITE_VERBS or n <= 0:
            continue
        if res == "events":
            events += n
            continue
        by[res + (f"/{sub}" if sub else "")] += n
    return sum(by.values()), events, by


# -- the two sides -------------------------------------------------------------------------------------------
@asynccontextmanager
async def capd_py_side(env: EnvTest) -> AsyncIterator[list[int]]:
    """capd-py's CRDs + webhooks as `capd-py init` (host mode) installs them; its controllers in a child process."""
    port = free_port()
    url = host_mode_url("127.0.0.1", port)
    ca = new_webhook_ca()
    kube = env.kube()
    try:
        await install_crds(kube, wait=True, crds=crds_serving_v1beta1(webhook_conversion(ca.cert, url=url)))
        await admission_webhook.install(kube, admission_webhook.configurations(ca.cert, url=url))
    finally:
        kube.close()
    log = open(Path(tempfile.gettempdir()) / f"peer-capd-py-{port}.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen([sys.executable, __file__, "capd-py-controllers", str(env.kubeconfig_path)],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield [proc.pid]
    finally:
        stop_process_group(proc, 15)
        log.close()


@asynccontextmanager
async def upstream_side(env: EnvTest) -> AsyncIterator[list[int]]:
    """Upstream's CRD bases, its four managers, their webhook configurations."""
    kube = env.kube()
    try:
        with ExitStack() as stack:
            managers = await um.serve(kube, env.kubeconfig_path, stack, UPSTREAM_ROLES)
            assert all(m.proc is not None for m in managers)
            yield [m.proc.pid for m in managers if m.proc is not None]
    finally:
        kube.close()


SIDES = {"capd-py": (capd_py_side, capd_py_objects), "upstream": (upstream_side, upstream_objects)}


# -- one measured run ----------------------------------------------------------------------------------------
async def _admitted(kube: Kube, objs: list[Obj], timeout: float = 120) -> None:
    """Every object of one cluster passes a server-side dry run (CRDs, conversion and admission webhooks answer)."""
    t0 = time.monotonic()
    while True:
        try:
            for o in objs:
                g = _gvk(o)
                await kube.acall("POST", f"/apis/{g.group}/{g.version}/namespaces/{NAMESPACE}/{g.plural}", o,
                                 query=[("dryRun", "All")])
            return
        except KubeError as e:
            if time.monotonic() - t0 > timeout:
                raise RuntimeError(f"webhooks not answering after {timeout:.0f} s: {e}") from e
            await asyncio.sleep(1)


async def measure(side: str, clusters: int, machines: int, duration: float, stable: float) -> dict[str, Any]:
    start_side, objects = SIDES[side]
    env = EnvTest().start()
    try:
        async with start_side(env) as pids:
            return await _measure(env, side, pids, objects, clusters, machines, duration, stable)
    finally:
        env.stop()


async def _measure(env: EnvTest, side: str, pids: list[int], objects: Any, clusters: int, machines: int,
                   duration: float, stable: float) -> dict[str, Any]:
    kube = env.kube()
    api_pid, etcd_pid = env._procs["kube-apiserver"].pid, env._procs["etcd"].pid
    try:
        await kube.create(NS_GVK, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        await _admitted(kube, objects(0, machines))
        counts0 = await request_counts(kube)
        cpu0 = [cpu_seconds(p) for p in (*pids, api_pid, etcd_pid)]
        t0 = time.monotonic()
        sem = asyncio.Semaphore(16)
        created = 0

        async def create(i: int) -> None:
            nonlocal created
            async with sem:
                for o in objects(i, machines):
                    await kube.create(_gvk(o), o)
                    created += 1
        await asyncio.gather(*(create(i) for i in range(clusters)))
        t_applied = time.monotonic() - t0
        want = clusters * machines
        t_running = t_available = None
        api_peak = 0.0
        n_run = n_av = 0
        poll_errors: list[str] = []
        while time.monotonic() - t0 < duration:
            await asyncio.sleep(2)
            api_peak = max(api_peak, rss_mib(api_pid))
            try:
                n_run = sum(1 for m in await kube.list(MACHINE, NAMESPACE)
                            if (m.get("status") or {}).get("phase") == "Running")
                n_av = sum(1 for c in await kube.list(CLUSTER, NAMESPACE) if cond.is_true(c, cond.AVAILABLE))
            except (Unreachable, KubeError) as e:  # a saturated API server times out a list: count it, go on
                poll_errors.append(f"{time.monotonic() - t0:.0f}s: {e}"[:200])
                continue
            now = time.monotonic() - t0
            if t_running is None and n_run >= want:
                t_running = now
            sys.stderr.write(f"\r {side}: t={now:6.1f}s running={n_run}/{want} available={n_av}/{clusters} ")
            if n_av >= clusters and t_running is not None:
                t_available = now
                break
        sys.stderr.write("\n")
        cpu1 = [cpu_seconds(p) for p in (*pids, api_pid, etcd_pid)]
        counts1 = await request_counts(kube)
        t_s = time.monotonic()
        while t_available is not None and time.monotonic() - t_s < stable:
            await asyncio.sleep(2)
            api_peak = max(api_peak, rss_mib(api_pid))
        counts2 = await request_counts(kube)
        rss = [peak_rss_mib(p) for p in pids]
    finally:
        kube.close()
    writes, events, by = writes_of(counts1 - counts0)
    writes -= created  # the bench's own creates (all succeeded: a failure raised)
    stable_writes, stable_events, _ = writes_of(counts2 - counts1)
    cpu = [b - a for a, b in zip(cpu0, cpu1, strict=True)]
    n_ctrl = len(pids)
    all_writes = writes + created + events
    return {
        "side": side, "clusters": clusters, "machines": machines, "applied_s": t_applied,
        "running_s": t_running, "available_s": t_available, "machines_running": n_run, "clusters_available": n_av,
        "writes": writes, "events": events, "bench_creates": created,
        "writes_per_machine": writes / want, "writes_per_worker_machine": writes / (clusters * (machines - 1)),
        "writes_by_resource": dict(by.most_common()),
        "controllers_cpu_s": sum(cpu[:n_ctrl]), "apiserver_cpu_s": cpu[n_ctrl], "etcd_cpu_s": cpu[n_ctrl + 1],
        "apiserver_cpu_ms_per_write": 1000 * cpu[n_ctrl] / max(all_writes, 1),
        "controllers_peak_rss_mib": sum(rss), "controllers_peak_rss_each": rss, "apiserver_peak_rss_mib": api_peak,
        "stable_window_s": stable if t_available is not None else 0, "stable_writes": stable_writes,
        "stable_events": stable_events, "poll_errors": poll_errors,
    }


# -- real clusters --------------------------------------------------------------------------------------------
CLUSTER_SCENARIOS = (("1cp1w", 1, 1, 0), ("3cp2w", 3, 2, 3))  # name, control planes, workers, MD scale-up after


def _kubectl(kubeconfig: str, *args: str, input_: str | None = None, check: bool = True) -> str:
    from capd_py.testing.e2e import kubectl_bin, run
    return run([kubectl_bin(), "--kubeconfig", kubeconfig, *args], input_=input_, check=check).stdout


def _until(what: str, probe: Any, timeout: float) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            if probe():
                return time.monotonic() - t0
        except (subprocess.SubprocessError, AssertionError, ValueError, KeyError):
            pass
        time.sleep(1)
    raise RuntimeError(f"{what}: not reached in {timeout:.0f} s")


def _cond(obj: Obj, ctype: str) -> bool:
    return any(c.get("type") == ctype and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


def _get(kubeconfig: str, kind: str, name: str) -> Obj:
    return dict(json.loads(_kubectl(kubeconfig, "get", kind, name, "-o", "json")))


@asynccontextmanager
async def _upstream_plane(tmp: Path) -> AsyncIterator[tuple[str, list[int]]]:
    """envtest (+ kube-controller-manager) with upstream's CRDs, webhooks and four managers, CAPD through the shim."""
    from capd_py.testing import docker_shim
    from capd_py.testing.e2e import run
    env = EnvTest(controller_manager=True).start()
    made_net = run(["docker", "network", "inspect", "kind"], check=False).returncode != 0
    if made_net:  # CAPD's default network (a kind management cluster would have made it)
        run(["docker", "network", "create", "--label", "io.x-k8s.capd-py.test=peer-bench", "kind"])
    try:
        kube = env.kube()
        try:
            with docker_shim.running(tmp / "docker-shim.sock") as shim, ExitStack() as stack:
                managers = await um.serve(kube, env.kubeconfig_path, stack,
                                          ("core", "kubeadm-bootstrap", "kubeadm-control-plane", "docker"),
                                          {"docker": {"DOCKER_HOST": f"unix://{shim.listen}"}})
                yield str(env.kubeconfig_path), [m.proc.pid for m in managers if m.proc is not None]
        finally:
            kube.close()
    finally:
        env.stop()
        if made_net:
            run(["docker", "network", "rm", "kind"], check=False)


@asynccontextmanager
async def _capd_py_plane(tmp: Path) -> AsyncIterator[tuple[str, list[int]]]:
    from capd_py.cli.management import privileged_mode
    from capd_py.testing.e2e import management_plane
    # management_plane runs its own event loop (asyncio.run) while it starts and stops: not on this one's thread.
    # The privilege mode as `capd-py init` (and `make`) hands it to the controllers: without it their first node
    # container tries --privileged, is refused here and is made again (~0.7 s that users do not pay).
    cm = management_plane(tmp / "controllers.log", env={"CAPD_PY_PRIVILEGED_MODE": privileged_mode()})
    m = await asyncio.to_thread(cm.__enter__)
    try:
        # ready as the upstream side is before its first apply (its managers healthy and their controllers
        # started): the controllers say they started, and the webhooks admit a cluster (a server-side dry run).
        # Before (until 2026-12-05) the first capd-py cluster's time included the controllers' start (~2 s).
        _until("capd-py controllers started",
               lambda: "capd-py controllers started" in m.log.read_text(errors="replace"), 120)
        _until("capd-py webhooks answering", lambda: _kubectl(m.kubeconfig, "apply", "--dry-run=server", "-f", "-",
                                                              input_=_manifest("peer-ready", 1, 1)) is not None, 120)
        yield m.kubeconfig, [m.pid] if m.pid is not None else []
    finally:
        await asyncio.to_thread(cm.__exit__, None, None, None)


def _manifest(name: str, cp: int, workers: int) -> str:
    from capd_py.testing.e2e import CAPD, run
    return run([*CAPD, "generate", "cluster", name, "--control-plane-machine-count", str(cp),
                "--worker-machine-count", str(workers)]).stdout


def _delete(kubeconfig: str, name: str) -> float:
    from capd_py.testing.e2e import docker_leftovers, run
    t0 = time.monotonic()
    _kubectl(kubeconfig, "delete", "cluster", name, "--wait=false")
    _until(f"{name} deleted", lambda: not _kubectl(kubeconfig, "get", "clusters", "-o", "name").split(), 600)
    took = time.monotonic() - t0
    _kubectl(kubeconfig, "delete", "clusterresourceset", f"{name}-crs-0", "--ignore-not-found", check=False)
    _kubectl(kubeconfig, "delete", "configmap", f"cni-{name}-crs-0", "--ignore-not-found", check=False)
    left = docker_leftovers(name)
    for c in run(["docker", "ps", "-a", "--format", "{{.Names}}"]).stdout.split():
        if c.startswith(name):  # CAPD's containers carry no capd-py label
            run(["docker", "rm", "-f", "-v", c], check=False)
    if any(left.values()):
        sys.stderr.write(f"   leftovers after deleting {name}: {left}\n")
    return took


async def _phases(kubeconfig: str, name: str) -> str:
    from phases import phases  # bench/phases.py: the object timeline
    kube = Kube.from_kubeconfig(kubeconfig)
    try:
        return await phases(kube, "default", name)
    finally:
        kube.close()


async def measure_clusters(side: str, rnd: int, tmp: Path, show_phases: bool = False,
                           scenarios: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    plane = _capd_py_plane if side == "capd-py" else _upstream_plane
    out: list[dict[str, Any]] = []
    async with plane(tmp) as (kubeconfig, pids):
        for scenario, cp, workers, scale in CLUSTER_SCENARIOS:
            if scenarios and scenario not in scenarios:
                continue
            name = f"peer-{'c' if side == 'capd-py' else 'u'}{rnd}-{scenario}"
            manifest = _manifest(name, cp, workers)
            t0 = time.monotonic()
            _kubectl(kubeconfig, "apply", "-f", "-", input_=manifest)
            try:
                _until(f"{side} {name} Available", lambda n=name: _cond(_get(kubeconfig, "cluster", n), "Available"),
                       900)
                available = time.monotonic() - t0
                sys.stderr.write(f"   {side} {scenario}: Available after {available:.1f} s\n")
                if show_phases:
                    sys.stderr.write(await _phases(kubeconfig, name) + "\n")
                out.append({"side": side, "round": rnd, "scenario": scenario, "value": available})
                if scale:
                    md = f"{name}-md-0"
                    want = workers + scale
                    t1 = time.monotonic()
                    _kubectl(kubeconfig, "scale", "machinedeployment", md, f"--replicas={want}")
                    _until(f"{md} {want} available", lambda md=md, want=want: int(
                        (_get(kubeconfig, "machinedeployment", md).get("status") or {}).get("availableReplicas")
                        or 0) >= want, 900)
                    took = time.monotonic() - t1
                    sys.stderr.write(f"   {side} MD +{scale}: {want} available after {took:.1f} s\n")
                    out.append({"side": side, "round": rnd, "scenario": f"md+{scale}", "value": took})
            finally:
                deleted = _delete(kubeconfig, name)
                out.append({"side": side, "round": rnd, "scenario": f"delete {scenario}", "value": deleted})
        # VmHWM is the process's peak over its life: read once every scenario ran, before the plane stops
        rss = [peak_rss_mib(p) for p in pids]
        cpu = [cpu_seconds(p) for p in pids]
        sys.stderr.write(f"   {side} controllers: peak RSS {rss} MiB, CPU {cpu} s\n")
        out.append({"side": side, "round": rnd, "scenario": "peak RSS controllers (MiB)", "value": sum(rss)})
        out.append({"side": side, "round": rnd, "scenario": "CPU controllers, whole round (s)", "value": sum(cpu)})
    return out


def report_clusters(results: list[dict[str, Any]]) -> str:
    scenarios = list(dict.fromkeys(r["scenario"] for r in results))
    lines = ["scenario | capd-py median | upstream median | capd-py / upstream | rounds",
             "--- | --- | --- | --- | ---"]
    for sc in scenarios:
        a = [r["value"] for r in results if r["scenario"] == sc and r["side"] == "capd-py"]
        b = [r["value"] for r in results if r["scenario"] == sc and r["side"] == "upstream"]
        ma = statistics.median(a) if a else None
        mb = statistics.median(b) if b else None
        ratio = f"{ma / mb:.2f}" if ma is not None and mb else "-"
        lines.append(f"{sc} | {ma and f'{ma:.1f}'} | {mb and f'{mb:.1f}'} | {ratio} | "
                     f"{' '.join(f'{x:.0f}' for x in a)} / {' '.join(f'{x:.0f}' for x in b)}")
    return "\n".join(lines)


# -- the capd-py controllers child ---------------------------------------------------------------------------
def capd_py_controllers(kubeconfig: str) -> int:
    """Every capd-py controller and its webhooks, with the in-memory FakeRuntime and fake workload clusters."""
    from capd_py.controllers.manager import Manager
    from capd_py.controllers.operator import run
    from capd_py.testing.fake_runtime import FakeRuntime
    from capd_py.testing.fake_workload import FakeWorkloadEtcd, FakeWorkloads

    runtime = FakeRuntime()

    def on_manager(m: Manager) -> None:
        workloads = FakeWorkloads(m.ctx.kube, runtime)
        m.ctx.workload = workloads
        m.ctx.etcd = FakeWorkloadEtcd(workloads)

    asyncio.run(run(kubeconfig, runtime=runtime, on_manager=on_manager))
    return 0


# -- report --------------------------------------------------------------------------------------------------
ROWS = [
    ("first apply -> all Machines Running (s)", "running_s", "{:.1f}"),
    ("first apply -> every Cluster Available (s)", "available_s", "{:.1f}"),
    ("apply (s)", "applied_s", "{:.1f}"),
    ("controller writes until Available (Events apart)", "writes", "{:.0f}"),
    ("writes per Machine", "writes_per_machine", "{:.1f}"),
    ("writes per worker Machine", "writes_per_worker_machine", "{:.1f}"),
    ("Events written", "events", "{:.0f}"),
    ("API-server CPU per write (ms)", "apiserver_cpu_ms_per_write", "{:.2f}"),
    ("CPU s until Available: controllers", "controllers_cpu_s", "{:.1f}"),
    ("CPU s until Available: kube-apiserver", "apiserver_cpu_s", "{:.1f}"),
    ("CPU s until Available: etcd", "etcd_cpu_s", "{:.1f}"),
    ("peak RSS controllers (MiB, all processes)", "controllers_peak_rss_mib", "{:.0f}"),
    ("peak RSS kube-apiserver (MiB)", "apiserver_peak_rss_mib", "{:.0f}"),
    ("writes in the stable window (Events apart)", "stable_writes", "{:.0f}"),
]


def report(results: list[dict[str, Any]], sides: list[str]) -> str:
    def med(side: str, key: str) -> float | None:
        xs = [r[key] for r in results if r["side"] == side and r[key] is not None]
        return statistics.median(xs) if xs else None

    rounds = max(sum(1 for r in results if r["side"] == s) for s in sides)
    head = ["", *(f"{s} (median of {rounds})" for s in sides)] + (["capd-py / upstream"] if len(sides) == 2 else [])
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for label, key, fmt in ROWS:
        vals = [med(s, key) for s in sides]
        cells = [label, *(fmt.format(v) if v is not None else "not reached" for v in vals)]
        if len(sides) == 2:
            a, b = vals
            cells.append(f"{a / b:.2f}" if a is not None and b not in (None, 0) else "-")
        lines.append(" | ".join(cells))
    per_round = [f"{r['side']}: available {r['available_s']}, writes {r['writes']}" for r in results]
    return "\n".join(lines) + "\n\nrounds, in order:\n" + "\n".join(per_round)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("scale", help="controllers only, N clusters x M machines, both sides alternately")
    s.add_argument("--clusters", type=int, default=100)
    s.add_argument("--machines", type=int, default=10, help="per cluster: 1 control plane + the rest workers")
    s.add_argument("--rounds", type=int, default=3)
    s.add_argument("--duration", type=float, default=900, help="give up waiting for Available after this long")
    s.add_argument("--stable", type=float, default=30, help="seconds of writes counted after Available")
    s.add_argument("--sides", default="capd-py,upstream")
    s.add_argument("--json", type=Path, help="write every round's figures here")
    k = sub.add_parser("clusters", help="real clusters: 1 CP + 1 W, 3 CP + 2 W, MD +3, both sides alternately")
    k.add_argument("--rounds", type=int, default=2)
    k.add_argument("--sides", default="capd-py,upstream")
    k.add_argument("--json", type=Path)
    k.add_argument("--phases", action="store_true", help="print each cluster's object timeline once Available")
    k.add_argument("--scenarios", default="", help="only these (comma-separated: 1cp1w,3cp2w); default all")
    c = sub.add_parser("capd-py-controllers", help=argparse.SUPPRESS)
    c.add_argument("kubeconfig")
    a = p.parse_args(argv)
    if a.cmd == "capd-py-controllers":
        return capd_py_controllers(a.kubeconfig)
    sides = a.sides.split(",")
    if a.cmd == "clusters":
        return clusters_main(a.rounds, sides, a.json, a.phases,
                             tuple(x.strip() for x in a.scenarios.split(",") if x.strip()))
    if "upstream" in sides and um.missing():
        sys.stderr.write(f"{um.missing()}\n")
        return 2
    sys.stderr.write(f"machine: {machine()}\nload average at start: {os.getloadavg()}\n")
    results: list[dict[str, Any]] = []
    for rnd in range(a.rounds):
        for side in sides if rnd % 2 == 0 else list(reversed(sides)):
            sys.stderr.write(f" • round {rnd + 1}/{a.rounds}: {side} {a.clusters} x {a.machines}\n")
            r = asyncio.run(measure(side, a.clusters, a.machines, a.duration, a.stable))
            r["round"] = rnd + 1
            r["loadavg_after"] = os.getloadavg()
            results.append(r)
            sys.stderr.write(f"   {json.dumps({k: v for k, v in r.items() if k != 'writes_by_resource'})}\n")
            if a.json:
                a.json.write_text(json.dumps(results, indent=1))
    print(f"peer scale: {a.clusters} clusters x {a.machines} machines, {a.rounds} rounds; {machine()}")
    print(report(results, sides))
    return 0


def clusters_main(rounds: int, sides: list[str], out: Path | None, show_phases: bool = False,
                  scenarios: tuple[str, ...] = ()) -> int:
    if "upstream" in sides and um.missing():
        sys.stderr.write(f"{um.missing()}\n")
        return 2
    # without dockerd capd-py's controllers exit at start and the rounds would only wait out their timeouts
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        sys.stderr.write("dockerd is not answering: start it (bash hack/ensure-docker.sh)\n")
        return 2
    sys.stderr.write(f"machine: {machine()}\nload average at start: {os.getloadavg()}\n")
    results: list[dict[str, Any]] = []
    for rnd in range(rounds):
        for side in sides if rnd % 2 == 0 else list(reversed(sides)):
            sys.stderr.write(f" • round {rnd + 1}/{rounds}: {side}\n")
            with tempfile.TemporaryDirectory(prefix="peer-clusters-") as tmp:
                results += asyncio.run(measure_clusters(side, rnd + 1, Path(tmp), show_phases, scenarios))
            if out:
                out.write_text(json.dumps(results, indent=1))
    print(f"peer clusters: {rounds} rounds; {machine()}")
    print(report_clusters(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
