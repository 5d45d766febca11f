"""The docker hosts service (issue 32): one DockerInfra (runtime + its process-local state: in-flight creations,
LB locks, address reservations) per configured docker host, on the controller context (`Ctx.hosts`).

The configuration is the ConfigMap `capd-py-system/capd-py-docker-hosts` (capd_py.api.dockerhosts), read from the
cache on every use: a host added, changed or removed is seen at the next reconcile. A host whose entry did not
change keeps its DockerInfra (its locks and in-flight creations must not be forgotten mid-flight); a changed
endpoint or Secret (TLS or ssh) gets a new one. `local` is the context's own infra: with no ConfigMap nothing
differs from a capd-py without hosts.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from capd_py.api import dockerhosts as dh
from capd_py.api.gvk import CONFIG_MAP
from capd_py.controllers.services.docker_infra import DockerInfra
from capd_py.kube import hostsecrets
from capd_py.runtime import endpoints
from capd_py.runtime.protocol import ContainerRuntime, RuntimeError_

log = logging.getLogger("capd_py.docker_hosts")

# (host, its Secret's material) -> that host's runtime; tests hand in fakes
RuntimeFactory = Callable[[dh.DockerHost, Mapping[str, bytes] | None], ContainerRuntime]


class DockerHosts:
    def __init__(self, local: DockerInfra, make_infra: Callable[[ContainerRuntime], DockerInfra],
                 factory: RuntimeFactory = endpoints.runtime_for) -> None:
        self.local = local
        self._make_infra = make_infra
        self._factory = factory
        # host name -> (what it was made from, its infra)
        self._infras: dict[str, tuple[tuple[dh.DockerHost, bytes], DockerInfra]] = {}

    @staticmethod
    async def read_config(kube: Any) -> dict[str, dh.DockerHost]:
        """The configured hosts (`local` always among them). HostConfigError when the ConfigMap is invalid."""
        cm = await kube.get(CONFIG_MAP, dh.NAMESPACE, dh.CONFIGMAP)
        return dh.parse_hosts((cm or {}).get("data"))

    async def infra(self, kube: Any, host: dh.DockerHost) -> DockerInfra:
        """The DockerInfra of `host` (made on first use, or when its entry or Secret changed).
        RuntimeError_ when its Secret is missing or its endpoint unusable."""
        if host.name == dh.LOCAL and not host.endpoint:
            return self.local
        try:
            material = await hostsecrets.material(kube, host)
        except hostsecrets.MissingSecret as e:
            raise RuntimeError_(str(e)) from e
        key = (host, hostsecrets.fingerprint(host, material))
        got = self._infras.get(host.name)
        if got is not None and got[0] == key:
            return got[1]
        if got is not None:
            log.info("docker host %s changed (%s); new client", host.name, host.endpoint)
        made = self._make_infra(self._factory(host, material))
        self._infras[host.name] = (key, made)
        return made

    def known(self) -> dict[str, DockerInfra]:
        """Every infra made so far (local included), by host name."""
        return {dh.LOCAL: self.local, **{n: i for n, (_k, i) in self._infras.items()}}
