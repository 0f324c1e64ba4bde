"""The recording transport (declared instrumentation ``recording_transport@1``).

It wraps the SDK's own HTTP transport and writes every wire attempt to the session's
capture log: a ``wire_request`` before the request goes out, then a ``wire_response`` or a
``wire_error`` (a connection error or timeout that never got a whole response). It changes
nothing: the request is sent as the SDK built it, and the response's status, headers and
raw (still content-encoded) body bytes are re-served to the SDK unchanged. The body is read
whole before the SDK sees it, so a streamed response arrives at once (same bytes, other
timing); the stock LLM elements the worker packages drive do not stream.

openai 3.26.0 (the version the backend projects pin) is built on ``httpx2``; its
``OpenAI(http_client=...)`` accepts an ``httpx2.Client`` or, when ``httpx`` is imported, a
legacy ``httpx.Client``. The stock client is ``openai.DefaultHttpxClient`` (an
``httpx2.Client`` with the SDK's timeout, connection limits and redirects), whose transport
is ``httpx2.HTTPTransport``. ``recording_http_client`` builds exactly that client and wraps
its transports (the default one and any proxy mounts taken from the environment), so
timeouts, limits and proxies are the stock ones. The transport works with both libraries:
it takes the classes from the request it is given.

Retries are linked through ``current_call(call_id)``: the worker sets it around each
element-level model call, so tenacity's 3 attempts x the SDK's 3 tries all carry that
``call_id`` and the ``first_attempt_id`` of the call's first attempt. Outside any call, each
attempt is its own call.

Standard library only at import time; httpx, httpx2 and openai are imported when used.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from agentprov_capture import CaptureWriter, body_fields

INSTRUMENTATION = "recording_transport@1"


class CallState:
    """One element-level model call: its id, its first wire attempt, how many attempts."""

    __slots__ = ("_lock", "attempts", "call_id", "first_attempt_id")

    def __init__(self, call_id: str) -> None:
        self.call_id = call_id
        self.first_attempt_id: str | None = None
        self.attempts = 0
        self._lock = threading.Lock()

    def next_attempt(self, attempt_id: str) -> tuple[str, int]:
        """(first_attempt_id, index of this attempt within the call)."""
        with self._lock:
            if self.first_attempt_id is None:
                self.first_attempt_id = attempt_id
            index = self.attempts
            self.attempts += 1
            return self.first_attempt_id, index


_CALL: ContextVar[CallState | None] = ContextVar("agentprov_current_call", default=None)


@contextlib.contextmanager
def current_call(call_id: str) -> Iterator[CallState]:
    """Link every wire attempt made inside to ``call_id`` and to the call's first attempt."""
    state = CallState(call_id)
    token = _CALL.set(state)
    try:
        yield state
    finally:
        _CALL.reset(token)


@contextlib.contextmanager
def model_call(writer: CaptureWriter, call_id: str, *, element: str, model: str,
               **fields: Any) -> Iterator[CallState]:
    """``current_call`` plus the ``model_call_start`` and ``model_call_end`` records. The
    end carries ``status`` (``ok`` or ``error``), the number of wire attempts, the first
    attempt's id and, on an exception, its type and message (the exception propagates)."""
    writer.append("model_call_start", call_id=call_id, element=element, model=model, **fields)
    with current_call(call_id) as state:
        try:
            yield state
        except BaseException as exc:
            if not writer.ended and not writer.broken:
                writer.append("model_call_end", call_id=call_id, status="error",
                              error_type=_qualname(exc), error_message=str(exc),
                              wire_attempts=state.attempts,
                              first_attempt_id=state.first_attempt_id)
            raise
        writer.append("model_call_end", call_id=call_id, status="ok",
                      wire_attempts=state.attempts, first_attempt_id=state.first_attempt_id)


def _qualname(exc: BaseException) -> str:
    t = type(exc)
    return f"{t.__module__}.{t.__qualname__}"


def _ms(start: float) -> int:
    return int(round((time.monotonic() - start) * 1000))


class _Attempt:
    """One wire attempt's records, shared by the sync and the async transport (they differ
    only in how they send and read): ``wire_request`` before the request leaves, then
    ``wire_error`` or ``wire_response``, and the unaltered response handed back."""

    __slots__ = ("attempt_id", "call_id", "lib", "start", "w")

    def __init__(self, writer: CaptureWriter, request: Any, body: bytes) -> None:
        self.lib = sys.modules[type(request).__module__.split(".")[0]]  # httpx2 or httpx
        self.w = w = writer
        self.attempt_id = attempt_id = w.new_attempt_id()
        state = _CALL.get()
        if state is None:
            self.call_id, first, index = f"call-{attempt_id}", attempt_id, 0
        else:
            self.call_id = state.call_id
            first, index = state.next_attempt(attempt_id)
        # Written (and fsync'ed) before the request leaves: no unrecorded wire traffic. If
        # the log cannot be written, this raises and nothing is sent.
        w.append("wire_request", attempt_id=attempt_id, call_id=self.call_id,
                 first_attempt_id=first, attempt_index=index, method=request.method,
                 url=str(request.url), headers=list(request.headers.multi_items()),
                 **body_fields(body))
        self.start = time.monotonic()

    def send_failed(self, exc: BaseException) -> None:
        self.w.append("wire_error", attempt_id=self.attempt_id, call_id=self.call_id,
                      stage="send", error_type=_qualname(exc), error_message=str(exc),
                      elapsed_ms=_ms(self.start))

    def receive_failed(self, response: Any, chunks: list[bytes], exc: BaseException) -> None:
        self.w.append("wire_error", attempt_id=self.attempt_id, call_id=self.call_id,
                      stage="receive", status=response.status_code,
                      headers=list(response.headers.multi_items()),
                      received_bytes=sum(map(len, chunks)), error_type=_qualname(exc),
                      error_message=str(exc), elapsed_ms=_ms(self.start))

    def received(self, response: Any, raw: bytes) -> Any:
        """Record the response whose body was read whole (``raw``, still content-encoded)
        and return one with the same status, headers, extensions and raw bytes."""
        elapsed = _ms(self.start)
        lib = self.lib
        fields = self._body(response, raw)
        reason = response.extensions.get("reason_phrase")
        if isinstance(reason, bytes):
            reason = reason.decode("latin-1")
        version = response.extensions.get("http_version")
        if isinstance(version, bytes):
            version = version.decode("latin-1")
        self.w.append("wire_response", attempt_id=self.attempt_id, call_id=self.call_id,
                      status=response.status_code, reason=reason, http_version=version,
                      headers=list(response.headers.multi_items()), elapsed_ms=elapsed,
                      **fields)
        return lib.Response(status_code=response.status_code, headers=response.headers,
                            stream=lib.ByteStream(raw), extensions=response.extensions)

    def _body(self, response: Any, raw: bytes) -> dict[str, Any]:
        """The recorded body: content-decoded (gzip, br, ...) as the SDK will read it; the
        encoded bytes' digest and size beside it when an encoding was applied."""
        encoding = response.headers.get("content-encoding")
        if not encoding or encoding.strip().lower() == "identity":
            return body_fields(raw)
        extra = {"content_encoding": encoding, "wire_bytes": len(raw),
                 "wire_sha256": body_fields(raw)["body_sha256"]}
        try:
            decoded = self.lib.Response(200, headers={"content-encoding": encoding},
                                        content=raw).read()
        except Exception as exc:  # the SDK will meet the same decoding error
            return {**body_fields(raw), **extra, "decode_error": f"{_qualname(exc)}: {exc}"}
        return {**body_fields(decoded), **extra}


class RecordingTransport:
    """Wrap a sync ``httpx2`` (or ``httpx``) transport; record each attempt; alter nothing."""

    def __init__(self, inner: Any, writer: CaptureWriter) -> None:
        self.inner = inner
        self.writer = writer

    def handle_request(self, request: Any) -> Any:
        # the body: the bytes that will be sent (a stream is kept replayable)
        a = _Attempt(self.writer, request, request.read())
        try:
            response = self.inner.handle_request(request)
        except Exception as exc:
            a.send_failed(exc)
            raise
        stream = response.stream
        chunks: list[bytes] = []
        try:
            for chunk in stream:
                chunks.append(chunk)
        except Exception as exc:
            a.receive_failed(response, chunks, exc)
            raise
        finally:
            stream.close()
        return a.received(response, b"".join(chunks))

    def close(self) -> None:
        self.inner.close()

    def __enter__(self) -> RecordingTransport:
        self.inner.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.inner.__exit__(*exc)


def wrap_client(client: Any, writer: CaptureWriter) -> Any:
    """Wrap every transport of an ``httpx2.Client`` or ``httpx.Client`` (the default one and
    the mounts, e.g. the environment's proxies) in a ``RecordingTransport``; returns it."""
    if not hasattr(client, "_transport") or not hasattr(client, "_mounts"):
        raise TypeError(f"cannot wrap the transports of {type(client)!r}")
    if isinstance(client._transport, RecordingTransport):
        raise ValueError("this client already records")
    client._transport = RecordingTransport(client._transport, writer)
    client._mounts = {pattern: (None if t is None else RecordingTransport(t, writer))
                      for pattern, t in client._mounts.items()}
    return client


#: the TLS context the worker's forkserver built once (``warm_tls_context``), by library
_TLS: dict[str, Any] = {}


def warm_tls_context() -> None:
    """Build the SDK client's TLS context once, exactly as httpx2 builds it for
    ``verify=True`` (``httpx2._config.create_ssl_context``: the system trust store through
    truststore, or ``SSL_CERT_FILE``/``SSL_CERT_DIR``), in the worker's forkserver. Every
    forked cell's client then uses its own copy-on-write copy instead of reading the trust
    store again, which costs about 40 ms a cell. Same context, same settings: a request is
    verified exactly as the stock client verifies it."""
    from httpx2._config import create_ssl_context

    _TLS["httpx2"] = create_ssl_context(verify=True, cert=None, trust_env=True)


def shared_tls_context(library: str = "httpx2") -> Any | None:
    return _TLS.get(library)


def recording_http_client(writer: CaptureWriter, *, library: str = "httpx2",
                          **client_kwargs: Any) -> Any:
    """The SDK's stock sync HTTP client, recording into ``writer``.

    ``library="httpx2"`` (default): ``openai.DefaultHttpxClient(**client_kwargs)``, the
    ``httpx2.Client`` openai 3.26.0 would build itself. ``library="httpx"``: an
    ``httpx.Client`` with the same defaults (timeout, limits, redirects), which openai also
    accepts. Pass the result as ``openai.OpenAI(http_client=...)``."""
    if library == "httpx2":
        import openai

        if "verify" not in client_kwargs and _TLS.get("httpx2") is not None:
            client_kwargs["verify"] = _TLS["httpx2"]  # the forkserver's, built the stock way
        client = openai.DefaultHttpxClient(**client_kwargs)
    elif library == "httpx":
        import httpx
        from openai._constants import DEFAULT_CONNECTION_LIMITS, DEFAULT_TIMEOUT

        client_kwargs.setdefault("timeout", httpx.Timeout(**DEFAULT_TIMEOUT.as_dict()))
        client_kwargs.setdefault("limits", httpx.Limits(
            max_connections=DEFAULT_CONNECTION_LIMITS.max_connections,
            max_keepalive_connections=DEFAULT_CONNECTION_LIMITS.max_keepalive_connections,
            keepalive_expiry=DEFAULT_CONNECTION_LIMITS.keepalive_expiry))
        client_kwargs.setdefault("follow_redirects", True)
        client = httpx.Client(**client_kwargs)
    else:
        raise ValueError(f"library must be 'httpx2' or 'httpx', not {library!r}")
    return wrap_client(client, writer)


class AsyncRecordingTransport:
    """The async twin of :class:`RecordingTransport` (``httpx2.AsyncClient`` or
    ``httpx.AsyncClient``): the same records, the same unaltered request and response.
    An element that talks through an ``AsyncAnthropic`` client (the stock Anthropic one does)
    records through it."""

    def __init__(self, inner: Any, writer: CaptureWriter) -> None:
        self.inner = inner
        self.writer = writer

    async def handle_async_request(self, request: Any) -> Any:
        a = _Attempt(self.writer, request, await request.aread())
        try:
            response = await self.inner.handle_async_request(request)
        except Exception as exc:
            a.send_failed(exc)
            raise
        stream = response.stream
        chunks: list[bytes] = []
        try:
            async for chunk in stream:
                chunks.append(chunk)
        except Exception as exc:
            a.receive_failed(response, chunks, exc)
            raise
        finally:
            await stream.aclose()
        return a.received(response, b"".join(chunks))

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> AsyncRecordingTransport:
        await self.inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.inner.__aexit__(*exc)


def wrap_async_client(client: Any, writer: CaptureWriter) -> Any:
    """Wrap every transport of an ``httpx2.AsyncClient`` (or ``httpx.AsyncClient``) in an
    ``AsyncRecordingTransport``; returns it."""
    if not hasattr(client, "_transport") or not hasattr(client, "_mounts"):
        raise TypeError(f"cannot wrap the transports of {type(client)!r}")
    if isinstance(client._transport, AsyncRecordingTransport):
        raise ValueError("this client already records")
    client._transport = AsyncRecordingTransport(client._transport, writer)
    client._mounts = {pattern: (None if t is None else AsyncRecordingTransport(t, writer))
                      for pattern, t in client._mounts.items()}
    return client


def recording_anthropic_http_client(writer: CaptureWriter, **client_kwargs: Any) -> Any:
    """The anthropic SDK's stock async HTTP client, recording into ``writer``:
    ``anthropic.DefaultAsyncHttpxClient(**client_kwargs)`` (an ``httpx2.AsyncClient`` with
    the SDK's timeout, connection limits and redirects), with the forkserver's TLS context
    when there is one. Pass it as ``anthropic.AsyncAnthropic(http_client=...)``."""
    import anthropic

    if "verify" not in client_kwargs and _TLS.get("httpx2") is not None:
        client_kwargs["verify"] = _TLS["httpx2"]
    return wrap_async_client(anthropic.DefaultAsyncHttpxClient(**client_kwargs), writer)
