from __future__ import annotations

import pytest

from capd_py.cli.waiting import apoll, poll

pytestmark = pytest.mark.unit


def test_poll_returns_the_first_value() -> None:
    calls: list[int] = []

    def probe() -> str | None:
        calls.append(1)
        return "ready" if len(calls) == 3 else None
    assert poll(probe, timeout=5, interval=0.001) == "ready" and len(calls) == 3


def test_poll_gives_none_after_the_timeout_and_calls_at_least_once() -> None:
    calls: list[int] = []

    def never() -> None:
        calls.append(1)
    assert poll(never, timeout=0, interval=0.001) is None and calls == [1]


def test_poll_lets_a_probe_give_up_by_raising() -> None:
    def broken() -> None:
        raise ValueError("stopped")
    with pytest.raises(ValueError, match="stopped"):
        poll(broken, timeout=5, interval=0.001)


async def test_apoll() -> None:
    n = 0

    async def probe() -> bool | None:
        nonlocal n
        n += 1
        return True if n > 1 else None
    assert await apoll(probe, timeout=5, interval=0.001) is True

    async def never() -> bool | None:
        return None
    assert await apoll(never, timeout=0.01, interval=0.001) is None
