"""Go durations, as upstream parses and prints them: time.ParseDuration (metav1.Duration fields such as
nodeDrainTimeout, the in-memory provider's delays) and time.Duration.String() (timeouts in messages and in the
Runtime SDK's query string). One implementation for capd-py, checked against Go's own output
(tests/fixtures/parity/durations.jsonl.gz, hack/parity/durations.go). Pure; durations are whole nanoseconds
internally, as Go's are, and seconds (float) at the edges."""

from __future__ import annotations

import re
from decimal import Decimal

_UNIT_NANOS = {"ns": 1, "us": 1_000, "µs": 1_000, "μs": 1_000, "ms": 1_000_000, "s": 1_000_000_000,
               "m": 60_000_000_000, "h": 3_600_000_000_000}
_NUMBER = re.compile(r"[0-9]*(?:\.[0-9]*)?")
_UNIT = re.compile(r"[^0-9.]*")  # Go's unit runs to the next digit or dot
_MAX = (1 << 63) - 1


def parse_nanos(text: str) -> int:
    """time.ParseDuration: an optional sign, then one or more number+unit terms ("1h30m", "1.5s", ".5h",
    "300ms"); "0" alone needs no unit. Each term is truncated to whole nanoseconds, as Go's. ValueError with Go's
    message."""
    orig, s, neg = text, text, False
    if s[:1] in ("+", "-"):
        neg, s = s[0] == "-", s[1:]
    if s == "0":
        return 0
    if not s:
        raise ValueError(f'time: invalid duration "{orig}"')
    total, pos = 0, 0
    while pos < len(s):
        number = _NUMBER.match(s, pos).group(0)  # type: ignore[union-attr]  # matches the empty string at worst
        if number in ("", "."):
            raise ValueError(f'time: invalid duration "{orig}"')
        pos += len(number)
        unit = _UNIT.match(s, pos).group(0)  # type: ignore[union-attr]
        if not unit:
            raise ValueError(f'time: missing unit in duration "{orig}"')
        if unit not in _UNIT_NANOS:
            raise ValueError(f'time: unknown unit "{unit}" in duration "{orig}"')
        pos += len(unit)
        total += int(Decimal(number) * _UNIT_NANOS[unit])
        if total > _MAX + (1 if neg else 0):
            raise ValueError(f'time: invalid duration "{orig}"')
    return -total if neg else total


def parse(text: str) -> float:
    """time.ParseDuration, in seconds."""
    return parse_nanos(text) / 1e9


def format_nanos(nanos: int) -> str:
    """time.Duration.String(): "0s", "1.5µs", "300ms", "45s", "1m30s", "1h30m0s", "-1.5s"."""
    if nanos == 0:
        return "0s"
    sign, u = ("-", -nanos) if nanos < 0 else ("", nanos)
    if u < 1_000_000_000:  # below a second: the largest unit that keeps a whole part, with a fraction
        for unit, size in (("ns", 1), ("µs", 1_000), ("ms", 1_000_000)):
            if u < size * 1000:
                return sign + _fraction(u, size) + unit
    secs, frac = divmod(u, 1_000_000_000)
    text = _fraction(secs * 1_000_000_000 + frac, 1_000_000_000) + "s"
    if secs < 60:
        return sign + text
    minutes, secs = divmod(secs, 60)
    seconds = _fraction(secs * 1_000_000_000 + frac, 1_000_000_000) + "s"
    if minutes < 60:
        return f"{sign}{minutes}m{seconds}"
    hours, minutes = divmod(minutes, 60)
    return f"{sign}{hours}h{minutes}m{seconds}"


def _fraction(value: int, size: int) -> str:
    whole, rest = divmod(value, size)
    if not rest:
        return str(whole)
    digits = str(rest).rjust(len(str(size)) - 1, "0").rstrip("0")
    return f"{whole}.{digits}"


def format_seconds(seconds: float) -> str:
    """time.Duration.String() of a number of seconds (rounded to the nanosecond)."""
    return format_nanos(round(Decimal(repr(seconds)) * 1_000_000_000))
