"""sprig's urlParse and urlJoin (sprig v3.3.0 url.go) over Go's net/url: url.Parse, URL.String, Hostname and
Userinfo as Go 1.26 writes them (byte strings, its escaping table per URL part, its error texts). Written from
net/url's behaviour, not translated from it; checked against Go's output by
tests/unit/reconcile/topology/test_gotemplate_parity.py. Pure."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

from capd_py.reconcile.topology.gostrconv import quote_bytes
from capd_py.reconcile.topology.sprig_text import go_text

_PATH, _SEGMENT, _HOST, _ZONE, _USER, _QUERY, _FRAGMENT = ("path", "segment", "host", "zone", "user", "query",
                                                            "fragment")
_HEX = b"0123456789abcdefABCDEF"


class URLError(ValueError):
    """url.Parse's error (its Error() text: `parse "<url>": <cause>`)."""


def _should_escape(c: int, mode: str) -> bool:
    ch = chr(c)
    if ch.isascii() and ch.isalnum():
        return False
    if mode in (_HOST, _ZONE) and ch in "!$&'()*+,;=:[]<>\"":
        return False
    if ch in "-_.~":
        return False
    if ch in "$&+,/:;=?@":
        if mode == _PATH:
            return ch == "?"
        if mode == _SEGMENT:
            return ch in "/;,?"
        if mode == _USER:
            return ch in "@/?:"
        if mode == _QUERY:
            return True
        if mode == _FRAGMENT:
            return False
    # a fragment keeps these sub-delims as they are
    return not (mode == _FRAGMENT and ch in "!()*")


def _unhex(c: int) -> int:
    return int(chr(c), 16)


def _unescape(s: bytes, mode: str) -> bytes:
    """net/url's unescape: %XX decoded; in a host only non-ASCII bytes may be escaped (and %25 in a zone)."""
    i, n, plus = 0, 0, False
    while i < len(s):
        c = s[i]
        if c == ord("%"):
            n += 1
            if i + 2 >= len(s) or s[i + 1] not in _HEX or s[i + 2] not in _HEX:
                raise ValueError("invalid URL escape " + quote_bytes(s[i:i + 3]))
            if mode == _HOST and _unhex(s[i + 1]) < 8 and s[i:i + 3] != b"%25":
                raise ValueError("invalid URL escape " + quote_bytes(s[i:i + 3]))
            if mode == _ZONE:
                v = _unhex(s[i + 1]) << 4 | _unhex(s[i + 2])
                if s[i:i + 3] != b"%25" and v != 0x20 and _should_escape(v, _HOST):
                    raise ValueError("invalid URL escape " + quote_bytes(s[i:i + 3]))
            i += 3
        elif c == ord("+"):
            plus = mode == _QUERY
            i += 1
        else:
            if mode in (_HOST, _ZONE) and c < 0x80 and _should_escape(c, mode):
                raise ValueError("invalid character " + quote_bytes(s[i:i + 1]) + " in host name")
            i += 1
    if n == 0 and not plus:
        return s
    out, i = bytearray(), 0
    while i < len(s):
        c = s[i]
        if c == ord("%"):
            out.append(_unhex(s[i + 1]) << 4 | _unhex(s[i + 2]))
            i += 3
            continue
        out.append(0x20 if c == ord("+") and mode == _QUERY else c)
        i += 1
    return bytes(out)


def _escape(s: bytes, mode: str) -> bytes:
    out = bytearray()
    for c in s:
        if c == 0x20 and mode == _QUERY:
            out += b"+"
        elif _should_escape(c, mode):
            out += b"%" + f"{c:02X}".encode()
        else:
            out.append(c)
    return bytes(out)


def _valid_port(port: bytes) -> bool:
    return not port or port[:1] == b":" and all(0x30 <= b <= 0x39 for b in port[1:])


def _valid_encoded(s: bytes, mode: str) -> bool:
    return all(chr(c) in "!$&'()*+,;=:@[]%" or not _should_escape(c, mode) for c in s)


def _escaped(raw: bytes, value: bytes, mode: str, unescaped: bool = False) -> bytes:
    """EscapedPath / EscapedFragment: the text as written when it is valid and means `value`, else `value`
    escaped (or as it is, `unescaped`)."""
    if raw and _valid_encoded(raw, mode):
        try:
            if _unescape(raw, mode) == value:
                return raw
        except ValueError:
            pass
    return value if unescaped else _escape(value, mode)


@dataclass
class _URL:
    scheme: bytes = b""
    opaque: bytes = b""
    user: tuple[bytes, bytes | None] | None = None   # (username, password or None when unset)
    host: bytes = b""
    path: bytes = b""
    raw_path: bytes = b""
    omit_host: bool = False
    force_query: bool = False
    raw_query: bytes = b""
    fragment: bytes = b""
    raw_fragment: bytes = b""

    def userinfo(self) -> bytes:
        if self.user is None:
            return b""
        name, password = self.user
        return _escape(name, _USER) + (b":" + _escape(password, _USER) if password is not None else b"")

    def hostname(self) -> bytes:
        host = self.host
        colon = host.rfind(b":")
        if colon != -1 and _valid_port(host[colon:]):
            host = host[:colon]
        if host.startswith(b"[") and host.endswith(b"]"):
            host = host[1:-1]
        return host

    def escaped_path(self) -> bytes:
        # "*" is not escaped (Go's Issue 11202)
        return _escaped(self.raw_path, self.path, _PATH, unescaped=self.path == b"*")

    def escaped_fragment(self) -> bytes:
        return _escaped(self.raw_fragment, self.fragment, _FRAGMENT)

    def string(self) -> bytes:
        buf = bytearray()
        if self.scheme:
            buf += self.scheme + b":"
        if self.opaque:
            buf += self.opaque
        else:
            if (self.scheme or self.host or self.user is not None) and \
                    not (self.omit_host and not self.host and self.user is None):
                if self.host or self.path or self.user is not None:
                    buf += b"//"
                if self.user is not None:
                    buf += self.userinfo() + b"@"
                if self.host:
                    buf += _escape(self.host, _HOST)
            path = self.escaped_path()
            if path and path[:1] != b"/" and self.host:
                buf += b"/"
            if not buf and b":" in path.partition(b"/")[0]:
                buf += b"./"
            buf += path
        if self.force_query or self.raw_query:
            buf += b"?" + self.raw_query
        if self.fragment:
            buf += b"#" + self.escaped_fragment()
        return bytes(buf)


def _scheme(raw: bytes) -> tuple[bytes, bytes]:
    for i, c in enumerate(raw):
        ch = chr(c)
        if ch.isascii() and ch.isalpha():
            continue
        if ch.isascii() and ch.isdigit() or ch in "+-.":
            if i == 0:
                return b"", raw
            continue
        if ch == ":":
            if i == 0:
                raise ValueError("missing protocol scheme")
            return raw[:i], raw[i + 1:]
        return b"", raw
    return b"", raw


def _parse_host(scheme: bytes, host: bytes) -> bytes:
    open_at = host.rfind(b"[")
    if open_at > 0:
        raise ValueError("invalid IP-literal")
    if open_at == 0:
        close_at = host.rfind(b"]")
        if close_at < 0:
            raise ValueError("missing ']' in host")
        colon_port = host[close_at + 1:]
        if not _valid_port(colon_port):
            raise ValueError(f"invalid port {quote_bytes(colon_port)} after host")
        port = _unescape(colon_port, _HOST)
        name = host[1:close_at]
        zone = name.find(b"%25")
        plain = (_unescape(name[:zone], _HOST) + _unescape(name[zone:], _ZONE)) if zone >= 0 \
            else _unescape(name, _HOST)
        text = plain.decode("utf-8", "surrogateescape")
        try:
            addr = ipaddress.ip_address(text.partition("%")[0])
        except ValueError:
            raise ValueError(f"invalid host: ParseAddr({quote_bytes(plain)}): unable to parse IP") from None
        if addr.version == 4:
            raise ValueError("invalid IP-literal")
        return b"[" + plain + b"]" + port
    i = host.find(b":")
    if i != -1:
        last = host.rfind(b":")
        if last != i and scheme not in (b"http", b"https"):
            i = last
        colon_port = host[i:]
        if not _valid_port(colon_port):
            raise ValueError(f"invalid port {quote_bytes(colon_port)} after host")
    return _unescape(host, _HOST)


_USERINFO_OK = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._:~!$&'()*+,;=%@")


def _parse_authority(u: _URL, authority: bytes) -> None:
    at = authority.rfind(b"@")
    u.host = _parse_host(u.scheme, authority[at + 1:] if at >= 0 else authority)
    if at < 0:
        return
    info = authority[:at]
    # validUserinfo ranges over runes: a multi-byte character is refused like any other outside the set
    if any(c not in _USERINFO_OK for c in info):
        raise ValueError("net/url: invalid userinfo")
    if b":" not in info:
        u.user = (_unescape(info, _USER), None)
    else:
        name, _, password = info.partition(b":")
        u.user = (_unescape(name, _USER), _unescape(password, _USER))


def _parse(raw: bytes, via_request: bool = False) -> _URL:
    """net/url's parse: url.Parse without the fragment, or ParseRequestURI (`via_request`: absolute URI or
    absolute path)."""
    if any(c < 0x20 or c == 0x7F for c in raw):
        raise ValueError("net/url: invalid control character in URL")
    if not raw and via_request:
        raise ValueError("empty url")
    u = _URL()
    if raw == b"*":
        u.path = b"*"
        return u
    scheme, rest = _scheme(raw)
    u.scheme = scheme.lower()
    if rest.endswith(b"?") and rest.count(b"?") == 1:
        u.force_query, rest = True, rest[:-1]
    else:
        rest, _, u.raw_query = rest.partition(b"?")
    if not rest.startswith(b"/"):
        if u.scheme:
            u.opaque = rest
            return u
        if via_request:
            raise ValueError("invalid URI for request")
        if b":" in rest.partition(b"/")[0]:
            raise ValueError("first path segment in URL cannot contain colon")
    if (u.scheme or not via_request and not rest.startswith(b"///")) and rest.startswith(b"//"):
        authority, slash, tail = rest[2:].partition(b"/")
        rest = slash + tail
        _parse_authority(u, authority)
    elif u.scheme and rest.startswith(b"/"):
        u.omit_host = True
    u.path = _unescape(rest, _PATH)
    u.raw_path = b"" if _escape(u.path, _PATH) == rest else rest
    return u


def parse_url(text: str) -> _URL:
    raw = text.encode()
    head, hash_, frag = raw.partition(b"#")
    try:
        u = _parse(head)
    except ValueError as e:
        raise URLError(f"parse {quote_bytes(head)}: {e}") from None
    if not hash_ or not frag:
        return u
    try:
        u.fragment = _unescape(frag, _FRAGMENT)
    except ValueError as e:
        raise URLError(f"parse {quote_bytes(raw)}: {e}") from None
    u.raw_fragment = b"" if _escape(u.fragment, _FRAGMENT) == frag else frag
    return u


def parse_request_uri(text: str) -> _URL:
    """url.ParseRequestURI: URLError with Go's message."""
    raw = text.encode()
    try:
        return _parse(raw, via_request=True)
    except ValueError as e:
        raise URLError(f"parse {quote_bytes(raw)}: {e}") from None


def url_parse(text: str) -> dict[str, Any]:
    """sprig's urlParse: the parts of the URL as a dict (ValueError with sprig's panic text when it does not
    parse)."""
    try:
        u = parse_url(text)
    except URLError as e:
        raise ValueError(f"unable to parse url: {e}") from None
    return {"scheme": go_text(u.scheme), "host": go_text(u.host), "hostname": go_text(u.hostname()),
            "path": go_text(u.path), "query": go_text(u.raw_query), "opaque": go_text(u.opaque),
            "fragment": go_text(u.fragment), "userinfo": go_text(u.userinfo())}


def url_join(parts: dict[str, str]) -> str:
    """sprig's urlJoin of a dict whose values are strings (`parts`: checked by the caller): url.URL.String()."""
    u = _URL(scheme=parts.get("scheme", "").encode(), host=parts.get("host", "").encode(),
             path=parts.get("path", "").encode(), raw_query=parts.get("query", "").encode(),
             opaque=parts.get("opaque", "").encode(), fragment=parts.get("fragment", "").encode())
    info = parts.get("userinfo", "")
    if info:
        try:
            u.user = parse_url(f"proto://{info}@host").user
        except URLError as e:
            raise ValueError(f"unable to parse userinfo in dict: {e}") from None
    return go_text(u.string())
