"""Controller-only scale benchmark: every capd-py controller (kopf watches + the Manager's queue)
against a real envtest API server (etcd + kube-apiserver), on the user-facing in-memory backend: the clusters are
`capd-py generate cluster --flavor in-memory` (upstream v1.14's DevCluster / DevMachineTemplate with
`spec.backend.inMemory`, startup durations 0s), so no container is made and each workload cluster is the
controllers' in-memory one (capd_py/kube/inmemory_api.py, served through the same WorkloadClients and etcd clients
`capd-py controllers` runs: docs/dev-kinds.md). The container runtime is the FakeRuntime only because the process
needs one (nothing uses it: the benchmark checks that no container was made).
N clusters of 1 control-plane machine + M-1 workers each are applied at once.

    .venv/bin/python bench/scale_fake.py [--clusters 100] [--machines 10] [--duration 600] [--namespace-per-cluster]

Prints a table:
- time from the last apply until every Machine is Running and every Cluster is Available;
- the controllers' API writes until then, and the API server's write floor measured in the same run: a
  plain async client (asyncio.gather under a semaphore) making as many writes (creates + status updates of
  DevMachines in a fresh namespace, the controllers stopped) -- and the ratio of the two times;
- once stable: API writes over 60 s (target 0), and the no-op reconcile p50/p90 (every key enqueued once,
  the handler calls timed);
- reconciles per second, cache vs API reads by kind, peak memory of this process (the controllers) and of
  the API server.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import statistics
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import cpu_seconds, machine, peak_rss_mib, rss_mib, table  # noqa: E402

from capd_py.api import conditions as cond  # noqa: E402
from capd_py.api.gvk import CLUSTER, DEV_MACHINE, GVK, MACHINE  # noqa: E402
from capd_py.cli.apply import apply_objects  # noqa: E402
from capd_py.cli.generate import generate_cluster, parse_documents  # noqa: E402
from capd_py.controllers.manager import Manager  # noqa: E402
from capd_py.controllers.operator import run  # noqa: E402
from capd_py.controllers.queue import Key, Result  # noqa: E402
from capd_py.kube.cache import Store  # noqa: E402
from capd_py.kube.client import Kube, KubeError, WriteCounter  # noqa: E402
from capd_py.kube.crds import install_crds  # noqa: E402
from capd_py.testing.envtest import EnvTest  # noqa: E402
from capd_py.testing.fake_runtime import FakeRuntime  # noqa: E402

NAMESPACE = GVK("", "v1", "Namespace", "namespaces", namespaced=False)
WRITES = ("create", "apply", "merge_patch", "json_patch", "replace", "delete_returning")
STABLE_WINDOW = 60.0


class Meter:
    """The controllers' API writes (the Manager's WriteCounter, by kind), the Manager's handler calls timed, and
    with --trace-writes / --write-paths every write looked at (the Kube's write methods wrapped)."""

    def __init__(self) -> None:
        self.counter = WriteCounter()  # the Manager's, once it exists (`attach`)
        self.mgr: Manager | None = None
        self.timing = False
        self.durations: list[float] = []
        self.timed_keys: set[Key] = set()
        self.trace: str | None = None  # a cluster name: print every write to its objects (stderr)
        # --write-paths: writes by (kind, verb, calling function, field paths the write changes)
        self.paths: Counter[tuple[str, str, str, str]] | None = None
        self.store: Store | None = None

    def attach(self, mgr: Manager) -> None:
        self.mgr, self.counter, self.store = mgr, mgr.writes, mgr.store
        self.wrap_handler(mgr)
        if self.trace or self.paths is not None:
            self.wrap_kube(mgr.ctx.kube)

    def _kinds(self) -> dict[str, GVK]:
        """plural -> GVK of every kind the Manager watches (dynamic watches included)."""
        if self.mgr is None:
            return {}
        return {g.plural: g for g in [*self.mgr.watched(), *(i.gvk for i in self.mgr.informers.values())]}

    @property
    def total(self) -> int:
        return self.counter.total

    @property
    def writes(self) -> Counter[str]:
        """Writes by kind (a resource no watched kind names: its plural)."""
        kinds = self._kinds()
        out: Counter[str] = Counter()
        for (_, res), n in self.counter.by_resource.items():
            out[kinds[res].kind if res in kinds else res] += n
        return out

    @property
    def creates(self) -> Counter[str]:
        kinds = self._kinds()
        return Counter({kinds[res].kind if res in kinds else res: n
                        for (verb, res), n in self.counter.by_resource.items() if verb == "POST"})

    @property
    def gvks(self) -> dict[str, GVK]:
        """The GVK of every watched kind written."""
        kinds = self._kinds()
        return {kinds[res].kind: kinds[res] for _, res in self.counter.by_resource if res in kinds}

    def wrap_kube(self, kube: Kube) -> None:
        for name in WRITES:
            orig = getattr(kube, name)

            def make(orig: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
                async def looked_at(gvk: GVK, *a: Any, **kw: Any) -> Any:
                    if self.trace:
                        self._trace(orig.__name__, gvk, a, kw)
                    if self.paths is not None:
                        try:
                            changed = self._changed(orig.__name__, gvk, a, kw)
                        except Exception as e:  # noqa: BLE001 - a measurement aid must not break the run
                            changed = f"? {e!r}"
                        where = (gvk.kind, orig.__name__, _caller(), changed)
                        self.paths[where] += 1
                        try:
                            return await orig(gvk, *a, **kw)
                        except KubeError as e:  # refused writes cost the API server too: say which
                            self.paths[(*where[:3], f"REFUSED {e.status}")] += 1
                            raise
                    return await orig(gvk, *a, **kw)
                return looked_at
            setattr(kube, name, make(orig))

    def _trace(self, verb: str, gvk: GVK, a: tuple[Any, ...], kw: dict[str, Any]) -> None:
        obj = next((x for x in a if isinstance(x, dict) and "metadata" in x), None)
        name = obj["metadata"].get("name") or obj["metadata"].get("generateName") if obj else a[1]
        if self.trace and self.trace in json.dumps(obj or a, default=str):
            body = [x for x in a if isinstance(x, (dict, list))]
            print(f"WRITE {time.monotonic():.2f} {gvk.kind} {name} {verb} {kw or ''} "
                  f"{json.dumps(body, default=str)[:400]}", file=sys.stderr)

    def _changed(self, verb: str, gvk: GVK, a: tuple[Any, ...], kw: dict[str, Any]) -> str:
        """The field paths a write changes against the cached copy (conditions by type), as one string."""
        if verb in ("create", "delete_returning"):
            return "-"
        if verb in ("merge_patch", "json_patch"):  # (namespace, name, patch or ops, [subresource])
            old = (self.store.get(gvk, a[0], a[1]) if self.store else None) or {}
            if verb == "json_patch":
                return ",".join(sorted({op.get("path", "") for op in a[2]}))
            return ",".join(sorted(_diff(old, a[2], only_new=True))) or "(none)"
        obj = a[0]
        old = (self.store.get(gvk, obj["metadata"].get("namespace"), obj["metadata"]["name"])
               if self.store else None) or {}
        sub = kw.get("subresource") or (a[1] if len(a) > 1 and isinstance(a[1], str) else None)
        if sub == "status":
            return ",".join(sorted(_diff({"status": old.get("status") or {}},
                                         {"status": obj.get("status") or {}}))) or "(none)"
        keep = ("metadata", "spec") if verb == "replace" else tuple(obj)
        return ",".join(sorted(_diff({k: old.get(k) for k in keep}, {k: obj.get(k) for k in keep},
                                     only_new=verb == "apply"))) or "(none)"

    def wrap_handler(self, mgr: Manager) -> None:
        orig = mgr.queue._handler

        async def timed(key: Key) -> Result | None:
            t = time.perf_counter()
            try:
                return await orig(key)
            finally:
                if self.timing:
                    self.durations.append(time.perf_counter() - t)
                    self.timed_keys.add(key)
        mgr.queue._handler = timed


IGNORED = {"resourceVersion", "managedFields", "generation", "uid", "creationTimestamp", "apiVersion", "kind"}


def _diff(old: Any, new: Any, path: str = "", only_new: bool = False, depth: int = 0) -> set[str]:
    """Paths (up to 4 deep) where `new` differs from `old`; conditions are keyed by type. `only_new`: look
    only at what `new` names (a merge patch or an applied configuration)."""
    if isinstance(old, dict) and isinstance(new, dict) and depth < 4:
        keys = set(new) if only_new else set(old) | set(new)
        out: set[str] = set()
        for k in keys - IGNORED:
            out |= _diff(old.get(k), new.get(k), f"{path}.{k}" if path else k, only_new, depth + 1)
        return out
    if path.endswith("conditions") and isinstance(new, list) and isinstance(old, list | None):
        by_type = {c.get("type"): c for c in old or []}
        return {f"{path}[{c.get('type')}]" + ("" if c.get("type") in by_type else "+")
                for c in new if by_type.get(c.get("type")) != c} | (
                {f"{path}-"} if {c.get("type") for c in new} < set(by_type) else set())
    return {path} if old != new else set()


def _caller() -> str:
    """The first capd_py function outside the kube layer on the stack: who wrote."""
    f = sys._getframe(2)
    while f is not None:
        fn = f.f_code.co_filename
        if "capd_py" in fn and "/kube/" not in fn:
            return f"{Path(fn).stem}.{f.f_code.co_name}"
        f = f.f_back  # type: ignore[assignment]
    return "?"


def available(c: dict[str, Any]) -> bool:
    return cond.is_true(c, cond.AVAILABLE)


def running(m: dict[str, Any]) -> bool:
    return (m.get("status") or {}).get("phase") == "Running"


def describe_one(mgr: Manager, ns: str, cluster: str) -> str:
    """The conditions of one Cluster, its control plane and its Machines (what blocks)."""
    st = mgr.store
    out = []
    c = st.get(CLUSTER, ns, cluster)
    objs: list[dict[str, Any]] = [c] if c else []
    for kind in ("KubeadmControlPlane", "MachineDeployment", "Machine"):
        g = next((g for g in mgr.watched() if g.kind == kind), None)
        if g is not None:
            objs += [o for o in st.list(g, ns) if (o["metadata"].get("labels") or {}).get(
                "cluster.x-k8s.io/cluster-name") == cluster or o["metadata"]["name"] == cluster]
    for o in objs:
        out.append(f"  {o['kind']} {o['metadata']['name']} phase={(o.get('status') or {}).get('phase')}")
        for cd in (o.get("status") or {}).get("conditions") or []:
            if cd.get("status") != "True":
                out.append(f"    {cd['type']}={cd['status']} {cd.get('reason')}: {(cd.get('message') or '')[:160]}")
    return "\n".join(out)


async def write_floor(kube: Kube, writes: int, concurrency: int) -> float:
    """`writes` API writes from a plain async client: creates and status updates of DevMachines."""
    ns = f"floor-{int(time.time())}"
    await kube.create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    n_obj = (writes + 1) // 2
    sem = asyncio.Semaphore(concurrency)
    status = {"conditions": [{"type": "Ready", "status": "True", "reason": "Bench", "message": "",
                              "lastTransitionTime": "2026-01-01T00:00:00Z"}]}

    async def one(i: int) -> None:
        async with sem:
            o = await kube.create(DEV_MACHINE, {"apiVersion": DEV_MACHINE.api_version, "kind": "DevMachine",
                                                "metadata": {"name": f"w{i:06d}", "namespace": ns},
                                                "spec": {"backend": {"inMemory": {}}}})
            if 2 * i + 1 < writes:
                await kube.patch_status(DEV_MACHINE, o, status)
    t = time.monotonic()
    await asyncio.gather(*(one(i) for i in range(n_obj)))
    return time.monotonic() - t


def replay_plan(writes: Counter[str], creates: Counter[str], gvks: dict[str, GVK],
                samples: dict[str, dict[str, Any]]) -> list[tuple[GVK, dict[str, Any], int, int]]:
    """(kind, template object, objects to create, updates) per kind the controllers wrote, for kinds with a
    sample object (Events are not watched: left out)."""
    plan = []
    for kind, n in writes.items():
        if kind not in samples or kind not in gvks:
            continue
        n_create = creates.get(kind, 0)
        plan.append((gvks[kind], samples[kind], max(n_create, 1), max(n - n_create, 0)))
    return plan


async def replay_floor(kube: Kube, plan: list[tuple[GVK, dict[str, Any], int, int]], concurrency: int) -> tuple[
        float, int]:
    """The controllers' write mix from a plain client: per kind, as many creates of a copy of a real object
    and as many updates (a status PUT changing one condition's message, or an annotation patch for kinds
    without conditions) as the controllers made. Returns (seconds, writes)."""
    ns = f"replay-{int(time.time())}"
    await kube.create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    sem = asyncio.Semaphore(concurrency)
    jobs: list[Callable[[], Awaitable[int]]] = []
    for g, sample, n_obj, n_upd in plan:
        md = sample["metadata"]
        base = {k: v for k, v in sample.items() if k not in ("metadata", "status")}
        status = sample.get("status") or {}
        conds = status.get("conditions") or []
        for i in range(n_obj):
            k = n_upd // n_obj + (1 if i < n_upd % n_obj else 0)

            async def chain(i: int = i, k: int = k, g: GVK = g, base: dict[str, Any] = base,
                            status: dict[str, Any] = status, conds: list[Any] = conds,
                            md: dict[str, Any] = md) -> int:
                async with sem:
                    obj = await kube.create(g, {**base, "metadata": {
                        "name": f"r{i:06d}", "namespace": ns, "labels": md.get("labels") or {},
                        "annotations": md.get("annotations") or {}}})
                    done = 1
                    for j in range(k):
                        if conds:
                            st = {**status, "conditions": [{**conds[0], "message": f"replay {j}"}, *conds[1:]]}
                            body = {**base, "metadata": {"name": obj["metadata"]["name"], "namespace": ns,
                                                         "resourceVersion": obj["metadata"]["resourceVersion"]},
                                    "status": st}
                            obj = await kube.replace(g, body, subresource="status")
                        else:
                            obj = await kube.merge_patch(g, ns, obj["metadata"]["name"],
                                                         {"metadata": {"annotations": {"replay": str(j)}}})
                        done += 1
                    return done
            jobs.append(chain)
    t = time.monotonic()
    n = sum(await asyncio.gather(*(j() for j in jobs)))
    return time.monotonic() - t, n


async def bench(clusters: int, machines: int, duration: float, concurrency: int,
                spread: bool = False, debug: bool = False, trace: str | None = None,
                write_paths: bool = False) -> list[tuple[str, str]]:
    env = EnvTest().start()
    try:
        kube = env.kube()
        await install_crds(kube, wait=True)
        namespaces = [f"bench-{i:03d}" for i in range(clusters)] if spread else ["bench"]
        for ns in namespaces:
            await kube.create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        holder: dict[str, Manager] = {}
        meter = Meter()
        meter.trace = trace
        if write_paths:
            meter.paths = Counter()
        runtime = FakeRuntime()

        def on_manager(m: Manager) -> None:  # the workload clients and etcd clients are what users run
            meter.attach(m)
            holder["m"] = m

        stop = asyncio.Event()
        # the operator runs in this task's child; the sampling loop stays the task that started it (kopf
        # cancels tasks created on its loop after it starts)
        task = asyncio.create_task(run(str(env.kubeconfig_path), runtime=runtime, stop=stop, on_manager=on_manager))
        while "m" not in holder:
            if task.done():
                task.result()
            await asyncio.sleep(0.1)
        mgr = holder["m"]

        t0 = time.monotonic()
        sem = asyncio.Semaphore(concurrency)

        async def create(i: int) -> None:
            ns = namespaces[i % len(namespaces)]
            docs = parse_documents(generate_cluster(f"c{i:03d}", namespace=ns, control_plane_machine_count=1,
                                                    worker_machine_count=machines - 1, flavor="in-memory", env={}))
            async with sem:
                bad = [o for o in await apply_objects(kube, docs) if not o.ok]
            if bad:
                raise RuntimeError(f"apply c{i:03d}: {bad[0].ref}: {bad[0].detail}")

        await asyncio.gather(*(create(i) for i in range(clusters)))
        t_applied = time.monotonic()
        writes_at_apply = meter.total
        writes_by_kind_at_apply, creates_at_apply = Counter(meter.writes), Counter(meter.creates)
        writes_at_available: Counter[str] = Counter()
        creates_at_available: Counter[str] = Counter()
        want_m = clusters * machines
        samples: list[tuple[float, int]] = [(time.monotonic(), mgr.queue.processed)]
        api_proc = getattr(env, "_procs", {}).get("kube-apiserver")
        api_pid = api_proc.pid if api_proc is not None else None
        api_peak = 0.0
        etcd_proc = getattr(env, "_procs", {}).get("etcd")
        etcd_pid = etcd_proc.pid if etcd_proc is not None else None
        cpu0 = (cpu_seconds(), cpu_seconds(api_pid) if api_pid else 0.0, cpu_seconds(etcd_pid) if etcd_pid else 0.0)
        cpu_conv = (0.0, 0.0, 0.0)
        t_running: float | None = None
        t_available: float | None = None
        writes_conv = 0
        deadline = t0 + duration
        next_debug = time.monotonic() + 60
        n_av = n_run = 0
        while time.monotonic() < deadline:
            await asyncio.sleep(1)
            if task.done():
                task.result()
            now = time.monotonic()
            samples.append((now, mgr.queue.processed))
            if api_pid:
                api_peak = max(api_peak, rss_mib(api_pid))
            n_run = sum(1 for m in mgr.store.list(MACHINE) if running(m))
            n_av = sum(1 for c in mgr.store.list(CLUSTER) if available(c))
            if t_running is None and n_run >= want_m:
                t_running = now - t_applied
            sys.stderr.write(f"\r t={now - t0:6.1f}s running={n_run}/{want_m} available={n_av}/{clusters} "
                             f"reconciles={mgr.queue.processed} queue={len(mgr.queue)} writes={meter.total} ")
            if debug and now > next_debug:
                next_debug = now + 60
                sys.stderr.write("\n" + describe_one(mgr, namespaces[0], "c000") + "\n")
            if n_av >= clusters and t_running is not None:
                t_available = now - t_applied
                writes_conv = meter.total
                writes_at_available, creates_at_available = Counter(meter.writes), Counter(meter.creates)
                cpu_conv = (cpu_seconds() - cpu0[0], (cpu_seconds(api_pid) - cpu0[1]) if api_pid else 0.0,
                            (cpu_seconds(etcd_pid) - cpu0[2]) if etcd_pid else 0.0)
                break
        sys.stderr.write("\n")
        if t_available is None:
            sys.stderr.write("not converged; first cluster:\n" + describe_one(mgr, namespaces[0], "c000") + "\n")
            for i in range(clusters):
                c = mgr.store.get(CLUSTER, namespaces[i % len(namespaces)], f"c{i:03d}")
                if c is not None and not available(c):
                    sys.stderr.write(f"first cluster not Available: c{i:03d}\n"
                                     + describe_one(mgr, namespaces[i % len(namespaces)], f"c{i:03d}") + "\n")
                    break

        stable_writes: Counter[str] = Counter()
        noop: list[float] = []
        t_stable = 0.0
        if t_available is not None:
            # steady state: API writes over STABLE_WINDOW seconds (resyncs and pollers keep reconciling)
            before = Counter(meter.writes)
            proc_before = mgr.queue.processed
            t_s = time.monotonic()
            while time.monotonic() - t_s < STABLE_WINDOW:
                await asyncio.sleep(2)
                if api_pid:
                    api_peak = max(api_peak, rss_mib(api_pid))
                sys.stderr.write(f"\r stable {time.monotonic() - t_s:4.0f}s writes={meter.total - writes_conv} "
                                 f"reconciles={mgr.queue.processed - proc_before} ")
            sys.stderr.write("\n")
            t_stable = time.monotonic() - t_s
            stable_writes = meter.writes - before
            # no-op reconciles: every key of every controller once, each handler call timed
            keys = [(c.gvk.kind, o["metadata"].get("namespace") or "", o["metadata"]["name"])
                    for c in mgr.controllers.values() for o in mgr.store.list(c.gvk)]
            meter.durations.clear()
            meter.timed_keys.clear()
            meter.timing = True
            for k in keys:
                mgr.queue.add(k)
            t_n = time.monotonic()
            while not set(keys) <= meter.timed_keys and time.monotonic() - t_n < 120:
                await asyncio.sleep(0.2)
            meter.timing = False
            noop = list(meter.durations)
        # one real object of every kind the controllers wrote, for the replayed floor (before the cache goes)
        sample_objs: dict[str, dict[str, Any]] = {}
        for kind, g in meter.gvks.items():
            objs = mgr.store.list(g) if mgr.store.serves(g) else []
            if objs:
                sample_objs[kind] = max(objs, key=lambda o: len(json.dumps(o)))  # the fullest one
        cache_reads = getattr(mgr.ctx.kube, "cache_reads", 0)
        api_reads: Counter[str] = Counter(getattr(mgr.ctx.kube, "api_reads", Counter()))
        # the in-memory clusters' HTTPS listeners (users' kubectl; docs/in-memory.md) and the controllers' calls into
        # their stores, before the controllers stop (stopping closes the listeners)
        sets = mgr.ctx.settings
        mem_server = mgr.ctx.workload.in_memory_server(sets.in_memory_host, sets.in_memory_ports)
        mem_clusters = mgr.ctx.workload.in_memory.all()
        mem_calls = sum(sum(a.requests.values()) for a in mem_clusters)
        mem_serving = sum(1 for a in mem_clusters if mem_server.serving(a.namespace, a.cluster))
        stop.set()
        await asyncio.wait_for(task, 60)

        conv_writes = writes_conv - writes_at_apply if t_available is not None else meter.total - writes_at_apply
        # the write floor: same API server, controllers stopped, as many writes as the controllers made
        loop = asyncio.get_running_loop()
        loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(max_workers=64))
        api_cpu_floor = cpu_seconds(api_pid) if api_pid else 0.0
        floor = await write_floor(kube, max(conv_writes, 1), 64)
        api_cpu_floor = (cpu_seconds(api_pid) - api_cpu_floor) if api_pid else 0.0
        conv_by_kind = (writes_at_available or meter.writes) - writes_by_kind_at_apply
        creates_conv = (creates_at_available or meter.creates) - creates_at_apply
        plan = replay_plan(conv_by_kind, creates_conv, meter.gvks, sample_objs)
        replay, replay_n = await replay_floor(kube, plan, 64)

        elapsed = samples[-1][0] - samples[0][0]
        total = samples[-1][1] - samples[0][1]
        peak = max(((b[1] - a[1]) / (b[0] - a[0]) for a, b in zip(samples, samples[1:], strict=False)
                    if b[0] > a[0]), default=0.0)

        def at(v: float | None) -> str:
            return f"{v:.1f} s" if v is not None else f"not reached in {duration:.0f} s"

        def pct(xs: list[float], q: int) -> str:
            return f"{statistics.quantiles(xs, n=100)[q - 1] * 1000:.1f} ms" if len(xs) >= 2 else "-"

        def kinds(c: Counter[str]) -> str:
            return ", ".join(f"{k} {v}" for k, v in c.most_common()) or "none"
        ratio = f"{t_available / floor:.2f}" if t_available is not None and floor > 0 else "-"
        replay_ratio = f"{t_available / replay:.2f}" if t_available is not None and replay > 0 else "-"
        rows = [
            ("machine", machine()),
            ("clusters x machines", f"{clusters} x {machines} (1 control plane + {machines - 1} workers each)"),
            ("namespaces", f"{len(namespaces)}"),
            ("apply all objects", f"{t_applied - t0:.1f} s ({clusters * 7} objects)"),
            ("last apply -> all Machines Running", at(t_running) + f" ({n_run}/{want_m})"),
            ("last apply -> all Clusters Available", at(t_available) + f" ({n_av}/{clusters})"),
            ("in-memory workload clusters / containers made", f"{len(mgr.ctx.workload.in_memory)} / "
                                                              f"{len(runtime.created)}"),
            ("calls into the in-memory stores / listeners serving",
             f"{mem_calls} / {mem_serving}"),
            ("controller writes until then", f"{conv_writes} ({meter.total} incl. during apply)"),
            ("write floor (same API server, plain client)", f"{floor:.1f} s for {max(conv_writes, 1)} writes "
                                                           f"({max(conv_writes, 1) / floor:.0f} writes/s)"),
            ("ratio Available / write floor (target <= 2.0)", ratio),
            ("replayed floor (same kinds, objects, counts)", f"{replay:.1f} s for {replay_n} writes "
                                                              f"({replay_n / replay:.0f} writes/s)" if replay else "-"),
            ("ratio Available / replayed floor", replay_ratio),
            ("writes per minute once stable (target 0)",
             f"{sum(stable_writes.values()) * 60 / t_stable:.1f} ({kinds(stable_writes)})" if t_stable else "-"),
            ("no-op reconcile p50 / p90", f"{pct(noop, 50)} / {pct(noop, 90)} ({len(noop)} reconciles)"),
            ("reconciles", f"{total} in {elapsed:.0f} s"),
            ("reconciles/s (mean)", f"{total / elapsed:.1f}" if elapsed else "-"),
            ("reconciles/s (peak 1 s window)", f"{peak:.1f}"),
            ("controller writes by kind", kinds(meter.writes)),
            ("reads: cache / API", f"{cache_reads} / {sum(api_reads.values())} ({kinds(api_reads)})"),
            ("CPU s until Available: controllers / apiserver / etcd",
             " / ".join(f"{x:.1f}" for x in cpu_conv)),
            ("apiserver CPU ms per write: controllers' / floor's",
             f"{cpu_conv[1] * 1000 / max(conv_writes, 1):.2f} / {api_cpu_floor * 1000 / max(conv_writes, 1):.2f}"),
            ("peak RSS controllers (this process)", f"{peak_rss_mib():.0f} MiB"),
            ("peak RSS kube-apiserver (sampled)", f"{api_peak:.0f} MiB" if api_pid else "n/a"),
        ]
        if meter.paths is not None:
            total_m = max(clusters * machines, 1)
            print("writes per Machine by kind / verb / caller / changed paths (the whole run):", file=sys.stderr)
            for (kind, verb, who, paths), n in sorted(meter.paths.items(), key=lambda kv: (kv[0][0], -kv[1])):
                print(f"{n / total_m:6.2f} {n:6d} {kind:22s} {verb:12s} {who:40s} {paths[:300]}", file=sys.stderr)
        kube.close()
        return rows
    finally:
        env.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clusters", type=int, default=100)
    p.add_argument("--machines", type=int, default=10, help="machines per cluster (1 control plane + rest workers)")
    p.add_argument("--duration", type=float, default=600, help="give up waiting for convergence after this long")
    p.add_argument("--concurrency", type=int, default=16, help="clusters applied in parallel")
    p.add_argument("--namespace-per-cluster", action="store_true",
                   help="one namespace per cluster (default: all clusters in one namespace, the worst case "
                        "for controllers that list a namespace)")
    p.add_argument("--debug", action="store_true", help="print the first cluster's conditions every 60 s")
    p.add_argument("--trace-writes", metavar="CLUSTER",
                   help="print every controller write that names this cluster (stderr), e.g. c000")
    p.add_argument("--write-paths", action="store_true",
                   help="print the writes by kind, verb, calling function and the field paths they change (stderr)")
    a = p.parse_args(argv)
    if a.machines < 1:
        p.error("--machines must be at least 1")
    rows = asyncio.run(bench(a.clusters, a.machines, a.duration, a.concurrency, a.namespace_per_cluster, a.debug,
                             a.trace_writes, a.write_paths))
    print(table(rows, "capd-py controller scale benchmark (Dev* inMemory backend + envtest)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
