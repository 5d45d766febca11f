"""A container runtime per configured docker host (capd_py.api.dockerhosts): the docker SDK client for its
endpoint. unix:// and tcp:// (TLS from the host's Secret, written to a private folder because the SDK takes file
paths) talk to the daemon directly; ssh:// goes through the system `ssh` client (capd_py.runtime.ssh_transport:
the host's ssh Secret when it names one, else the user's ssh configuration and agent; paramiko is never used)."""

from __future__ import annotations

from collections.abc import Mapping

import docker
from docker.constants import MINIMUM_DOCKER_API_VERSION
from docker.tls import TLSConfig

from capd_py.api import dockerhosts as dh
from capd_py.runtime import hostfiles, ssh_transport
from capd_py.runtime.docker_runtime import DockerRuntime
from capd_py.runtime.protocol import DaemonUnreachable, RuntimeError_

TIMEOUT = 120


def tls_config(host: dh.DockerHost, material: Mapping[str, bytes] | None) -> TLSConfig:
    """A TLSConfig from the Secret's ca.pem / cert.pem / key.pem (written into a private folder)."""
    _folder, paths = hostfiles.private_copy(host, material)
    return TLSConfig(client_cert=(paths["cert.pem"], paths["key.pem"]), ca_cert=paths["ca.pem"], verify=True)


def runtime_for(host: dh.DockerHost, material: Mapping[str, bytes] | None = None) -> DockerRuntime:
    """The runtime of `host`, with its Secret's `material` (TLS files, or the ssh key and known_hosts). The
    implicit `local` host (no endpoint) is the environment's daemon, as before docker hosts existed (DOCKER_HOST or
    the default socket)."""
    if not host.endpoint:
        return DockerRuntime()
    try:
        if host.scheme == "tcp" and host.tls_secret:
            client = docker.DockerClient(base_url=host.endpoint.replace("tcp://", "https://", 1), timeout=TIMEOUT,
                                         tls=tls_config(host, material),
                                         version=MINIMUM_DOCKER_API_VERSION)  # asked below, once the session is set
            # requests lets REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE replace a session's CA on every request (trust_env):
            # wherever those are set (distributions, corporate machines, this one) the host's own CA was ignored and
            # every call failed "unable to get local issuer certificate" (measured, tests/integration/runtime/
            # test_tls_host.py)
            client.api.trust_env = False
            client.api._version = client.api._retrieve_server_version()
        elif host.scheme == "ssh":
            client = ssh_transport.client(host, ssh_transport.options_for(host, material), TIMEOUT)
        else:
            client = docker.DockerClient(base_url=host.endpoint, timeout=TIMEOUT)
    except docker.errors.DockerException as e:
        # the SDK asks the daemon its API version here: a daemon that does not answer is said as such
        gone = isinstance(e.__context__, OSError) or isinstance(e.__cause__, OSError)
        raise (DaemonUnreachable if gone else RuntimeError_)(f"docker host {host.name} ({host.endpoint}): {e}") from e
    return DockerRuntime(client)
