"""What one write costs the API server, by object shape: creates and status PUTs of small DockerMachines (the
scale benchmark's floor), of Machines as the controllers write them (nine conditions, upstream's v1beta2 set)
and of the same Machines with one condition; optionally with the CRDs' CEL rules removed. A plain async
client, 64 writes in flight, against a fresh envtest API server; the API server's CPU seconds per write come
from /proc, so the figure holds up on a busy machine better than the writes per second beside it.

    .venv/bin/python bench/api_cost.py [--objects 1200] [--rounds 2] [--no-cel]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import cpu_seconds, machine, table  # noqa: E402

from capd_py.api.gvk import DOCKER_MACHINE, GVK, MACHINE  # noqa: E402
from capd_py.kube.crds import install_crds, load_crds  # noqa: E402
from capd_py.testing.envtest import EnvTest  # noqa: E402

NAMESPACE = GVK("", "v1", "Namespace", "namespaces", namespaced=False)
MACHINE_CONDITIONS = ("Available", "BootstrapConfigReady", "Deleting", "InfrastructureReady", "NodeHealthy",
                      "NodeReady", "Paused", "Ready", "UpToDate")
Obj = dict[str, Any]


def a_machine(i: int, ns: str) -> Obj:
    return {"apiVersion": MACHINE.api_version, "kind": "Machine",
            "metadata": {"name": f"m{i:05d}", "namespace": ns, "finalizers": ["machine.cluster.x-k8s.io"],
                         "labels": {"cluster.x-k8s.io/cluster-name": "c1", "cluster.x-k8s.io/set-name": "c1-md-0-x",
                                    "cluster.x-k8s.io/deployment-name": "c1-md-0"}},
            "spec": {"clusterName": "c1", "version": "v1.34.4",
                     "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig",
                                                 "name": f"m{i:05d}"}},
                     "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachine",
                                           "name": f"m{i:05d}"}}}


def a_docker_machine(i: int, ns: str) -> Obj:
    return {"apiVersion": DOCKER_MACHINE.api_version, "kind": "DockerMachine",
            "metadata": {"name": f"w{i:05d}", "namespace": ns}, "spec": {}}


def machine_status(conditions: int) -> Callable[[int], Obj]:
    def status(j: int) -> Obj:
        return {"observedGeneration": 1, "phase": "Provisioning", "conditions": [
            {"type": t, "status": "False", "reason": "Waiting", "observedGeneration": 1,
             "message": f"* DockerMachine: waiting for the control plane to initialize ({j})",
             "lastTransitionTime": "2026-01-01T00:00:00Z"} for t in MACHINE_CONDITIONS[:conditions]]}
    return status


def small_status(j: int) -> Obj:
    return {"conditions": [{"type": "Ready", "status": "True", "reason": "Bench", "message": str(j),
                            "lastTransitionTime": "2026-01-01T00:00:00Z"}]}


def without_cel(o: Any) -> Any:
    if isinstance(o, dict):
        return {k: without_cel(v) for k, v in o.items() if k != "x-kubernetes-validations"}
    if isinstance(o, list):
        return [without_cel(v) for v in o]
    return o


async def measure(env: EnvTest, gvk: GVK, make: Callable[[int, str], Obj], status: Callable[[int], Obj],
                  n: int) -> tuple[float, float, float, float]:
    """(create ms CPU/write, creates/s, status PUT ms CPU/write, PUTs/s): n creates, then two status PUTs each."""
    kube = env.kube()
    try:
        ns = f"cost-{time.monotonic_ns() % 10**9}"
        await kube.create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        api = env._procs["kube-apiserver"].pid
        sem = asyncio.Semaphore(64)
        made: list[Obj] = []

        async def create(i: int) -> None:
            async with sem:
                made.append(await kube.create(gvk, make(i, ns)))

        async def update(o: Obj) -> None:
            async with sem:
                for j in range(2):
                    o = await kube.replace(gvk, {**{k: v for k, v in o.items() if k != "status"}, "status": status(j)},
                                           subresource="status")
        c0, t0 = cpu_seconds(api), time.monotonic()
        await asyncio.gather(*(create(i) for i in range(n)))
        c1, t1 = cpu_seconds(api), time.monotonic()
        await asyncio.gather(*(update(o) for o in made))
        c2, t2 = cpu_seconds(api), time.monotonic()
        return 1000 * (c1 - c0) / n, n / (t1 - t0), 1000 * (c2 - c1) / (2 * n), 2 * n / (t2 - t1)
    finally:
        kube.close()


async def bench(n: int, rounds: int, cel: bool) -> list[tuple[str, str]]:
    crds = load_crds() if cel else [without_cel(c) for c in load_crds()]
    shapes: list[tuple[str, GVK, Callable[[int, str], Obj], Callable[[int], Obj]]] = [
        ("DockerMachine, 1 condition (the floor's)", DOCKER_MACHINE, a_docker_machine, small_status),
        ("Machine, 9 conditions (as the controllers write it)", MACHINE, a_machine, machine_status(9)),
        ("Machine, 1 condition", MACHINE, a_machine, machine_status(1)),
    ]
    rows = [("machine", machine()), ("objects per shape, rounds", f"{n}, {rounds}"),
            ("CRDs", "as installed" if cel else "CEL rules (x-kubernetes-validations) removed")]
    env = EnvTest().start()
    try:
        kube = env.kube()
        try:
            await install_crds(kube, wait=True, crds=crds)
        finally:
            kube.close()
        for r in range(rounds):
            for label, gvk, make, status in shapes:
                cm, cr, um, ur = await measure(env, gvk, make, status, n)
                print(f"round {r + 1}: {label}: create {cm:.2f} ms, status PUT {um:.2f} ms", file=sys.stderr)
                rows.append((f"{label}, round {r + 1}",
                             f"create {cm:.2f} ms CPU ({cr:.0f}/s), status PUT {um:.2f} ms CPU ({ur:.0f}/s)"))
    finally:
        env.stop()
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--objects", type=int, default=1200)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--no-cel", action="store_true", help="install the CRDs without their CEL rules")
    a = p.parse_args(argv)
    print(table(asyncio.run(bench(a.objects, a.rounds, not a.no_cel)), "API server CPU per write, by object shape"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
