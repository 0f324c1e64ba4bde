"""The containment probe as ``agentprov backends build`` runs it in a new environment and
records it in the marker, when a build must run it again, and what ``--offline-check``
reports of it (never re-run there). The probe itself is :mod:`agentprov_core.backend.probe`.
"""

from __future__ import annotations

from pathlib import Path

from agentprov_core.backend import marker


def probe(env_dir: Path, hello: dict) -> dict[str, object]:
    """Run the probe of every enforced containment provider that has a probe key, in the
    built environment: ``not applicable`` off its platforms, ``not run`` where this build
    has no probe for it (sandbox-exec on macOS), else the probe's result (bwrap on Linux:
    17 checks, docs/containment.md)."""
    import sys

    from agentprov_core.backend import containment

    out: dict[str, object] = {}
    for prov in containment.providers().values():
        if prov.declared_by != "probe" or not prov.probe_key:
            continue
        if not prov.applies_here():
            out[prov.probe_key] = {"status": "not applicable", "platform": sys.platform}
        elif prov.probe is None:
            out[prov.probe_key] = {"status": "not run", "platform": sys.platform,
                                   "profile_sha256": prov.profile_sha256,
                                   "note": "this build cannot run the macOS probe"}
        else:
            out[prov.probe_key] = containment.run_probe(prov, env_dir, hello)
    return out


def probe_rerun(m: marker.Marker) -> list[str]:
    """Why a build must run the probe again in an environment that is already built: for
    each applicable provider with a probe, no probe or one of another profile recorded, a
    machine that changed since it ran (bubblewrap installed, removed or replaced, root or
    not, the user-namespace settings), or a probe that failed (its cause may lie outside
    what is recorded). Empty: the recorded probe stands."""
    from agentprov_core.backend import containment

    out: list[str] = []
    for prov in containment.providers().values():
        if prov.declared_by != "probe" or not prov.probe_key or prov.probe is None \
                or not prov.applies_here():
            continue
        entry = containment.recorded_probe(m, prov)
        reasons = containment.stale_reasons(prov, entry)
        if not reasons and entry is not None and entry.get("status") == "failed":
            reasons = ["its last run failed"]
        out += reasons
    return out


def probe_lines(m: marker.Marker) -> list[str]:
    """What ``--offline-check`` reports of the probe recorded at build time (never re-run):
    the recorded result, said to be stale when it no longer describes this machine."""
    from agentprov_core.backend import containment

    parts, stale = [], []
    provs = {p.probe_key: p for p in containment.providers().values() if p.probe_key}
    for key, entry in sorted((m.probe or {}).items()):
        if not isinstance(entry, dict):
            continue
        prov = provs.get(key)
        if prov is not None and prov.probe is not None and prov.applies_here():
            stale += containment.stale_reasons(prov, entry)
        name = key.replace("_", "-")
        if "checks" in entry:
            ok = sum(1 for c in entry["checks"] if c.get("passed"))
            unenforced = containment.not_enforced(entry)
            failed = [c.get("name") for c in entry["checks"]
                      if not c.get("passed") and c.get("name") not in unenforced]
            hard = entry.get("hardening") or {}
            extra = "".join([
                f"; failed: {', '.join(map(str, failed))}" if failed else "",
                f"; not enforced on this kernel: {', '.join(unenforced)}" if unenforced else "",
                ("; staging isolation: Landlock" if str(hard["staging_isolation"])
                 .startswith("landlock") else "; staging isolation: not available")
                if hard.get("staging_isolation") else "",
                _cell_protections(hard)])
            parts.append(f"{name} {entry.get('status')} ({ok}/{len(entry['checks'])} checks, "
                         f"profile {str(entry.get('profile_sha256'))[:12]}…{extra})")
        else:
            parts.append(f"{name} {entry.get('status')}")
    when = (f"recorded at build, stale: {'; '.join(stale)}; agentprov backends build "
            f"{m.backend} re-runs it" if stale else "recorded at build, not re-run")
    return [f"  containment probe ({when}): " + ("; ".join(parts) or "none recorded")]


def _cell_protections(hard: dict) -> str:
    """What keeps one cell from another, as the probe's hardening record says."""
    if "cell_signals" not in hard:
        return ""
    said = [("forkserver on a socket pair" if hard.get("cell_server") else
             "forkserver not recorded"),
            ("metadata refused" if str(hard.get("cell_metadata")).startswith("seccomp")
             else "metadata not protected"),
            ("signals scoped" if str(hard.get("cell_signals")).startswith("landlock")
             else "signals not scoped")]
    return "; cells: " + ", ".join(said)
