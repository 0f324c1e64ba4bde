"""Endpoint kinds (contributed through hooks), the endpoint registry (data), and the rules
for an endpoint's base URL and class (R-10, R-11.36, R-11.57 … R-11.59, R-12.9, R-12.10).

Nothing here reads a key or contacts a server: :func:`resolve_base_url` reads the flag, the
variables a caller already read from ``.env``, the setting and the registry, in that order.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Literal
from urllib.parse import SplitResult, urlsplit

import msgspec

from agentprov_core.base import paths, tomlfile
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


class Fingerprint(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """How T0 recognises a local server kind on its port: ``GET path`` answers a JSON
    object holding every key of ``keys``; ``owned_by`` is the listing entries' owner when
    the server names one; ``absent`` a path this kind does not serve (a 404 tells it apart
    from another kind on the same default port)."""

    path: str
    keys: list[str] = []
    owned_by: str | None = None
    absent: str | None = None


class Endpoint(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One entry of ``endpoints.toml``. ``base_url`` is None only for a local entry whose
    server has no standard port (``openai_compat``): ``--base-url`` or the setting names
    it, never ``.env`` (its class is decided before ``.env`` is read)."""

    name: str
    kind: str
    base_url: str | None = None
    host: str | None = None
    local: bool = False
    key: str | None = None
    optional_key: str | None = None
    base_url_variable: str | None = None
    model_variable: str | None = None
    aliases: list[str] = []
    fingerprint: Fingerprint | None = None

    @property
    def registered_host(self) -> str:
        return (self.host or urlsplit(self.base_url or "").hostname or "").lower()

    @property
    def endpoint_class(self) -> Literal["local", "api"]:
        """``local`` only for a local entry whose base URL is on loopback (R-10)."""
        return "local" if self.local and is_loopback(self.base_url or "") else "api"


def is_loopback(url: str) -> bool:
    try:
        host = (urlsplit(url).hostname or "").strip("[]")
    except ValueError:  # not a URL: refused by check_url
        return False
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
            ep = msgspec.convert(dict(entry, name=name), type=Endpoint)
        except msgspec.ValidationError as exc:
            raise AgentprovError("cli.usage.registry_file",
                                 location=tomlfile.location(path, text, "kind",
                                                            f"endpoints.{name}"),
                                 what=f"[endpoints.{name}]: {exc}") from None
        if ep.base_url is None and (not ep.local or ep.base_url_variable):
            raise AgentprovError(
                "cli.usage.registry_file",
                location=tomlfile.location(path, text, "kind", f"endpoints.{name}"),
                what=f"[endpoints.{name}]: base_url is required"
                     + (" (an entry without one is a local server whose URL --base-url or "
                        "the setting names, so it takes no base_url_variable)"
                        if ep.local else ""))
        out[name] = ep
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


#: The private ranges a LAN endpoint may name (R-11.57), as literal addresses only.
LAN_NETWORKS = tuple(ipaddress.ip_network(n) for n in
                     ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10",
                      "fc00::/7"))


class ResolvedEndpoint(msgspec.Struct, frozen=True, kw_only=True):
    """An endpoint with its base URL resolved and checked: what the agent configuration
    records (never a key, only its variable's name)."""

    name: str
    kind: str
    wire: str
    base_url: str
    base_url_source: Literal["flag", "env", "setting", "registry"]
    endpoint_class: Literal["local", "api"]
    lan: bool = False
    custom: bool = False
    key_variable: str | None = None


def wire_of(ep: Endpoint) -> str:
    """The API style of an endpoint: ``anthropic`` for Anthropic-style entries, else
    ``openai`` (every local server kind speaks the OpenAI chat format)."""
    return "anthropic" if ep.kind == "anthropic" else "openai"


def setting_base_url(name: str) -> str | None:
    """The setting ``endpoints.<name>.base_url`` from ``$AGENTPROV_HOME/settings.toml``."""
    from agentprov_core import settings

    return settings.base_url(name)


def resolve_base_url(ep: Endpoint, flag: str | None, env: dict[str, str] | None
                     ) -> tuple[str, str]:
    """The base URL and where it came from: the flag (local entries only), then ``.env``,
    then the setting ``endpoints.<name>.base_url``, then the registry (R-11.36). An entry
    with no registry URL and none of the others is ``cli.usage.base_url_required`` (exit
    2)."""
    if flag and ep.local:
        return flag, "flag"
    if ep.base_url_variable and (env or {}).get(ep.base_url_variable):
        return env[ep.base_url_variable], "env"
    setting = setting_base_url(ep.name)
    if setting:
        return setting, "setting"
    if ep.base_url is None:
        raise AgentprovError("cli.usage.base_url_required", endpoint=ep.name,
                             settings=paths.display(paths.home() / "settings.toml"))
    return ep.base_url, "registry"


def endpoint_class(ep: Endpoint, url: str) -> Literal["local", "api"]:
    """``local`` only for a ``local = true`` entry whose base URL is on loopback (R-10.9)."""
    return "local" if ep.local and is_loopback(url) else "api"


_CONTROL = re.compile(r"[\x00-\x20\x7f]")


def shown(url: str, secrets: Iterable[str] = ()) -> str:
    """A URL as a message may print it: no user information, query or fragment (they may
    hold a secret), only that they were there; no key (the values ``secrets`` and any
    key-shaped string, as the redaction scan knows them); control characters escaped. It
    never raises, whatever ``url`` holds."""
    # control characters first: urlsplit would silently drop a line break or a tab
    url = _CONTROL.sub(lambda m: "%20" if m.group() == " " else
                       m.group().encode("unicode_escape").decode("ascii"), url)
    try:
        parts = urlsplit(url)
        scheme, netloc, path, query, fragment = (parts.scheme, parts.netloc, parts.path,
                                                 parts.query, parts.fragment)
    except ValueError:  # not a URL (an unclosed IPv6 bracket): cut it the same way by hand
        scheme, _, rest = url.partition("://") if "://" in url else ("", "", url)
        rest, hash_, fragment = rest.partition("#")
        rest, _, query = rest.partition("?")
        netloc, slash, path = rest.partition("/")
        path = slash + path
        fragment = fragment or hash_
    if "@" in netloc:
        netloc = "…@" + netloc.rsplit("@", 1)[1]
    out = f"{scheme}://{netloc}{path}" if scheme else netloc + path
    out += ("?…" if query else "") + ("#…" if fragment else "")
    from agentprov_core.base import redaction

    return redaction.redact_text(out, secrets)


def _refuse(url: str, why: str, secrets: Iterable[str] = ()) -> AgentprovError:
    return AgentprovError("cli.refused.endpoint", url=shown(url, secrets), why=why)


def parse_url(url: str) -> SplitResult:
    """``url`` split, or ``cli.refused.endpoint`` (exit 4) when it is no URL: one that
    does not parse (an unclosed IPv6 bracket, a port that is not a number) or that holds a
    control character or a space (``urlsplit`` would silently drop a line break, which
    would then reach the request line)."""
    if m := _CONTROL.search(url):
        raise _refuse(url, f"it holds a control character or a space "
                           f"({m.group()!r} at character {m.start() + 1}); give the URL on "
                           "one line, without spaces")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a malformed port raises here
    except ValueError as exc:
        raise _refuse(url, f"it is not a valid URL ({exc})") from None
    return parts


def check_secret_free(url: str, secrets: dict[str, str]) -> None:
    """``cli.refused.endpoint`` (exit 4) when ``url`` holds the value of a key (by its
    variable's name in ``secrets``), as given or percent-encoded, or a key-shaped string:
    a base URL is recorded in the corpus and printed, and a key never is."""
    from urllib.parse import unquote

    from agentprov_core.base import redaction

    values = [v for v in secrets.values() if v]
    for text in dict.fromkeys((url, unquote(url))):  # shown decoded: redacted either way
        for name, value in secrets.items():
            if value and value in text:
                raise _refuse(text, f"it holds the value of {name}: a key is never put in a "
                                    "URL (it would be recorded and printed); give the "
                                    "endpoint's URL without it, the key stays in the keychain "
                                    "or .env", values)
        if what := redaction.key_shape(text):
            raise _refuse(text, f"it holds a key-shaped string ({what}): a key is never put "
                                "in a URL; give the endpoint's URL without it", values)


def lan_address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The literal private address ``host`` names, or ``None``."""
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        return None
    return addr if any(addr in n for n in LAN_NETWORKS) else None


def check_url(ep: Endpoint, url: str, source: str, *, allow_custom: bool, allow_lan: bool
              ) -> ResolvedEndpoint:
    """The URL rules of step 3 (exit 4, ``cli.refused.endpoint``): user names, queries and
    fragments always refused; https only (loopback excepted); the registered host unless
    ``--allow-custom-endpoint``; a local entry on loopback, or with ``--allow-lan-endpoint``
    a literal private address over plain http."""
    parts = parse_url(url)
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise _refuse(url, "a URL with a user name is always refused (put the key in the "
                           "keychain or .env)")
    if parts.query:
        raise _refuse(url, "a URL with a query is always refused")
    if parts.fragment:
        raise _refuse(url, "a URL with a fragment is always refused")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _refuse(url, "an endpoint URL is http(s)://HOST[:PORT]/PATH")
    raw_host = parts.netloc.rsplit("@", 1)[-1]
    if "%" in raw_host:
        raise _refuse(url, "IPv6 zone ids are refused")
    host = parts.hostname.lower()
    loopback = is_loopback(url)
    lan = False
    custom = False
    if ep.local and not loopback:
        if not allow_lan:
            raise _refuse(url, f"{ep.name} is a local server: it must run on this machine, on "
                               "loopback (127.0.0.1, ::1, localhost); a server on another "
                               "machine needs --allow-lan-endpoint")
        if lan_address(host) is None:
            raise _refuse(url, "--allow-lan-endpoint admits a literal private address only "
                               "(10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7), no host "
                               "names")
        if parts.scheme != "http":
            raise _refuse(url, "a LAN endpoint is plain http (the egress proxy forwards "
                               "plain http to that one address)")
        lan = True
    elif not ep.local:
        if parts.scheme != "https" and not loopback:
            raise _refuse(url, "an API endpoint URL must be https (loopback excepted)")
        if host != ep.registered_host:
            if not allow_custom:
                raise _refuse(url, f"the host {host} is not {ep.name}'s registered host "
                                   f"{ep.registered_host}; pass --allow-custom-endpoint to "
                                   "use it (recorded)")
            custom = True
    return ResolvedEndpoint(
        name=ep.name, kind=ep.kind, wire=wire_of(ep), base_url=url,
        base_url_source=source,  # type: ignore[arg-type]
        endpoint_class=endpoint_class(ep, url), lan=lan, custom=custom)
