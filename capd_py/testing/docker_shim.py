"""A Docker Engine API proxy on a unix socket that turns `Privileged: true` container creations into capd-py's
restricted privilege mode (capd_py.api.containers.restricted_host_config) and passes everything else through.

Why: upstream CAPD creates every container with `Privileged: true` (test/infrastructure/container/docker.go, not
configurable), and hosts without CAP_SYS_RESOURCE to hand out (this sandbox) refuse that at start ("unable to apply
caps: operation not permitted"). capd-py falls back to its restricted mode there; with `DOCKER_HOST` pointing at
this shim, upstream CAPD's containers get the same treatment and start.

How: each client connection gets its own connection to dockerd. The first request on it is read; a
`POST [/vX.Y]/containers/create` has its JSON body rewritten, and a `POST .../containers/<id>/exec` loses
`Privileged` (CAPD runs every command in a node with a privileged exec, refused here too). Every request but a
protocol upgrade (exec/attach hijack the connection) is sent with `Connection: close`, so dockerd ends the
connection after answering and the client opens a new one for its next request: every request passes through here
head first, and the rest of a connection is piped both ways untouched (streams, hijacked exec sessions).

    python -m capd_py.testing.docker_shim /tmp/shim.sock [--docker /var/run/docker.sock]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import re
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from capd_py.api.containers import restricted_host_config

log = logging.getLogger(__name__)
DOCKER_SOCKET = "/var/run/docker.sock"
_CREATE = re.compile(r"^(/v[0-9.]+)?/containers/create(\?|$)")
_EXEC = re.compile(r"^(/v[0-9.]+)?/containers/[^/?]+/exec(\?|$)")
MAX_HEAD = 64 * 1024


def rewrite_create(body: bytes, cgroup_v1: bool = True) -> tuple[bytes, bool]:
    """The create request's body with a privileged HostConfig made restricted; (body, changed)."""
    try:
        spec = json.loads(body)
    except ValueError:
        return body, False
    hc = spec.get("HostConfig") if isinstance(spec, dict) else None
    if not isinstance(hc, dict) or not hc.get("Privileged"):
        return body, False
    spec["HostConfig"] = restricted_host_config(hc, cgroup_v1)
    return json.dumps(spec).encode(), True


def rewrite_exec(body: bytes) -> tuple[bytes, bool]:
    """An exec creation's body without `Privileged` (refused here like a privileged container; the exec gets the
    container's own capabilities: the restricted mode's); (body, changed)."""
    try:
        spec = json.loads(body)
    except ValueError:
        return body, False
    if not isinstance(spec, dict) or not spec.get("Privileged"):
        return body, False
    spec["Privileged"] = False
    return json.dumps(spec).encode(), True


def _headers(head: bytes) -> tuple[str, list[tuple[str, str]]]:
    lines = head.decode("latin-1").split("\r\n")
    return lines[0], [(k.strip(), v.strip()) for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)]


async def _read_body(reader: asyncio.StreamReader, headers: list[tuple[str, str]]) -> bytes:
    values = {k.lower(): v for k, v in headers}
    if "chunked" in values.get("transfer-encoding", "").lower():
        out = bytearray()
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                    pass
                return bytes(out)
            out += await reader.readexactly(size)
            await reader.readexactly(2)
    return await reader.readexactly(int(values.get("content-length") or 0))


async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    try:
        while data := await src.read(65536):
            dst.write(data)
            await dst.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        with contextlib.suppress(Exception):
            if dst.can_write_eof():
                dst.write_eof()


class DockerShim:
    def __init__(self, listen: str, docker: str = DOCKER_SOCKET):
        self.listen, self.docker = listen, docker
        self.rewritten = 0  # creations made restricted (tests read it)
        self.exec_rewritten = 0  # privileged execs made plain
        self.cgroup_v1 = not os.path.exists("/sys/fs/cgroup/cgroup.controllers")
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.listen)
        self._server = await asyncio.start_unix_server(self._handle, self.listen, limit=MAX_HEAD)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.listen)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream: asyncio.StreamWriter | None = None
        try:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                return
            line, headers = _headers(head[:-4])
            method, target = (line.split(" ") + ["", ""])[:2]
            upgrade = any(k.lower() == "connection" and "upgrade" in v.lower() for k, v in headers)
            body: bytes | None = None
            create, exec_ = bool(_CREATE.match(target)), bool(_EXEC.match(target))
            if method == "POST" and (create or exec_):
                raw = await _read_body(reader, headers)
                body, changed = rewrite_create(raw, self.cgroup_v1) if create else rewrite_exec(raw)
                if changed and create:
                    self.rewritten += 1
                    log.info("restricted a privileged container creation (%s)", target)
                elif changed:
                    self.exec_rewritten += 1
                headers = [(k, v) for k, v in headers if k.lower() not in ("content-length", "transfer-encoding")]
                headers.append(("Content-Length", str(len(body))))
            if not upgrade:
                headers = [(k, v) for k, v in headers if k.lower() != "connection"] + [("Connection", "close")]
            up_reader, upstream = await asyncio.open_unix_connection(self.docker, limit=MAX_HEAD)
            upstream.write((line + "\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n").encode("latin-1"))
            if body is not None:
                upstream.write(body)
            await upstream.drain()
            await asyncio.gather(_pipe(reader, upstream), _pipe(up_reader, writer))
        except (ConnectionError, OSError) as e:
            log.warning("docker shim: %s", e)
        finally:
            for w in (upstream, writer):
                if w is not None:
                    with contextlib.suppress(Exception):
                        w.close()


@contextlib.contextmanager
def running(listen: Path, docker: str = DOCKER_SOCKET) -> Iterator[DockerShim]:
    """The shim served from a thread of its own until the block ends; `DOCKER_HOST=unix://<listen>` reaches it."""
    loop = asyncio.new_event_loop()
    shim = DockerShim(str(listen), docker)
    started = threading.Event()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(shim.start())
        started.set()
        loop.run_forever()

    t = threading.Thread(target=serve, name="docker-shim", daemon=True)
    t.start()
    if not started.wait(10):
        raise RuntimeError("the docker shim did not start")
    try:
        yield shim
    finally:
        asyncio.run_coroutine_threadsafe(shim.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        t.join(10)
        loop.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("listen", help="unix socket path to serve")
    p.add_argument("--docker", default=DOCKER_SOCKET, help="dockerd's socket")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")

    async def serve() -> None:
        shim = DockerShim(a.listen, a.docker)
        await shim.start()
        sys.stderr.write(f"docker shim: DOCKER_HOST=unix://{a.listen}\n")
        await asyncio.Event().wait()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
