"""The egress proxy (D-664): the one way out for a contained worker that talks to a
non-loopback endpoint.

T0 starts it for a run whose agent endpoint (or defence endpoint) is not on loopback; a
loopback endpoint is reached directly and needs none
(:func:`agentprov_core.live.egressplan.plan` returns ``None``). It does exactly two things
and refuses everything else:

* **CONNECT tunnels** to the exact ``host:port`` pairs allowed (the agent's endpoint, plus
  a defence endpoint if any; the judges of an Inspect plan share the agent's endpoint).
  The TLS inside is never decrypted: the proxy copies bytes and counts them.
* **A plain-http forward mode** for one literal private address (a LAN endpoint such as
  ``http://192.168.1.20:8000``): an absolute-form request (``POST http://192.168.1.20:8000/v1/…``)
  is rewritten to origin form (``POST /v1/…``, ``Host`` set, hop-by-hop headers dropped,
  ``Connection: close``), only ``GET``, ``POST``, ``HEAD`` and ``OPTIONS`` pass, and each
  client connection carries one request.

A target that is neither is refused with ``403``; an allowed target asked with another
method (``GET https://openrouter.ai/…`` in proxy form, ``CONNECT`` to the LAN address,
``DELETE`` in forward mode) with ``405``; a request that does not parse with ``400``; a
header larger than ``max_header_bytes`` with ``431``; a header that does not arrive within
``header_timeout`` with ``408``; a connection beyond ``max_connections`` with ``503``. An
upstream that cannot be reached answers ``502`` (counted as a failure of that pair, not as
a refusal).

The API (what ``agentprov run`` uses)::

    from agentprov_core.live import egressplan

    p = egressplan.plan([agent_base_url, defence_base_url])   # None: all loopback, no proxy
    if p is not None:
        with p.proxy(unix_path=staging / "egress.sock") as proxy:
            env.update(proxy.proxy_env())   # HTTPS_PROXY / HTTP_PROXY = proxy.url
            # (in a sandbox: proxy.proxy_env(relay_url), the relay to the Unix socket)
            ...                             # run the worker
        live["egress"] = proxy.record()     # after stop: the final counts

:func:`agentprov_core.live.egressplan.plan` raises ``cli.refused.egress_target`` (exit 4)
for an endpoint the proxy cannot serve (plain http to a name or a public address, a URL
with credentials, two different LAN addresses). :meth:`EgressProxy.start` raises
``run.environment.egress`` (exit 3) when it cannot listen. What it reads and writes of
HTTP/1.x is :mod:`agentprov_core.live.proxyhttp`.
``EgressProxy(allowed=[("openrouter.ai", 443)], unix_path=...)`` may also be built
directly. It listens on ``127.0.0.1`` on an ephemeral port (:attr:`EgressProxy.url`)
and, with ``unix_path``, on a Unix domain socket too, so that a sandbox without a network
(bubblewrap ``--unshare-net``) reaches it through the bind-mounted socket; both listeners
behave alike. ``resolver`` (tests, benchmarks) maps a name to the address actually dialled,
``{"openrouter.ai": ("127.0.0.1", 8443)}`` or a callable ``(host, port) -> (ip, port)``: the
allowlist is still matched on the name the client asked for.

:meth:`EgressProxy.record` is ``live.egress``: the allowed pairs, the forward address,
tunnels opened per pair with bytes up and down, forwarded requests per method, failures,
and the refusals by kind with counts and the refused target names. It never holds a request
body, a header value or a path.

The proxy is an asyncio event loop in a daemon thread. Every connection is handled inside
one ``try``; no exception of a connection reaches the loop, and :meth:`EgressProxy.stop`
closes the listeners, cancels every open connection (an open tunnel is cut, and counted as
``closed_at_stop``), and joins the thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentprov_core.live.proxyhttp import (
    BUF,
    HOP_BY_HOP,
    KIND_STATUS,
    REASONS,
    Pair,
    Refuse,
    Upstream,
    absolute_target,
    close_quietly,
    connect_authority,
    copy_chunked,
    copy_exact,
    host_port,
    is_lan,
    literal_ip,
    norm_host,
    parse_head,
    parse_response,
    refusal_text,
    response_length,
)

EGRESS_FORMAT = "agentprov-egress/0.1"
FORWARD_METHODS = ("GET", "POST", "HEAD", "OPTIONS")
MAX_TARGET_NAMES = 50  # refused target names kept per kind (the count is always exact)

log = logging.getLogger("agentprov.egress")

Resolver = Callable[[str, int], tuple[str, int]]


# ----------------------------------------------------------------------------- the record
@dataclass
class _PairStats:
    opened: int = 0
    open: int = 0
    failed: int = 0
    bytes_up: int = 0
    bytes_down: int = 0
    closed_idle: int = 0
    closed_at_stop: int = 0
    methods: dict[str, int] = field(default_factory=dict)


@dataclass
class _Refusals:
    count: int = 0
    targets: list[str] = field(default_factory=list)
    dropped_targets: int = 0
    methods: dict[str, int] = field(default_factory=dict)


def _safe_name(raw: str) -> str:
    """A refused target as recorded: printable ASCII, at most 260 characters."""
    out = "".join(c if 32 < ord(c) < 127 else "?" for c in raw[:260])
    return out or "?"


# ----------------------------------------------------------------------------- the proxy
class EgressProxy:
    """The egress proxy of one run. Use it as a context manager (or :meth:`start` and
    :meth:`stop`); :meth:`record` gives ``live.egress`` at any time, final after stop."""

    def __init__(self, allowed: Iterable[Pair] = (), *, forward: Pair | None = None,
                 unix_path: str | os.PathLike[str] | None = None, host: str = "127.0.0.1",
                 port: int = 0,
                 resolver: Mapping[str, Pair] | Resolver | None = None,
                 connect_timeout: float = 10.0, idle_timeout: float = 600.0,
                 header_timeout: float = 10.0, max_header_bytes: int = 32 * 1024,
                 max_connections: int = 128) -> None:
        self.allowed: tuple[Pair, ...] = tuple(
            dict.fromkeys((norm_host(h), int(p)) for h, p in allowed))
        if forward is not None:
            ip = literal_ip(forward[0])
            if ip is None or not is_lan(ip):
                raise ValueError(f"the forward address must be a literal private address, "
                                 f"not {forward[0]!r}")
            forward = (str(ip), int(forward[1]))
        self.forward: Pair | None = forward
        self.unix_path = Path(unix_path) if unix_path is not None else None
        self._bind = (host, port)
        self._resolver = resolver
        self.connect_timeout = connect_timeout
        self.idle_timeout = idle_timeout
        self.header_timeout = header_timeout
        self.max_header_bytes = max_header_bytes
        self.max_connections = max_connections

        self._lock = threading.Lock()
        self._tunnels: dict[Pair, _PairStats] = {p: _PairStats() for p in self.allowed}
        self._forwards: dict[Pair, _PairStats] = ({forward: _PairStats()} if forward else {})
        self._refusals: dict[str, _Refusals] = {}
        self._internal_errors = 0
        self._connections = 0
        self._peak = 0

        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._servers: list[asyncio.AbstractServer] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._address: Pair | None = None
        self._started_at: float | None = None
        self._stopped_at: float | None = None

    # ------------------------------------------------------------------ lifecycle
    @property
    def address(self) -> Pair:
        """The loopback TCP address the proxy listens on."""
        if self._address is None:
            raise RuntimeError("the egress proxy is not started")
        return self._address

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``: what ``HTTPS_PROXY`` and ``HTTP_PROXY`` name."""
        return f"http://{host_port(*self.address)}"

    def proxy_env(self, url: str | None = None) -> dict[str, str]:
        """The proxy variables of the worker's environment (upper and lower case), naming
        :attr:`url`, or ``url`` (a sandbox's relay to the Unix socket). Loopback is exempt:
        a loopback endpoint of the same run (a local defence model) is reached directly."""
        url = url or self.url
        env = {"HTTPS_PROXY": url, "HTTP_PROXY": url,
               "NO_PROXY": "localhost,127.0.0.1,::1"}
        return env | {k.lower(): v for k, v in env.items()}

    def start(self) -> EgressProxy:
        if self._thread is not None:
            raise RuntimeError("the egress proxy was already started")
        ready = threading.Event()
        failure: list[BaseException] = []
        self._loop = loop = asyncio.new_event_loop()
        loop.set_exception_handler(self._loop_exception)

        def main() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._listen())
            except BaseException as exc:  # noqa: BLE001 - reported to start()
                failure.append(exc)
                for srv in self._servers:
                    with contextlib.suppress(Exception):
                        srv.close()
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                with contextlib.suppress(Exception):
                    loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()

        self._thread = threading.Thread(target=main, name="agentprov-egress", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            self._thread.join()
            from agentprov_core.errors import AgentprovError

            raise AgentprovError("run.environment.egress", what=str(failure[0])) from None
        self._started_at = time.time()
        log.debug("egress proxy listening on %s%s", self.url,
                  f" and {self.unix_path}" if self.unix_path else "")
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Close the listeners and every open connection; join the thread. Idempotent."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or not thread.is_alive():
            return
        with contextlib.suppress(RuntimeError):  # the loop may be closing already
            fut = asyncio.run_coroutine_threadsafe(self._shutdown(), loop)
            with contextlib.suppress(Exception):
                fut.result(timeout)
            loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        if self.unix_path is not None:
            with contextlib.suppress(OSError):
                self.unix_path.unlink()
        self._stopped_at = time.time()

    def __enter__(self) -> EgressProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _listen(self) -> None:
        host, port = self._bind
        srv = await asyncio.start_server(self._accept, host, port, limit=BUF,
                                         reuse_address=True)
        self._servers.append(srv)
        sockname = srv.sockets[0].getsockname()
        self._address = (sockname[0], sockname[1])
        if self.unix_path is not None:
            if self.unix_path.is_socket():
                self.unix_path.unlink()
            usrv = await asyncio.start_unix_server(self._accept, str(self.unix_path),
                                                   limit=BUF)
            self._servers.append(usrv)
            os.chmod(self.unix_path, 0o600)

    async def _shutdown(self) -> None:
        for srv in self._servers:
            srv.close()
        tasks = [t for t in self._tasks if not t.done()]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=5)

    def _loop_exception(self, loop: asyncio.AbstractEventLoop, ctx: dict[str, Any]) -> None:
        with self._lock:
            self._internal_errors += 1
        log.debug("egress proxy: %s", ctx.get("message"))

    # ------------------------------------------------------------------ the record
    def record(self) -> dict[str, Any]:
        """``live.egress``: names and counts only (never a body, a header value or a path)."""
        with self._lock:
            tunnels = {host_port(*p): {"opened": s.opened, "failed": s.failed,
                                  "bytes_up": s.bytes_up, "bytes_down": s.bytes_down,
                                  "closed_idle": s.closed_idle,
                                  "closed_at_stop": s.closed_at_stop}
                       for p, s in self._tunnels.items()}
            forwards = {host_port(*p): {"requests": sum(s.methods.values()),
                                   "methods": dict(sorted(s.methods.items())),
                                   "failed": s.failed, "bytes_up": s.bytes_up,
                                   "bytes_down": s.bytes_down,
                                   "closed_idle": s.closed_idle,
                                   "closed_at_stop": s.closed_at_stop}
                        for p, s in self._forwards.items()}
            refusals = []
            for kind, r in sorted(self._refusals.items()):
                entry: dict[str, Any] = {"kind": kind, "status": KIND_STATUS[kind],
                                         "count": r.count}
                if kind in ("target", "method"):
                    entry["targets"] = sorted(r.targets)
                    if r.dropped_targets:
                        entry["targets_not_listed"] = r.dropped_targets
                if r.methods:
                    entry["methods"] = dict(sorted(r.methods.items()))
                refusals.append(entry)
            return {
                "format": EGRESS_FORMAT,
                "allowed": [host_port(*p) for p in self.allowed],
                "forward": host_port(*self.forward) if self.forward else None,
                "forward_methods": list(FORWARD_METHODS) if self.forward else [],
                "unix_socket": self.unix_path is not None,
                "tunnels": tunnels,
                "forwards": forwards,
                "refusals": refusals,
                "connections_peak": self._peak,
                "internal_errors": self._internal_errors,
            }

    def _refused(self, kind: str, target: str | None, method: str | None) -> None:
        with self._lock:
            r = self._refusals.setdefault(kind, _Refusals())
            r.count += 1
            if target is not None and kind in ("target", "method"):
                name = _safe_name(target)
                if name not in r.targets:
                    if len(r.targets) < MAX_TARGET_NAMES:
                        r.targets.append(name)
                    else:
                        r.dropped_targets += 1
            if method is not None and kind == "method":
                r.methods[method] = r.methods.get(method, 0) + 1

    # ------------------------------------------------------------------ connections
    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        with self._lock:
            self._connections += 1
            over = self._connections > self.max_connections
            self._peak = max(self._peak, self._connections)
        try:
            if over:
                self._refused("limit", None, None)
                await self._answer(writer, 503, "too many connections")
            else:
                await self._serve(reader, writer)
        except asyncio.CancelledError:
            pass
        except Exception as exc:  # noqa: BLE001 - no exception of a connection escapes
            with self._lock:
                self._internal_errors += 1
            log.debug("egress proxy: connection error %s", type(exc).__name__)
        finally:
            with self._lock:
                self._connections -= 1
            close_quietly(writer)
            if task is not None:
                self._tasks.discard(task)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        method = None
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"),
                                              self.header_timeout)
            except TimeoutError:
                raise Refuse("header_timeout") from None
            except asyncio.LimitOverrunError:
                raise Refuse("header_too_large") from None
            except asyncio.IncompleteReadError as exc:
                if exc.partial.strip():
                    raise Refuse("malformed", detail="the request ended early") from None
                return  # a client that connected and left
            if len(head) > self.max_header_bytes:
                raise Refuse("header_too_large")
            method, target, version, headers = parse_head(head)
            if method == "CONNECT":
                pair = connect_authority(target)
                if pair in self.allowed:
                    await self._tunnel(pair, reader, writer)
                    return
                if pair == self.forward:
                    raise Refuse("method", host_port(*pair), allow=", ".join(FORWARD_METHODS))
                raise Refuse("target", host_port(*pair))
            scheme, pair, origin = absolute_target(target)
            if pair == self.forward and scheme == "http":
                if method not in FORWARD_METHODS:
                    raise Refuse("method", host_port(*pair), allow=", ".join(FORWARD_METHODS))
                await self._forward(pair, method, origin, version, headers, reader, writer)
                return
            if pair in self.allowed:
                raise Refuse("method", host_port(*pair), allow="CONNECT")
            raise Refuse("target", host_port(*pair))
        except Refuse as r:
            self._refused(r.kind, r.target, method if r.kind == "method" else None)
            log.debug("egress proxy refused (%s) %s", r.kind, r.target or "")
            extra = [(b"Allow", r.allow.encode())] if r.allow else []
            await self._answer(writer, KIND_STATUS[r.kind],
                               r.detail or refusal_text(r.kind, r.target), extra)

    async def _answer(self, writer: asyncio.StreamWriter, status: int, text: str,
                      extra: list[tuple[bytes, bytes]] | None = None) -> None:
        body = f"agentprov egress proxy: {text}\n".encode("ascii", "replace")
        lines = [f"HTTP/1.1 {status} {REASONS.get(status, '')}".encode(),
                 b"Content-Type: text/plain; charset=us-ascii",
                 f"Content-Length: {len(body)}".encode(), b"Connection: close"]
        lines += [k + b": " + v for k, v in extra or []]
        with contextlib.suppress(Exception):
            writer.write(b"\r\n".join(lines) + b"\r\n\r\n" + body)
            await asyncio.wait_for(writer.drain(), 5)

    async def _dial(self, pair: Pair) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        host, port = pair
        r = self._resolver
        if r is None:
            dial = await self._resolve_default(host, port)
        elif callable(r):
            dial = r(host, port)
        else:
            dial = r.get(host) or r.get(host_port(host, port)) or (host, port)
        try:
            return await asyncio.wait_for(asyncio.open_connection(dial[0], dial[1], limit=BUF),
                                          self.connect_timeout)
        except TimeoutError:
            raise Upstream(504, f"{host_port(*pair)} did not answer within "
                                 f"{self.connect_timeout:g} s") from None
        except OSError as exc:
            raise Upstream(502, f"{host_port(*pair)} cannot be reached "
                                 f"({exc.strerror or type(exc).__name__})") from None

    async def _resolve_default(self, host: str, port: int) -> Pair:
        """The system resolver, refusing a name that resolves onto this machine (so an
        allowed name cannot be turned into a path to a local service)."""
        if literal_ip(host) is not None:
            return host, port
        loop = asyncio.get_running_loop()
        try:
            infos = await asyncio.wait_for(
                loop.getaddrinfo(host, port, type=socket.SOCK_STREAM), self.connect_timeout)
        except (OSError, TimeoutError):
            raise Upstream(502, f"{host_port(host, port)} does not resolve") from None
        for info in infos:
            ip = ipaddress.ip_address(info[4][0].split("%")[0])
            if not (ip.is_loopback or ip.is_unspecified or ip.is_link_local or ip.is_multicast):
                return str(ip), port
        raise Upstream(502, f"{host_port(host, port)} resolves to a local address only")

    async def _tunnel(self, pair: Pair, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        stats = self._tunnels[pair]
        try:
            up_r, up_w = await self._dial(pair)
        except Upstream as exc:
            with self._lock:
                stats.failed += 1
            log.debug("egress proxy: tunnel to %s failed", host_port(*pair))
            await self._answer(writer, exc.status, exc.detail)
            return
        with self._lock:
            stats.opened += 1
            stats.open += 1
        log.debug("egress proxy: tunnel to %s", host_port(*pair))
        try:
            writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            await writer.drain()
            await self._relay(stats, reader, writer, up_r, up_w)
        except asyncio.CancelledError:
            with self._lock:
                stats.closed_at_stop += 1
            raise
        finally:
            with self._lock:
                stats.open -= 1
            close_quietly(up_w)

    async def _relay(self, stats: _PairStats, c_r: asyncio.StreamReader,
                     c_w: asyncio.StreamWriter, u_r: asyncio.StreamReader,
                     u_w: asyncio.StreamWriter) -> None:
        """Copy both ways until both have ended; cut both after ``idle_timeout`` with no byte
        either way."""
        loop = asyncio.get_running_loop()
        last = [loop.time()]

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, up: bool) -> None:
            try:
                while True:
                    data = await src.read(BUF)
                    if not data:
                        break
                    last[0] = loop.time()
                    with self._lock:
                        if up:
                            stats.bytes_up += len(data)
                        else:
                            stats.bytes_down += len(data)
                    dst.write(data)
                    await dst.drain()
                if dst.can_write_eof():
                    with contextlib.suppress(OSError, RuntimeError):
                        dst.write_eof()
            except (ConnectionError, OSError):
                close_quietly(dst)

        pumps = [asyncio.ensure_future(pump(c_r, u_w, True)),
                 asyncio.ensure_future(pump(u_r, c_w, False))]
        tasks = set(pumps)
        try:
            while tasks:
                wait = max(0.05, last[0] + self.idle_timeout - loop.time())
                done, tasks = await asyncio.wait(tasks, timeout=wait)
                if tasks and not done and loop.time() - last[0] >= self.idle_timeout:
                    with self._lock:
                        stats.closed_idle += 1
                    break
        finally:
            for t in tasks:
                t.cancel()
            # every pump's outcome is retrieved, so none is left "never retrieved"
            await asyncio.gather(*pumps, return_exceptions=True)

    async def _forward(self, pair: Pair, method: str, origin: bytes, version: bytes,
                       headers: list[tuple[bytes, bytes]], reader: asyncio.StreamReader,
                       writer: asyncio.StreamWriter) -> None:
        stats = self._forwards[pair]
        te = [v for k, v in headers if k.lower() == b"transfer-encoding"]
        cl = [v for k, v in headers if k.lower() == b"content-length"]
        if te and cl or len(cl) > 1:
            raise Refuse("malformed", detail="conflicting body lengths")
        if te and te[-1].strip().lower() != b"chunked":
            raise Refuse("malformed", detail="only the chunked transfer coding is forwarded")
        length = 0
        if cl:
            if not cl[0].strip().isdigit():
                raise Refuse("malformed", detail="bad Content-Length")
            length = int(cl[0])
        dropped = set(HOP_BY_HOP)
        for k, v in headers:
            if k.lower() == b"connection":
                dropped |= {t.strip().lower() for t in v.split(b",")}
        dropped.discard(b"transfer-encoding")
        dropped.discard(b"content-length")
        out = [f"{method} ".encode() + origin + b" HTTP/1.1", b"Host: " + host_port(*pair).encode()]
        out += [k + b": " + v for k, v in headers
                if k.lower() not in dropped and k.lower() != b"host"]
        out.append(b"Connection: close")
        head = b"\r\n".join(out) + b"\r\n\r\n"
        try:
            up_r, up_w = await self._dial(pair)
        except Upstream as exc:
            with self._lock:
                stats.failed += 1
            await self._answer(writer, exc.status, exc.detail)
            return
        with self._lock:
            stats.methods[method] = stats.methods.get(method, 0) + 1
            stats.open += 1
        log.debug("egress proxy: forward %s to %s", method, host_port(*pair))
        answered = False
        try:
            async with asyncio.timeout(self.idle_timeout) as deadline:
                sent = len(head)
                up_w.write(head)
                try:
                    if te:
                        sent += await copy_chunked(reader, up_w, deadline, self.idle_timeout)
                    elif length:
                        sent += await copy_exact(reader, up_w, length, deadline,
                                                 self.idle_timeout)
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
                    raise Refuse("malformed", detail="the request body ended early or does "
                                                      "not parse") from None
                await up_w.drain()
                with self._lock:
                    stats.bytes_up += sent
                # the response: its head rewritten to Connection: close, then its body
                try:
                    rhead = await up_r.readuntil(b"\r\n\r\n")
                except (asyncio.LimitOverrunError, asyncio.IncompleteReadError):
                    raise Upstream(502, "the LAN endpoint's response does not parse") from None
                status, rheaders = parse_response(rhead)
                rlen = response_length(method, status, rheaders)
                keep = [k + b": " + v for k, v in rheaders
                        if k.lower() not in (b"connection", b"keep-alive", b"proxy-connection")]
                first = rhead.split(b"\r\n", 1)[0]
                new = b"\r\n".join([first, *keep, b"Connection: close"]) + b"\r\n\r\n"
                answered = True
                writer.write(new)
                await writer.drain()
                got = len(new)
                try:
                    if rlen is None:
                        while data := await up_r.read(BUF):
                            deadline.reschedule(asyncio.get_running_loop().time()
                                                + self.idle_timeout)
                            writer.write(data)
                            await writer.drain()
                            got += len(data)
                    elif rlen:
                        got += await copy_exact(up_r, writer, rlen, deadline,
                                                self.idle_timeout)
                finally:
                    with self._lock:
                        stats.bytes_down += got
        except TimeoutError:
            with self._lock:
                stats.closed_idle += 1
            if not answered:
                await self._answer(writer, 504, "the LAN endpoint did not answer within "
                                                f"{self.idle_timeout:g} s")
        except (Upstream, asyncio.IncompleteReadError, ConnectionError) as exc:
            with self._lock:
                stats.failed += 1
            if not answered:
                status = exc.status if isinstance(exc, Upstream) else 502
                detail = exc.detail if isinstance(exc, Upstream) else "the LAN endpoint " \
                    "closed the connection"
                await self._answer(writer, status, detail)
        except asyncio.CancelledError:
            with self._lock:
                stats.closed_at_stop += 1
            raise
        finally:
            with self._lock:
                stats.open -= 1
            close_quietly(up_w)
