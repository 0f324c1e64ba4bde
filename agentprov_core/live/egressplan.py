"""What egress one run needs (D-664): from the base URLs of its endpoints, the ``host:port``
pairs the egress proxy (:mod:`agentprov_core.live.egress`) tunnels to and at most one LAN
address it forwards plain http to; none when every endpoint is on loopback.

:func:`plan` raises ``cli.refused.egress_target`` (exit 4) for an endpoint the proxy cannot
serve (plain http to a name or a public address, a URL with credentials, two different LAN
addresses).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from agentprov_core.live.egress import EgressProxy
from agentprov_core.live.proxyhttp import Pair, host_port, is_lan, literal_ip, norm_host


@dataclass(frozen=True)
class EgressPlan:
    """What one run's proxy allows: CONNECT pairs and at most one LAN forward address."""

    allowed: tuple[Pair, ...] = ()
    forward: Pair | None = None

    def proxy(self, **options: Any) -> EgressProxy:
        """An :class:`EgressProxy` for this plan (not started); ``options`` as its own."""
        return EgressProxy(allowed=self.allowed, forward=self.forward, **options)


def plan(urls: Iterable[str | None]) -> EgressPlan | None:
    """The egress a run needs for the base URLs of its endpoints (the agent's, plus a
    defence endpoint if any; ``None`` entries are skipped, duplicates collapse). ``None``
    when every endpoint is on loopback: it is reached directly (R-20.4)."""
    from agentprov_core.errors import AgentprovError
    from agentprov_core.live.endpoints import is_loopback

    allowed: list[Pair] = []
    forward: Pair | None = None
    for url in urls:
        if not url:
            continue
        if is_loopback(url):
            continue
        try:
            parts = urlsplit(url)
            host, port = parts.hostname, parts.port
        except ValueError:
            parts, host, port = None, None, None
        shown = (f"{parts.scheme}://{host_port(host, port or 0)}" if parts and host
                 else "(unparsable)")

        def refuse(why: str, shown: str = shown) -> AgentprovError:
            return AgentprovError("cli.refused.egress_target", url=shown, why=why)

        if parts is None or not host:
            raise refuse("the URL does not parse")
        if parts.username is not None or parts.password is not None:
            raise refuse("a base URL carries no credentials")
        host = norm_host(host)
        if parts.scheme == "https":
            pair = (host, port or 443)
            if pair not in allowed:
                allowed.append(pair)
        elif parts.scheme == "http":
            ip = literal_ip(host)
            if ip is None or not is_lan(ip):
                raise refuse("plain http leaves the machine only to one literal private "
                             "(LAN) address; use https for anything else")
            target = (str(ip), port or 80)
            if forward is not None and forward != target:
                raise refuse(f"the forward mode serves one LAN address, and "
                             f"{host_port(*forward)} is already the run's")
            forward = target
        else:
            raise refuse(f"scheme {parts.scheme!r}: only https (and http to a LAN address)")
    if not allowed and forward is None:
        return None
    return EgressPlan(tuple(allowed), forward)
