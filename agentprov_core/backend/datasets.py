"""A backend's dataset: a local copy read, checked and copied into the environment by
``agentprov backends build NAME --dataset DIR`` (never downloaded at run time).

The build reads the files of ``DIR`` that match the dataset's pattern (``**/*.json``: what
the task's loader would download; hidden directories such as a hub client's ``.cache`` are
skipped), hashes each, and checks that every file the backend names is present and holds
its count of records, before anything is built: a refusal writes nothing. Where the
pinned revision publishes a sha256 per file, every file must match it; AgentHarm's does
not, so its copy is recorded as *not verified against the revision*, and the build's
output and the marker say so. The copy goes to ``<env>/agentprov/datasets/<name>/<target>``
and its files are hashed again there; the marker's ``dataset`` records every file's sha256,
the counts, the revision, whether it was verified, and whether it is a *fixture*.

A fixture is a dataset the project generates for tests and the demo
(:mod:`agentprov_core.testing.agentharm_fixture`), in the real layout, with benign
prompts. It says so in its own files: ``AGENTPROV_FIXTURE.json`` at its root and the key
``agentprov_fixture`` in every counted file. Either mark makes the copy a fixture
(``kind: "fixture"``); the marker, the environment's identity and the build's output carry
it, so nothing built from it passes as the real dataset.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentprov_core.backendproject import BackendDataset
from agentprov_core.base import paths
from agentprov_core.base.digests import digest, file_sha256
from agentprov_core.errors import AgentprovError

FIXTURE_FILE = "AGENTPROV_FIXTURE.json"
FIXTURE_KEY = "agentprov_fixture"
FIXTURE_FORMAT = "agentprov-dataset-fixture/0.1"
NOT_VERIFIED = ("not verified against the pinned revision: {origin} publishes no per-file "
                "sha256 list, so only the layout and the counts were checked; the marker "
                "records the sha256 of every file copied")


@dataclass(frozen=True)
class Copy:
    """A dataset copy as read: where from, every file's sha256, the counts, its kind."""

    spec: BackendDataset
    directory: Path
    files: dict[str, str]
    counts: dict[str, int]
    kind: str
    fixture: dict[str, Any] | None
    verified: bool

    @property
    def sha256(self) -> str:
        """One digest over every file's path and sha256."""
        return digest(self.files)

    def note(self) -> str:
        if self.verified:
            return f"every file matches the sha256 published for revision {self.spec.revision[:8]}"
        return NOT_VERIFIED.format(origin=self.spec.origin)

    def record(self) -> dict[str, Any]:
        """What the marker records (``Marker.dataset``)."""
        return {"name": self.spec.name, "kind": self.kind, "origin": self.spec.origin,
                "revision": self.spec.revision, "target": self.spec.target,
                "verified_against_revision": self.verified, "note": self.note(),
                "fixture": self.fixture, "counts": dict(sorted(self.counts.items())),
                "files": dict(sorted(self.files.items())), "sha256": self.sha256}

    def summary(self) -> str:
        return describe(self.record())


def describe(recorded: dict[str, Any]) -> str:
    """One line of what a dataset record is: its kind, files, digest, counts and whether it
    was verified against the revision (the build's output and its dry run)."""
    what = (f"the project's FIXTURE (benign prompts; not the dataset of {recorded['origin']})"
            if recorded["kind"] == "fixture" else f"a local copy of {recorded['origin']}")
    counts = ", ".join(f"{Path(p).name} {n}" for p, n in sorted(recorded["counts"].items()))
    return (f"dataset {recorded['name']}: {what}, {len(recorded['files'])} file(s), digest "
            f"{recorded['sha256'][:16]}…; counts {counts}; {recorded['note']}")


def env_root(env_dir: Path, spec: BackendDataset) -> Path:
    """The directory the task's cache points at (``INSPECT_EVALS_CACHE_DIR``)."""
    return env_dir / "agentprov" / "datasets" / spec.name


def env_files(env_dir: Path, spec: BackendDataset) -> Path:
    """Where the copy's files lie in the environment."""
    return env_root(env_dir, spec) / spec.target


def _listed(directory: Path, pattern: str) -> list[str]:
    out = []
    for p in sorted(directory.glob(pattern)):
        rel = p.relative_to(directory)
        if p.is_file() and not any(part.startswith(".") for part in rel.parts):
            out.append(rel.as_posix())
    return out


def read(spec: BackendDataset, directory: Path) -> Copy:
    """Read and check a copy (reading only): exit 3 (``cli.environment.dataset``) naming
    the file that is missing, unreadable, holds the wrong count or differs from its
    published digest."""
    where = paths.display(directory)

    def refuse(rel: str | None, what: str) -> AgentprovError:
        return AgentprovError("cli.environment.dataset",
                              path=f"{where}/{rel}" if rel else where, what=what)

    if not directory.is_dir():
        raise refuse(None, "is not a directory")
    names = _listed(directory, spec.pattern)
    files = {rel: file_sha256(directory / rel) for rel in names}
    counts: dict[str, int] = {}
    marked = []
    for f in spec.files:
        if f.path not in files:
            raise refuse(f.path, f"is missing (the backend needs {', '.join(x.path for x in spec.files)})")
        try:
            doc = json.loads((directory / f.path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise refuse(f.path, f"is not readable JSON ({exc})") from None
        rows = doc.get(spec.records_key) if isinstance(doc, dict) else None
        if not isinstance(rows, list):
            raise refuse(f.path, f"has no list {spec.records_key!r}")
        if len(rows) != f.records:
            split = f" ({f.task} {f.split})" if f.task else ""
            raise refuse(f.path, f"holds {len(rows)} records, the catalogue counts "
                                 f"{f.records}{split}")
        ids = [r.get("id") for r in rows if isinstance(r, dict)]
        if len(set(ids)) != len(rows):
            raise refuse(f.path, "has records without an id, or repeated ids")
        counts[f.path] = len(rows)
        if isinstance(doc, dict) and doc.get(FIXTURE_KEY):
            marked.append(f.path)
    fixture = None
    if FIXTURE_FILE in files or marked:
        fixture = {"marked_files": marked, "file": FIXTURE_FILE if FIXTURE_FILE in files else None}
        if FIXTURE_FILE in files:
            try:
                fixture["declared"] = json.loads((directory / FIXTURE_FILE).read_text("utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise refuse(FIXTURE_FILE, f"is not readable JSON ({exc})") from None
    verified = False
    if spec.digests is not None and fixture is None:
        for rel, want in sorted(spec.digests.items()):
            if files.get(rel) != want:
                got = files.get(rel, "missing")
                raise refuse(rel, f"has sha256 {got[:16]}…, revision {spec.revision[:8]} "
                                  f"publishes {want[:16]}…")
        verified = True
    return Copy(spec, directory, files, counts, "fixture" if fixture else "copy", fixture,
                verified)


def provision(copy: Copy, env_dir: Path) -> dict[str, Any]:
    """Copy the files into the environment and hash them again there (a file that changed
    while being copied is refused, naming it); return the marker's record."""
    dest = env_files(env_dir, copy.spec)
    for rel, want in copy.files.items():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(copy.directory / rel, target)
        if file_sha256(target) != want:
            raise AgentprovError("cli.environment.dataset",
                                 path=f"{paths.display(copy.directory)}/{rel}",
                                 what="changed while it was copied")
    return copy.record()


def from_environment(spec: BackendDataset, env_dir: Path, recorded: dict[str, Any]) -> Copy:
    """The copy an existing environment holds, for a rebuild without ``--dataset``: read
    and checked as a new copy, and equal to what its marker records (exit 3 otherwise)."""
    copy = read(spec, env_files(env_dir, spec))
    if copy.files != recorded.get("files"):
        raise AgentprovError("cli.environment.dataset", path=paths.display(env_files(env_dir, spec)),
                             what="differs from what the environment's marker records "
                                  f"({'; '.join(check_env(env_dir, spec, recorded)[:3])})")
    return copy


def check_env(env_dir: Path, spec: BackendDataset, recorded: dict[str, Any] | None) -> list[str]:
    """What differs between the environment's dataset files and the marker's record: each
    missing, changed or added file, by its path inside the environment."""
    if recorded is None:
        return []
    base = env_files(env_dir, spec)
    shown = f"agentprov/datasets/{spec.name}/{spec.target}"
    want = recorded.get("files") or {}
    have = set(_listed(base, spec.pattern)) if base.is_dir() else set()
    out = []
    for rel in sorted(want):
        p = base / rel
        if not p.is_file():
            out.append(f"dataset file {shown}/{rel} is missing")
        elif file_sha256(p) != want[rel]:
            out.append(f"dataset file {shown}/{rel} changed")
    out += [f"dataset file {shown}/{rel} was not in the build" for rel in sorted(have - set(want))]
    return out


def catalogue_problems(spec: BackendDataset, copy: Copy, catalogues: dict[str, Any]) -> list[str]:
    """Every task split the worker's catalogue counts differently from the dataset."""
    served = {}
    for doc in catalogues.values():
        for t in (doc or {}).get("tasks", []):
            for s in t.get("splits", []):
                served[(t.get("name"), s.get("name"))] = s.get("samples")
    out = []
    for f in spec.files:
        if f.task is None:
            continue
        got = served.get((f.task, f.split))
        if got != copy.counts.get(f.path):
            out.append(f"the worker's catalogue counts {got} sample(s) in {f.task} {f.split}, "
                       f"the dataset's {f.path} holds {copy.counts.get(f.path)}")
    return out


def identity(record: dict[str, Any] | None) -> dict[str, Any] | None:
    """What of the dataset enters the environment's identity digest."""
    if record is None:
        return None
    return {"kind": record["kind"], "revision": record["revision"], "sha256": record["sha256"],
            "verified_against_revision": record["verified_against_revision"]}


def manifest_fields(recorded: dict[str, Any] | None) -> dict[str, Any]:
    """What a corpus manifest records of the environment's dataset: its identity under
    ``backend_identity.dataset``, and for a fixture ``test_only`` and ``synthetic`` (a corpus
    run on the project's fixture is never the benchmark's, whatever its model)."""
    if recorded is None:
        return {}
    out: dict[str, Any] = {"dataset": identity(recorded)}
    if recorded.get("kind") == "fixture":
        out |= {"test_only": True, "synthetic": True}
    return out

