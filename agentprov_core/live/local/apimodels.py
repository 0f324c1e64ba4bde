"""An API endpoint's model list, kept in a dated cache (R-12.11 … R-12.13).

``$AGENTPROV_HOME/cache/models-<endpoint>.json``::

    {"format": "agentprov-model-list/0.1", "endpoint": "openrouter",
     "fetched_at": "2026-11-30T10:00:00Z", "url": "https://openrouter.ai/api/v1/models",
     "models": ["anthropic/claude-…", …]}

Reading it never touches the network. :func:`refresh` (``--allow-network``) makes list
calls only (``GET …/models``, paginated on Anthropic), with the endpoint's key when the
provider wants one; OpenRouter's list is public and is fetched without a key. A model that
is absent from a cached list is a warning, never a refusal.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import msgspec

from agentprov_core.base import paths
from agentprov_core.errors import AgentprovError

FORMAT = "agentprov-model-list/0.1"
#: Providers whose model list needs no key.
PUBLIC_LISTS = {"openrouter"}
TIMEOUT = 20.0


class ModelList(msgspec.Struct, frozen=True, kw_only=True):
    format: str = FORMAT
    endpoint: str
    fetched_at: str
    url: str
    models: list[str]


def cache_file(endpoint: str) -> Path:
    return paths.home() / "cache" / f"models-{endpoint}.json"


def read_cache(endpoint: str) -> ModelList | None:
    path = cache_file(endpoint)
    try:
        data = msgspec.json.decode(path.read_bytes(), type=ModelList)
    except FileNotFoundError:
        return None
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None  # a damaged cache is no cache: --allow-network rewrites it
    return data if data.format == FORMAT and data.endpoint == endpoint else None


def write_cache(lst: ModelList) -> Path:
    path = cache_file(lst.endpoint)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(msgspec.json.encode(lst))
    os.replace(tmp, path)
    return path


def _ids(body: Any) -> list[str]:
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        raise ValueError('the answer has no "data" list')
    return [e["id"] for e in data if isinstance(e, dict) and isinstance(e.get("id"), str)]


def refresh(ep: Any, base_url: str, key: str | None, *, transport: Any = None) -> ModelList:
    """Fetch the list (list calls only) and write the cache."""
    import httpx

    from agentprov_core.live import endpoints

    anthropic = ep.kind == "anthropic"
    root = base_url.rstrip("/")
    url = root + ("/v1/models" if anthropic and not root.endswith("/v1") else "/models")
    headers = {"Accept": "application/json", "User-Agent": "agentprov-models"}
    if key:
        if anthropic:
            headers["x-api-key"] = key
        else:
            headers["Authorization"] = f"Bearer {key}"
    if anthropic:
        headers["anthropic-version"] = "2023-06-01"
    ids: list[str] = []
    params: dict[str, Any] = {"limit": 1000} if anthropic else {}
    try:
        with httpx.Client(timeout=TIMEOUT, headers=headers, follow_redirects=False,
                          transport=transport) as client:
            for _ in range(100):
                resp = client.get(url, params=params)
                if resp.status_code != 200:
                    raise AgentprovError("cli.environment.models_fetch", endpoint=ep.name,
                                         url=endpoints.shown(url),
                                         why=f"HTTP {resp.status_code}")
                body = resp.json()
                ids += _ids(body)
                if not (anthropic and body.get("has_more") and body.get("last_id")):
                    break
                params = {"limit": 1000, "after_id": body["last_id"]}
    except httpx.HTTPError as exc:
        raise AgentprovError("cli.environment.models_fetch", endpoint=ep.name,
                             url=endpoints.shown(url), why=type(exc).__name__) from None
    except ValueError as exc:
        raise AgentprovError("cli.environment.models_fetch", endpoint=ep.name,
                             url=endpoints.shown(url), why=str(exc)) from None
    lst = ModelList(endpoint=ep.name, url=endpoints.shown(url), models=sorted(set(ids)),
                    fetched_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    write_cache(lst)
    return lst


def as_json(lst: ModelList) -> dict:
    return json.loads(msgspec.json.encode(lst))
