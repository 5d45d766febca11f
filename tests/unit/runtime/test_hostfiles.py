"""A docker host's Secret as private files: the one writer for TLS (docker SDK) and ssh (OpenSSH) material."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from capd_py.api import dockerhosts as dh
from capd_py.runtime import hostfiles
from capd_py.runtime.protocol import RuntimeError_

pytestmark = pytest.mark.unit

TLS = dh.parse_host("b", "endpoint: tcp://b:2376\ntlsSecretName: b-tls")


def test_tls_files_are_private_and_end_with_a_newline() -> None:
    folder, paths = hostfiles.private_copy(TLS, {"ca.pem": b"CA", "cert.pem": b"C\n", "key.pem": b"K"})
    assert sorted(paths) == ["ca.pem", "cert.pem", "key.pem"] and stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    assert all(stat.S_IMODE(os.stat(p).st_mode) == 0o600 for p in paths.values())
    assert Path(paths["ca.pem"]).read_bytes() == b"CA\n" and Path(paths["cert.pem"]).read_bytes() == b"C\n"


def test_what_the_secret_lacks_is_said() -> None:
    want = "docker host b: its TLS Secret capd-py-system/b-tls lacks cert.pem, key.pem"
    with pytest.raises(RuntimeError_, match=want):
        hostfiles.private_copy(TLS, {"ca.pem": b"CA"})


def test_the_folder_goes_when_the_process_exits() -> None:
    import subprocess
    import sys

    code = ("from capd_py.api import dockerhosts as dh; from capd_py.runtime import hostfiles\n"
            "h = dh.parse_host('b', 'endpoint: tcp://b:2376\\ntlsSecretName: b-tls')\n"
            "folder, _ = hostfiles.private_copy(h, {'ca.pem': b'CA', 'cert.pem': b'C', 'key.pem': b'K'})\n"
            "print(folder)")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.strip()
    assert Path(out).name.startswith("capd-py-b-"), out
    assert not Path(out).exists(), f"{out} (a private key's folder) outlived its process"
