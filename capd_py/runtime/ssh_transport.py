"""The transport of `ssh://` docker hosts: HTTP to the remote daemon over `ssh HOST docker system dial-stdio`, run by
the system OpenSSH client, as the docker SDK's `use_ssh_client` mode and the docker CLI do.

Ours rather than the SDK's (docker 7, `docker/transport/sshconn.py`) for three reasons, each measured in
tests/integration/runtime/test_ssh_host.py:
- the SDK runs `ssh` with no options at all, so a host's credentials could only come from the ssh configuration of
  the machine the controllers run on; a host with `sshSecretName` gets its key and known_hosts passed here
  (`-i`, `UserKnownHostsFile`, strict host key checking, batch mode), which is what in-cluster controllers need;
- with such credentials the connection is shared (`ControlMaster`, in the host's private folder): the SDK opens a
  new ssh connection per call (~70 ms here, ~19 ms as a channel of a shared one);
- the SDK's socket close writes two newlines to an ssh that has often exited already (the daemon ends the stream
  with every exec): a BrokenPipeError raised out of a call that succeeded.
The HTTP side (pools, adapter) is the SDK's, subclassed only where it makes the socket."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any

import docker
from docker.constants import MINIMUM_DOCKER_API_VERSION
from docker.transport import sshconn

from capd_py.api import dockerhosts as dh
from capd_py.runtime import hostfiles

DIAL = "docker system dial-stdio"
# how long a shared connection outlives its last use (the controllers call a steady host every few seconds)
CONTROL_PERSIST = "60s"


class SshSocket(sshconn.SSHSocket):  # type: ignore[misc]
    """The SDK's socket (HTTP over an ssh process's pipes) with ssh options of our own and a tolerant close."""

    def __init__(self, host: str, options: Sequence[str]) -> None:
        super().__init__(host)
        self.options = list(options)

    def command(self) -> list[str]:
        args = ["ssh", *self.options]
        if self.user:
            args += ["-l", self.user]
        if self.port:
            args += ["-p", self.port]
        return [*args, "--", self.host, DIAL]

    def connect(self, **_kwargs: Any) -> None:
        env = dict(os.environ)
        env.pop("LD_LIBRARY_PATH", None)  # as the SDK: the ssh binary is the system's, not a bundled library's
        self.proc = subprocess.Popen(self.command(), env=env, stdout=subprocess.PIPE, stdin=subprocess.PIPE,
                                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))

    def close(self) -> None:
        """End the ssh process. One that already exited (the daemon closed the stream) is reaped; its stdin is
        closed, not written to; its stdout stays open because http.client still flushes the response file."""
        proc: subprocess.Popen[bytes] | None = self.proc
        stdin = proc.stdin if proc is not None else None
        if proc is None or stdin is None or stdin.closed:
            return
        if proc.poll() is None:
            try:
                stdin.write(b"\n\n")  # as the SDK: let dial-stdio see the end of its input
                stdin.flush()
            except OSError:
                pass
            proc.terminate()
        try:
            stdin.close()
        except OSError:
            pass  # buffered bytes for a pipe whose reader is gone


class _Connection(sshconn.SSHConnection):  # type: ignore[misc]
    def __init__(self, options: Sequence[str], timeout: float, host: str) -> None:
        super().__init__(None, timeout, host)
        self.options = options

    def connect(self) -> None:
        sock = SshSocket(self.ssh_host, self.options)
        sock.settimeout(self.timeout)
        sock.connect()
        self.sock = sock


class _Pool(sshconn.SSHConnectionPool):  # type: ignore[misc]
    def __init__(self, options: Sequence[str], timeout: float, maxsize: int, host: str) -> None:
        super().__init__(None, timeout, maxsize, host)
        self.options = options

    def _new_conn(self) -> _Connection:
        return _Connection(self.options, self.timeout, self.ssh_host)


class SshAdapter(sshconn.SSHHTTPAdapter):  # type: ignore[misc]
    __attrs__ = [*sshconn.SSHHTTPAdapter.__attrs__, "options"]

    def __init__(self, base_url: str, options: Sequence[str], timeout: float) -> None:
        super().__init__(base_url, timeout, shell_out=True)
        self.options = list(options)

    def get_connection(self, url: Any, proxies: Any = None) -> _Pool:
        return _Pool(self.options, self.timeout, self.max_pool_size, self.ssh_host)


def options_for(host: dh.DockerHost, material: Mapping[str, bytes] | None) -> list[str]:
    """ssh options for `host`: none without a Secret (the machine's own ssh configuration and agent apply, as for
    the docker CLI); with one, its key and known_hosts only, checked strictly, never a prompt, one shared
    connection. The files go into a private folder of their own (0700, files 0600)."""
    if not host.ssh_secret:
        return []
    folder, paths = hostfiles.private_copy(host, material)
    key, known = paths["ssh-privatekey"], paths["known_hosts"]
    return ["-F", "/dev/null", "-i", key, "-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none",
            "-o", f"UserKnownHostsFile={known}", "-o", "GlobalKnownHostsFile=/dev/null",
            "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10",
            "-o", "ControlMaster=auto", "-o", f"ControlPath={folder}/cm", "-o", f"ControlPersist={CONTROL_PERSIST}"]


def client(host: dh.DockerHost, options: Sequence[str], timeout: float) -> docker.DockerClient:
    """A docker client for an ssh:// host over our transport. The daemon's API version is asked once the
    transport is ours (the SDK would ask through its own, without the options)."""
    made = docker.DockerClient(base_url=host.endpoint, timeout=timeout, use_ssh_client=True,
                               version=MINIMUM_DOCKER_API_VERSION)
    api = made.api
    api._custom_adapter = SshAdapter(host.endpoint, options, timeout)
    api.mount("http+docker://ssh", api._custom_adapter)
    api._version = api._retrieve_server_version()
    return made
