"""What a docker call costs over an `ssh://` docker host (issue 32) against the unix socket: N pings and N
`containers.list` each way, through capd-py's runtime (capd_py.runtime.endpoints) and a throwaway local ssh
server (tests/integration/runtime/ssh_server.py), optionally with OpenSSH connection sharing (ControlMaster) in
the client's config. The ssh figure is the transport's own cost (same machine, same daemon): a real remote host
adds its round trips.

    .venv/bin/python bench/ssh_host.py [--calls 50] [--control-master]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration" / "runtime"))

from ssh_server import SshDockerHost, patched_environ  # noqa: E402

from capd_py.api import dockerhosts as dh  # noqa: E402
from capd_py.runtime import endpoints  # noqa: E402
from capd_py.runtime.docker_runtime import DockerRuntime  # noqa: E402


def timed(fn: Callable[[], object], n: int) -> list[float]:
    fn()  # the first call pays for the connection (and the SDK's setup); measured apart below
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--control-master", action="store_true", help="ControlMaster auto + ControlPersist in ssh_config")
    args = ap.parse_args()
    rows = []
    local = DockerRuntime()
    with SshDockerHost() as sshd, patched_environ(sshd.client_env()):
        if args.control_master:
            config = sshd.dir / "ssh_config"
            config.write_text(f"{config.read_text()}  ControlMaster auto\n  ControlPath {sshd.dir}/cm-%C\n"
                              "  ControlPersist 60\n")
        t0 = time.perf_counter()
        far = endpoints.runtime_for(dh.DockerHost("far", sshd.endpoint))
        first = (time.perf_counter() - t0) * 1000
        for label, rt in (("unix socket", local), ("ssh://", far)):
            for call, fn in (("ping", rt.client.ping), ("containers.list", lambda r=rt: r.client.containers.list())):
                ms = timed(fn, args.calls)
                rows.append([label, call, str(args.calls), f"{statistics.median(ms):.1f}", f"{max(ms):.1f}"])
        calls = len(sshd.commands)
    print(f"{'transport':<12} {'call':<16} {'n':>4} {'median ms':>10} {'max ms':>8}")
    for r in rows:
        print(f"{r[0]:<12} {r[1]:<16} {r[2]:>4} {r[3]:>10} {r[4]:>8}")
    print(f"ssh client made (the SDK's version query): {first:.0f} ms; ssh sessions opened: {calls} for "
          f"{2 * (args.calls + 1) + 1} calls over ssh{' (ControlMaster)' if args.control_master else ''}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
