"""What a host that runs a campaign's cells must agree on with T0, before the first cell.

An executor that runs cells on other hosts (``--executor ray``) has each host report
:func:`node_facts` of its own installation and compares them with T0's (:func:`node_differences`):
the plan's environment built there (its id and marker: the identity the configuration
digest hashes, the lock, the defence registry and the worker package's sources), the host
libraries this agentprov installs into every environment (``agentprov-backend``,
``agentprov-capture``: their source digests), the containment the run resolved (its probe
passed in that host's marker) and the endpoint key's variable set in that host's own
environment (never its value). A host that differs is refused naming the difference.
"""

from __future__ import annotations

import os
from typing import Any

#: the facts that must be equal on every host (the others describe the host)
COMPARED = ("environment_id", "identity_sha256", "lock_sha256", "defence_registry_sha256",
            "worker_sources", "host_libraries", "containment", "key")


def node_facts(environment_id: str, containment: Any = None,
          key_variable: str | None = None) -> dict[str, Any]:
    """This host's facts for a campaign of ``environment_id`` under ``containment`` (a
    :class:`~agentprov_core.backend.containment.Recorded` or its builtins, or None) with the
    key in ``key_variable``."""
    import msgspec

    from agentprov_core.backend import containment as cm
    from agentprov_core.backend import environments, hostlibs, hostlimits
    from agentprov_core.backend import marker as markermod

    out: dict[str, Any] = {"environment_id": None, "max_jobs": hostlimits.max_jobs(),
                           "host_libraries": hostlibs.digests()}
    env_dir = environments.environment_dir(environment_id)
    try:
        m = markermod.read(env_dir)
    except FileNotFoundError:
        out["containment"] = None
        out["key"] = _key(key_variable)
        return out
    except ValueError as exc:
        out["environment_id"] = f"{environment_id} (its marker {exc})"
        return out
    out |= {"environment_id": m.environment_id, "identity_sha256": m.identity_sha256,
            "lock_sha256": m.lock_sha256,
            "defence_registry_sha256": m.defence_registry_sha256,
            "worker_sources": {k: v.get("sources_sha256")
                               for k, v in (m.path_sources or {}).items()}}
    out["containment"] = None
    if containment is not None:
        rec = msgspec.convert(containment, cm.Recorded) if isinstance(containment, dict) \
            else containment
        if cm.enforced(rec):
            names = [n for n, p in cm.providers().items() if p.recorded_as == rec.kind]
            try:
                got = cm.resolve(names[0] if names else rec.kind, m, backend=m.backend)
                out["containment"] = f"{got.kind} (probe, profile {got.profile_sha256[:12]})"
            except Exception as exc:  # noqa: BLE001 - a refusal of any kind is the difference
                out["containment"] = f"refused: {getattr(exc, 'message', exc)}"
        else:
            out["containment"] = f"{rec.kind} (declared)"
    out["key"] = _key(key_variable)
    return out


def _key(variable: str | None) -> str | None:
    if variable is None:
        return None
    return f"{variable} set" if os.environ.get(variable) else f"{variable} not set"


def node_differences(expected: dict[str, Any], got: dict[str, Any]) -> list[str]:
    """What of a host's ``got`` facts differs from T0's ``expected`` ones, each said as
    ``field: the host's (T0's)``."""
    out = []
    for k in COMPARED:
        if got.get(k) != expected.get(k):
            mine, theirs = expected.get(k), got.get(k)
            if isinstance(mine, dict) and isinstance(theirs, dict):
                keys = sorted(n for n in {*mine, *theirs} if mine.get(n) != theirs.get(n))
                out.append(f"{k} differ: " + ", ".join(
                    f"{n} {_short(theirs.get(n))} (here {_short(mine.get(n))})" for n in keys))
            else:
                out.append(f"{k} {_short(theirs)} (here {_short(mine)})")
    return out


def _short(v: Any) -> str:
    if v is None:
        return "none"
    s = str(v)
    return s[:12] + "…" if len(s) == 64 and all(c in "0123456789abcdef" for c in s) else s
