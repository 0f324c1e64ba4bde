"""T0's worker sessions for a run: hello checked against the marker, the catalogue the
installed benchmark serves, and the plan the worker accepts (step 5 and 6 of R-16)."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from agentprov_core.backend import environments
from agentprov_core.backend.envlock import hold
from agentprov_core.backend.marker import Marker
from agentprov_core.catalogue import Catalogue
from agentprov_core.errors import AgentprovError
from agentprov_core.source import Source, SourceMeta

if TYPE_CHECKING:
    from agentprov_core.backend.workerclient import Worker
    from agentprov_core.plan.plans import Cell

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
    environments.check_worker_sources(hello, m.environment_id, backend, m)


def check_recorded_catalogue(env_dir: Path, m: Marker, source: str) -> None:
    """The catalogue recorded at build time must still be the one the marker hashed."""
    from agentprov_core.base.digests import file_sha256

    rel = f"agentprov/catalogue-{source}.json"
    p = env_dir / rel
    if rel in m.guarded and (not p.is_file() or file_sha256(p) != m.guarded[rel]):
        raise AgentprovError("cli.environment.identity", env_id=m.environment_id,
                             what=f"{rel} changed", backend=m.backend)


def check_dataset(env_dir: Path, m: Marker, meta: SourceMeta) -> None:
    """The dataset the build copied in must still be the one the marker records, every file
    re-hashed (step 5's dataset identity check, exit 3 naming the file)."""
    from agentprov_core.backend import datasets, projects

    loc = projects.locate(meta.backend)
    spec = loc.entry.project.dataset if loc is not None else None
    if spec is None or m.dataset is None:
        return
    if diffs := datasets.check_env(env_dir, spec, m.dataset):
        raise AgentprovError("cli.environment.identity", env_id=m.environment_id,
                             what="; ".join(diffs[:3]), backend=m.backend)


@contextlib.contextmanager
def _checked_worker(meta: SourceMeta, env_id: str, m: Marker) -> Iterator[tuple[Worker, dict]]:
    """A worker of the environment, with no keys and no network, its hello checked against
    the marker ``m``; the environment's lock held shared while it runs."""
    from agentprov_core.backend.workerclient import Worker

    env_dir = environments.environment_dir(env_id)
    check_recorded_catalogue(env_dir, m, meta.name)
    check_dataset(env_dir, m, meta)
    with hold(env_id, shared=True), \
            tempfile.TemporaryDirectory(prefix="agentprov-") as staging, \
            Worker(env_id, env_dir, Path(staging), network=False) as w:
        hello = w.request("hello")
        check_hello(hello, m, meta.backend or "")
        yield w, hello


def recorded_catalogue(src: Source) -> Catalogue | None:
    """The catalogue the source's built environment recorded from its worker at build time
    (``agentprov/catalogue-SOURCE.json``, its sha256 in the marker), which a run plans
    with, as ``--catalogue`` prints the worker's: ``None`` when no environment is built,
    its worker does not serve the source, or the recorded file is not the one the marker
    hashed (step 5 then refuses the environment, exit 3)."""
    import hashlib

    from agentprov_core.backend import marker as markermod

    meta = src.meta
    try:
        env_dir = environments.environment_dir(environments.environment_id(meta))
        m = markermod.read(env_dir)
        rel = f"agentprov/catalogue-{meta.name}.json"
        data = (env_dir / rel).read_bytes() if meta.name in m.hello.get("sources", []) \
            else b""
    except (AgentprovError, OSError, ValueError):
        return None
    if not data or hashlib.sha256(data).hexdigest() != m.guarded.get(rel):
        return None
    try:
        return msgspec.json.decode(data, type=Catalogue)
    except msgspec.DecodeError:
        return None


def worker_catalogue(src: Source) -> Catalogue | None:
    """The catalogue served by the source's built environment, or ``None`` when the
    environment is not built (the plugin's committed catalogue then answers)."""
    meta = src.meta
    try:
        env_id = environments.environment_id(meta)
    except AgentprovError:
        return None
    if not environments.environment_dir(env_id).is_dir():
        return None
    m = environments.read_marker(meta, env_id)
    if meta.name not in m.hello.get("sources", []):
        return None
    with _checked_worker(meta, env_id, m) as (w, _):
        doc = w.request("catalogue", source=meta.name)
    return msgspec.convert(doc, type=Catalogue)


class PlanCheck:
    """The worker of a dry run, started for hello, catalogue and plan only (no keys, no
    network): what the installed benchmark serves of a source, asked by the caller in turn
    (:func:`plan_check`)."""

    def __init__(self, worker: Worker, source: str, hello: dict) -> None:
        self._worker, self.source, self.hello = worker, source, hello

    @property
    def serves(self) -> bool:
        """The worker serves the source (its catalogue and plans)."""
        return self.source in self.hello.get("sources", [])

    def catalogue_document(self) -> object:
        """The worker's reply to ``catalogue``, as it sent it (untrusted: not yet converted)."""
        return self._worker.request("catalogue", source=self.source)

    def catalogue(self) -> Catalogue:
        """The source's catalogue, as the installed benchmark holds it."""
        return msgspec.convert(self.catalogue_document(), type=Catalogue)

    def plan_problems(self, benchmark_version: str | None, cells: Sequence[Cell],
                      inspect: dict | None = None) -> list[str]:
        """What the worker finds wrong with a plan's cells; empty when it accepts them all.

        :param inspect: an Inspect plan's ``task`` and ``split`` (:func:`inspect_request`),
            which its sample cells do not name."""
        extra = {"inspect": inspect} if inspect is not None else {}
        res = self._worker.request("plan", source=self.source,
                                   benchmark_version=benchmark_version,
                                   cells=[c.row() for c in cells], **extra)
        return res["problems"]


def inspect_request(doc) -> dict | None:
    """The ``inspect`` part of a ``plan`` request for a plan document: its task and split
    (``None``: the task's default split), or ``None`` for a plan of suites."""
    insp = getattr(doc, "inspect", None)
    if insp is None:
        return None
    split = insp.split or insp.params.get("split")
    return {"task": insp.task, "split": str(split) if split is not None else None}


@contextlib.contextmanager
def plan_check(meta: SourceMeta, env_id: str) -> Iterator[PlanCheck]:
    """The dry run's worker of environment ``env_id`` for source ``meta``, its hello checked
    against the marker (exit 3 when they differ)."""
    m = environments.read_marker(meta, env_id)
    with _checked_worker(meta, env_id, m) as (w, hello):
        yield PlanCheck(w, meta.name, hello)
