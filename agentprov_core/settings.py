"""The user's settings (D-828): ``$AGENTPROV_HOME/settings.toml``, read by runs and edited by
``agentprov settings`` with tomlkit, so comments and layout the user wrote survive an edit.

The keys are a schema, not free TOML (:data:`FACTS`, :func:`parse_key`):

``compute.preset``                          a preset's name (a string)
``endpoints.<name>.base_url``               an endpoint's base URL (``http://`` or ``https://``)
``local_models.<endpoint>.<model id>.<fact>``  a local model's facts: ``size_gb``,
                                            ``active_params_b``, ``kv_gb_per_trace``
                                            (numbers above 0) and ``context_tokens`` (an
                                            integer above 0)

``<name>`` is an endpoint of ``endpoints.toml``, and ``<endpoint>`` one of its local ones.
A model id may hold dots and slashes (``Qwen3.5-4B-MLX-4bit``,
``mlx-community/Qwen3-8B-4bit``): between the endpoint and the fact, everything is the model
id, so it can be given as is; a TOML-quoted id (``local_models.omlx."a.b".size_gb``) is read
the same. The file holds it as a quoted TOML key (``[local_models.omlx."Qwen3.5-4B-MLX-4bit"]``),
and ``list`` prints keys in that quoted form, which ``get``, ``set`` and ``unset`` accept back.

A key outside the schema, or a value of the wrong type, is refused (exit 2) naming the key
and the fix, and nothing is written. A settings file that does not parse, or that holds a
wrong-typed value, is refused the same way (naming the file and line) wherever it is read.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentprov_core.base import paths
from agentprov_core.errors import AgentprovError

FILE_NAME = "settings.toml"

#: a local model's facts: (type, what a value must be)
FACTS: dict[str, tuple[type, str]] = {
    "size_gb": (float, "the weights' size in GB, a number above 0"),
    "active_params_b": (float, "the active parameters in billions, a number above 0"),
    "context_tokens": (int, "the context length in tokens, an integer above 0"),
    "kv_gb_per_trace": (float, "the KV cache of one trace in GB, a number above 0"),
}
SCHEMA_TEXT = ("compute.preset, endpoints.<name>.base_url, or "
               "local_models.<endpoint>.<model id>.{" + ",".join(FACTS) + "}")
_BARE = re.compile(r"^[A-Za-z0-9_-]+$")
_PRESET = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")


def path() -> Path:
    return paths.home() / FILE_NAME


@dataclass(frozen=True)
class Key:
    """A key of the schema, as its parts (``("local_models", "omlx", "a.b", "size_gb")``)."""

    parts: tuple[str, ...]

    @property
    def text(self) -> str:
        """The key as ``list`` prints it: each part bare when TOML allows, else quoted."""
        return ".".join(p if _BARE.match(p) else _quote(p) for p in self.parts)


def _quote(part: str) -> str:
    import json

    return json.dumps(part, ensure_ascii=False)


def _key_error(key: str, what: str) -> AgentprovError:
    return AgentprovError("cli.usage.setting_key", key=key, what=what, schema=SCHEMA_TEXT)


def _split(raw: str) -> list[str]:
    """The parts of a dotted key: TOML's own grammar when it holds a quote, else split on
    dots (a ``local_models`` key then rejoins the model id, :func:`parse_key`)."""
    not_dotted = _key_error(raw, "it is not a dotted key (quote a part with double quotes: "
                                 'local_models.omlx."a.b".size_gb)')
    if any(not c.isprintable() for c in raw):
        raise not_dotted
    if '"' in raw or "'" in raw:
        try:
            node: Any = tomllib.loads(f"{raw} = 0")
        except tomllib.TOMLDecodeError:
            raise not_dotted from None
        parts: list[str] = []
        while isinstance(node, dict):
            if len(node) != 1:
                raise not_dotted
            [(k, node)] = node.items()
            parts.append(k)
        return parts
    return raw.split(".")


def parse_key(raw: str, registry: Mapping[str, Any]) -> Key:
    """A key of the schema, or ``cli.usage.setting_key`` (exit 2) naming what is wrong.
    Endpoint names are checked against ``registry`` (``endpoints.toml``: name -> entry with
    ``local``), which the caller loads."""
    raw = raw.strip()
    quoted = '"' in raw or "'" in raw
    parts = _split(raw)
    if any(p == "" for p in parts):
        raise _key_error(raw, "it has an empty part")
    head = parts[0]
    if head == "compute":
        if parts != ["compute", "preset"]:
            raise _key_error(raw, "the compute table holds preset only")
        return Key(("compute", "preset"))
    if head == "endpoints":
        if len(parts) != 3 or parts[2] != "base_url":
            raise _key_error(raw, "an endpoint's setting is endpoints.<name>.base_url")
        _endpoint(raw, parts[1], registry, local=False)
        return Key(tuple(parts))
    if head == "local_models":
        if len(parts) < 4 or (quoted and len(parts) != 4):
            raise _key_error(raw, "a model's fact is local_models.<endpoint>.<model id>.<fact>")
        endpoint, fact = parts[1], parts[-1]
        model = ".".join(parts[2:-1])  # a model id may hold dots
        if fact not in FACTS:
            raise _key_error(raw, f"{fact!r} is not a model fact (the facts: "
                                  f"{', '.join(FACTS)})")
        _endpoint(raw, endpoint, registry, local=True)
        return Key(("local_models", endpoint, model, fact))
    raise _key_error(raw, f"{head!r} is not a settings table")


def _endpoint(raw: str, name: str, registry: Mapping[str, Any], *, local: bool) -> None:
    ep = registry.get(name)
    if ep is None:
        raise _key_error(raw, f"{name!r} is not an endpoint of "
                              f"{paths.display(paths.registry_dir() / 'endpoints.toml')} "
                              f"(the endpoints: {', '.join(sorted(registry))})")
    if local and not ep.local:
        raise _key_error(raw, f"{name!r} is an API endpoint; local model facts belong to a "
                              "local one (" + ", ".join(sorted(n for n, e in registry.items()
                                                               if e.local)) + ")")


def parse_value(key: Key, raw: str) -> Any:
    """The value ``set`` stores for ``key``, from its command-line text, or
    ``cli.usage.setting_value`` (exit 2)."""
    return check_value(key, raw.strip(), from_text=True)


def check_value(key: Key, value: Any, *, from_text: bool = False) -> Any:
    """``value`` as the schema types it (a number given as text is read), or
    ``cli.usage.setting_value`` (exit 2) naming the key and what it must be."""
    def bad(what: str) -> AgentprovError:
        shown = value if isinstance(value, str) and len(value) <= 80 else repr(value)[:80]
        return AgentprovError("cli.usage.setting_value", key=key.text, value=shown, what=what)

    head = key.parts[0]
    if head == "compute":
        if not isinstance(value, str) or not _PRESET.match(value):
            raise bad("a preset's name: lower-case letters, digits, '.', '_' and '-'")
        return value
    if head == "endpoints":
        if not isinstance(value, str) or not re.match(r"^https?://[^\s/]+", value):
            raise bad("a base URL beginning with http:// or https://, e.g. "
                      "http://127.0.0.1:8000/v1")
        return value
    kind, what = FACTS[key.parts[-1]]
    number = value
    if from_text and isinstance(value, str):
        try:
            number = int(value) if re.fullmatch(r"[0-9]+", value) else float(value)
        except ValueError:
            raise bad(what) from None
    if isinstance(number, bool) or not isinstance(number, (int, float)):
        raise bad(what)
    if kind is int and not isinstance(number, int):
        raise bad(what)
    if not (0 < number < 1e9) or number != number:  # NaN, infinities, <= 0
        raise bad(what)
    return float(number) if kind is float else number


# ------------------------------------------------------------------ reading and writing
def _text(p: Path) -> str | None:
    """The settings file's text (None when there is none); one that is not a regular UTF-8
    file (a directory, a FIFO, over 16 MiB) is ``cli.usage.settings_file``."""
    from agentprov_core.base import inputfile

    try:
        return inputfile.read_text(p)
    except inputfile.Missing:
        return None
    except inputfile.Unreadable as exc:
        raise AgentprovError("cli.usage.settings_file", location=str(p),
                             what=f"cannot be read: it {exc}") from None


def _document(p: Path):
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    text = _text(p)
    if text is None:
        return tomlkit.document()
    try:
        return tomlkit.parse(text)
    except TOMLKitError as exc:
        raise AgentprovError("cli.usage.settings_file", location=str(p),
                             what=f"malformed TOML: {exc}") from None


def read() -> dict[str, Any]:
    """The settings as plain data (empty without a file); a malformed file is exit 2."""
    from agentprov_core.base import tomlfile

    p = path()
    if not p.is_file():
        return {}
    data, _ = tomlfile.read(p, "cli.usage.settings_file")
    return data


def entries(registry: Mapping[str, Any]) -> list[tuple[Key, Any]]:
    """Every schema key the settings hold, with its value, in file order. A value of the
    wrong type, or a key outside the schema, is ``cli.usage.settings_file`` (exit 2)."""
    data = read()
    out: list[tuple[Key, Any]] = []

    def walk(node: Any, prefix: tuple[str, ...]) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, (*prefix, k))
            return
        key = _file_key(prefix, registry)
        out.append((key, _stored(key, node)))

    walk(data, ())
    return out


def _file_key(parts: tuple[str, ...], registry: Mapping[str, Any]) -> Key:
    text = ".".join(p if _BARE.match(p) else _quote(p) for p in parts)
    try:
        key = parse_key(text, registry)
    except AgentprovError as exc:
        raise AgentprovError("cli.usage.settings_file", location=_where(parts),
                             what=f"{text}: {exc.params.get('what')}; the keys are "
                                  f"{SCHEMA_TEXT}") from None
    if key.parts != parts:
        raise AgentprovError("cli.usage.settings_file", location=_where(parts),
                             what=f"{text} is not a key of the schema ({SCHEMA_TEXT})")
    return key


def _where(parts: tuple[str, ...]) -> str:
    from agentprov_core.base import tomlfile

    file = path()
    table = ".".join(x if _BARE.match(x) else _quote(x) for x in parts[:-1]) or None
    return tomlfile.location(file, _text(file) or "", parts[-1], table)


def get(key: Key) -> Any:
    """The value of ``key`` in the settings, or None when it is not set."""
    node: Any = read()
    for part in key.parts:
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return check_value(key, node) if not isinstance(node, dict) else None


def set_value(key: Key, value: Any, registry: Mapping[str, Any]) -> None:
    """Write ``key = value`` (tomlkit: every other line of the file, comments included,
    stays as it was); the file is replaced whole, atomically."""
    import tomlkit

    from agentprov_core.registries.edit import _write as write_file  # atomic replace

    p = path()
    entries(registry)  # a file that is already wrong is refused before it is edited
    doc = _document(p)
    node = doc
    for part in key.parts[:-1]:
        if part not in node:
            node[part] = tomlkit.table(is_super_table=part in ("local_models", "endpoints")
                                       or (key.parts[0] == "local_models"
                                           and part == key.parts[1]))
        node = node[part]
    node[key.parts[-1]] = value
    write_file(p, tomlkit.dumps(doc))


def unset(key: Key) -> bool:
    """Remove ``key`` (and the tables it leaves empty); whether it was set."""
    import tomlkit

    from agentprov_core.registries.edit import _write as write_file  # atomic replace

    p = path()
    if not p.is_file():
        return False
    doc = _document(p)
    chain = [doc]
    for part in key.parts[:-1]:
        nxt = chain[-1].get(part)
        if not isinstance(nxt, dict):
            return False
        chain.append(nxt)
    if key.parts[-1] not in chain[-1]:
        return False
    del chain[-1][key.parts[-1]]
    for parent, part, node in zip(reversed(chain[:-1]), reversed(key.parts[:-1]),
                                  reversed(chain[1:]), strict=True):
        if len(node) == 0:
            del parent[part]
    write_file(p, tomlkit.dumps(doc))
    return True


# ------------------------------------------------------------------ what runs read
def _stored(key: Key, value: Any) -> Any:
    """A value read from the file, checked: a wrong one names the file and its line."""
    try:
        return check_value(key, value)
    except AgentprovError as exc:
        raise AgentprovError("cli.usage.settings_file", location=_where(key.parts),
                             what=f"{key.text}: it must be {exc.params.get('what')}; fix it "
                                  f"with agentprov settings set {key.text} VALUE") from None


def base_url(endpoint: str) -> str | None:
    """``endpoints.<endpoint>.base_url``, or None."""
    value = ((read().get("endpoints") or {}).get(endpoint) or {}).get("base_url")
    if value is None:
        return None
    return _stored(Key(("endpoints", endpoint, "base_url")), value)


def model_facts(endpoint: str, model_id: str) -> dict[str, Any]:
    """The facts stored for ``model_id`` on ``endpoint`` (each checked against the schema)."""
    stored = ((read().get("local_models") or {}).get(endpoint) or {}).get(model_id) or {}
    if not isinstance(stored, dict):
        return {}
    return {fact: _stored(Key(("local_models", endpoint, model_id, fact)), value)
            for fact, value in stored.items() if fact in FACTS}
