"""T0's worker sessions for a run: hello checked against the marker, the catalogue the
installed benchmark serves, and the plan the worker accepts (step 5 and 6 of R-16)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import msgspec

from agentprov_core.backend import build as backends
from agentprov_core.backend import environments
from agentprov_core.backend.marker import Marker
from agentprov_core.catalogue import Catalogue
from agentprov_core.errors import AgentprovError
from agentprov_core.source import Source

PROTOCOL = "agentprov-worker/0.1"


def check_hello(hello: dict, m: Marker, backend: str) -> None:
    if hello.get("protocol") != PROTOCOL:
        raise AgentprovError("cli.environment.identity", env_id=m.environment_id,
                             what=f"protocol {hello.get('protocol')!r}, this agentprov speaks "
                                  f"{PROTOCOL}", backend=backend)
    diffs = []
    want, got = m.hello.get("distributions", {}), hello.get("distributions", {})
    diffs += [f"{n} {'missing' if n not in got else 'changed'}" for n in sorted(want)
              if got.get(n) != want[n]]
    diffs += [f"{n} added" for n in sorted(set(got) - set(want))]
    for key in ("python", "defence_registry_sha256", "agentprov_backend", "agentprov_capture"):
        if hello.get(key) != m.hello.get(key):
            diffs.append(f"{key} changed")
    if diffs:
        raise AgentprovError("cli.environment.identity", env_id=m.environment_id,
                             what=", ".join(diffs[:5]), backend=backend)
    environments.check_worker_sources(hello, m.environment_id, backend)



def check_recorded_catalogue(env_dir: Path, m: Marker, source: str) -> None:
    """The catalogue recorded at build time must still be the one the marker hashed."""
    from agentprov_core.base.digests import file_sha256

    rel = f"agentprov/catalogue-{source}.json"
    p = env_dir / rel
    if rel in m.guarded and (not p.is_file() or file_sha256(p) != m.guarded[rel]):
        raise AgentprovError("cli.environment.identity", env_id=m.environment_id,
                             what=f"{rel} changed", backend=m.backend)


def worker_catalogue(src: Source) -> Catalogue | None:
    """The catalogue served by the source's built environment, or ``None`` when the
    environment is not built (the plugin's committed catalogue then answers)."""
    meta = src.meta
    try:
        env_id = environments.environment_id(meta)
    except AgentprovError:
        return None
    env_dir = environments.environment_dir(env_id)
    if not env_dir.is_dir():
        return None
    m = environments.read_marker(meta, env_id)
    if meta.name not in m.hello.get("sources", []):
        return None
    from agentprov_core.backend.workerclient import Worker

    check_recorded_catalogue(env_dir, m, meta.name)
    with backends.hold(env_id, shared=True), tempfile.TemporaryDirectory(prefix="agentprov-") as staging, \
            Worker(env_id, env_dir, Path(staging), network=False) as w:
        check_hello(w.request("hello"), m, meta.backend or "")
        doc = w.request("catalogue", source=meta.name)
    return msgspec.convert(doc, type=Catalogue)


def dry_run(p):
    """Start the worker for hello and plan only, with no keys and no network."""
    from agentprov_core.backend.workerclient import Worker
    from agentprov_core.run.prepare import with_worker_catalogue

    meta = p.source.meta
    env_id = p.plan.environment_id
    m = environments.read_marker(meta, env_id)
    env_dir = environments.environment_dir(env_id)
    check_recorded_catalogue(env_dir, m, meta.name)
    with backends.hold(env_id, shared=True), tempfile.TemporaryDirectory(prefix="agentprov-") as staging, \
            Worker(env_id, env_dir, Path(staging), network=False) as w:
        hello = w.request("hello")
        check_hello(hello, m, meta.backend or "")
        if meta.name in hello.get("sources", []):
            cat = msgspec.convert(w.request("catalogue", source=meta.name), type=Catalogue)
            p = with_worker_catalogue(p, cat)
            res = w.request("plan", source=meta.name, benchmark_version=p.plan.benchmark_version,
                            cells=[c.row() for c in p.plan.cells])
            if res["problems"]:
                more = len(res["problems"]) - 3
                raise AgentprovError("cli.usage.worker_plan",
                                     detail="; ".join(res["problems"][:3])
                                     + (f" (+{more} more)" if more > 0 else ""))
    return p
