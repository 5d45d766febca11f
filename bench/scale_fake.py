"""Controller-only scale benchmark: every capd-py controller (kopf watches + the Manager's queue)
against a real envtest API server (etcd + kube-apiserver), with the in-memory FakeRuntime instead of
docker. N clusters of 1 control-plane machine + M-1 workers each are applied at once.

There are no workload API servers behind the fake containers, so the benchmark measures the
management-side work: creating and converging Cluster/DockerCluster/KCP/MachineDeployment/MachineSet/
Machine/KubeadmConfig/DockerMachine objects and the fake containers, then the steady state (pollers,
resyncs). Workload clients are disabled (they would only time out).

    .venv/bin/python bench/scale_fake.py [--clusters 100] [--machines 10] [--duration 600] [--namespace-per-cluster]

Prints a table: time until every Machine / DockerMachine / KubeadmConfig exists, reconciles per second
(Manager.queue.processed over time), peak memory of this process (the controllers) and of the API server.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import machine, peak_rss_mib, rss_mib, table  # noqa: E402

from capd_py.api.gvk import DOCKER_MACHINE, GVK, KUBEADM_CONFIG, MACHINE  # noqa: E402
from capd_py.cli.apply import apply_objects  # noqa: E402
from capd_py.cli.generate import generate_cluster, parse_documents  # noqa: E402
from capd_py.controllers.manager import Manager  # noqa: E402
from capd_py.controllers.operator import run  # noqa: E402
from capd_py.kube.client import Kube  # noqa: E402
from capd_py.kube.crds import install_crds  # noqa: E402
from capd_py.kube.workload import WorkloadClients  # noqa: E402
from capd_py.runtime.fake import FakeRuntime  # noqa: E402
from capd_py.testing.envtest import EnvTest  # noqa: E402

NAMESPACE = GVK("", "v1", "Namespace", "namespaces", namespaced=False)


class NoWorkloads(WorkloadClients):
    """Fake containers have no API server behind them: every workload cluster is 'not reachable yet'."""

    async def get(self, namespace: str, cluster: str) -> Kube | None:
        return None


async def count(kube: Kube, gvk: GVK) -> int:
    return len(await kube.list(gvk))


async def bench(clusters: int, machines: int, duration: float, concurrency: int,
                spread: bool = False) -> list[tuple[str, str]]:
    env = EnvTest().start()
    try:
        kube = env.kube()
        await install_crds(kube, wait=True)
        namespaces = [f"bench-{i:03d}" for i in range(clusters)] if spread else ["bench"]
        for ns in namespaces:
            await kube.create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        holder: dict[str, Manager] = {}
        stop = asyncio.Event()
        task = asyncio.create_task(run(str(env.kubeconfig_path), runtime=FakeRuntime(), stop=stop,
                                       workload=NoWorkloads(kube), on_manager=lambda m: holder.setdefault("m", m)))
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
                                                    worker_machine_count=machines - 1, env={}))
            async with sem:
                bad = [o for o in await apply_objects(kube, docs) if not o.ok]
            if bad:
                raise RuntimeError(f"apply c{i:03d}: {bad[0].ref}: {bad[0].detail}")

        await asyncio.gather(*(create(i) for i in range(clusters)))
        t_applied = time.monotonic() - t0
        want = clusters * machines
        reached: dict[str, float] = {}
        samples: list[tuple[float, int]] = [(time.monotonic(), mgr.queue.processed)]
        api_proc = getattr(env, "_procs", {}).get("kube-apiserver")
        api_pid = api_proc.pid if api_proc is not None else None
        api_peak = 0.0
        deadline = t0 + duration
        while time.monotonic() < deadline:
            await asyncio.sleep(2)
            if task.done():
                task.result()
            now = time.monotonic()
            samples.append((now, mgr.queue.processed))
            if api_pid:
                api_peak = max(api_peak, rss_mib(api_pid))
            n = -1
            for label, gvk in (("Machine", MACHINE), ("KubeadmConfig", KUBEADM_CONFIG),
                               ("DockerMachine", DOCKER_MACHINE)):
                if label in reached:
                    continue
                got = await count(kube, gvk)  # one cluster-wide list per kind still missing objects
                if label == "Machine":
                    n = got
                if got >= want:
                    reached[label] = now - t0
            n = want if n < 0 else n
            sys.stderr.write(f"\r t={now - t0:6.1f}s machines={n}/{want} reconciles={mgr.queue.processed} "
                             f"queue={len(mgr.queue)} ")
            if len(reached) == 3 and now - t0 > reached["DockerMachine"] + 30:
                break  # 30 s of steady state after convergence is enough
        sys.stderr.write("\n")
        stop.set()
        await asyncio.wait_for(task, 60)
        elapsed = samples[-1][0] - samples[0][0]
        total = samples[-1][1] - samples[0][1]
        peak = max(((b[1] - a[1]) / (b[0] - a[0]) for a, b in zip(samples, samples[1:], strict=False)
                    if b[0] > a[0]), default=0.0)

        def at(label: str) -> str:
            return f"{reached[label]:.1f} s" if label in reached else f"not reached in {duration:.0f} s"
        rows = [
            ("machine", machine()),
            ("clusters x machines", f"{clusters} x {machines} (1 control plane + {machines - 1} workers each)"),
            ("namespaces", f"{len(namespaces)}"),
            ("apply all objects", f"{t_applied:.1f} s ({clusters * 7} objects)"),
            ("all Machines exist", at("Machine")),
            ("all KubeadmConfigs exist", at("KubeadmConfig")),
            ("all DockerMachines exist", at("DockerMachine")),
            ("reconciles", f"{total} in {elapsed:.0f} s"),
            ("reconciles/s (mean)", f"{total / elapsed:.1f}" if elapsed else "-"),
            ("reconciles/s (peak 2 s window)", f"{peak:.1f}"),
            ("peak RSS controllers (this process)", f"{peak_rss_mib():.0f} MiB"),
            ("peak RSS kube-apiserver (sampled)", f"{api_peak:.0f} MiB" if api_pid else "n/a"),
        ]
        kube.close()
        return rows
    finally:
        env.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clusters", type=int, default=100)
    p.add_argument("--machines", type=int, default=10, help="machines per cluster (1 control plane + rest workers)")
    p.add_argument("--duration", type=float, default=600, help="give up after this many seconds")
    p.add_argument("--concurrency", type=int, default=16, help="clusters applied in parallel")
    p.add_argument("--namespace-per-cluster", action="store_true",
                   help="one namespace per cluster (default: all clusters in one namespace, the worst case "
                        "for controllers that list a namespace)")
    a = p.parse_args(argv)
    if a.machines < 1:
        p.error("--machines must be at least 1")
    rows = asyncio.run(bench(a.clusters, a.machines, a.duration, a.concurrency, a.namespace_per_cluster))
    print(table(rows, "capd-py controller scale benchmark (FakeRuntime + envtest)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
