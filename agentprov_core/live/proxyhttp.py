"""HTTP/1.x as the egress proxy (:mod:`agentprov_core.live.egress`) reads and writes it:
the request head and its target (CONNECT's authority, a forward request's absolute form),
the LAN endpoint's response head and how much body follows, copying a body exactly or
chunk by chunk, and the refusals the proxy answers with. Nothing here opens a connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import re
from urllib.parse import urlsplit

Pair = tuple[str, int]


REASONS = {200: "Connection Established", 400: "Bad Request", 403: "Forbidden",
           405: "Method Not Allowed", 408: "Request Timeout",
           431: "Request Header Fields Too Large", 502: "Bad Gateway",
           503: "Service Unavailable", 504: "Gateway Timeout"}
KIND_STATUS = {"malformed": 400, "target": 403, "method": 405, "header_timeout": 408,
               "header_too_large": 431, "limit": 503}
TOKEN = re.compile(rb"^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,32}$")
HOSTNAME = re.compile(r"^[A-Za-z0-9._-]{1,253}$")
HOP_BY_HOP = {b"connection", b"proxy-connection", b"keep-alive", b"proxy-authorization",
              b"proxy-authenticate", b"te", b"trailer", b"upgrade", b"expect"}
BUF = 1 << 18


class Refuse(Exception):
    """Answer the client with a refusal and close."""

    def __init__(self, kind: str, target: str | None = None, detail: str = "",
                 allow: str | None = None) -> None:
        super().__init__(kind)
        self.kind, self.target, self.detail, self.allow = kind, target, detail, allow


class Upstream(Exception):
    """The upstream could not be reached or answered badly: 502 (or 504)."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status, self.detail = status, detail


def host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def literal_ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def is_lan(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    return ip.is_private and not (ip.is_loopback or ip.is_unspecified or ip.is_multicast)


def norm_host(host: str) -> str:
    ip = literal_ip(host)
    return str(ip) if ip is not None else host.lower()


def parse_head(head: bytes) -> tuple[str, str, bytes, list[tuple[bytes, bytes]]]:
    lines = head[:-4].split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or not TOKEN.match(parts[0]) or parts[2] not in (b"HTTP/1.1",
                                                                          b"HTTP/1.0"):
        raise Refuse("malformed", detail="not an HTTP/1.x request line")
    try:
        target = parts[1].decode("ascii")
    except UnicodeDecodeError:
        raise Refuse("malformed", detail="a non-ASCII request target") from None
    if not target or any(ord(c) <= 32 or ord(c) >= 127 for c in target):
        raise Refuse("malformed", detail="a bad request target")
    headers = []
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep or not TOKEN.match(name):
            raise Refuse("malformed", detail="a header line does not parse")
        headers.append((name, value.strip()))
    return parts[0].decode("ascii").upper(), target, parts[2], headers


def connect_authority(target: str) -> Pair:
    """``host:port`` of a CONNECT request (``[v6]:port`` too)."""
    if target.startswith("["):
        host, sep, rest = target[1:].partition("]")
        if not sep or not rest.startswith(":"):
            raise Refuse("malformed", detail="CONNECT needs host:port")
        port_s = rest[1:]
        if literal_ip(host) is None:
            raise Refuse("malformed", detail="a bad IPv6 literal")
    else:
        host, sep, port_s = target.rpartition(":")
        if not sep or not HOSTNAME.match(host):
            raise Refuse("malformed", detail="CONNECT needs host:port")
    if not port_s.isdigit() or not 0 < int(port_s) < 65536:
        raise Refuse("malformed", detail="CONNECT needs a port")
    return norm_host(host), int(port_s)


def absolute_target(target: str) -> tuple[str, Pair, bytes]:
    """Scheme, (host, port) and origin-form of an absolute-form request target."""
    if target.startswith("/") or target == "*":
        raise Refuse("malformed", detail="a proxy request names its target in absolute "
                                          "form (http://host:port/path)")
    try:
        parts = urlsplit(target)
        host, port = parts.hostname, parts.port
    except ValueError:
        raise Refuse("malformed", detail="the request target does not parse") from None
    if parts.scheme not in ("http", "https") or not host or parts.username is not None \
            or parts.password is not None or parts.fragment:
        raise Refuse("malformed", detail="the request target does not parse")
    pair = (norm_host(host), port or (443 if parts.scheme == "https" else 80))
    origin = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return parts.scheme, pair, origin.encode("ascii")


def parse_response(head: bytes) -> tuple[int, list[tuple[bytes, bytes]]]:
    lines = head[:-4].split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise Upstream(502, "the LAN endpoint's response does not parse")
    headers = []
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep:
            raise Upstream(502, "the LAN endpoint's response does not parse")
        headers.append((name.strip(), value.strip()))
    return int(parts[1]), headers


def response_length(method: str, status: int, headers: list[tuple[bytes, bytes]]) -> int | None:
    """Bytes of body to copy: 0 for none, None for "until the upstream closes"."""
    if method == "HEAD" or status < 200 or status in (204, 304):
        return 0
    if any(k.lower() == b"transfer-encoding" for k, _ in headers):
        return None
    for k, v in headers:
        if k.lower() == b"content-length" and v.isdigit():
            return int(v)
    return None


async def copy_exact(src: asyncio.StreamReader, dst: asyncio.StreamWriter, n: int,
                     deadline: asyncio.Timeout, idle: float) -> int:
    loop = asyncio.get_running_loop()
    left = n
    while left:
        data = await src.read(min(left, BUF))
        if not data:
            raise asyncio.IncompleteReadError(b"", left)
        deadline.reschedule(loop.time() + idle)
        dst.write(data)
        await dst.drain()
        left -= len(data)
    return n


async def copy_chunked(src: asyncio.StreamReader, dst: asyncio.StreamWriter,
                       deadline: asyncio.Timeout, idle: float) -> int:
    loop = asyncio.get_running_loop()
    sent = 0
    while True:
        line = await src.readuntil(b"\r\n")
        size = int(line.split(b";", 1)[0].strip(), 16)
        dst.write(line)
        sent += len(line)
        if size == 0:
            while True:  # trailers, then the empty line
                t = await src.readuntil(b"\r\n")
                dst.write(t)
                sent += len(t)
                if t == b"\r\n":
                    return sent
        data = await src.readexactly(size + 2)
        if not data.endswith(b"\r\n"):
            raise ValueError("a chunk does not end with CRLF")
        deadline.reschedule(loop.time() + idle)
        dst.write(data)
        await dst.drain()
        sent += len(data)


def refusal_text(kind: str, target: str | None) -> str:
    return {
        "target": f"{target} is not an allowed egress target",
        "method": f"this method is not allowed to {target}",
        "malformed": "the request does not parse",
        "header_too_large": "the request header is too large",
        "header_timeout": "the request header did not arrive in time",
        "limit": "too many connections",
    }[kind]


def close_quietly(writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(Exception):
        writer.close()
