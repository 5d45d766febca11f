"""Polling for the CLI, over tenacity: call until a value arrives or the time is up.

`poll(fn, timeout, interval)` calls `fn()` until it returns something other than None and returns that,
or None once `timeout` seconds have passed (at least one call is made). Exceptions from `fn` propagate
at once: raising is how a probe says "this will never succeed". `apoll` is the same for coroutines.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from tenacity import AsyncRetrying, Retrying, retry_if_result, stop_after_delay, wait_fixed

T = TypeVar("T")


def _none(_state: object) -> None:
    return None


def poll(fn: Callable[[], T | None], timeout: float, interval: float) -> T | None:
    r: Retrying = Retrying(retry=retry_if_result(lambda v: v is None), stop=stop_after_delay(timeout),
                           wait=wait_fixed(interval), retry_error_callback=_none)
    return r(fn)


async def apoll(fn: Callable[[], Awaitable[T | None]], timeout: float, interval: float) -> T | None:
    r = AsyncRetrying(retry=retry_if_result(lambda v: v is None), stop=stop_after_delay(timeout),
                      wait=wait_fixed(interval), retry_error_callback=_none)
    return await r(fn)
