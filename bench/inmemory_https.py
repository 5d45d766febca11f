"""What one call into an in-memory workload cluster costs the controllers: in process (the store's `call`, what
capd-py's controllers do) vs over HTTPS (capd-py's own API client with the cluster's admin kubeconfig, through
capd_py/kube/inmemory_api_server.py on this event loop, as upstream's controllers reach their in-memory clusters).
The calls are the ones the controllers make of a workload cluster (get a Node, list Nodes, list the kube-system
Pods of a component, merge-patch a Node); the store holds a 1 CP + 3 W cluster. No API server, no docker.

    .venv/bin/python bench/inmemory_https.py [--calls 500]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from capd_py.kube.client import Kube  # noqa: E402
from capd_py.kube.inmemory_api import InMemoryClusters  # noqa: E402
from capd_py.kube.inmemory_api_server import InMemoryServer  # noqa: E402
from capd_py.reconcile import certs  # noqa: E402

HOST = "127.0.0.1"
CALLS: list[tuple[str, str, str, list[tuple[str, str]], Any]] = [
    ("get a Node", "GET", "/api/v1/nodes/c-md-1", [], None),
    ("list Nodes", "GET", "/api/v1/nodes", [], None),
    ("list kube-system Pods by label", "GET", "/api/v1/namespaces/kube-system/pods",
     [("labelSelector", "component=etcd")], None),
    ("merge-patch a Node", "PATCH", "/api/v1/nodes/c-md-1", [], {"metadata": {"annotations": {"x": "y"}}}),
]


async def timed(n: int, call: Callable[[], Awaitable[Any]]) -> float:
    """Mean ms per call over n calls, one at a time (a controller's await)."""
    await call()
    start = time.perf_counter()
    for _ in range(n):
        await call()
    return (time.perf_counter() - start) / n * 1000


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def main(n: int) -> None:
    clusters = InMemoryClusters()
    api = clusters.ensure("ns", "c")
    for i, name in enumerate(["c-cp", "c-md-1", "c-md-2", "c-md-3"]):
        api.add_node(name, f"in-memory://{name}", control_plane=i == 0, version="v1.34.4")
    api.add_static_pods("c-cp", ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"])
    api.add_kubeadm_objects("v1.34.4")
    server = InMemoryServer(clusters, HOST)
    port = server.assign("ns", "c")
    ca = certs.new_ca()
    t0 = time.perf_counter()
    await server.serve("ns", "c", ca)
    first = time.perf_counter() - t0
    client = Kube.from_kubeconfig_text(certs.admin_kubeconfig("c", {"host": HOST, "port": port}, ca).encode())
    rows = []
    total_mem = total_https = 0.0
    cpu_mem = cpu_https = 0.0
    for label, method, path, query, body in CALLS:
        ct = "application/merge-patch+json" if method == "PATCH" else None

        def in_memory(method: str = method, path: str = path, query: Any = query, body: Any = body,
                      ct: str | None = ct) -> Awaitable[Any]:
            return api.acall(method, path, body, query, ct)

        def https(method: str = method, path: str = path, query: Any = query, body: Any = body,
                  ct: str | None = ct) -> Awaitable[Any]:
            return client.acall(method, path, body, query, ct)
        c0 = cpu()
        mem = await timed(n, in_memory)
        c1 = cpu()
        over = await timed(n, https)
        c2 = cpu()
        cpu_mem += c1 - c0
        cpu_https += c2 - c1
        total_mem += mem
        total_https += over
        rows.append((label, f"{mem:.3f} ms", f"{over:.2f} ms", f"{over / mem:.0f}x"))
    rows.append(("mean of the four", f"{total_mem / len(CALLS):.3f} ms", f"{total_https / len(CALLS):.2f} ms",
                 f"{total_https / total_mem:.0f}x"))
    rows.append(("CPU s for all calls (client + server, one process)", f"{cpu_mem:.2f}", f"{cpu_https:.2f}", ""))
    print(f"{n} calls each, one at a time; listener start (serving certificate, first key): {first * 1000:.0f} ms")
    print("| call | in process | HTTPS (capd-py client) | ratio |\n|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    client.close()
    await server.close()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=500)
    asyncio.run(main(p.parse_args().calls))
