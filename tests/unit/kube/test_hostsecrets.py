"""A docker host's Secret, read once for the controllers and the CLI."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from capd_py.api import dockerhosts as dh
from capd_py.api.gvk import GVK
from capd_py.kube import hostsecrets

pytestmark = pytest.mark.unit


class OneSecret:
    def __init__(self, name: str, data: dict[str, bytes]) -> None:
        self.name, self.data = name, {k: base64.b64encode(v).decode() for k, v in data.items()}

    async def get(self, g: GVK, ns: str, name: str) -> dict[str, Any] | None:
        return {"data": self.data} if (g.kind, ns, name) == ("Secret", dh.NAMESPACE, self.name) else None


async def test_material_of_tls_ssh_and_plain_hosts() -> None:
    ssh = dh.parse_host("c", "endpoint: ssh://ci@c\nsshSecretName: c-ssh")
    kube = OneSecret("c-ssh", {"ssh-privatekey": b"K", "known_hosts": b"H"})
    got = await hostsecrets.material(kube, ssh)
    assert got == {"ssh-privatekey": b"K", "known_hosts": b"H"}
    assert hostsecrets.fingerprint(ssh, got) == b"K\0H"
    assert await hostsecrets.material(kube, dh.parse_host("d", "endpoint: ssh://ci@d")) is None
    tls = dh.parse_host("b", "endpoint: tcp://b:2376\ntlsSecretName: b-tls")
    with pytest.raises(hostsecrets.MissingSecret, match="docker host b: TLS Secret capd-py-system/b-tls not found"):
        await hostsecrets.material(kube, tls)
