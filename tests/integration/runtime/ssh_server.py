"""A throwaway ssh "docker host" for the tests of `ssh://` docker hosts (issue 32): an SSH server on
127.0.0.1:<free port> (asyncssh, in a thread with its own event loop) that runs the command a client asks for with
its stdio on the channel, and the client side the system `ssh` needs to reach it without any state of this machine.

Why these pieces:
- capd-py's ssh:// runtime is the docker SDK with `use_ssh_client=True` (capd_py.runtime.endpoints): the SDK runs
  `ssh [-l USER] [-p PORT] -- HOST 'docker system dial-stdio'` (docker/transport/sshconn.py, SSHSocket.connect)
  with a copy of os.environ and no other options. So the server only has to run that command (the docker CLI on
  this machine, talking to `docker_host` or the environment's daemon) with stdin/stdout piped to the channel.
- OpenSSH reads `~/.ssh/config` from the passwd entry's home, not $HOME (measured: `HOME=/tmp/h ssh -G foo` ignores
  /tmp/h/.ssh/config), and the SDK passes no `-F`; the one thing a test can change without touching the user's
  ~/.ssh is PATH. `client_env()` puts first on PATH a folder whose `ssh` is the system one with `-F <our config>`:
  a throwaway ed25519 client key (IdentitiesOnly), known_hosts holding the throwaway host key
  (StrictHostKeyChecking yes: the real host-key check runs), BatchMode (never a prompt).
- `stop()` closes the listener *and* every open connection: the SDK keeps its ssh processes (one per pooled
  connection) alive between calls, so a server gone must also end them, as a host going away does.

    with SshDockerHost() as sshd, patched_environ(sshd.client_env()):
        endpoint = sshd.endpoint   # ssh://capd@127.0.0.1:PORT

A sibling module of the tests (imported by bare name, as pytest puts this folder on sys.path; bench/ssh_host.py adds
it), not in capd_py.testing: asyncssh is a `dev` extra only, and capd_py may import its runtime dependencies only
(hack/check_deps.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import asyncssh

USER = "capd"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _pump(read: Any, write: Any, drain: Any, eof: Any) -> None:
    """Copy read() to write() until EOF, then eof(); a side that went away ends the copy quietly."""
    try:
        while data := await read(65536):
            write(data)
            await drain()
        if eof is not None:
            eof()
    except (OSError, asyncssh.Error):
        pass


class _Server(asyncssh.SSHServer):
    def __init__(self, owner: SshDockerHost) -> None:
        self._owner = owner

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self._owner._conns.add(conn)
        self._owner.connections += 1

    def connection_lost(self, exc: Exception | None) -> None:
        self._owner._conns = {c for c in self._owner._conns if not c.is_closed()}


class SshDockerHost:
    """`docker_host`: the DOCKER_HOST the remote command talks to ("" = the environment's daemon)."""

    def __init__(self, docker_host: str = "", port: int = 0) -> None:
        self.docker_host = docker_host
        self.port = port or free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="capd-py-sshd-"))
        self.commands: list[str] = []            # what clients asked to run, in order
        self.connections = 0                     # ssh connections accepted (each may carry many commands)
        self._conns: set[asyncssh.SSHServerConnection] = set()
        self._handlers: set[asyncio.Task[Any]] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="capd-py-sshd", daemon=True)
        self._thread.start()
        self._acceptor: asyncssh.SSHAcceptor | None = None
        self._host_key = asyncssh.generate_private_key("ssh-ed25519")
        client_key = asyncssh.generate_private_key("ssh-ed25519")
        self._authorized = asyncssh.import_authorized_keys(client_key.export_public_key().decode())
        self._write_client_side(client_key)

    @property
    def endpoint(self) -> str:
        return f"ssh://{USER}@127.0.0.1:{self.port}"

    # --- client side -----------------------------------------------------------------------------------
    def _write_client_side(self, client_key: asyncssh.SSHKey) -> None:
        key = self.dir / "id_ed25519"
        client_key.write_private_key(str(key))
        key.chmod(0o600)
        host_pub = self._host_key.export_public_key().decode().strip()
        (self.dir / "known_hosts").write_text(f"[127.0.0.1]:{self.port} {host_pub}\n")
        config = self.dir / "ssh_config"
        config.write_text("\n".join([
            "Host *",
            f"  IdentityFile {key}", "  IdentitiesOnly yes", "  IdentityAgent none",
            f"  UserKnownHostsFile {self.dir / 'known_hosts'}", "  GlobalKnownHostsFile /dev/null",
            "  StrictHostKeyChecking yes", "  BatchMode yes", "  ConnectTimeout 5", "  LogLevel ERROR", ""]))
        config.chmod(0o600)
        real_ssh = shutil.which("ssh")
        if real_ssh is None:
            raise RuntimeError("no ssh client on PATH (apt-get install openssh-client)")
        bindir = self.dir / "bin"
        bindir.mkdir()
        wrapper = bindir / "ssh"
        wrapper.write_text(f'#!/bin/sh\nexec {real_ssh} -F {config} "$@"\n')
        wrapper.chmod(0o755)

    def material(self) -> dict[str, bytes]:
        """What a host's ssh Secret holds for this server (`sshSecretName`): the client key and known_hosts."""
        return {"ssh-privatekey": (self.dir / "id_ed25519").read_bytes(),
                "known_hosts": (self.dir / "known_hosts").read_bytes()}

    def client_env(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """`environ` (default os.environ) with this host's `ssh` wrapper first on PATH."""
        env = dict(os.environ if environ is None else environ)
        env["PATH"] = f"{self.dir / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
        return env

    # --- server ----------------------------------------------------------------------------------------
    async def _handle(self, process: asyncssh.SSHServerProcess[bytes]) -> None:
        command = process.command or ""
        self.commands.append(command)
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
            task.add_done_callback(self._handlers.discard)
        env = dict(os.environ)
        if self.docker_host:
            env["DOCKER_HOST"] = self.docker_host
        if not command:
            process.stderr.write(b"this server runs commands only, no shell\n")
            process.exit(1)
            return
        proc = await asyncio.create_subprocess_shell(command, stdin=asyncio.subprocess.PIPE,
                                                     stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                                                     env=env)
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        # pumped by hand rather than process.redirect(): the SDK ends its ssh with SIGTERM, and asyncssh's redirect
        # cleanup then leaves an un-awaited Queue.join behind (RuntimeWarning noise in every test)
        pumps = [asyncio.ensure_future(_pump(process.stdin.read, proc.stdin.write, proc.stdin.drain, proc.stdin.close)),
                 asyncio.ensure_future(_pump(proc.stdout.read, process.stdout.write, process.stdout.drain,
                                             process.stdout.write_eof)),
                 asyncio.ensure_future(_pump(proc.stderr.read, process.stderr.write, process.stderr.drain, None))]
        try:
            code = await proc.wait()
            await asyncio.gather(*pumps[1:], return_exceptions=True)
            process.exit(code)
        finally:
            for p in pumps:
                p.cancel()
            if proc.returncode is None:  # the connection was closed under it (stop()): the command goes too
                proc.kill()
                await proc.wait()

    async def _start(self) -> None:
        self._acceptor = await asyncssh.create_server(
            lambda: _Server(self), "127.0.0.1", self.port, server_host_keys=[self._host_key],
            authorized_client_keys=self._authorized, process_factory=self._handle, encoding=None,
            password_auth=False, kbdint_auth=False, x509_trusted_certs=None)

    async def _stop(self) -> None:
        if self._acceptor is not None:
            self._acceptor.close()
            await self._acceptor.wait_closed()
            self._acceptor = None
        for conn in list(self._conns):
            conn.close()
        for conn in list(self._conns):
            await conn.wait_closed()
        self._conns.clear()
        if self._handlers:  # their commands killed: let them finish rather than be destroyed pending
            await asyncio.wait(set(self._handlers), timeout=10)

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=30)

    def start(self) -> SshDockerHost:
        """Listen (again, on the same port and keys: a host coming back)."""
        self._run(self._start())
        return self

    def stop(self) -> None:
        """Stop listening and end every open connection (and the commands they run): the host is away."""
        self._run(self._stop())

    def close(self) -> None:
        """stop(), end the thread, remove the keys and config."""
        try:
            self.stop()
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
            self._loop.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> SshDockerHost:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextlib.contextmanager
def patched_environ(env: Mapping[str, str]) -> Iterator[None]:
    """os.environ replaced by `env` for the block (the docker SDK copies os.environ for every ssh it runs)."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)
