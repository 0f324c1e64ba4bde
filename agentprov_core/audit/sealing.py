"""``agentprov package``: seal a finished live corpus as ``agentprov-corpus/0.3``
(:mod:`agentprov_core.audit.sealed` says what a sealed corpus holds).

What may be sealed, checked in this order, each refusal exit 4 with nothing written:
the corpus is not held by a run (its ``.lock``) and no unit is in flight (``staging/`` is
empty, and the manifest records how the last campaign ended); ``verify`` finds nothing
failed; ``validate --strict`` passes; the manifest records what a reader is told (corpus
id, source, backend identity, plans, configurations, producer) and, for a corpus that is
not ``test_only``, the consent of its runs; no symlink or special file is inside. A
scripted or ``test_only`` corpus seals as such: its predicate says ``test_only`` and
``supports_live_capture_claim: false``.

The sealed corpus is written to a new directory beside the output (``.NAME.sealing-*``),
renamed into place only when it is complete: a refusal or a crash leaves nothing at the
output path. An output named ``NAME.tar`` is that directory written as one deterministic
archive (:mod:`agentprov_core.audit.archive`), renamed into place the same way.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from agentprov_core.audit import archive, sealed
from agentprov_core.base import dsse, merkle
from agentprov_core.corpus.opening import OpenCorpus
from agentprov_core.errors import AgentprovError
from agentprov_core.evidence.validated import FILE as VALIDATED

#: not sealed, beside what a sealed corpus never holds (``sealed.LEFT_OUT``): T0's record of
#: clean validations, which only spares ``package`` re-validating (a reader of the release
#: validates it with ``validate --strict``, which never takes the record)
LEFT_OUT = (*sealed.LEFT_OUT, VALIDATED)
#: what the worker keeps in staging/ beside the sessions: its home and its stderr
WORKER_FILES = ("home", "worker.stderr")
BATCH = 64  # files copied per task of the copying threads
#: how far a file's ctime may lag the clock (the kernel stamps it with its coarse clock,
#: one tick behind at most: 10 ms at the slowest tick rate)
CLOCK_SLACK_NS = 20_000_000
REQUIRED = ("corpus_id", "source", "backend_identity", "plans", "config_digests", "producer")


@dataclass
class Release:
    corpus: OpenCorpus
    version: str
    spec: Path
    licences: list[tuple[str, Path]]
    out: Path
    signing_key: Any | None  # an Ed25519 private key, or None: unsigned
    previous: Path | None = None
    #: what ``verify`` read (:func:`check_verifies`): those files are copied by the
    #: kernel and not hashed again
    verified: Verified | None = None


@dataclass
class Verified:
    """The sha256 of the files ``verify`` read, by relative path, and the time (ns since
    the epoch, less the file system's clock granularity) before it began: a file whose
    status changed after ``since`` may not be the file it read."""

    digests: dict[str, str]
    since: int

    @staticmethod
    def start() -> Verified:
        return Verified({}, time.time_ns() - CLOCK_SLACK_NS)


def _refuse(code: str, c: OpenCorpus, what: str, **extra: Any) -> AgentprovError:
    return AgentprovError(code, corpus=c.root, what=what, **extra)


def _ledgered(root: Path) -> set[str]:
    """The sessions the ledger and the preflight ledger record (a session directory kept by
    --keep-staging, or quarantined, is ingested: only one they do not record is in flight)."""
    out: set[str] = set()
    for rel in ("ledger.jsonl", "preflight/ledger.jsonl"):
        try:
            lines = (root / rel).read_bytes().splitlines()
        except OSError:
            continue
        for line in lines:
            try:
                sid = json.loads(line).get("session_id")
            except (ValueError, AttributeError):
                continue
            if isinstance(sid, str):
                out.add(sid)
    return out


def check_finished(c: OpenCorpus) -> None:
    from agentprov_core.corpus import snapshot

    note = snapshot.take(c.root).note()
    if note is not None:
        raise _refuse("package.refused.unfinished", c, f"a run holds it ({note})")
    staging = c.root / "staging"
    held = sorted(p.name for p in staging.iterdir() if p.is_dir() and p.name not in
                  WORKER_FILES) if staging.is_dir() else []
    if held:
        ingested = _ledgered(c.root)
        held = [s for s in held if s not in ingested]
    if held:
        raise _refuse("package.refused.unfinished", c,
                      f"a unit is in flight (staging/ holds {', '.join(held[:3])}"
                      f"{', …' if len(held) > 3 else ''}: a session a run has not ingested)")
    if not c.manifest.get("stops"):
        raise _refuse("package.refused.unfinished", c,
                      "manifest.json records no end of a campaign (stops): a run was cut "
                      "short before it closed the corpus")


def check_contents(c: OpenCorpus) -> None:
    """What a sealed corpus must hold and say, and no file that cannot be sealed."""
    unsealable = "package.refused.unsealable"
    for rel, e in sealed.walk(c.root, LEFT_OUT):
        if not e.is_file(follow_symlinks=False):
            raise _refuse(unsealable, c, f"{rel} is a symlink or a special file, which is "
                          "never sealed", fix="replace it by the file itself, or remove it")
        if (why := sealed.unsealable_name(rel)) is not None:
            raise _refuse(unsealable, c, why, fix="rename the file")
    m = c.manifest
    missing = [k for k in REQUIRED if not m.get(k)]
    if missing:
        raise _refuse(unsealable, c, f"manifest.json does not record {', '.join(missing)}",
                      fix="seal a corpus a run of this agentprov wrote")
    if m.get("test_only") is not True and not (m.get("live") or {}).get("consent"):
        raise _refuse(unsealable, c, "manifest.json records no consent (live.consent) for "
                      "a corpus that is not test_only",
                      fix="seal a corpus whose runs recorded their consent")


def check_verifies(c: OpenCorpus) -> Verified:
    """``verify`` finds nothing failed and ``validate --strict`` passes; returns what
    verify read (what :func:`seal` copies without hashing).

    ``validate --strict`` takes the digests verify read (its linkage reads no file again)
    and passes each execution T0 recorded as validated clean by this validator whose
    files still have the digests recorded (:mod:`agentprov_core.evidence.validated`);
    every other execution is validated in full, in two processes."""
    from agentprov_core.audit.validation import Run
    from agentprov_core.audit.verification import verify_corpus

    verified = Verified.start()
    read = verified.digests
    report = verify_corpus(c.root, read)
    if report.failed:
        f = report.failed[0]
        raise _refuse("package.refused.unsealable", c,
                      f"verify fails ({len(report.failed)} failed; first: {f.code} at "
                      f"{f.path}: {f.message})",
                      fix=f"agentprov verify --corpus {c.root} lists what fails")
    run = Run(c.root, strict=True, release=False, skip_prov=False, fmt="json",
              echo=lambda *a, **k: None, known=read, recorded=True)
    if run.corpus(workers=sealed.WORKERS):
        raise _refuse("package.refused.unsealable", c,
                      "validate --strict fails",
                      fix=f"agentprov validate --corpus {c.root} --strict lists what fails")
    return verified


def _counts(entries: list[Any]) -> dict[str, Any]:
    """The executions by outcome, verdict and validation, from the index."""
    return {"executions": len(entries),
            "by_status": dict(sorted(Counter(e.status for e in entries).items())),
            "by_live_vs_native": dict(sorted(Counter(e.live_vs_native
                                                     for e in entries).items())),
            "by_validation": dict(sorted(Counter(e.validation for e in entries).items()))}


class _Agent(msgspec.Struct):
    model: Any = msgspec.UNSET


class _Header(msgspec.Struct):
    agent: _Agent


class _Models(msgspec.Struct):
    """The one field of an AER the predicate reads (the rest is skipped, not decoded)."""

    header: _Header


def _models(root: Path, entries: list[Any]) -> list[str]:
    dec = msgspec.json.Decoder(_Models)
    base = f"{root}{os.sep}executions{os.sep}"
    seen: set[str] = set()
    for e in entries:
        try:
            with open(f"{base}{e.execution_id}{os.sep}aer.json", "rb") as f:
                model = dec.decode(f.read()).header.agent.model
        except (OSError, msgspec.DecodeError, RecursionError):
            continue
        if model is not msgspec.UNSET:
            seen.add(str(model))
    return sorted(seen)


def predicate(r: Release, files: dict[str, str], size: int, head: bytes,
              previous: dict[str, Any] | None) -> dict[str, Any]:
    from agentprov_core import __version__
    from agentprov_core.evidence.executions import Executions

    entries = Executions(r.corpus.root).entries()
    m = r.corpus.manifest
    live = m.get("live") or {}
    ident = m.get("backend_identity") or {}
    test_only = bool(m.get("test_only"))
    return {
        "format": sealed.FORMAT,
        "corpus": {"id": r.corpus.corpus_id, "version": r.version,
                   "source": m.get("source"), "profile": m.get("profile"),
                   "backend": m.get("backend"), "manifest_format": m.get("format"),
                   "created_at": m.get("created_at"), "updated_at": m.get("updated_at"),
                   "partial": bool(m.get("partial"))},
        "test_only": test_only, "synthetic": bool(m.get("synthetic")),
        "supports_live_capture_claim": False if test_only else None,
        "manifest": {"path": sealed.MANIFEST, "sha256": files[sealed.MANIFEST]},
        "spec": {"path": "corpus-spec.toml", "sha256": files["corpus-spec.toml"]},
        "licences": [{"name": n, "path": f"licences/{n}", "sha256": files[f"licences/{n}"]}
                     for n, _ in r.licences],
        "plans": m.get("plans"), "config_digests": m.get("config_digests"),
        "backend_identity": {k: ident.get(k) for k in ("environment_id", "identity_sha256",
                                                        "lock_sha256", "pinned_commit")},
        "endpoint_class": live.get("endpoint_class"), "transport": live.get("transport"),
        "llm_element": live.get("llm_element"), "models": _models(r.corpus.root, entries),
        "counts": _counts(entries), "stops": m.get("stops"),
        "caps": live.get("caps"), "consent": live.get("consent") or [],
        "canary": live.get("canary"), "quality": live.get("quality"),
        "test_overrides": live.get("test_overrides") or [],
        "producer": {"sealed_by": {"agentprov": __version__}, "corpus": m.get("producer"),
                     "plugins": m.get("plugins") or []},
        "tree": {"size": size, "root_sha256": head.hex(), "hash": "sha256",
                 "leaf": "RFC 9162 leaf hash of the UTF-8 line '<sha256>  <name>'"},
        "previous": previous,
    }


def _copy(src: str | Path, dst: str | Path) -> str:
    """Copy one regular file (never through a link) to the new file ``dst``, with its
    permission bits; returns the sha256 of the bytes copied, hashed as they are read."""
    fi, st = _open_regular(src)
    try:
        fo = _create(dst)
        try:
            h = hashlib.sha256()
            while chunk := os.read(fi, sealed.CHUNK):
                h.update(chunk)
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fo, view):]
            os.fchmod(fo, stat.S_IMODE(st.st_mode))
        finally:
            os.close(fo)
    finally:
        os.close(fi)
    return h.hexdigest()


def _open_regular(src: str | Path) -> tuple[int, os.stat_result]:
    """A read descriptor of the regular file ``src`` (never through a link), and its
    status; ``package.refused.unsealable`` when it is anything else."""
    fi = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    st = os.fstat(fi)
    if not stat.S_ISREG(st.st_mode):
        os.close(fi)
        raise AgentprovError("package.refused.unsealable", corpus=src,
                             what="not a regular file, which is never sealed",
                             fix="replace it by the file itself, or remove it")
    return fi, st


def _create(dst: str | Path) -> int:
    return os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                   0o600)


def _copy_known(src: str | Path, dst: str | Path, since: int) -> None:
    """Copy one regular file whose sha256 was read after ``since`` to the new file
    ``dst``, with its permission bits, in the kernel (``copy_file_range``: the bytes never
    enter Python); ``package.refused.unsealable`` when its status changed after ``since``
    (written, or its mode changed, since that read began: its digest may not be its
    bytes')."""
    fi, st = _open_regular(src)
    try:
        fo = _create(dst)
        try:
            while os.copy_file_range(fi, fo, max(st.st_size, sealed.CHUNK)):
                pass
            os.fchmod(fo, stat.S_IMODE(st.st_mode))
        finally:
            os.close(fo)
        if os.fstat(fi).st_ctime_ns >= since:
            raise AgentprovError("package.refused.unsealable", corpus=src,
                                 what="changed while the corpus was being sealed",
                                 fix="seal again once nothing writes to the corpus")
    finally:
        os.close(fi)


def _order(leaves: list[tuple[str, str]], prev: list[tuple[str, str]] | None,
           r: Release) -> list[tuple[str, str]]:
    """The leaves in the order of the release before, then the new ones sorted; a leaf of
    that release missing or changed is ``package.refused.rewritten``."""
    if prev is None:
        return leaves
    now = dict(leaves)
    for n, s in prev:
        if n not in now:
            raise AgentprovError("package.refused.rewritten", corpus=r.corpus.root,
                                 previous=r.previous, what=f"{n} is gone")
        if now[n] != s:
            raise AgentprovError("package.refused.rewritten", corpus=r.corpus.root,
                                 previous=r.previous, what=f"{n} was changed")
    old = {n for n, _ in prev}
    return list(prev) + [leaf for leaf in leaves if leaf[0] not in old]


def seal(r: Release) -> dict[str, Any]:
    """Write the sealed corpus of ``r`` to ``r.out`` (a directory, or the archive of one
    when ``r.out`` ends in ``.tar``); returns what the command reports."""
    prev_st, prev_leaves = None, None
    if r.previous is not None:
        try:
            prev_st, prev_leaves = sealed.previous_of(r.previous)
        except (OSError, ValueError) as exc:
            raise AgentprovError("package.usage.option", option="--previous",
                                 value=r.previous, what=f"not a sealed corpus ({exc})") from None
    r.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{r.out.name}.sealing-", dir=r.out.parent))
    try:
        base = f"{tmp}{os.sep}"  # paths as strings: no pathlib per file
        made = {""}
        pairs: dict[str, str] = {}
        for rel, e in sealed.walk(r.corpus.root, LEFT_OUT):
            parent = rel.rpartition("/")[0]
            if parent not in made:  # one mkdir per directory, not per file
                os.makedirs(base + parent, exist_ok=True)
                made.add(parent)
            pairs[rel] = e.path
        known = r.verified.digests if r.verified else {}
        since = r.verified.since if r.verified else 0

        def copy(batch: list[str]) -> list[tuple[str, str]]:
            out = []
            for rel in batch:
                if (sha := known.get(rel)) is not None:
                    _copy_known(pairs[rel], base + rel, since)
                else:
                    sha = _copy(pairs[rel], base + rel)
                out.append((rel, sha))
            return out

        todo = list(pairs)
        batches = [todo[i:i + BATCH] for i in range(0, len(todo), BATCH)]
        with ThreadPoolExecutor(sealed.WORKERS, thread_name_prefix="seal") as pool:
            files = dict(pair for done in pool.map(copy, batches) for pair in done)
        (tmp / "licences").mkdir(exist_ok=True)
        for name, path in r.licences:
            files[f"licences/{name}"] = _copy(path, tmp / "licences" / name)
        files["corpus-spec.toml"] = _copy(r.spec, tmp / "corpus-spec.toml")
        leaves = _order(sealed.leaves_of(files, lambda rel: (tmp / rel).read_bytes()),
                        prev_leaves, r)
        hashes = sealed.leaf_hashes(leaves)
        head = merkle.root(hashes)
        previous = None
        if prev_st is not None:
            previous = {"version": prev_st.predicate["corpus"]["version"],
                        "tree_size": prev_st.size, "root_sha256": prev_st.head.hex(),
                        "consistency": [p.hex() for p in
                                        merkle.consistency_proof(prev_st.size, hashes)]
                        if prev_st.size else []}
        (tmp / "seal").mkdir()
        tree = {"format": sealed.TREE_FORMAT, "size": len(leaves), "root_sha256": head.hex(),
                "leaves": [list(leaf) for leaf in leaves]}
        (tmp / sealed.TREE).write_text(json.dumps(tree, separators=(",", ":")) + "\n")
        payload = sealed.statement(f"{r.corpus.corpus_id}@{r.version}", head,
                                   predicate(r, files, len(leaves), head, previous))
        env = dsse.envelope(payload, r.signing_key)
        (tmp / sealed.ENVELOPE).write_bytes(env.encode())
        for rel in (sealed.TREE, sealed.ENVELOPE):
            files[rel] = sealed.sha256_file(tmp / rel)
        with open(tmp / sealed.CHECKSUMS, "x", encoding="utf-8") as f:
            f.writelines(f"{files[rel]}  {rel}\n" for rel in sorted(files))
        if archive.is_archive(r.out):
            tar = tmp.with_name(tmp.name + archive.SUFFIX)
            try:
                archive.write(tmp, tar, r.out.name.removesuffix(archive.SUFFIX))
                os.rename(tar, r.out)
            except BaseException:
                tar.unlink(missing_ok=True)
                raise
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            os.rename(tmp, r.out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {"out": str(r.out), "format": sealed.FORMAT, "version": r.version,
            "files": len(files) + 1, "tree_size": len(leaves), "root_sha256": head.hex(),
            "signed_by": env.signatures[0][0] if env.signatures else None,
            "test_only": bool(r.corpus.manifest.get("test_only")),
            "previous": previous and previous["version"]}
