"""Endpoint kinds (contributed through hooks) and the endpoint registry (data)."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

import msgspec

from agentprov_core import paths, tomlfile
from agentprov_core.errors import AgentprovError

ENDPOINTS_FORMAT = "agentprov-endpoints/0.1"


class EndpointKind(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A wire protocol, and for a local server kind how it is recognised."""

    name: str
    wire: Literal["openai", "anthropic"]
    local: bool = False
    listing_path: str | None = None
    fingerprint: str | None = None
    summary: str = ""


class Endpoint(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: str
    kind: str
    base_url: str
    local: bool = False
    key: str | None = None
    optional_key: str | None = None
    model_variable: str | None = None
    aliases: list[str] = []

    @property
    def endpoint_class(self) -> Literal["local", "api"]:
        """``local`` only for a local entry whose base URL is on loopback (R-10)."""
        return "local" if self.local and is_loopback(self.base_url) else "api"


def is_loopback(url: str) -> bool:
    host = (urlsplit(url).hostname or "").strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def endpoints_file() -> Path:
    return paths.registry_dir() / "endpoints.toml"


def load(path: Path | None = None) -> dict[str, Endpoint]:
    path = path or endpoints_file()
    data, text = tomlfile.read(path, "cli.usage.registry_file")
    if data.get("format") != ENDPOINTS_FORMAT:
        raise AgentprovError("cli.usage.registry_file",
                             location=tomlfile.location(path, text, "format"),
                             what=f'format must be "{ENDPOINTS_FORMAT}"')
    out: dict[str, Endpoint] = {}
    for name, entry in (data.get("endpoints") or {}).items():
        try:
            out[name] = msgspec.convert(dict(entry, name=name), type=Endpoint)
        except msgspec.ValidationError as exc:
            raise AgentprovError("cli.usage.registry_file",
                                 location=tomlfile.location(path, text, "kind",
                                                            f"endpoints.{name}"),
                                 what=f"[endpoints.{name}]: {exc}") from None
    return out


def resolve(name: str, option: str, registry: dict[str, Endpoint]) -> Endpoint:
    if name in registry:
        return registry[name]
    for ep in registry.values():
        if name in ep.aliases:
            return ep
    raise AgentprovError("cli.usage.unknown_endpoint", option=option, name=name,
                         registry=paths.display(endpoints_file()),
                         known=", ".join(sorted(registry)))
