"""The local server kinds, how each one recognises itself on its port, and the read-only
probes that ask it (R-11.1 … R-11.3, R-11.26, R-11.32 … R-11.35).

Every request is a GET (Ollama's ``POST /api/show`` excepted: a read of one model's
metadata, no inference), to a loopback address (a LAN address only when the caller passed
``allow_lan``), with short timeouts, without proxies from the environment and without
redirects. A key is sent only to loopback, and only when the caller gives one.

What each kind answers, as verified in its source or documentation (docs/local-models.md):

=========  ==========================================================================
ollama     ``GET /api/version`` ``{"version"}``; ``GET /api/tags`` ``{"models": [{name,
           model, size, digest, details}]}`` (a cloud model carries ``remote_host`` /
           ``remote_model``); ``GET /api/ps`` the loaded models; ``POST /api/show``
           details, capabilities, parameters, template, model_info, modelfile
llamacpp   ``GET /props`` ``{default_generation_settings: {n_ctx, params}, total_slots,
           model_path, model_alias, modalities, chat_template, build_info}``;
           ``/v1/models`` entries ``owned_by: "llamacpp"`` with ``meta``
lmstudio   ``GET /api/v0/models`` ``{"object": "list", "data": [{id, type, publisher,
           arch, compatibility_type, quantization, state, max_context_length,
           loaded_context_length, capabilities}]}``
vllm       ``GET /version`` ``{"version"}``; ``/v1/models`` entries ``owned_by: "vllm"``
           with ``root``, ``parent``, ``max_model_len``
omlx       ``/v1/models`` entries ``owned_by: "omlx"`` (newer: ``max_model_len``);
           ``GET /v1/models/status`` ``{"models": [{id, loaded, ...}]}``
mlx_lm     ``/v1/models`` entries ``{id, object, created}`` with no ``owned_by``;
           ``GET /health`` ``{"status": "ok"}``; every other path 404
=========  ==========================================================================

``openai_compat`` is any other server with an OpenAI-style listing (SGLang, TGI, LocalAI,
llamafile, a test server): it has no fingerprint, so its record says ``verified: false``
and holds only what the listing answer says (the entry, the served ids, the ``Server``
header). It is asked nothing but ``GET <base_url>/models``, at step 4 and before every
cell (A14), and it is never offered as what another kind's port "answers as": it would
match every server.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from agentprov_core.errors import AgentprovError

CONNECT_TIMEOUT = 1.0
READ_TIMEOUT = 3.0
MAX_BODY = 16 << 20


@dataclass(frozen=True)
class Answer:
    """One probe's answer: the HTTP status (None when the request failed) and the JSON
    body (None when it was not JSON)."""

    status: int | None
    json: Any = None
    error: str | None = None
    #: the ``Server`` response header, when the server volunteers one
    server: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == 200

    def obj(self) -> dict:
        return self.json if self.ok and isinstance(self.json, dict) else {}


def _is_loopback(host: str) -> bool:
    import ipaddress

    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def server_root(base_url: str) -> str:
    """``http://127.0.0.1:11434/v1`` -> ``http://127.0.0.1:11434``: the kinds' own paths
    (``/api/tags``, ``/props``, ``/version``) hang off the root."""
    parts = urlsplit(base_url)
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    return f"{parts.scheme}://{parts.netloc}{path}"


@functools.cache
def _tls_context() -> Any:
    """The TLS context every probe shares (the one httpx would build per client, without
    the environment's certificate variables): building it reads the CA bundle, which costs
    more than a loopback request, and A14 opens a probe before every cell."""
    import httpx

    return httpx.create_ssl_context(verify=True, trust_env=False)


class Probe:
    """A read-only client of one local server. Answers are cached per path, so a kind's
    recogniser and its identity reader never ask twice."""

    def __init__(self, base_url: str, *, key: str | None = None, allow_lan: bool = False,
                 timeout: float = READ_TIMEOUT, transport: Any = None) -> None:
        import httpx

        from agentprov_core.live import endpoints

        self.base_url = base_url.rstrip("/")
        self.root = server_root(self.base_url)
        host = urlsplit(self.base_url).hostname or ""
        self.loopback = _is_loopback(host)
        if not self.loopback and not allow_lan:
            raise AgentprovError(
                "cli.refused.endpoint", url=endpoints.shown(base_url),
                why="a local server must run on this machine, on loopback (127.0.0.1, ::1, "
                    "localhost); agentprov models never contacts another machine")
        headers = {"Accept": "application/json", "User-Agent": "agentprov-models"}
        self.key_sent = bool(key) and self.loopback
        if self.key_sent:
            headers["Authorization"] = f"Bearer {key}"
        self._client = httpx.Client(
            timeout=httpx.Timeout(timeout, connect=min(CONNECT_TIMEOUT, timeout)),
            headers=headers, trust_env=False, follow_redirects=False, verify=_tls_context(),
            transport=transport)
        self._cache: dict[tuple[str, str], Answer] = {}
        self.requests: list[str] = []

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Probe:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, method: str, url: str, body: Any = None) -> Answer:
        import httpx

        self.requests.append(f"{method} {url}")
        try:
            resp = self._client.get(url) if method == "GET" else self._client.post(url, json=body)
        except httpx.TimeoutException:
            return Answer(None, error=f"no answer within {self._client.timeout.read:g}s")
        except httpx.HTTPError as exc:
            return Answer(None, error=f"{type(exc).__name__}: {exc}" if str(exc)
                          else type(exc).__name__)
        data = None
        content = resp.content[:MAX_BODY]
        if content:
            import json

            try:
                data = json.loads(content)
            except ValueError:
                data = None
        return Answer(resp.status_code, data, server=resp.headers.get("server") or None)

    def get(self, path: str) -> Answer:
        """``GET root + path`` (cached)."""
        key = ("GET", path)
        if key not in self._cache:
            self._cache[key] = self._send("GET", self.root + path)
        return self._cache[key]

    def listing(self) -> Answer:
        """``GET base_url/models``: the OpenAI-style listing (cached)."""
        key = ("GET", "<listing>")
        if key not in self._cache:
            self._cache[key] = self._send("GET", self.base_url + "/models")
        return self._cache[key]

    def post_read(self, path: str, body: dict) -> Answer:
        """A POST that only reads (Ollama's ``/api/show``); cached per body."""
        import json

        key = ("POST", path + json.dumps(body, sort_keys=True))
        if key not in self._cache:
            self._cache[key] = self._send("POST", self.root + path, body)
        return self._cache[key]


# --- the listing -------------------------------------------------------------------------


def read_listing(probe: Probe, kind: str, *, key_variable: str | None = None) -> list[dict]:
    """The listing's entries, or the refusal: unreachable, unauthorized (401/403) or
    not an OpenAI-style listing (all exit 3)."""
    from agentprov_core.live import endpoints

    url = endpoints.shown(probe.base_url + "/models")
    ans = probe.listing()
    if ans.status is None:
        raise AgentprovError("run.local.unreachable", kind=kind,
                             url=endpoints.shown(probe.base_url), why=ans.error or "no answer")
    if ans.status in (401, 403):
        if probe.key_sent:
            how = f"the key in {key_variable or 'the key variable'} was refused"
        elif key_variable:
            how = (f"no key was sent ({key_variable} is not set): store it with agentprov "
                   f"keys set {key_variable}, or put it in .env")
        else:
            how = ("no key was sent, and this endpoint names no key variable: start the "
                   "server without a key, or on loopback without authentication")
        raise AgentprovError("run.local.unauthorized", url=url, status=ans.status, how=how)
    if ans.status != 200:
        raise AgentprovError("run.local.bad_listing", url=url, why=f"HTTP {ans.status}")
    body = ans.json
    if not isinstance(body, dict):
        raise AgentprovError("run.local.bad_listing", url=url,
                             why="the body is not a JSON object")
    data = body.get("data")
    if not isinstance(data, list):
        raise AgentprovError("run.local.bad_listing", url=url,
                             why='it has no "data" list of models')
    for i, entry in enumerate(data):
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str) \
                or not entry["id"]:
            raise AgentprovError("run.local.bad_listing", url=url,
                                 why=f'data[{i}] is not a model object with a string "id"')
    return data


# --- recognising a kind --------------------------------------------------------------------


def _owned_by_all(entries: list[dict], owner: str) -> bool:
    return bool(entries) and all(e.get("owned_by") == owner for e in entries)


def _version_of(ans: Answer) -> str | None:
    v = ans.obj().get("version")
    return v if isinstance(v, str) and v else None


def _ollama(probe: Probe, entries: list[dict]) -> dict | None:
    version = _version_of(probe.get("/api/version"))
    if version is None:
        return None
    tags = probe.get("/api/tags").obj()
    if not isinstance(tags.get("models"), list):
        return None
    return {"GET /api/version": "version", "GET /api/tags": "models"}


def _lmstudio(probe: Probe, entries: list[dict]) -> dict | None:
    body = probe.get("/api/v0/models").obj()
    data = body.get("data")
    if body.get("object") != "list" or not isinstance(data, list):
        return None
    if not all(isinstance(e, dict) and "type" in e and "state" in e for e in data):
        return None
    return {"GET /api/v0/models": "data[].type, data[].state"}


def _llamacpp(probe: Probe, entries: list[dict]) -> dict | None:
    ev: dict[str, str] = {}
    if _owned_by_all(entries, "llamacpp"):
        ev["owned_by"] = "llamacpp"
    props = probe.get("/props").obj()
    if "default_generation_settings" in props and "total_slots" in props:
        ev["GET /props"] = "default_generation_settings, total_slots"
    return ev or None


def _vllm(probe: Probe, entries: list[dict]) -> dict | None:
    if not _owned_by_all(entries, "vllm"):
        return None
    ev = {"owned_by": "vllm"}
    if _version_of(probe.get("/version")):
        ev["GET /version"] = "version"
    return ev


def _omlx(probe: Probe, entries: list[dict]) -> dict | None:
    return {"owned_by": "omlx"} if _owned_by_all(entries, "omlx") else None


def _mlx_lm(probe: Probe, entries: list[dict]) -> dict | None:
    # mlx_lm.server names no owner and answers only /v1/models and /health: recognised by
    # what it does not answer, on a port (8080) it shares with llama.cpp.
    if any("owned_by" in e for e in entries):
        return None
    if probe.get("/props").ok or probe.get("/api/v0/models").ok \
            or _version_of(probe.get("/api/version")):
        return None
    return {"owned_by": "absent", "GET /props": "not served"}


def _openai_compat(probe: Probe, entries: list[dict]) -> dict:
    # Any OpenAI-style listing is accepted (read_listing checked it): nothing here proves
    # what the server is, and the record says so. What it volunteers in that one answer,
    # its Server header, is recorded, and so re-observed by A14 with no further request.
    ev: dict = {"verified": False,
                "GET " + urlsplit(probe.base_url).path + "/models": "data[].id"}
    server = probe.listing().server
    if server:
        ev["Server"] = server
    return ev


def _ollama_version(probe: Probe) -> str | None:
    return _version_of(probe.get("/api/version"))


def _vllm_version(probe: Probe) -> str | None:
    return _version_of(probe.get("/version"))


def _llamacpp_version(probe: Probe) -> str | None:
    v = probe.get("/props").obj().get("build_info")
    return v if isinstance(v, str) and v else None


def _none(probe: Probe) -> None:
    return None


@dataclass(frozen=True)
class ServerKind:
    name: str
    label: str
    recognise: Callable[[Probe, list[dict]], dict | None]
    version: Callable[[Probe], str | None]
    #: listing-entry keys that are stamped per request (never part of an identity)
    volatile: tuple[str, ...] = ("created", "permission")
    #: listing-entry keys that are load or serving state (recorded in observed_state)
    state: tuple[str, ...] = ()


KINDS: dict[str, ServerKind] = {
    k.name: k for k in (
        ServerKind("ollama", "Ollama", _ollama, _ollama_version),
        ServerKind("lmstudio", "LM Studio", _lmstudio, _none),
        ServerKind("llamacpp", "llama.cpp", _llamacpp, _llamacpp_version,
                   state=("status",)),
        ServerKind("vllm", "vLLM", _vllm, _vllm_version, state=("max_model_len",)),
        ServerKind("omlx", "oMLX", _omlx, _none, state=("max_model_len",)),
        ServerKind("mlx_lm", "mlx-lm", _mlx_lm, _none),
        ServerKind("openai_compat", "OpenAI-compatible server", _openai_compat, _none,
                   state=("max_model_len", "status")),
    )
}
#: The order in which a server on the port is named when it is not the expected kind:
#: the kinds with positive evidence first, mlx_lm (recognised by absence) last.
ORDER = ("ollama", "lmstudio", "llamacpp", "vllm", "omlx", "mlx_lm")


GENERIC = "openai_compat"


def identify(probe: Probe, expected: str, entries: list[dict]) -> dict:
    """The fingerprint evidence that the server is ``expected``; else
    ``run.local.wrong_server`` (exit 4) naming what is there, and pointing at the generic
    ``openai_compat`` endpoint when no kind with positive evidence answers (the listing,
    already read, is OpenAI-style)."""
    from agentprov_core.live import endpoints

    url = endpoints.shown(probe.base_url)
    if expected not in KINDS:
        raise AgentprovError("run.local.wrong_server", url=url, kind=expected,
                             found="(no fingerprint is known for this kind)", hint="")
    ev = KINDS[expected].recognise(probe, entries)
    if ev:
        return ev
    for other in ORDER:
        if other != expected and KINDS[other].recognise(probe, entries):
            found = f"a {KINDS[other].label} server ({other})"
            break
    else:
        other = None
        found = "a server whose kind agentprov does not recognise"
    hint = ""
    if other in (None, "mlx_lm"):  # nothing, or only mlx_lm's evidence of absence
        hint = (f"; it serves an OpenAI-style listing: if it is another OpenAI-compatible "
                f"server, --endpoint {GENERIC} --base-url {url} uses it, its kind recorded "
                "as unverified")
    raise AgentprovError("run.local.wrong_server", url=url,
                         kind=f"a {KINDS[expected].label} server ({expected})", found=found,
                         hint=hint)


# --- what a kind says about one model --------------------------------------------------------


_SHARD = re.compile(r"^(?P<stem>.+)-(?P<i>\d{5})-of-(?P<n>\d{5})\.gguf$")


def gguf_shards(path: str) -> list[str]:
    """A GGUF file and, when it is ``NAME-00001-of-0000N.gguf``, its sibling shards."""
    from pathlib import Path

    p = Path(path)
    m = _SHARD.match(p.name)
    if not m:
        return [str(p)]
    n = int(m["n"])
    return [str(p.with_name(f"{m['stem']}-{i:05d}-of-{n:05d}.gguf")) for i in range(1, n + 1)]


def _sha_text(value: Any) -> str | None:
    if not isinstance(value, str) or not value:
        return None
    from agentprov_core.base.digests import sha256_hex

    return sha256_hex(value.encode())


def _scalars(d: Any) -> dict:
    return {k: v for k, v in d.items() if not isinstance(v, (list, dict))} \
        if isinstance(d, dict) else {}


@dataclass
class ModelFacts:
    """What a kind's server says about one model: its identity (in the digest), its load
    and serving state (outside), where its weights are, and why it is remote (if it is)."""

    identity: dict
    state: dict
    weight_paths: list[str] | None = None
    weights_note: str | None = None
    remote: str | None = None
    #: where the weight paths come from: ``server`` (a path the server names) or
    #: ``hf-cache`` (a repo id the server names, found in the local Hugging Face cache)
    weights_source: str = "server"


def ollama_facts(probe: Probe, model_id: str) -> ModelFacts:
    tags = probe.get("/api/tags").obj().get("models") or []
    tag = next((t for t in tags if isinstance(t, dict)
                and model_id in (t.get("name"), t.get("model"))), {})
    show = probe.post_read("/api/show", {"model": model_id}).obj()
    remote = None
    for src, what in ((tag, "/api/tags"), (show, "/api/show")):
        host = src.get("remote_host") or src.get("remote_model")
        if host:
            remote = f"{what} names remote_host {src.get('remote_host')!r}" \
                if src.get("remote_host") else f"{what} names remote_model"
            break
    if remote is None and re.search(r"[-:]cloud$", model_id):
        remote = "its tag names an Ollama cloud model"
    identity = {
        "digest": tag.get("digest"), "size": tag.get("size"),
        "details": tag.get("details") or show.get("details"),
        "capabilities": show.get("capabilities"),
        "parameters": show.get("parameters"),
        "template_sha256": _sha_text(show.get("template")),
        "system_sha256": _sha_text(show.get("system")),
        "model_info": _scalars(show.get("model_info")),
    }
    state: dict = {"loaded": False}
    for m in probe.get("/api/ps").obj().get("models") or []:
        if isinstance(m, dict) and model_id in (m.get("name"), m.get("model")):
            state = {"loaded": True, **{k: m.get(k) for k in
                                        ("size", "size_vram", "context_length", "expires_at")
                                        if k in m}}
    weights: list[str] = []
    for line in (show.get("modelfile") or "").splitlines():
        if line.startswith("FROM /") or line.startswith("ADAPTER /"):
            weights.append(line.split(" ", 1)[1].strip())
    note = None if weights else "the server named no weight file (/api/show modelfile)"
    return ModelFacts(identity, state, weights or None, note, remote)


def llamacpp_facts(probe: Probe, model_id: str) -> ModelFacts:
    props = probe.get("/props").obj()
    gen = props.get("default_generation_settings") or {}
    identity = {
        "model_path": props.get("model_path"), "model_alias": props.get("model_alias"),
        "modalities": props.get("modalities"),
        "chat_template_sha256": _sha_text(props.get("chat_template")),
        # what a request that names no sampling parameter gets (the server's --temp,
        # --seed, …): AgentDojo's element sends none but the temperature, so these shape
        # every reply; constant while the server runs
        "generation_defaults": (gen.get("params") if isinstance(gen, dict)
                                and isinstance(gen.get("params"), dict) else None),
    }
    state = {"n_ctx": gen.get("n_ctx") if isinstance(gen, dict) else None,
             "total_slots": props.get("total_slots")}
    path = props.get("model_path")
    if isinstance(path, str) and path.startswith("/"):
        return ModelFacts(identity, state, gguf_shards(path))
    return ModelFacts(identity, state, None, "the server named no model_path (/props)")


def vllm_facts(probe: Probe, model_id: str, entry: dict) -> ModelFacts:
    from agentprov_core.live.local.weights import hf_cache_folder

    root = entry.get("root")
    identity = {"root": root, "parent": entry.get("parent")}
    state = {"max_model_len": entry.get("max_model_len")}
    return ModelFacts(identity, state, *_folder_of(root, hf_cache_folder))  # type: ignore[arg-type]


def lmstudio_facts(probe: Probe, model_id: str) -> ModelFacts:
    data = probe.get("/api/v0/models").obj().get("data") or []
    e = next((d for d in data if isinstance(d, dict) and d.get("id") == model_id), {})
    identity = {k: e.get(k) for k in ("type", "publisher", "arch", "compatibility_type",
                                      "quantization", "max_context_length", "capabilities")}
    state = {k: e.get(k) for k in ("state", "loaded_context_length")}
    return ModelFacts(identity, state, None,
                      "LM Studio does not name a model's files: give --model-dir PATH")


def omlx_facts(probe: Probe, model_id: str) -> ModelFacts:
    models = probe.get("/v1/models/status").obj().get("models") or []
    e = next((m for m in models if isinstance(m, dict) and m.get("id") == model_id), {})
    state = {k: v for k, v in _scalars(e).items() if k != "id"}
    path = e.get("model_path") or e.get("path")
    if isinstance(path, str) and path.startswith("/"):
        return ModelFacts({"model_path": path}, state, [path])
    return ModelFacts({}, state, None,
                      "oMLX does not name a model's folder here: give --model-dir PATH")


def openai_compat_facts(probe: Probe, model_id: str) -> ModelFacts:
    """Nothing but the listing: the served ids are serving state (another model loaded
    beside this one is not drift); no file is named (``--model-dir`` names one)."""
    data = probe.listing().obj().get("data") or []
    return ModelFacts({}, {"served": [e["id"] for e in data]}, None,
                      "an OpenAI-compatible server names no model files: give --model-dir PATH")


def mlx_lm_facts(probe: Probe, model_id: str) -> ModelFacts:
    from agentprov_core.live.local.weights import hf_cache_folder

    state = _scalars(probe.get("/health").obj())
    return ModelFacts({}, state, *_folder_of(model_id, hf_cache_folder))


def _folder_of(name: Any, hf: Callable[[str], Any]
               ) -> tuple[list[str] | None, str | None, None, str]:
    """A model named by a local folder or a Hugging Face repo id: its folder, as a
    one-element list (expanded into files by the caller), or the reason there is none;
    in :class:`ModelFacts` order (paths, note, remote, source)."""
    from pathlib import Path

    if not isinstance(name, str) or not name:
        return None, "the server named no model folder", None, "server"
    if name.startswith("/"):
        if Path(name).exists():
            return [name], None, None, "server"
        return None, f"the folder the server names ({name}) is not on this machine", None, \
            "server"
    folder = hf(name)
    if folder is not None:
        return [str(folder)], None, None, "hf-cache"
    return None, f"{name} is not in the local Hugging Face cache: give --model-dir PATH", \
        None, "hf-cache"


def facts(kind: str, probe: Probe, model_id: str, entry: dict) -> ModelFacts:
    if kind == "ollama":
        return ollama_facts(probe, model_id)
    if kind == "llamacpp":
        return llamacpp_facts(probe, model_id)
    if kind == "vllm":
        return vllm_facts(probe, model_id, entry)
    if kind == "lmstudio":
        return lmstudio_facts(probe, model_id)
    if kind == "omlx":
        return omlx_facts(probe, model_id)
    if kind == GENERIC:
        return openai_compat_facts(probe, model_id)
    return mlx_lm_facts(probe, model_id)
