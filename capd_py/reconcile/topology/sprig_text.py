"""sprig v3.3.0's text and duration helpers that ClusterClass templates may call (upstream renders with
sprig.HermeticTxtFuncMap): abbrev/abbrevboth/initials/wrap/wrapWith/swapcase (Masterminds/goutils v1.1.1),
camelcase/snakecase/kebabcase (huandu/xstrings v1.5.0), toDecimal, duration, durationRound. Written from those
libraries' behaviour, byte for byte where they work on bytes (goutils indexes Go strings, so a multi-byte character
can be cut, or read as Latin-1 runes by initials); checked against Go's own output by
tests/unit/reconcile/topology/test_gotemplate_parity.py. Pure."""

from __future__ import annotations

import codecs
import re
import unicodedata

from capd_py.api import godur

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_RUNE_ERROR = "\ufffd"
# unicode.IsSpace: Latin-1's spaces, then the White_Space property
_SPACE = frozenset("\t\n\v\f\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000"
                   + "".join(chr(c) for c in range(0x2000, 0x200B)))
_OCTAL = re.compile(r"[+-]?[0-7]+")
_DECIMAL = re.compile(r"[+-]?[0-9]+")


def _go_replace(err: UnicodeError) -> tuple[str, int]:
    """encoding/json's (and so the corpus's) reading of invalid UTF-8: one U+FFFD per invalid byte."""
    assert isinstance(err, UnicodeDecodeError)
    return _RUNE_ERROR * (err.end - err.start), err.end


codecs.register_error("capd-py-go-replace", _go_replace)


def go_text(data: bytes) -> str:
    return data.decode("utf-8", "capd-py-go-replace")


# -- unicode's predicates as Go's unicode package answers them ---------------------------------------------------

def is_space(c: str) -> bool:
    return c in _SPACE


def _cat(c: str) -> str:
    return unicodedata.category(c)


def _is_upper(c: str) -> bool:
    return _cat(c) == "Lu"


def _is_lower(c: str) -> bool:
    return _cat(c) == "Ll"


def _is_letter(c: str) -> bool:
    return _cat(c).startswith("L")


def _is_number(c: str) -> bool:
    return _cat(c).startswith("N")


def _is_punct(c: str) -> bool:
    return _cat(c).startswith("P")


def _one(mapped: str, c: str) -> str:
    """Go's case mappings map one rune to one rune (Python's may give several: ß -> SS)."""
    return mapped if len(mapped) == 1 else c


def _upper(c: str) -> str:
    return _one(c.upper(), c)


def _lower(c: str) -> str:
    return _one(c.lower(), c)


def _title(c: str) -> str:
    return _one(c.title(), c)


# -- goutils ------------------------------------------------------------------------------------------------------

def _abbreviate_full(data: bytes, offset: int, max_width: int) -> bytes | None:
    """goutils.AbbreviateFull on bytes; None where it returns an error."""
    if not data:
        return b""
    if max_width < 4:
        return None
    if len(data) <= max_width:
        return data
    offset = min(offset, len(data))
    if len(data) - offset < max_width - 3:
        offset = len(data) - (max_width - 3)
    if offset <= 4:
        return data[:max_width - 3] + b"..."
    if max_width < 7:
        return None
    if offset + max_width - 3 < len(data):
        return b"..." + (_abbreviate_full(data[offset:], 0, max_width - 3) or b"")
    return b"..." + data[len(data) - (max_width - 3):]


def abbrev(width: int, s: str) -> str:
    if width < 4:
        return s
    return go_text(_abbreviate_full(s.encode(), 0, width) or b"")


def abbrevboth(left: int, right: int, s: str) -> str:
    if right < 4 or left > 0 and right < 7:
        return s
    return go_text(_abbreviate_full(s.encode(), left, right) or b"")


def initials(s: str) -> str:
    """goutils.Initials: the first byte of each whitespace-separated word, each byte read as a Latin-1 rune."""
    out, gap = [], True
    for b in s.encode():
        ch = chr(b)
        if is_space(ch):
            gap = True
        elif gap:
            out.append(ch)
            gap = False
    return "".join(out)


def _wrap_custom(s: str, width: int, newline: str, long_words: bool) -> str:
    """goutils.WrapCustom on bytes: words end at ' '; a leading space of a line is dropped."""
    data = s.encode()
    if not data:
        return ""
    nl = (newline or "\n").encode()
    width = max(width, 1)
    out, offset, n = bytearray(), 0, len(data)
    while n - offset > width:
        if data[offset:offset + 1] == b" ":
            offset += 1
            continue
        at = data.rfind(b" ", offset, width + offset + 1)
        if at >= offset:
            out += data[offset:at] + nl
            offset = at + 1
        elif long_words:
            out += data[offset:offset + width] + nl
            offset += width
        else:
            nxt = data.find(b" ", width + offset)
            if nxt == -1:
                out += data[offset:]
                offset = n
            else:
                out += data[offset:nxt] + nl
                offset = nxt + 1
    out += data[offset:]
    return go_text(bytes(out))


def wrap(width: int, s: str) -> str:
    return _wrap_custom(s, width, "", False)


def wrap_with(width: int, newline: str, s: str) -> str:
    return _wrap_custom(s, width, newline, True)


def swapcase(s: str) -> str:
    """goutils.SwapCase: upper and title to lower, lower to upper, and to title case after whitespace."""
    out, space = [], True
    for c in s:
        if _is_upper(c) or _cat(c) == "Lt":
            out.append(_lower(c))
            space = False
        elif _is_lower(c):
            out.append(_title(c) if space else _upper(c))
            space = False
        else:
            out.append(c)
            space = is_space(c)
    return "".join(out)


# -- xstrings -----------------------------------------------------------------------------------------------------

def _connector(c: str) -> bool:
    return c in "-_" or is_space(c)


def _alphabet(c: str) -> bool:
    """A letter that is not CJK (xstrings.isAlphabet)."""
    if not _is_letter(c):
        return False
    o = ord(c)
    return not (0x4E00 <= o <= 0x9FCC or 0x3400 <= o <= 0x4D85 or 0x20000 <= o <= 0x2B81D)


def pascalcase(s: str) -> str:
    """xstrings.ToPascalCase (sprig's camelcase): connector-separated words capitalized and joined; leading
    connectors kept, a run of connectors keeps all but its last."""
    if not s:
        return ""
    out: list[str] = []
    i, first_upper, r0 = 0, False, ""
    while i < len(s):
        r0 = s[i]
        i += 1
        if not _connector(r0):
            first_upper = _is_upper(r0)
            r0 = _upper(r0)
            break
        out.append(r0)
    if i >= len(s):
        out.append(r0)
        return "".join(out)
    while i < len(s):
        r1, r0 = r0, s[i]
        i += 1
        if _connector(r0) and _connector(r1):
            out.append(r1)
            continue
        if _connector(r1):
            first_upper = _is_upper(r0)
            r0 = _upper(r0)
        else:
            if first_upper:
                if _is_upper(r0):
                    r0 = _lower(r0)
                else:
                    first_upper = False
            out.append(r1)
    out.append(r0)
    return "".join(out)


_INVALID, _NUMBER, _UPPER, _ALPHA, _CONNECTOR, _PUNCT, _OTHER = range(7)


def _next_valid(s: str, i: int, prev: str) -> tuple[str, int]:
    """The next rune that is not RuneError from index i, and how many runes were read (xstrings.nextValidRune)."""
    j = i
    while j < len(s):
        r = s[j]
        j += 1
        if r != _RUNE_ERROR:
            return r, j - i
    return prev, j - i


def _next_word(s: str) -> tuple[int, str, str]:
    """xstrings.nextWord: (word type, word, remaining)."""
    if not s:
        return _INVALID, "", ""
    r, size = _next_valid(s, 0, _RUNE_ERROR)
    offset = size
    if r == _RUNE_ERROR:
        return _INVALID, s[:offset], s[offset:]

    def run(pred: object, start: int, r: str) -> int:
        """Extends the word over the runes `pred` accepts, from `start` (index into s); returns the new offset."""
        off = start
        while off < len(s):
            r, size = _next_valid(s, off, r)
            if not pred(r):  # type: ignore[operator]
                break
            off += size
        return off

    if _connector(r):
        wt, offset = _CONNECTOR, run(_connector, offset, r)
    elif _is_punct(r):
        wt, offset = _PUNCT, run(_is_punct, offset, r)
    elif _is_upper(r):
        wt = _UPPER
        if offset < len(s):
            r2, size2 = _next_valid(s, offset, r)
            if _is_upper(r2):
                prev_size = size2
                offset += size2
                r = r2
                while offset < len(s):
                    r, size2 = _next_valid(s, offset, r)
                    if not _is_upper(r):
                        break
                    prev_size = size2
                    offset += size2
                # "HTTPStatus": "HTTP" and "Status"
                if offset < len(s) and _alphabet(r):
                    offset -= prev_size
            elif _alphabet(r2):
                offset = run(lambda c: _alphabet(c) and not _is_upper(c), offset + size2, r2)
    elif _alphabet(r):
        wt, offset = _ALPHA, run(lambda c: _alphabet(c) and not _is_upper(c), offset, r)
    elif _is_number(r):
        wt, offset = _NUMBER, run(_is_number, offset, r)
    else:
        wt = _OTHER
        offset = run(lambda c: not (_connector(c) or _alphabet(c) or _is_number(c) or _is_punct(c)), offset, r)
    return wt, s[:offset], s[offset:]


def _to_lower(out: list[str], wt: int, word: str, connector: str) -> None:
    if wt not in (_UPPER, _CONNECTOR):
        out.append(word)
        return
    for c in word:
        out.append(connector if _connector(c) else _lower(c) if _is_upper(c) else c)


def _lower_case(s: str, connector: str) -> str:
    """xstrings.camelCaseToLowerCase (snakecase with '_', kebabcase with '-')."""
    if not s:
        return ""
    out: list[str] = []
    wt, word, remaining = _next_word(s)
    while remaining:
        if wt != _CONNECTOR:
            _to_lower(out, wt, word, connector)
        prev, last = wt, word
        wt, word, remaining = _next_word(remaining)
        if prev == _NUMBER:
            while wt in (_ALPHA, _NUMBER):
                _to_lower(out, wt, word, connector)
                wt, word, remaining = _next_word(remaining)
            if wt not in (_INVALID, _PUNCT, _CONNECTOR):
                out.append(connector)
        elif prev == _CONNECTOR:
            _to_lower(out, prev, last, connector)
        elif prev == _PUNCT:
            pass
        else:
            if wt != _NUMBER:
                if wt not in (_CONNECTOR, _PUNCT):
                    out.append(connector)
                continue
            if not remaining:
                continue
            last = word
            wt, word, remaining = _next_word(remaining)
            # a number followed by no letters belongs to the word before it ("Bld4Floor" -> "bld4_floor")
            if wt != _ALPHA:
                _to_lower(out, _NUMBER, last, connector)
                if wt not in (_CONNECTOR, _PUNCT):
                    out.append(connector)
                continue
            # letters after the number: a connector before it ("HTTP2xx" -> "http_2xx")
            out.append(connector)
            _to_lower(out, _NUMBER, last, connector)
            while wt in (_ALPHA, _NUMBER):
                _to_lower(out, wt, word, connector)
                wt, word, remaining = _next_word(remaining)
            if wt not in (_INVALID, _CONNECTOR, _PUNCT):
                out.append(connector)
    _to_lower(out, wt, word, connector)
    return "".join(out)


def snakecase(s: str) -> str:
    return _lower_case(s, "_")


def kebabcase(s: str) -> str:
    return _lower_case(s, "-")


# -- numbers and durations ----------------------------------------------------------------------------------------

def _parse_int64(text: str, base: int) -> int:
    """strconv.ParseInt(text, base, 64) as sprig uses it (error ignored): 0 on bad syntax, clamped when out of
    range (Go returns the bound with its range error)."""
    if not (_OCTAL if base == 8 else _DECIMAL).fullmatch(text):
        return 0
    return max(_INT64_MIN, min(_INT64_MAX, int(text, base)))


def to_decimal(printed: str) -> int:
    """toDecimal: fmt.Sprint of the value read as an octal int64 (0 when it is not one, as sprig swallows the error;
    out of range is an error too there: strconv's bound is not returned by toDecimal)."""
    if not _OCTAL.fullmatch(printed):
        return 0
    n = int(printed, 8)
    return n if _INT64_MIN <= n <= _INT64_MAX else 0


def _wrap64(n: int) -> int:
    return (n + (1 << 63)) % (1 << 64) - (1 << 63)


def duration(seconds: int | None, text: str | None) -> str:
    """sprig's duration: a string parsed as decimal seconds (clamped, 0 when not a number), an int64 as seconds,
    anything else 0; multiplied by time.Second as Go does (wrapping) and printed as time.Duration."""
    n = _parse_int64(text, 10) if text is not None else seconds or 0
    return godur.format_nanos(_wrap64(n * 1_000_000_000))


def duration_round(nanos: int) -> str:
    """sprig's durationRound of a duration in nanoseconds: the largest whole unit it exceeds (y = 365 d, mo = 30 d)."""
    u = nanos % (1 << 64)
    if nanos < 0:
        u = -u % (1 << 64)
    hour = 3_600_000_000_000
    for unit, suffix in ((hour * 24 * 365, "y"), (hour * 24 * 30, "mo"), (hour * 24, "d"), (hour, "h"),
                         (60_000_000_000, "m"), (1_000_000_000, "s")):
        if u > unit:
            return f"{u // unit}{suffix}"
    return "0s"


def parse_duration_or_zero(text: str) -> int:
    try:
        return godur.parse_nanos(text)
    except ValueError:
        return 0
