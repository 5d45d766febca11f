"""End-to-end benchmark on real workload clusters (needs the node and haproxy images, docker, and a
management cluster: `capd-py init`, or pass --init to create one). Not part of the timed tests.

Measures, each on a fresh cluster:
  - apply -> Cluster Available for 1 control plane + 1 worker, and for 3 control planes + 2 workers;
  - scaling the second cluster's MachineDeployment by +3 until all its replicas are available;
  - delete -> the Cluster object and every container of the cluster are gone;
  - peak RSS of the controllers process (VmHWM of the `capd-py controllers` host process).

    .venv/bin/python bench/run.py [--init] [--timeout 1200] [--keep]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import machine, peak_rss_mib, table  # noqa: E402
from limit import measure as measure_limit  # noqa: E402
from phases import phases  # noqa: E402

from capd_py.api import conditions  # noqa: E402
from capd_py.api.gvk import (  # noqa: E402
    CLUSTER,
    CLUSTER_RESOURCE_SET,
    CONFIG_MAP,
    KUBEADM_CONTROL_PLANE,
    MACHINE_DEPLOYMENT,
)
from capd_py.api.labels import CONTAINER_CLUSTER, CONTAINER_NAMESPACE  # noqa: E402
from capd_py.cli import management as mgmt  # noqa: E402
from capd_py.cli.apply import apply_objects  # noqa: E402
from capd_py.cli.generate import generate_cluster, parse_documents  # noqa: E402
from capd_py.cli.steps import Steps  # noqa: E402
from capd_py.kube.client import Kube  # noqa: E402
from capd_py.runtime.protocol import ContainerRuntime  # noqa: E402

NS = "default"


class BenchError(Exception):
    pass


async def wait_for(what: str, probe: Callable[[], Awaitable[bool]], timeout: float, interval: float = 0.5) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if await probe():
            return time.monotonic() - t0
        await asyncio.sleep(interval)
    raise BenchError(f"{what}: not reached after {timeout:.0f}s")


async def create_available(kube: Kube, name: str, cp: int, workers: int, timeout: float) -> float:
    docs = parse_documents(generate_cluster(name, namespace=NS, control_plane_machine_count=cp,
                                            worker_machine_count=workers, env={}))
    t0 = time.monotonic()
    bad = [o for o in await apply_objects(kube, docs) if not o.ok]
    if bad:
        raise BenchError(f"{bad[0].ref}: {bad[0].detail}")

    async def available() -> bool:
        """Available, and every machine asked for Ready (a KCP is Available with its first machine)."""
        c = await kube.get(CLUSTER, NS, name)
        if not (c and conditions.is_true(c, conditions.AVAILABLE)):
            return False
        kcp = await kube.get(KUBEADM_CONTROL_PLANE, NS, f"{name}-control-plane")
        md = await kube.get(MACHINE_DEPLOYMENT, NS, f"{name}-md-0")
        return (((kcp or {}).get("status") or {}).get("readyReplicas") == cp
                and (workers == 0 or ((md or {}).get("status") or {}).get("readyReplicas") == workers))
    await wait_for(f"{name} Available with every machine Ready", available, timeout)
    return time.monotonic() - t0


async def scale(kube: Kube, name: str, by: int, timeout: float) -> float:
    md_name = f"{name}-md-0"
    md = await kube.get(MACHINE_DEPLOYMENT, NS, md_name)
    if md is None:
        raise BenchError(f"MachineDeployment {md_name} not found")
    want = int(md["spec"].get("replicas") or 0) + by
    t0 = time.monotonic()
    await kube.merge_patch(MACHINE_DEPLOYMENT, NS, md_name, {"spec": {"replicas": want}})

    async def done() -> bool:
        m = await kube.get(MACHINE_DEPLOYMENT, NS, md_name)
        st = (m or {}).get("status") or {}
        return st.get("availableReplicas") == want and st.get("replicas") == want
    await wait_for(f"{md_name} scaled to {want}", done, timeout)
    return time.monotonic() - t0


async def delete(kube: Kube, rt: ContainerRuntime, name: str, timeout: float) -> float:
    t0 = time.monotonic()
    await kube.delete(CLUSTER, NS, name)

    async def gone() -> bool:
        if await kube.get(CLUSTER, NS, name) is not None:
            return False
        left = await asyncio.to_thread(rt.list_containers, {CONTAINER_CLUSTER: name, CONTAINER_NAMESPACE: NS})
        return not left
    await wait_for(f"{name} deleted", gone, timeout)
    took = time.monotonic() - t0
    # the template's CNI set and its ConfigMap outlive the Cluster (as upstream's): not part of the timing
    await kube.delete(CLUSTER_RESOURCE_SET, NS, f"{name}-crs-0")
    await kube.delete(CONFIG_MAP, NS, f"cni-{name}-crs-0")
    return took


async def bench(kubeconfig: str, timeout: float, keep: bool, rows: list[tuple[str, str]],
                with_limit: bool = False, only_small: bool = False) -> None:
    kube = Kube.from_kubeconfig(kubeconfig)
    rt = mgmt.default_runtime()
    pid = mgmt.controllers_pid()
    rows.append(("machine", machine()))
    steps = Steps()
    try:  # rows gathered so far are printed even when a phase fails
        limit = None
        if with_limit:
            with steps.step("physical limit: 1 control plane + 1 worker by hand (bench/limit.py)"):
                limit_phases = await measure_limit()
            limit = limit_phases[-1][1]
            rows.extend((f"limit: {p}", f"{t:.1f} s") for p, t in limit_phases)
        with steps.step("1 control plane + 1 worker: apply -> Available"):
            t = await create_available(kube, "bench-small", 1, 1, timeout)
        rows.append(("1 CP + 1 worker: apply -> Available, all Ready", f"{t:.1f} s"))
        print("bench-small, from its objects' timestamps (s after the Cluster was created):\n"
              + await phases(kube, NS, "bench-small"), file=sys.stderr)
        if limit:
            rows.append(("1 CP + 1 worker / physical limit", f"{t / limit:.2f}x (same run)"))
        if only_small:
            if not keep:
                with steps.step("delete bench-small"):
                    t = await delete(kube, rt, "bench-small", timeout)
                rows.append(("delete 1 CP + 1 worker", f"{t:.1f} s"))
            return
        with steps.step("3 control planes + 2 workers: apply -> Available"):
            t = await create_available(kube, "bench-ha", 3, 2, timeout)
        rows.append(("3 CP + 2 workers: apply -> Available, all Ready", f"{t:.1f} s"))
        print("bench-ha, from its objects' timestamps:\n" + await phases(kube, NS, "bench-ha"), file=sys.stderr)
        with steps.step("scale bench-ha-md-0 by +3"):
            t = await scale(kube, "bench-ha", 3, timeout)
        rows.append(("MachineDeployment +3 -> available", f"{t:.1f} s"))
        if not keep:
            with steps.step("delete bench-small"):
                t = await delete(kube, rt, "bench-small", timeout)
            rows.append(("delete 1 CP + 1 worker", f"{t:.1f} s"))
            with steps.step("delete bench-ha"):
                t = await delete(kube, rt, "bench-ha", timeout)
            rows.append(("delete 3 CP + 5 workers", f"{t:.1f} s"))
    finally:
        kube.close()
        rows.append(("peak RSS controllers", f"{peak_rss_mib(pid):.0f} MiB (pid {pid})" if pid else
                     "n/a (controllers not running as a host process)"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kubeconfig", default=str(mgmt.kubeconfig_path()))
    p.add_argument("--init", action="store_true", help="create the management cluster first (capd-py init)")
    p.add_argument("--timeout", type=float, default=1200, help="seconds per phase")
    p.add_argument("--keep", action="store_true", help="do not delete the clusters (skips the delete timing)")
    p.add_argument("--limit", action="store_true",
                   help="first measure the physical limit (bench/limit.py) and print apply -> Available as a ratio")
    p.add_argument("--small-only", action="store_true", help="only the 1 control plane + 1 worker cluster")
    a = p.parse_args(argv)
    if a.init:
        m = mgmt.ManagementCluster()
        kc = m.create()
        mgmt.install_crds(kc)
        mgmt.start_controllers(kc)
        a.kubeconfig = str(kc)
    if not Path(a.kubeconfig).exists():
        p.error(f"{a.kubeconfig} does not exist: run `capd-py init` first or pass --init")
    rows: list[tuple[str, str]] = []
    code = 0
    try:
        asyncio.run(bench(a.kubeconfig, a.timeout, a.keep, rows, a.limit, a.small_only))
    except BenchError as e:
        print(f"ERROR: {e}", file=sys.stderr)
        rows.append(("failed", str(e)))
        code = 1
    print(table(rows, "capd-py end-to-end benchmark (real clusters)"))
    return code


if __name__ == "__main__":
    sys.exit(main())
