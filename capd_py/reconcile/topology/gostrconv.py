"""strconv.Quote as Go writes it (`%q`, and every Go error that quotes a value), for the template engine and the
net/url port; one home. Pure."""

from __future__ import annotations

from typing import Final

_SIMPLE_ESCAPES: Final = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
                          "\v": "\\v"}


def go_quote(s: str, ascii_only: bool = False) -> str:
    """strconv.Quote (`%q`): Go escapes, printable runes kept (Go's IsPrint matches Python's isprintable). A byte
    that is not UTF-8, carried as a surrogate escape (quote_bytes), is written as Go writes it: \\xNN; any other
    surrogate as \\ufffd."""
    out = ['"']
    for ch in s:
        c = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch.isprintable() and (not ascii_only or c < 0x80) and not 0xD800 <= c <= 0xDFFF:
            out.append(ch)
        elif ch in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[ch])
        elif c < 0x20 or c == 0x7F:
            out.append(f"\\x{c:02x}")
        elif 0xDC80 <= c <= 0xDCFF:
            out.append(f"\\x{c - 0xDC00:02x}")
        elif 0xD800 <= c <= 0xDFFF:
            out.append("\\ufffd")
        elif c < 0x10000:
            out.append(f"\\u{c:04x}")
        else:
            out.append(f"\\U{c:08x}")
    out.append('"')
    return "".join(out)


def quote_bytes(data: bytes) -> str:
    """strconv.Quote of a Go string that holds `data` (which need not be UTF-8)."""
    return go_quote(data.decode("utf-8", "surrogateescape"))
