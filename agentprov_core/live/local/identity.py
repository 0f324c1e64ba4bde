"""The observed identity of one model on a local server (``agentprov-local-model/0.2``,
R-11.4, R-11.6 … R-11.10), and the checks that use it.

The run path (step 4 of the order of checks, R-16.4) calls::

    from agentprov_core.live.local import identity as local_identity

    served = local_identity.served(endpoint, opts)              # refusals, exit 3 or 4
    model_id = model_id or local_identity.choose_model(served, endpoint.name)
    ident = local_identity.observe(endpoint, model_id, opts)    # the record
    tool_note = local_identity.check_tool_use(ident, allow_text_tool_calls=...)
    agent["local_model"] = ident.identity_part() | {"digest": ident.digest}

and the campaign, before every cell (A14, R-11.15)::

    same, changed, seen = local_identity.reobserve(ident, endpoint)
    note = local_identity.session_note(ident, seen)   # the session's agentdojo/local_model

``endpoint`` is anything with ``name``, ``kind`` and ``base_url`` (an
``endpoints.Endpoint`` or an ``endpoints.ResolvedEndpoint``).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any, Literal, Protocol

import msgspec

from agentprov_core.errors import AgentprovError
from agentprov_core.live.local import kinds

FORMAT = "agentprov-local-model/0.2"


class EndpointLike(Protocol):
    name: str
    kind: str
    base_url: str


@dataclass(frozen=True, kw_only=True)
class ObserveOptions:
    """How to observe: hash the weights (default) or record sizes only
    (``--no-hash-weights``); a model folder the server does not name (``--model-dir``);
    the key to send to a loopback server (its value is never recorded) and the variable
    that held it; whether a LAN address is admitted (``--allow-lan-endpoint``: no key is
    sent and weight files are null unless ``--model-dir`` names a copy)."""

    hash_weights: bool = True
    model_dir: str | None = None
    key: Any = field(default=None, repr=False)  # a keys.Secret or a str; never recorded
    key_variable: str | None = None
    allow_lan: bool = False
    timeout: float = kinds.READ_TIMEOUT


class WeightFile(msgspec.Struct, frozen=True, kw_only=True):
    path: str
    size: int
    sha256: str | None = None
    role: Literal["weights", "config"] = "weights"


class ServerInfo(msgspec.Struct, frozen=True, kw_only=True):
    """The server: its kind, version (when it exposes one) and the fingerprint evidence
    that matched. A fingerprint holding ``"verified": false`` (``openai_compat``) proves
    nothing about the kind: it records what the server volunteered; without that key the
    kind's own fingerprint matched."""

    kind: str
    base_url: str
    version: str | None
    fingerprint: dict[str, str | bool]


class LocalModelIdentity(msgspec.Struct, frozen=True, kw_only=True):
    """The record. ``digest`` is the sha256 of the canonical JSON of
    :meth:`identity_part`; ``observed_state`` and ``observed_at`` lie outside it."""

    format: str = FORMAT
    endpoint: str
    model_id: str
    server: ServerInfo
    listing_entry: dict[str, Any]
    server_identity: dict[str, Any]
    files: list[WeightFile] | None
    files_source: str | None
    files_note: str | None = None
    weights_hashed: bool
    model_dir: str | None = None
    digest: str
    observed_state: dict[str, Any] = {}
    observed_at: str = ""

    def identity_part(self) -> dict[str, Any]:
        d = msgspec.to_builtins(self)
        for k in ("digest", "observed_state", "observed_at"):
            d.pop(k, None)
        return d

    def to_json(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)


def _no_floats(obj: Any) -> Any:
    """Canonical JSON refuses floats (digests must not depend on float printing): a float
    a server reports is kept as its shortest repr string."""
    if isinstance(obj, float):
        return repr(obj)
    if isinstance(obj, dict):
        return {str(k): _no_floats(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_no_floats(v) for v in obj]
    return obj


def compute_digest(part: dict[str, Any]) -> str:
    from agentprov_core.base.digests import digest

    return digest(part)


def _key_value(key: Any) -> str | None:
    if key is None:
        return None
    reveal = getattr(key, "reveal", None)
    return reveal() if callable(reveal) else str(key)


def _open(endpoint: EndpointLike, options: ObserveOptions) -> kinds.Probe:
    return kinds.Probe(endpoint.base_url, key=_key_value(options.key),
                       allow_lan=options.allow_lan, timeout=options.timeout,
                       transport=_shared_transport())


def import_httpx():
    """``httpx``, without its command-line client: ``import httpx`` also imports
    ``httpx._main`` whenever click and rich are installed (they are, with agentprov), and that
    brings in rich's console and pygments, 79 modules no part of agentprov uses, on the run's
    critical path before the first cell. A ``None`` in ``sys.modules`` makes that one import
    fail, and httpx then defines its ``main`` as a stub."""
    if "httpx" not in sys.modules:
        sys.modules.setdefault("httpx._main", None)  # type: ignore[assignment]
    import httpx

    return httpx


@cache
def _shared_transport():
    """One HTTP transport for every observation of this process: A14 re-observes the server
    before every cell, and a client of its own each time would build a TLS context (reading
    the trust store, 20-40 ms) and open new connections. Each observation still has its own
    :class:`kinds.Probe` (its own answers, headers and timeouts); only the connection pools
    are shared, and kept open (a probe's ``close`` leaves them to the next). A server on
    ``http://`` (the usual local one) never needs the TLS context, so it is built at the
    first ``https://`` request only, verifying as httpx does by default."""
    httpx = import_httpx()

    class Shared(httpx.BaseTransport):
        def __init__(self) -> None:
            self._plain: httpx.HTTPTransport | None = None
            self._tls: httpx.HTTPTransport | None = None
            self._lock = threading.Lock()

        def _pool(self, scheme: str) -> httpx.HTTPTransport:
            with self._lock:
                if scheme == "https":
                    if self._tls is None:
                        self._tls = httpx.HTTPTransport()
                    return self._tls
                if self._plain is None:  # plain http: no TLS handshake, nothing to verify
                    self._plain = httpx.HTTPTransport(verify=False)
                return self._plain

        def handle_request(self, request: httpx.Request) -> httpx.Response:
            return self._pool(request.url.scheme).handle_request(request)

        def close(self) -> None:
            pass

    return Shared()


class Served(msgspec.Struct, frozen=True, kw_only=True):
    """What a server serves, once its kind is checked (no model chosen yet)."""

    endpoint: str
    kind: str
    base_url: str
    version: str | None
    fingerprint: dict[str, str | bool]
    ids: list[str]

    @property
    def verified(self) -> bool:
        return self.fingerprint.get("verified") is not False


def _served(probe: kinds.Probe, endpoint: EndpointLike, options: ObserveOptions
            ) -> tuple[Served, list[dict]]:
    entries = kinds.read_listing(probe, endpoint.kind, key_variable=options.key_variable)
    fp = kinds.identify(probe, endpoint.kind, entries)
    version = kinds.KINDS[endpoint.kind].version(probe)
    return Served(endpoint=endpoint.name, kind=endpoint.kind, base_url=probe.base_url,
                  version=version, fingerprint=fp, ids=[e["id"] for e in entries]), entries


def served(endpoint: EndpointLike, options: ObserveOptions | None = None) -> Served:
    """List and fingerprint the server: ``run.local.unreachable``,
    ``run.local.unauthorized``, ``run.local.bad_listing`` (exit 3) or
    ``run.local.wrong_server`` (exit 4)."""
    options = options or ObserveOptions()
    with _open(endpoint, options) as probe:
        return _served(probe, endpoint, options)[0]


def _weight_files(paths: list[str]) -> tuple[list[Path], list[Path]]:
    weights: list[Path] = []
    config: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            from agentprov_core.live.local.weights import folder_files

            w, c = folder_files(p)
            weights += w
            config += c
        elif p.is_file():
            weights.append(p)
    return weights, config


def _files(paths: list[str], hash_weights: bool) -> list[WeightFile]:
    from agentprov_core.live.local.weights import digest_files

    weights, config = _weight_files(paths)
    every = [(p, "weights") for p in weights] + [(p, "config") for p in config]
    shas = digest_files([p for p, _ in every]) if hash_weights else {}
    return [WeightFile(path=str(p), size=os.stat(p).st_size, sha256=shas.get(str(p)),
                       role=role)  # type: ignore[arg-type]
            for p, role in every]


def observe(endpoint: EndpointLike, model_id: str,
            options: ObserveOptions | None = None) -> LocalModelIdentity:
    """List, fingerprint and observe ``model_id``: the refusals of :func:`served`, then
    ``run.local.model_not_served`` (exit 3, naming the served ids) and
    ``run.local.remote_model`` (exit 4); then the identity record, with the weight files
    hashed (through the digest cache) unless ``hash_weights`` is off."""
    from agentprov_core.live import endpoints

    options = options or ObserveOptions()
    with _open(endpoint, options) as probe:
        srv, entries = _served(probe, endpoint, options)
        entry = next((e for e in entries if e["id"] == model_id), None)
        if entry is None:
            raise AgentprovError("run.local.model_not_served", endpoint=endpoint.name,
                                 url=endpoints.shown(probe.base_url), model=model_id,
                                 served=", ".join(srv.ids) or "(nothing)")
        facts = kinds.facts(endpoint.kind, probe, model_id, entry)
        if facts.remote:
            raise AgentprovError("run.local.remote_model", endpoint=endpoint.name,
                                 model=model_id, why=facts.remote)
        spec = kinds.KINDS[endpoint.kind]
        listing = {k: v for k, v in entry.items() if k not in spec.volatile + spec.state}
        state = {"listing": {k: entry[k] for k in spec.state if k in entry},
                 "server": facts.state}
    if options.model_dir:
        folder = Path(options.model_dir).expanduser().absolute()
        if not folder.is_dir():
            raise AgentprovError("cli.usage.model_dir", path=str(folder))
        paths: list[str] | None = [str(folder)]
        source: str | None = "model-dir"
        note = None
    elif not probe.loopback:
        paths, source, note = None, None, "a LAN server's files are not on this machine"
    else:
        paths, note = facts.weight_paths, facts.weights_note
        source = facts.weights_source if paths else None
    files = None
    if paths is not None:
        files = _files(paths, options.hash_weights)
        if not files:
            note = f"no weight file was found in {', '.join(paths)}"
            files = None
    part = {
        "format": FORMAT, "endpoint": endpoint.name, "model_id": model_id,
        "server": {"kind": endpoint.kind, "base_url": srv.base_url, "version": srv.version,
                   "fingerprint": srv.fingerprint},
        "listing_entry": _no_floats(listing),
        "server_identity": _no_floats(facts.identity),
        "files": [msgspec.to_builtins(f) for f in files] if files is not None else None,
        "files_source": source if files is not None else None,
        "files_note": note,
        "weights_hashed": bool(options.hash_weights and files),
        "model_dir": str(Path(options.model_dir).expanduser().absolute())
        if options.model_dir else None,
    }
    return msgspec.convert(
        dict(part, digest=compute_digest(part), observed_state=_no_floats(state),
             observed_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())),
        type=LocalModelIdentity)


def _diff(a: Any, b: Any, where: str, out: list[str]) -> None:
    if a == b:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            _diff(a.get(k), b.get(k), f"{where}.{k}" if where else k, out)
        return
    if isinstance(a, list) and isinstance(b, list) and a and b \
            and all(isinstance(x, dict) and "path" in x for x in a + b):
        da, db = {x["path"]: x for x in a}, {x["path"]: x for x in b}
        for p in sorted(set(da) | set(db)):
            if p not in db:
                out.append(f"{where}: {p} is gone")
            elif p not in da:
                out.append(f"{where}: {p} is new")
            else:
                _diff(da[p], db[p], f"{where}[{p}]", out)
        return
    shown = [str(x) if not isinstance(x, (dict, list)) else "…" for x in (a, b)]
    out.append(f"{where}: {shown[0]} -> {shown[1]}")


def reobserve(identity: LocalModelIdentity, endpoint: EndpointLike,
              options: ObserveOptions | None = None
              ) -> tuple[bool, list[str], LocalModelIdentity | None]:
    """Observe the same model again with the same weight options; whether its digest is
    unchanged, what changed, and the new record (None when the server could not be
    observed: that is a mismatch too)."""
    base = options or ObserveOptions()
    opts = replace(base, hash_weights=identity.weights_hashed, model_dir=identity.model_dir)
    try:
        new = observe(endpoint, identity.model_id, opts)
    except AgentprovError as exc:
        return False, [f"the server could not be observed: [{exc.code}] {exc.message}"], None
    if new.digest == identity.digest:
        return True, [], new
    changed: list[str] = []
    _diff(identity.identity_part(), new.identity_part(), "", changed)
    return False, changed or ["the digest"], new


def session_note(planned: LocalModelIdentity, seen: LocalModelIdentity | None
                 ) -> dict[str, Any]:
    """What a session's ``agentdojo/local_model`` note records of A14's observation before
    it (R-11.15): whether the served model still matches the plan's identity record, the
    record's digest, and when and in what serving state it was seen."""
    return {"matches": seen is not None and seen.digest == planned.digest,
            "digest": planned.digest, "observed_digest": seen.digest if seen else None,
            "observed_at": seen.observed_at if seen else None,
            "observed_state": seen.observed_state if seen else None}


def check_tool_use(identity: LocalModelIdentity, *, allow_text_tool_calls: bool = False
                   ) -> dict | None:
    """LM Studio only (R-11.16, R-11.17): a model without ``tool_use`` among its
    capabilities gets LM Studio's own tool-use system prompt, which the wire capture
    cannot see: ``cli.refused.local_tool_prompt`` (exit 4) unless
    ``--allow-text-tool-calls``. Returns what the run records (None for other kinds)."""
    if identity.server.kind != "lmstudio":
        return None
    caps = identity.server_identity.get("capabilities")
    if isinstance(caps, list) and "tool_use" in caps:
        return {"native_tool_use": True}
    why = ("LM Studio lists no capabilities for it" if caps is None
           else f"its capabilities are {caps!r}, without tool_use")
    if allow_text_tool_calls:
        return {"native_tool_use": False, "accepted": "--allow-text-tool-calls", "why": why}
    raise AgentprovError("cli.refused.local_tool_prompt", model=identity.model_id, why=why)


def choose_model(srv: Served, *, variable: str | None = None, stdin: Any = None,
                 stderr: Any = None) -> str:
    """Without a model id: on a terminal, a numbered pick of the served ids; otherwise
    ``run.local.no_model_id`` (exit 3) listing them (R-11.5)."""
    stdin = stdin or sys.stdin
    stderr = stderr or sys.stderr
    hint = f"--model-id ID (or {variable} in .env)" if variable else "--model-id ID"
    listed = ", ".join(srv.ids) or "(nothing)"
    interactive = bool(srv.ids) and stdin.isatty() and stderr.isatty()
    if not interactive:
        raise AgentprovError("run.local.no_model_id", endpoint=srv.endpoint, hint=hint,
                             served=listed)
    stderr.write(f"{srv.endpoint} serves {len(srv.ids)} model(s):\n")
    for i, mid in enumerate(srv.ids, 1):
        stderr.write(f"  {i:>3}  {mid}\n")
    for _ in range(3):
        stderr.write(f"Pick a model [1-{len(srv.ids)}]: ")
        stderr.flush()
        line = stdin.readline()
        if not line:
            break
        line = line.strip()
        if line.isdigit() and 1 <= int(line) <= len(srv.ids):
            return srv.ids[int(line) - 1]
        if line in srv.ids:
            return line
        stderr.write(f"  not a number from 1 to {len(srv.ids)}\n")
    raise AgentprovError("run.local.no_model_id", endpoint=srv.endpoint, hint=hint,
                         served=listed)
