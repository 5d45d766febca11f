"""A docker host's credentials (capd_py.api.dockerhosts): the TLS or ssh material of its Secret in capd-py-system,
read the same way by the controllers (the docker hosts service) and by the CLI (`load image --host`, `get nodes`,
`delete all`)."""

from __future__ import annotations

import base64
from typing import Any

from capd_py.api import dockerhosts as dh
from capd_py.api.gvk import SECRET


class MissingSecret(LookupError):
    """The host names a Secret that does not exist (its message says which)."""


async def material(kube: Any, host: dh.DockerHost) -> dict[str, bytes] | None:
    """The decoded data of the host's Secret (None when it names none). MissingSecret when it is absent."""
    if not host.secret:
        return None
    secret = await kube.get(SECRET, dh.NAMESPACE, host.secret)
    if secret is None:
        what = "TLS" if host.tls_secret else "ssh"
        raise MissingSecret(f"docker host {host.name}: {what} Secret {dh.NAMESPACE}/{host.secret} not found")
    return {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}


def fingerprint(host: dh.DockerHost, got: dict[str, bytes] | None) -> bytes:
    """What a client made from `got` depends on: a change means a new client."""
    return b"\0".join(got.get(k, b"") for k in host.secret_keys) if got else b""
