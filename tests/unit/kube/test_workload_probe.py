"""How an unreachable workload API server is described (the address tried and the error, stable text)."""

from __future__ import annotations

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
