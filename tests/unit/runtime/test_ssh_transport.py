"""ssh:// transport options (no ssh is run here): a host without a Secret passes nothing (the machine's own ssh
configuration applies, as for the docker CLI); one with a Secret gets its key and known_hosts in a private folder,
strict host key checking, batch mode and a shared connection."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from capd_py.api import dockerhosts as dh
from capd_py.runtime import ssh_transport
from capd_py.runtime.protocol import RuntimeError_

pytestmark = pytest.mark.unit

MANAGED = dh.parse_host("far", "endpoint: ssh://ci@far:2222\nsshSecretName: far-docker-ssh")


def test_without_a_secret_no_option_is_passed() -> None:
    assert ssh_transport.options_for(dh.parse_host("far", "endpoint: ssh://ci@far"), None) == []


def test_the_secrets_files_are_private_and_used_strictly() -> None:
    opts = ssh_transport.options_for(MANAGED, {"ssh-privatekey": b"-----KEY-----", "known_hosts": b"far ssh-ed25519 A"})
    key = opts[opts.index("-i") + 1]
    folder = os.path.dirname(key)
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600
    assert Path(key).read_bytes() == b"-----KEY-----\n"  # OpenSSH refuses a key without its final newline
    pairs = dict(o.split("=", 1) for o in opts if "=" in o)
    assert pairs["UserKnownHostsFile"] == os.path.join(folder, "known_hosts")
    assert (pairs["StrictHostKeyChecking"], pairs["BatchMode"], pairs["IdentitiesOnly"]) == ("yes", "yes", "yes")
    assert pairs["ControlMaster"] == "auto" and pairs["ControlPath"].startswith(folder)
    assert opts[:2] == ["-F", "/dev/null"]  # nothing of the machine's ssh configuration


@pytest.mark.parametrize(("material", "missing"), [
    (None, "ssh-privatekey, known_hosts"), ({"ssh-privatekey": b"k"}, "known_hosts"),
    ({"ssh-privatekey": b"", "known_hosts": b"h"}, "ssh-privatekey")])
def test_an_incomplete_secret_is_said(material: dict[str, bytes] | None, missing: str) -> None:
    with pytest.raises(RuntimeError_, match=f"capd-py-system/far-docker-ssh lacks {missing}"):
        ssh_transport.options_for(MANAGED, material)


def test_the_command_is_ssh_with_options_user_port_and_dial_stdio() -> None:
    sock = ssh_transport.SshSocket("ci@far:2222", ["-o", "BatchMode=yes"])
    assert sock.command() == ["ssh", "-o", "BatchMode=yes", "-l", "ci", "-p", "2222", "--", "far",
                              "docker system dial-stdio"]
    assert ssh_transport.SshSocket("far", []).command() == ["ssh", "--", "far", "docker system dial-stdio"]
