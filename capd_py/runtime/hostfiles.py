"""A docker host's credentials as files (capd_py.api.dockerhosts): the docker SDK takes TLS files by path and
OpenSSH its key and known_hosts by path, so the Secret's material is written once per client into a folder of its
own, private to this process's user (0700, files 0600). The client reads them for as long as it lives (a new TLS
connection loads the files again; ssh keeps its ControlPath socket there), so the folder goes when the process exits:
private keys are not left in the temporary directory (they were: one folder per client of every run, measured
2026-12-07)."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Mapping

from capd_py.api import dockerhosts as dh
from capd_py.runtime.protocol import RuntimeError_


def private_copy(host: dh.DockerHost, material: Mapping[str, bytes] | None) -> tuple[str, dict[str, str]]:
    """(folder, Secret key -> file path) for `host.secret_keys`; RuntimeError_ naming what the Secret lacks. Each
    file ends with a newline (OpenSSH refuses a key without its final one; PEM readers do not mind)."""
    missing = [k for k in host.secret_keys if not (material or {}).get(k)]
    if missing:
        kind = "TLS" if host.tls_secret else "ssh"
        raise RuntimeError_(f"docker host {host.name}: its {kind} Secret {dh.NAMESPACE}/{host.secret} lacks "
                            f"{', '.join(missing)}")
    assert material is not None
    folder = tempfile.mkdtemp(prefix=f"capd-py-{host.name}-")
    atexit.register(shutil.rmtree, folder, True)
    paths = {}
    for key in host.secret_keys:
        path = os.path.join(folder, key)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            data = material[key]
            f.write(data if data.endswith(b"\n") else data + b"\n")
        paths[key] = path
    return folder, paths
