"""How an unreachable workload API server is described (the address tried and the error, stable text)."""

from __future__ import annotations

import errno
import os

import pytest

from capd_py.kube.workload import unreachable

pytestmark = pytest.mark.unit

SERVER = "https://172.19.0.3:6443"


class Boom(Exception):
    pass


def test_names_the_address_and_the_error_stably() -> None:
    a = unreachable(SERVER, Boom("<conn object at 0x7f00aa> refused"))
    b = unreachable(SERVER, Boom("<conn object at 0x7f11bb> refused"))
    assert a == b == "https://172.19.0.3:6443: Boom: <conn object> refused"
    assert len(unreachable(SERVER, Boom("x" * 500))) == len(SERVER) + len(": Boom: ") + 200


def test_a_timeout_says_how_long_it_waited() -> None:
    # docker drops packets between isolated bridge networks: no refusal, only silence
    assert unreachable(SERVER, TimeoutError(), 5) == f"{SERVER}: TimeoutError: no answer within 5s"
    assert unreachable(SERVER, Boom(""), 5) == f"{SERVER}: Boom: failed"


def test_a_failed_connect_says_why() -> None:
    # asyncio's text ("Connect call failed (addr)") is the same for a refusal and a missing route; the errno is not
    from aiohttp import ClientConnectorError
    from aiohttp.client_reqrep import ConnectionKey

    key = ConnectionKey("172.19.0.3", 6443, True, True, None, None, None)
    for code, name in ((errno.EHOSTUNREACH, "EHOSTUNREACH"), (errno.ECONNREFUSED, "ECONNREFUSED")):
        e = ClientConnectorError(key, OSError(code, "Connect call failed ('172.19.0.3', 6443)"))
        text = unreachable(SERVER, e)
        assert text.startswith(f"{SERVER}: ClientConnectorError: Cannot connect to host 172.19.0.3:6443"), text
        assert text.endswith(f"({name}: {os.strerror(code)})"), text
    # an error whose text already says why is not repeated
    assert unreachable(SERVER, ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")) == (
        f"{SERVER}: ConnectionRefusedError: [Errno {errno.ECONNREFUSED}] Connection refused")
