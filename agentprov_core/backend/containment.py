"""Containment providers: what ``--containment`` may name, how a run resolves it against
the environment's marker, how it wraps the worker's argv, and how it is recorded.

Providers come through the ``agentprov_containment_providers`` hook; the core registers
its own (``agentprov_core.builtin``): ``sandbox-exec`` (macOS), ``bwrap`` (Linux), both
enforced and accepted only with a passed build-time probe of the exact profile, and
``dedicated-user`` and ``vm``, declared by the operator, recorded and not checked.

The run path calls :func:`resolve` (in the order of checks, after the endpoint) and hands
the :class:`Recorded` value to the worker (``Worker(containment=..., allowed=...)``),
which calls :func:`wrap_argv`. Scripted runs record no containment (``producer.sandbox``
is null) and are not wrapped.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import msgspec

from agentprov_core.errors import AgentprovError


class ContainmentProvider(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A way to confine the worker. ``declared_by`` says who vouches for it: ``probe``
    (enforced, accepted only with a passed build-time probe) or ``operator`` (declared,
    recorded, not checked).

    An enforced provider names, as ``module:function`` strings (imported only when used):
    ``probe``, run by ``agentprov backends build`` as ``probe(env_dir, hello) -> dict``
    and recorded in the marker's ``probe`` under ``probe_key``; ``wrap``, called as
    ``wrap(argv, staging=, home=, tmp=, routes=, env_dir=) -> argv``; ``stale``, called as
    ``stale(entry) -> list[str]``: why a recorded probe no longer describes this machine
    (the probe records what it ran against; empty when it still does); and its
    ``profile_sha256``, the digest the probe must have passed."""

    name: str
    recorded_as: str
    platforms: tuple[str, ...]
    declared_by: Literal["probe", "operator"]
    summary: str = ""
    probe_key: str | None = None
    probe: str | None = None
    wrap: str | None = None
    stale: str | None = None
    profile_sha256: str | None = None

    def applies_here(self, platform: str | None = None) -> bool:
        platform = platform or sys.platform
        return "any" in self.platforms or platform in self.platforms


class Recorded(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What ``producer.sandbox`` records: ``{"kind", "declared_by"[, "profile_sha256"][,
    "not_enforced"]}``; ``not_enforced`` names the probe's checks this machine's kernel
    cannot enforce (``signal_sibling_or_worker`` below Landlock ABI 6), absent when it
    enforces them all."""

    kind: str
    declared_by: Literal["probe", "operator"]
    profile_sha256: str | None = None
    not_enforced: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return msgspec.json.decode(msgspec.json.encode(self))  # lists, as a manifest reads


class Allowed(msgspec.Struct, frozen=True, kw_only=True):
    """Where the contained worker may connect. ``loopback_ports``: ports of the host's
    loopback interface (the scripted endpoint, a local server), each bridged by T0 and
    reached in the sandbox at the same ``127.0.0.1:PORT``. ``unix_sockets``: a port in
    the sandbox relayed to a host Unix socket (the egress proxy listens on one)."""

    loopback_ports: tuple[int, ...] = ()
    unix_sockets: tuple[tuple[int, str], ...] = ()


def providers() -> dict[str, ContainmentProvider]:
    """Every registered provider by name, in registration order (the first one wins)."""
    from agentprov_core.plugins import manager

    found: dict[str, ContainmentProvider] = {}
    for impl in manager().hook.agentprov_containment_providers.get_hookimpls():
        for p in impl.function() or ():
            found.setdefault(p.name, p)
    return found


def provider(name: str) -> ContainmentProvider:
    known = providers()
    if name not in known:
        raise _refuse(name, why=f"no provider is named {name!r} (known: {', '.join(known)})",
                      fix="name one of them")
    return known[name]


def _load(ref: str) -> Callable[..., Any]:
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


def recorded_probe(marker: Any, prov: ContainmentProvider) -> dict[str, Any] | None:
    probe = getattr(marker, "probe", None) if not isinstance(marker, dict) else marker.get("probe")
    entry = (probe or {}).get(prov.probe_key or prov.recorded_as)
    return entry if isinstance(entry, dict) else None


def stale_reasons(prov: ContainmentProvider, entry: dict[str, Any] | None) -> list[str]:
    """Why the recorded probe ``entry`` of an enforced provider does not speak for this
    agentprov on this machine: none recorded, another profile digest, or (the provider's
    ``stale``) a machine that changed since it ran. Empty when it does."""
    if entry is None:
        return ["no probe is recorded"]
    if entry.get("status") == "not run":
        return []  # nothing this build could have re-run (sandbox-exec on macOS)
    out = []
    if entry.get("profile_sha256") != prov.profile_sha256:
        out.append(f"the profile changed (probe of {str(entry.get('profile_sha256'))[:12]}…, "
                   f"this agentprov's is {str(prov.profile_sha256)[:12]}…)")
    if prov.stale:
        out += _load(prov.stale)(entry)
    return out


def resolve(name: str, marker: Any, *, backend: str = "BACKEND",
            platform: str | None = None) -> Recorded:
    """Accept ``--containment name`` for a real-model run with this environment marker,
    or refuse (``cli.refused.containment``, exit 4) naming the fix."""
    prov = provider(name)
    platform = platform or sys.platform
    if not prov.applies_here(platform):
        entry = recorded_probe(marker, prov) or {}
        status = entry.get("status", "not applicable")
        raise _refuse(
            name,
            why=f"it applies to {', '.join(prov.platforms)} only; its probe is "
                f"\"{status}\" on {platform}",
            fix=_fix_elsewhere(platform))
    if prov.declared_by == "operator":
        return Recorded(kind=prov.recorded_as, declared_by="operator")
    entry = recorded_probe(marker, prov)
    want = prov.profile_sha256
    rebuild = f"run agentprov backends build {backend} (it re-runs the probe)"
    if prov.probe is None:  # sandbox-exec: this build cannot run the macOS probe
        rebuild = ("this build cannot run its probe; declare dedicated-user or vm "
                   "truthfully")
    if entry is None or entry.get("status") in (None, "not run", "not applicable"):
        why = ("the environment's marker records no probe of it" if entry is None
               else f"its probe is \"{entry.get('status')}\" in the environment's marker"
                    + (f" ({entry['note']})" if entry.get("note") else ""))
        raise _refuse(name, why=why, fix=rebuild)
    if entry.get("profile_sha256") != want:
        raise _refuse(
            name,
            why=f"the marker's probe is of profile {str(entry.get('profile_sha256'))[:12]}…, "
                f"this agentprov's profile is {str(want)[:12]}…", fix=rebuild)
    if prov.stale and (moved := _load(prov.stale)(entry)):
        raise _refuse(name, why="its probe in the environment's marker is stale: "
                      + "; ".join(moved), fix=rebuild)
    if entry.get("passed") is not True:
        failed = [c["name"] for c in entry.get("checks", []) if not c.get("passed")]
        raise _refuse(
            name,
            why="its probe failed" + (f" ({', '.join(failed)})" if failed else
                                      f" ({entry.get('detail', entry.get('status'))})"),
            fix=rebuild + " once the cause is fixed (docs/containment.md), or declare "
                          "dedicated-user or vm truthfully")
    return Recorded(kind=prov.recorded_as, declared_by="probe", profile_sha256=want,
                    not_enforced=not_enforced(entry))


def not_enforced(entry: dict[str, Any]) -> tuple[str, ...]:
    """The checks of a recorded probe that this machine's kernel cannot enforce (recorded
    ``"enforced_here": false``): accepted, and said in the dry run and the manifest."""
    return tuple(str(c.get("name")) for c in entry.get("checks") or ()
                 if isinstance(c, dict) and c.get("enforced_here") is False)


def _refuse(name: str, why: str, fix: str) -> AgentprovError:
    """``cli.refused.containment`` (exit 4), its reason and its fix in one line."""
    return AgentprovError("cli.refused.containment", name=name, fix=fix,
                          why=f"--containment {name} is refused: {why}; {fix}")


def _fix_elsewhere(platform: str) -> str:
    if platform.startswith("linux"):
        return "use --containment bwrap, or declare dedicated-user or vm truthfully"
    return "declare dedicated-user or vm truthfully, or build the environment on macOS"


def enforced(recorded: Recorded | None) -> bool:
    return recorded is not None and recorded.declared_by == "probe"


def prewarm(recorded: Recorded | None, env_dir: Path) -> None:
    """Start, in the background, what :func:`wrap_argv` will need for ``recorded`` (bwrap:
    the walk of the environment and its Python install for ``.env`` files to mask), so that
    the worker's start does not wait for it."""
    if enforced(recorded) and recorded.kind == "bwrap":
        from agentprov_core.backend.sandbox import profile

        profile.prewalk(env_dir)


def wrap_argv(recorded: Recorded | None, argv: list[str], staging: Path, home: Path,
              allowed: dict[int, str], *, env_dir: Path, tmp: Path) -> list[str]:
    """The worker's argv under ``recorded``. ``allowed`` maps each port the worker may
    reach on 127.0.0.1 to the host Unix socket it is relayed to (see :class:`Allowed`
    and :class:`agentprov_core.backend.sandbox.bridge.Bridge`). A declared containment (or none)
    leaves the argv as it is: there is nothing for agentprov to enforce."""
    if not enforced(recorded):
        return list(argv)
    prov = next((p for p in providers().values() if p.recorded_as == recorded.kind), None)
    if prov is None or prov.wrap is None:
        raise _refuse(recorded.kind, why="no registered provider wraps it",
                      fix="declare dedicated-user or vm")
    if recorded.profile_sha256 != prov.profile_sha256:
        raise _refuse(prov.name, why="the recorded profile digest is not this agentprov's",
                      fix="run agentprov backends build (it re-runs the probe)")
    return _load(prov.wrap)(list(argv), staging=staging, home=home, tmp=tmp,
                            routes=dict(allowed), env_dir=env_dir)


def run_probe(prov: ContainmentProvider, env_dir: Path, hello: dict[str, Any]) -> dict[str, Any]:
    return _load(prov.probe)(env_dir, hello)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- the providers
def wrap_bwrap(argv: list[str], *, staging: Path, home: Path, tmp: Path,
               routes: dict[int, str], env_dir: Path) -> list[str]:
    from agentprov_core.backend.sandbox import profile

    return profile.realise(argv, env_dir=env_dir, staging=staging, home=home, tmp=tmp,
                           routes=routes)


def builtin_providers() -> list[ContainmentProvider]:
    from agentprov_core.backend.sandbox import profile
    from agentprov_core.backend.sandbox.sbpl import profile_sha256 as sbpl_sha256

    return [
        ContainmentProvider(name="sandbox-exec", recorded_as="sandbox_exec",
                            platforms=("darwin",), declared_by="probe",
                            summary="enforced; accepted only with a passed build-time probe",
                            probe_key="sandbox_exec", profile_sha256=sbpl_sha256()),
        ContainmentProvider(name="bwrap", recorded_as="bwrap", platforms=("linux",),
                            declared_by="probe",
                            summary="enforced by bubblewrap; accepted only with a passed "
                                    "build-time probe",
                            probe_key="bwrap", probe="agentprov_core.backend.probe:run",
                            wrap="agentprov_core.backend.containment:wrap_bwrap",
                            stale="agentprov_core.backend.probe:stale",
                            profile_sha256=profile.profile_sha256()),
        ContainmentProvider(name="dedicated-user", recorded_as="dedicated_user",
                            platforms=("any",), declared_by="operator",
                            summary="declared, not enforced: the run executes as a dedicated OS user"),
        ContainmentProvider(name="vm", recorded_as="vm", platforms=("any",),
                            declared_by="operator",
                            summary="declared, not enforced: the run executes inside a virtual machine"),
    ]
