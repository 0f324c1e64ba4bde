"""What T0 records of each execution it validated clean (``validated.jsonl``), so that
``agentprov package`` re-validates only what changed since.

A validation is a pure function of the bytes it reads (the AER, SEM and PROV graph, and the
files the linkage tier resolves) and of the validator's code. When T0 stores an execution
whose validation found nothing at all (every tier passed, no warning: what
``validate --strict`` passes), it appends one line to ``validated.jsonl`` beside the index:
the execution, the validator's identity (:func:`identity`), the sha256 of its four files
and every ``(path, sha256)`` the linkage tier resolved. The file is appended to like the
index (never rewritten; a resume appends); an execution with any finding gets no line, so
its findings always come from the validator itself.

``package`` accepts a line for an execution only when the validator identity is its own
and every digest the line names is the digest of the file as ``package`` read it
(:func:`holds`); every other execution is validated in full. A corpus without the file
(written before it existed) is validated in full.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Any

import msgspec

FILE = "validated.jsonl"
#: what ``validate`` checks, by revision: raise it with any change to the tiers' rules that
#: the code digest of :func:`identity` would not show (a dependency's behaviour)
RULES = 1


class Validated(msgspec.Struct, frozen=True, kw_only=True):
    execution_id: str
    validator: str
    aer_sha256: str
    sem_sha256: str
    prov_sha256: str
    validation_sha256: str
    linkage: list[tuple[str, str]]  # (corpus-relative path, sha256) of each linkage target


@lru_cache(maxsize=1)
def identity() -> str:
    """The validator's identity: agentprov's version, :data:`RULES`, the versions of the
    libraries the tiers parse with, and the sha256 of the source of the package that holds
    the validator (a changed line of it is another validator)."""
    from importlib.metadata import version

    from agentprov_core import __version__

    h = hashlib.sha256()
    for p in sorted(Path(__file__).parent.glob("*.py")):
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return (f"agentprov {__version__}; rules {RULES}; prov {version('prov')}; "
            f"msgspec {version('msgspec')}; code sha256:{h.hexdigest()}")


def attest(v: Any, validation: bytes, targets: list[tuple[str, str]]) -> bytes | None:
    """The line recording the clean validation ``v`` (stored as ``validation``), or None
    when it found anything, skipped a tier or has no PROV graph."""
    if (v.status != "passed" or v.prov_sha256 is None or v.execution_id is None
            or any(t.status != "passed" or t.problems for t in v.tiers)):
        return None
    return msgspec.json.encode(Validated(
        execution_id=v.execution_id, validator=identity(), aer_sha256=v.aer_sha256,
        sem_sha256=v.sem_sha256, prov_sha256=v.prov_sha256,
        validation_sha256=hashlib.sha256(validation).hexdigest(), linkage=targets)) + b"\n"


def append(root: Path, lines: list[bytes | None]) -> None:
    """Append the lines that are there (after the index lines of their executions). Not
    fsynced: a line lost in a crash costs only a re-validation."""
    data = b"".join(line for line in lines if line)
    if data:
        with open(root / FILE, "ab") as f:
            f.write(data)


def read(root: Path) -> dict[str, list[Validated]]:
    """The lines of this validator, by execution; a torn or foreign line is skipped."""
    try:
        lines = (root / FILE).read_bytes().splitlines()
    except OSError:
        return {}
    own = identity()
    dec = msgspec.json.Decoder(Validated)
    out: dict[str, list[Validated]] = {}
    for line in lines:
        try:
            rec = dec.decode(line)
        except (msgspec.DecodeError, RecursionError):
            continue
        if rec.validator == own:
            out.setdefault(rec.execution_id, []).append(rec)
    return out


def _safe(rel: str) -> bool:
    p = PurePosixPath(rel)
    return bool(rel) and not p.is_absolute() and ".." not in p.parts and "\\" not in rel


def holds(rec: Validated, entry: Any, digests: Mapping[str, str],
          sha256_of: Any) -> bool:
    """Whether ``rec`` still describes the execution of index row ``entry``: its four files
    and every linkage target have the digests it names. ``digests``: the sha256 of corpus
    files already read, by relative path; ``sha256_of(rel)`` hashes one that was not (None
    when it is not a file)."""
    base = f"executions/{entry.execution_id}/"
    for name in ("aer", "sem", "prov", "validation"):
        want = getattr(rec, f"{name}_sha256")
        if getattr(entry, f"{name}_sha256") != want or digests.get(f"{base}{name}.json") != want:
            return False
    for rel, sha in rec.linkage:
        if not _safe(rel):
            return False
        if rel.startswith("raw/") and rel != f"raw/sha256/{sha[:2]}/{sha}":
            return False
        if (digests.get(rel) or sha256_of(rel)) != sha:
            return False
    return True
