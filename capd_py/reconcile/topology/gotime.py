"""Go's time.Time as sprig's date helpers use it in ClusterClass templates (toDate, mustToDate, unixEpoch,
mustDateModify): time.ParseInLocation with a Go layout ("2006-01-02", "Jan _2 15:04:05", "Z07:00", ...) in the
controllers' local zone, which is UTC (as upstream's manager image), Time.String, Unix and Add. Written from the
behaviour of Go's time package (its layout elements, range checks and error texts), not translated from it; checked
against Go's output by tests/unit/reconcile/topology/test_gotemplate_parity.py. Pure: no clock is read."""

from __future__ import annotations

from dataclasses import dataclass

_NANOS = 1_000_000_000
_DAYS_BEFORE = (0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334, 365)
_SHORT_DAYS = (b"Sun", b"Mon", b"Tue", b"Wed", b"Thu", b"Fri", b"Sat")
_LONG_DAYS = (b"Sunday", b"Monday", b"Tuesday", b"Wednesday", b"Thursday", b"Friday", b"Saturday")
_SHORT_MONTHS = (b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec")
_LONG_MONTHS = (b"January", b"February", b"March", b"April", b"May", b"June", b"July", b"August", b"September",
                b"October", b"November", b"December")

# layout elements (Go's std* codes, as names)
(LONG_MONTH, MONTH, NUM_MONTH, ZERO_MONTH, LONG_WEEKDAY, WEEKDAY, DAY, UNDER_DAY, ZERO_DAY, UNDER_YEAR_DAY,
 ZERO_YEAR_DAY, HOUR, HOUR12, ZERO_HOUR12, MINUTE, ZERO_MINUTE, SECOND, ZERO_SECOND, LONG_YEAR, YEAR, PM, PM_LOWER,
 TZ, ISO_TZ, ISO_SECONDS_TZ, ISO_SHORT_TZ, ISO_COLON_TZ, ISO_COLON_SECONDS_TZ, NUM_TZ, NUM_SECONDS_TZ, NUM_SHORT_TZ,
 NUM_COLON_TZ, NUM_COLON_SECONDS_TZ, FRAC0, FRAC9) = range(1, 36)
_ZERO_X = (ZERO_MONTH, ZERO_DAY, ZERO_HOUR12, ZERO_MINUTE, ZERO_SECOND, YEAR)
# fixed layout texts, longest first where one is a prefix of another
_LITERALS: tuple[tuple[bytes, int], ...] = (
    (b"-070000", NUM_SECONDS_TZ), (b"-07:00:00", NUM_COLON_SECONDS_TZ), (b"-0700", NUM_TZ), (b"-07:00", NUM_COLON_TZ),
    (b"-07", NUM_SHORT_TZ), (b"Z070000", ISO_SECONDS_TZ), (b"Z07:00:00", ISO_COLON_SECONDS_TZ), (b"Z0700", ISO_TZ),
    (b"Z07:00", ISO_COLON_TZ), (b"Z07", ISO_SHORT_TZ),
)


class ParseError(ValueError):
    """time.ParseError; str() is Go's Error()."""


class _Bad(Exception):
    """A value element that does not match its layout element (Go's errBad)."""


@dataclass(frozen=True)
class Chunk:
    prefix: bytes
    std: int         # 0: no element left
    digits: int      # fractional seconds: how many digits the layout shows
    text: bytes      # the element as written in the layout
    suffix: bytes


def _hit(layout: bytes, i: int, std: int, width: int, digits: int = 0) -> Chunk:
    """The element `std` of `width` bytes at `i`."""
    return Chunk(layout[:i], std, digits, layout[i:i + width], layout[i + width:])


def next_chunk(layout: bytes) -> Chunk:
    """The text before the layout's first element, the element, and the rest (Go's nextStdChunk)."""
    n = len(layout)
    for i in range(n):
        c = layout[i:i + 1]
        rest = layout[i:]

        if c == b"J" and rest[:3] == b"Jan":
            if rest[:7] == b"January":
                return _hit(layout, i, LONG_MONTH, 7)
            if not rest[3:4].islower():
                return _hit(layout, i, MONTH, 3)
        elif c == b"M" and len(rest) >= 3:
            if rest[:3] == b"Mon":
                if rest[:6] == b"Monday":
                    return _hit(layout, i, LONG_WEEKDAY, 6)
                if not rest[3:4].islower():
                    return _hit(layout, i, WEEKDAY, 3)
            if rest[:3] == b"MST":
                return _hit(layout, i, TZ, 3)
        elif c == b"0":
            if len(rest) >= 2 and b"1" <= rest[1:2] <= b"6":
                return _hit(layout, i, _ZERO_X[rest[1] - ord("1")], 2)
            if rest[:3] == b"002":
                return _hit(layout, i, ZERO_YEAR_DAY, 3)
        elif c == b"1":
            return _hit(layout, i, HOUR, 2) if rest[1:2] == b"5" else _hit(layout, i, NUM_MONTH, 1)
        elif c == b"2":
            return _hit(layout, i, LONG_YEAR, 4) if rest[:4] == b"2006" else _hit(layout, i, DAY, 1)
        elif c == b"_":
            if rest[1:2] == b"2":
                if rest[1:5] == b"2006":  # "_2006": a literal "_", then the year
                    return Chunk(layout[:i + 1], LONG_YEAR, 0, b"2006", layout[i + 5:])
                return _hit(layout, i, UNDER_DAY, 2)
            if rest[1:3] == b"_2":
                return _hit(layout, i, UNDER_YEAR_DAY, 3)
        elif c == b"3":
            return _hit(layout, i, HOUR12, 1)
        elif c == b"4":
            return _hit(layout, i, MINUTE, 1)
        elif c == b"5":
            return _hit(layout, i, SECOND, 1)
        elif c == b"P" and rest[1:2] == b"M":
            return _hit(layout, i, PM, 2)
        elif c == b"p" and rest[1:2] == b"m":
            return _hit(layout, i, PM_LOWER, 2)
        elif c in (b"-", b"Z"):
            for text, std in _LITERALS:
                if rest.startswith(text):
                    return _hit(layout, i, std, len(text))
        elif c in (b".", b",") and rest[1:2] in (b"0", b"9"):
            j = 1
            while j < len(rest) and rest[j] == rest[1]:
                j += 1
            if not rest[j:j + 1].isdigit():
                return _hit(layout, i, FRAC0 if rest[1:2] == b"0" else FRAC9, j, digits=j - 1)
    return Chunk(layout, 0, 0, b"", b"")


def _quote(s: bytes) -> str:
    """The time package's quote: every byte of a non-ASCII or control character as \\xNN."""
    out = ['"']
    for ch in s.decode("utf-8", "surrogateescape"):
        o = ord(ch)
        if 0xDC80 <= o <= 0xDCFF:
            out.append(f"\\x{o - 0xDC00:02x}")
        elif o >= 0x80 or o < 0x20:
            out.extend(f"\\x{b:02x}" for b in ch.encode())
        else:
            out.append("\\" + ch if ch in '"\\' else ch)
    return "".join(out) + '"'


def _error(layout: bytes, value: bytes, elem: bytes, value_elem: bytes, message: str = "") -> ParseError:
    if not message:
        return ParseError(f"parsing time {_quote(value)} as {_quote(layout)}: cannot parse {_quote(value_elem)} as "
                          f"{_quote(elem)}")
    return ParseError(f"parsing time {_quote(value)}{message}")


def _leading_int(s: bytes) -> tuple[int, bytes]:
    x, i = 0, 0
    while i < len(s) and s[i:i + 1].isdigit():
        if x > (1 << 63) // 10:
            raise _Bad
        x = x * 10 + s[i] - 48
        if x > 1 << 63:
            raise _Bad
        i += 1
    return x, s[i:]


def _atoi(s: bytes) -> int:
    neg = s[:1] == b"-"
    if s[:1] in (b"-", b"+"):
        s = s[1:]
    x, rem = _leading_int(s)
    if rem:
        raise _Bad
    x = (x + (1 << 63)) % (1 << 64) - (1 << 63)  # Go's int(uint64)
    return -x if neg else x


def _getnum(s: bytes, fixed: bool) -> tuple[int, bytes]:
    if not s[:1].isdigit():
        raise _Bad
    if not s[1:2].isdigit():
        if fixed:
            raise _Bad
        return s[0] - 48, s[1:]
    return (s[0] - 48) * 10 + s[1] - 48, s[2:]


def _getnum3(s: bytes, fixed: bool) -> tuple[int, bytes]:
    n, i = 0, 0
    while i < 3 and s[i:i + 1].isdigit():
        n = n * 10 + s[i] - 48
        i += 1
    if i == 0 or fixed and i != 3:
        raise _Bad
    return n, s[i:]


def _skip(value: bytes, prefix: bytes) -> tuple[bytes, bool]:
    """`value` after the layout's literal `prefix` (a run of spaces matches any run of spaces), and whether it
    matched; when it did not, what is left where it stopped (Go reports that)."""
    while prefix:
        if prefix[:1] == b" ":
            if value and value[:1] != b" ":
                return value, False
            prefix, value = prefix.lstrip(b" "), value.lstrip(b" ")
            continue
        if not value or value[0] != prefix[0]:
            return value, False
        prefix, value = prefix[1:], value[1:]
    return value, True


def _lookup(table: tuple[bytes, ...], value: bytes) -> tuple[int, bytes]:
    for i, name in enumerate(table):
        if len(value) >= len(name) and _match(value[:len(name)], name):
            return i, value[len(name):]
    raise _Bad


def _match(a: bytes, b: bytes) -> bool:
    for x, y in zip(a, b, strict=True):
        if x != y:
            x, y = x | 0x20, y | 0x20
            if x != y or not 0x61 <= x <= 0x7A:
                return False
    return True


def _nanos(value: bytes, width: int) -> tuple[int, str]:
    """(nanoseconds, range error) of a fraction: its separator and up to 9 digits of `width` - 1."""
    if value[:1] not in (b".", b","):
        raise _Bad
    width = min(width, 10)
    ns = _atoi(value[1:width])
    if ns < 0:
        return 0, "fractional second"
    return ns * 10 ** (10 - width), ""


def _zone_length(value: bytes) -> int:
    """Go's parseTimeZone: the length of a zone abbreviation at the start of `value`, 0 when there is none."""
    if len(value) < 3:
        return 0
    if value[:4] in (b"ChST", b"MeST"):
        return 4
    if value[:3] == b"GMT":
        return 3 + _signed_offset(value[3:]) if len(value) > 3 else 3
    if value[:1] in (b"+", b"-"):
        return _signed_offset(value)
    upper = 0
    while upper < 6 and upper < len(value) and 0x41 <= value[upper] <= 0x5A:
        upper += 1
    if upper == 5 and value[4:5] == b"T":
        return 5
    if upper == 4 and (value[3:4] == b"T" or value[:4] == b"WITA"):
        return 4
    return 3 if upper == 3 else 0


def _signed_offset(value: bytes) -> int:
    if value[:1] not in (b"-", b"+"):
        return 0
    try:
        x, rem = _leading_int(value[1:])
    except _Bad:
        return 0
    if rem == value[1:] or x > 23:
        return 0
    return len(value) - len(rem)


def _is_leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def _days_in(month: int, year: int) -> int:
    if month == 2:
        return 29 if _is_leap(year) else 28
    return _DAYS_BEFORE[month] - _DAYS_BEFORE[month - 1]


def _days_from_civil(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (any year)."""
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _civil_from_days(z: int) -> tuple[int, int, int]:
    z += 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + (3 if mp < 10 else -9)
    return yoe + era * 400 + (m <= 2), m, d


@dataclass(frozen=True)
class GoTime:
    """A time.Time: an instant (Unix seconds and nanoseconds) in a zone (offset east of UTC and its name; an
    empty name prints the offset)."""
    unix: int
    nsec: int = 0
    offset: int = 0
    zone: str = "UTC"

    def add(self, nanos: int) -> GoTime:
        total = self.unix * _NANOS + self.nsec + nanos
        return GoTime(total // _NANOS, total % _NANOS, self.offset, self.zone)

    def string(self) -> str:
        """Time.String: Format("2006-01-02 15:04:05.999999999 -0700 MST")."""
        wall = self.unix + self.offset
        days, secs = divmod(wall, 86400)
        y, m, d = _civil_from_days(days)
        year = f"-{-y:04d}" if y < 0 else f"{y:04d}"
        frac = f".{self.nsec:09d}".rstrip("0") if self.nsec else ""
        off = self._offset_text("")
        return (f"{year}-{m:02d}-{d:02d} {secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}{frac} {off} "
                f"{self.zone or off}")

    def _offset_text(self, colon: str) -> str:
        """-0700 (or -07:00): whole minutes of the offset, truncated toward zero as Go divides."""
        minutes = int(self.offset / 60)
        return f"{'-' if minutes < 0 else '+'}{abs(minutes) // 60:02d}{colon}{abs(minutes) % 60:02d}"

    def rfc3339(self) -> str:
        """MarshalJSON's text: RFC 3339 with nanoseconds, Z for UTC."""
        date, clock = self.string().split(" ")[:2]
        return f"{date}T{clock}{'Z' if not self.offset else self._offset_text(':')}"


ZERO = GoTime(unix=_days_from_civil(1, 1, 1) * 86400)


def parse_in_utc(layout_text: str, value_text: str) -> GoTime:
    """time.ParseInLocation(layout, value, time.Local) where Local is UTC; ParseError with Go's message."""
    layout, value = layout_text.encode(), value_text.encode()
    f = _Fields()
    rest = layout
    while True:
        chunk = next_chunk(rest)
        value, matched = _skip(value, chunk.prefix)
        if not matched:
            raise _error(layout, value_text.encode(), chunk.prefix, value)
        if chunk.std == 0:
            if value:
                raise _error(layout, value_text.encode(), b"", value, f": extra text: {_quote(value)}")
            break
        rest = chunk.suffix
        hold = value
        try:
            value, range_error = f.read(chunk, value, rest)
        except _Bad:
            raise _error(layout, value_text.encode(), chunk.text, hold) from None
        if range_error:
            raise _error(layout, value_text.encode(), chunk.text, value, f": {range_error} out of range")
    return f.time(layout, value_text.encode(), value)


class _Fields:
    """What the layout's elements have read so far (Go's parse locals)."""

    def __init__(self) -> None:
        self.year, self.month, self.day, self.yday = 0, -1, -1, -1
        self.hour = self.minute = self.sec = self.nsec = 0
        self.am = self.pm = False
        self.utc = False
        self.zone_offset, self.zone_name = -1, b""

    def read(self, chunk: Chunk, value: bytes, rest: bytes) -> tuple[bytes, str]:
        """Consumes one element from `value`: (what is left, a range error or ""). _Bad when it does not match."""
        std = chunk.std
        if std == YEAR:
            if len(value) < 2:
                raise _Bad
            year = _atoi(value[:2])
            self.year = year + (1900 if year >= 69 else 2000)
            return value[2:], ""
        if std == LONG_YEAR:
            if len(value) < 4 or not value[:1].isdigit():
                raise _Bad
            self.year = _atoi(value[:4])
            return value[4:], ""
        if std in (MONTH, LONG_MONTH):
            i, value = _lookup(_SHORT_MONTHS if std == MONTH else _LONG_MONTHS, value)
            self.month = i + 1
            return value, ""
        if std in (NUM_MONTH, ZERO_MONTH):
            self.month, value = _getnum(value, std == ZERO_MONTH)
            return value, "month" if not 0 < self.month <= 12 else ""
        if std in (WEEKDAY, LONG_WEEKDAY):
            return _lookup(_SHORT_DAYS if std == WEEKDAY else _LONG_DAYS, value)[1], ""
        if std in (DAY, UNDER_DAY, ZERO_DAY):
            if std == UNDER_DAY and value[:1] == b" ":
                value = value[1:]
            self.day, value = _getnum(value, std == ZERO_DAY)
            return value, ""
        if std in (UNDER_YEAR_DAY, ZERO_YEAR_DAY):
            for _ in range(2):
                if std == UNDER_YEAR_DAY and value[:1] == b" ":
                    value = value[1:]
            self.yday, value = _getnum3(value, std == ZERO_YEAR_DAY)
            return value, ""
        if std == HOUR:
            self.hour, value = _getnum(value, False)
            return value, "hour" if not 0 <= self.hour < 24 else ""
        if std in (HOUR12, ZERO_HOUR12):
            self.hour, value = _getnum(value, std == ZERO_HOUR12)
            return value, "hour" if not 0 <= self.hour <= 12 else ""
        if std in (MINUTE, ZERO_MINUTE):
            self.minute, value = _getnum(value, std == ZERO_MINUTE)
            return value, "minute" if not 0 <= self.minute < 60 else ""
        if std in (SECOND, ZERO_SECOND):
            return self._second(std, value, rest)
        if std in (PM, PM_LOWER):
            if len(value) < 2:
                raise _Bad
            word = value[:2].decode("latin-1")
            pm, am = ("PM", "AM") if std == PM else ("pm", "am")
            if word not in (pm, am):
                raise _Bad
            self.pm, self.am = (True, self.am) if word == pm else (self.pm, True)
            return value[2:], ""
        if std in (ISO_TZ, ISO_SHORT_TZ, ISO_COLON_TZ, ISO_SECONDS_TZ, ISO_COLON_SECONDS_TZ) and value[:1] == b"Z":
            self.utc = True
            return value[1:], ""
        if std in (ISO_TZ, ISO_SHORT_TZ, ISO_COLON_TZ, ISO_SECONDS_TZ, ISO_COLON_SECONDS_TZ, NUM_TZ, NUM_SHORT_TZ,
                   NUM_COLON_TZ, NUM_SECONDS_TZ, NUM_COLON_SECONDS_TZ):
            return self._offset(std, value)
        if std == TZ:
            if value[:3] == b"UTC":
                self.utc = True
                return value[3:], ""
            n = _zone_length(value)
            if not n:
                raise _Bad
            self.zone_name = value[:n]
            return value[n:], ""
        if std == FRAC0:
            width = 1 + chunk.digits
            if len(value) < width:
                raise _Bad
            self.nsec, range_error = _nanos(value, width)
            return value[width:], range_error
        # FRAC9: optional in the value
        if len(value) < 2 or value[:1] not in (b".", b",") or not value[1:2].isdigit():
            return value, ""
        i = 0
        while i + 1 < len(value) and value[i + 1:i + 2].isdigit():
            i += 1
        self.nsec, range_error = _nanos(value, 1 + i)
        return value[1 + i:], range_error

    def _second(self, std: int, value: bytes, rest: bytes) -> tuple[bytes, str]:
        self.sec, value = _getnum(value, std == ZERO_SECOND)
        if not 0 <= self.sec < 60:
            return value, "second"
        # a fraction after the seconds is read here unless the layout has its own fraction element next
        if len(value) >= 2 and value[:1] in (b".", b",") and value[1:2].isdigit():
            if next_chunk(rest).std in (FRAC0, FRAC9):
                return value, ""
            n = 2
            while n < len(value) and value[n:n + 1].isdigit():
                n += 1
            self.nsec, range_error = _nanos(value, n)
            return value[n:], range_error
        return value, ""

    def _offset(self, std: int, value: bytes) -> tuple[bytes, str]:
        if std in (ISO_COLON_TZ, NUM_COLON_TZ):
            if len(value) < 6 or value[3:4] != b":":
                raise _Bad
            sign, hh, mm, ss, value = value[:1], value[1:3], value[4:6], b"00", value[6:]
        elif std in (NUM_SHORT_TZ, ISO_SHORT_TZ):
            if len(value) < 3:
                raise _Bad
            sign, hh, mm, ss, value = value[:1], value[1:3], b"00", b"00", value[3:]
        elif std in (ISO_COLON_SECONDS_TZ, NUM_COLON_SECONDS_TZ):
            if len(value) < 9 or value[3:4] != b":" or value[6:7] != b":":
                raise _Bad
            sign, hh, mm, ss, value = value[:1], value[1:3], value[4:6], value[7:9], value[9:]
        elif std in (ISO_SECONDS_TZ, NUM_SECONDS_TZ):
            if len(value) < 7:
                raise _Bad
            sign, hh, mm, ss, value = value[:1], value[1:3], value[3:5], value[5:7], value[7:]
        else:
            if len(value) < 5:
                raise _Bad
            sign, hh, mm, ss, value = value[:1], value[1:3], value[3:5], b"00", value[5:]
        # Go reads the three numbers until one fails, then checks the ranges of what it has, then the sign
        nums, bad = [0, 0, 0], False
        for i, part in enumerate((hh, mm, ss)):
            try:
                nums[i] = _getnum(part, True)[0]
            except _Bad:
                bad = True
                break
        h, m, s = nums
        range_error = ("time zone offset second" if s > 60 else "time zone offset minute" if m > 60
                       else "time zone offset hour" if h > 24 else "")
        self.zone_offset = (h * 60 + m) * 60 + s
        if sign == b"-":
            self.zone_offset = -self.zone_offset
        elif sign != b"+":
            bad = True
        if range_error:
            return value, range_error
        if bad:
            raise _Bad
        return value, ""

    def time(self, layout: bytes, original: bytes, value: bytes) -> GoTime:
        if self.pm and self.hour < 12:
            self.hour += 12
        elif self.am and self.hour == 12:
            self.hour = 0
        month, day = self.month, self.day
        if self.yday >= 0:
            yday, m, d = self.yday, 0, 0
            if _is_leap(self.year):
                if yday == 31 + 29:
                    m, d = 2, 29
                elif yday > 31 + 29:
                    yday -= 1
            if not 1 <= yday <= 365:
                raise _error(layout, original, b"", value, ": day-of-year out of range")
            if m == 0:
                m = (yday - 1) // 31 + 1
                if _DAYS_BEFORE[m] < yday:
                    m += 1
                d = yday - _DAYS_BEFORE[m - 1]
            if month >= 0 and month != m:
                raise _error(layout, original, b"", value, ": day-of-year does not match month")
            if day >= 0 and day != d:
                raise _error(layout, original, b"", value, ": day-of-year does not match day")
            month, day = m, d
        else:
            month = 1 if month < 0 else month
            day = 1 if day < 0 else day
        if not 1 <= day <= _days_in(month, self.year):
            raise _error(layout, original, b"", value, ": day out of range")
        wall = _days_from_civil(self.year, month, day) * 86400 + self.hour * 3600 + self.minute * 60 + self.sec
        if self.utc:
            return GoTime(wall, self.nsec)
        if self.zone_offset != -1:
            # the local zone (UTC) is used when it has that offset and the name, if any, is its own
            if self.zone_offset == 0 and self.zone_name in (b"", b"UTC"):
                return GoTime(wall, self.nsec)
            return GoTime(wall - self.zone_offset, self.nsec, self.zone_offset, self.zone_name.decode("latin-1"))
        if self.zone_name:
            offset = 0
            if len(self.zone_name) > 3 and self.zone_name[:3] == b"GMT":
                offset = _atoi(self.zone_name[3:]) * 3600
            return GoTime(wall - offset, self.nsec, offset, self.zone_name.decode("latin-1"))
        return GoTime(wall, self.nsec)
