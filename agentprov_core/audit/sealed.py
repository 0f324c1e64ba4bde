"""A sealed corpus, ``agentprov-corpus/0.3`` (docs/formats/sealed-corpus-0.3.md): its leaves,
its statement, and ``verify``'s level ``sealed``.

A sealed corpus is the working corpus's files, unchanged (without ``.lock`` and
``staging/``), plus the release's ``corpus-spec.toml`` and ``licences/NAME``, plus:

- ``seal/tree.json``: the leaves of an RFC 9162 Merkle tree (:mod:`agentprov_core.base.merkle`)
  and its head. A leaf is a stored file, ``(path, sha256)``, or one line of a file a run
  appends to (``ledger.jsonl#L3``: the ledger, the index, the preflight ledger), so that a
  later release of the same corpus only adds leaves. The leaf's data is the
  ``sha256sum`` line ``"<sha256>  <name>"`` (UTF-8, no newline). The manifest, which every
  run rewrites, is no leaf: its sha256 is in the statement. Leaves are in the order of the
  release before (``previous``), then the new ones sorted by path and line.
- ``seal/statement.dsse.json``: a DSSE envelope (:mod:`agentprov_core.base.dsse`) over an
  in-toto Statement v1 whose subject is the tree head and whose predicate
  (:data:`PREDICATE_TYPE`) says what a reader needs to judge the corpus without opening it.
- ``checksums.sha256``: ``sha256sum -c`` lines for every other file.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentprov_core.base import dsse, merkle
from agentprov_core.corpus.snapshot import APPENDED, LOCK

FORMAT = "agentprov-corpus/0.3"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "urn:agentprov:predicate:sealed-corpus:0.1"
TREE_FORMAT = "agentprov-merkle/0.1"
CHECKSUMS = "checksums.sha256"
TREE = "seal/tree.json"
ENVELOPE = "seal/statement.dsse.json"
MANIFEST = "manifest.json"
#: not sealed: the run's lock and its staging area
LEFT_OUT = (LOCK, "staging")
#: sealed but no leaf: the seal itself and the manifest (rewritten by every run)
NOT_LEAVES = (CHECKSUMS, TREE, ENVELOPE, MANIFEST)
CHUNK = 1 << 20
WORKERS = 2  # hashing threads (hashlib releases the GIL)


def is_sealed(root: Path) -> bool:
    return (root / "seal").is_dir() or (root / CHECKSUMS).is_file()


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def leaf_data(name: str, sha: str) -> bytes:
    return f"{sha}  {name}".encode()


def leaf_hashes(leaves: list[tuple[str, str]]) -> list[bytes]:
    return [merkle.leaf_hash(leaf_data(n, s)) for n, s in leaves]


def sort_key(name: str) -> tuple[str, int]:
    path, _, line = name.partition("#L")
    return path, int(line) if line.isdigit() else 0


def unsealable_name(rel: str) -> str | None:
    """Why a path cannot be a leaf or a ``sha256sum`` line (None when it can)."""
    if any(not c.isprintable() or c == "\\" for c in rel) or "#L" in rel:
        return f"the file name {rel!r} holds a control character, a backslash or '#L'"
    return None


def walk(root: Path, skip: tuple[str, ...] = ()) -> Iterator[tuple[str, os.DirEntry]]:
    """``(relative path, entry)`` of every entry under ``root`` but the top-level names
    ``skip``, directories entered, symlinks and other non-files yielded as they are (never
    followed)."""
    stack = [("", str(root))]
    while stack:
        prefix, d = stack.pop()
        with os.scandir(d) as it:
            entries = sorted(it, key=lambda e: e.name)
        for e in entries:
            rel = prefix + e.name
            if not prefix and e.name in skip:
                continue
            if e.is_dir(follow_symlinks=False):
                stack.append((rel + "/", e.path))
            else:
                yield rel, e


def line_leaves(rel: str, data: bytes) -> list[tuple[str, str]]:
    """One leaf per line (its newline included) of a file a run appends to."""
    out = []
    for n, line in enumerate(data.splitlines(keepends=True), 1):
        out.append((f"{rel}#L{n}", hashlib.sha256(line).hexdigest()))
    return out


def leaves_of(files: dict[str, str], read: Any) -> list[tuple[str, str]]:
    """The leaves of the files ``{relative path: sha256}`` (``read(rel)`` gives the bytes of
    an appended file), sorted by path and line."""
    out: list[tuple[str, str]] = []
    for rel, sha in files.items():
        if rel in NOT_LEAVES:
            continue
        if rel in APPENDED:
            out.extend(line_leaves(rel, read(rel)))
        else:
            out.append((rel, sha))
    out.sort(key=lambda leaf: sort_key(leaf[0]))
    return out


def statement(subject_name: str, head: bytes, predicate: dict[str, Any]) -> bytes:
    doc = {"_type": STATEMENT_TYPE,
           "subject": [{"name": subject_name, "digest": {"sha256": head.hex()}}],
           "predicateType": PREDICATE_TYPE, "predicate": predicate}
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode("utf-8")


# ------------------------------------------------------------------------- verification
@dataclass
class SealedReport:
    """The findings of level ``sealed`` (kind failed or unverified, as level chain's)."""

    findings: list[tuple[str, str, str, str]] = field(default_factory=list)
    signer: str | None = None  # the fingerprint of the key that signed, when one did
    tree_size: int = 0
    head: str = ""
    version: str = ""

    def add(self, kind: str, code: str, path: str, message: str) -> None:
        self.findings.append((kind, code, path, message))

    def fail(self, code: str, path: str, message: str) -> None:
        self.add("failed", code, path, message)

    @property
    def result(self) -> str:
        kinds = {f[0] for f in self.findings}
        return "failed" if "failed" in kinds else "unverified" if kinds else "passed"

    def line(self, level: str = "level sealed") -> str:
        failed = sum(1 for f in self.findings if f[0] == "failed")
        tail = f"; {failed} failed, {len(self.findings) - failed} unverified" if (
            self.findings) else ""
        return f"agentprov verify: {level}: {self.result}{tail}"


@dataclass
class Statement:
    head: bytes
    size: int
    predicate: dict[str, Any]


def read_statement(data: bytes, report: SealedReport, where: str,
                   trusted: Any | None) -> Statement | None:
    """The statement of envelope bytes ``data``, its signature judged against ``trusted``
    (an Ed25519 public key, or None); findings go to ``report``."""
    try:
        env = dsse.parse(data)
    except ValueError as exc:
        report.fail("sealed.envelope", where, f"not a DSSE envelope: {exc}")
        return None
    check_signature(env, report, where, trusted)
    try:
        doc = json.loads(env.payload.decode("utf-8"))
        subject = doc["subject"][0]["digest"]["sha256"]
        pred = doc["predicate"]
        head = bytes.fromhex(subject)
        size = int(pred["tree"]["size"])
        if (doc["_type"] != STATEMENT_TYPE or doc["predicateType"] != PREDICATE_TYPE
                or env.payload_type != dsse.INTOTO or len(head) != 32
                or pred["tree"]["root_sha256"] != subject):
            raise ValueError("not an agentprov sealed-corpus statement")
    except (ValueError, KeyError, TypeError, IndexError, UnicodeDecodeError) as exc:
        report.fail("sealed.statement", where,
                    f"the envelope's payload is not an in-toto statement of "
                    f"{PREDICATE_TYPE} ({type(exc).__name__}: {exc})")
        return None
    report.tree_size, report.head = size, head.hex()
    report.version = str((pred.get("corpus") or {}).get("version", ""))
    return Statement(head, size, pred)


def check_signature(env: dsse.Envelope, report: SealedReport, where: str,
                    trusted: Any | None) -> None:
    if not env.signatures:
        report.add("unverified", "sealed.unsigned", where,
                   "the seal is unsigned: nothing says who sealed it")
        return
    keyids = sorted({k for k, _ in env.signatures})
    report.signer = keyids[0]
    if trusted is None:
        report.add("unverified", "sealed.untrusted_key", where,
                   f"signed by an untrusted key {', '.join(keyids)} (no --trusted-key given)")
        return
    fp = dsse.fingerprint(dsse.public_raw(trusted))
    if env.signed_by(trusted):
        report.signer = fp
        return
    if fp in keyids:
        report.fail("sealed.signature", where,
                    f"the signature of key {fp} does not verify: the statement was altered "
                    "after it was signed, or the signature was")
        return
    report.add("unverified", "sealed.untrusted_key", where,
               f"signed by an untrusted key {', '.join(keyids)}, not the trusted key {fp}")


def _read_checksums(root: Path, report: SealedReport) -> dict[str, str] | None:
    try:
        text = (root / CHECKSUMS).read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        report.fail("sealed.checksums", CHECKSUMS, f"not readable ({exc})")
        return None
    listed: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        sha, sep, rel = line.partition("  ")
        if not sep or len(sha) != 64 or rel in listed:
            report.fail("sealed.checksums", CHECKSUMS,
                        f"line {n} is not a sha256sum line (or repeats a file)")
            continue
        listed[rel] = sha
    return listed


def verify_sealed(root: Path, trusted: Any | None,
                  known: dict[str, str] | None = None) -> SealedReport:
    """Level ``sealed``: every file against ``checksums.sha256`` and the tree, the tree head
    against the statement, the manifest against the statement, the signature against
    ``trusted``, and a release's consistency proof from the one before it.

    :param known: the sha256 of files level chain read in this same ``verify``, by
        relative path: those files are not read a second time; every other file is."""
    report = SealedReport()
    try:
        env_bytes = (root / ENVELOPE).read_bytes()
    except OSError:
        report.fail("sealed.envelope", ENVELOPE, "the sealed corpus has no statement envelope")
        env_bytes = None
    st = read_statement(env_bytes, report, ENVELOPE, trusted) if env_bytes is not None else None
    paths: dict[str, str] = {}
    for rel, e in walk(root):
        if not e.is_file(follow_symlinks=False):
            report.fail("sealed.file_added", rel, "not a regular file (a symlink or a device "
                        "is never sealed)")
        elif rel != CHECKSUMS:
            paths[rel] = e.path
    known = known or {}
    actual = {rel: known[rel] for rel in paths if rel in known}
    todo = {rel: p for rel, p in paths.items() if rel not in known}
    with ThreadPoolExecutor(WORKERS, thread_name_prefix="sealed") as pool:
        actual.update(zip(todo, pool.map(sha256_file, todo.values()), strict=True))
    listed = _read_checksums(root, report)
    if listed is not None:
        for rel in sorted(listed.keys() - actual.keys()):
            report.fail("sealed.file_removed", rel,
                        "checksums.sha256 lists it and the corpus does not hold it")
        for rel in sorted(actual.keys() - listed.keys()):
            report.fail("sealed.file_added", rel,
                        "the corpus holds it and checksums.sha256 does not list it")
        for rel in sorted(actual.keys() & listed.keys()):
            if actual[rel] != listed[rel]:
                report.fail("sealed.file_changed", rel,
                            "its sha256 is not the one checksums.sha256 records")
    if st is None:
        return report
    _check_tree(root, actual, st, report)
    return report


def _check_tree(root: Path, actual: dict[str, str], st: Statement,
                report: SealedReport) -> None:
    want_manifest = (st.predicate.get("manifest") or {}).get("sha256")
    if actual.get(MANIFEST) != want_manifest:
        report.fail("sealed.file_changed", MANIFEST,
                    "its sha256 is not the one the signed statement records")
    try:
        tree = json.loads((root / TREE).read_bytes())
        recorded = [(str(n), str(s)) for n, s in tree["leaves"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        report.fail("sealed.tree_head", TREE, f"the tree's leaves are not readable ({exc})")
        recorded = []
    now = dict(leaves_of(actual, lambda rel: (root / rel).read_bytes()))
    sealed_names = {n for n, _ in recorded}
    order = [n for n, _ in recorded if n in now]
    extra = sorted((n for n in now if n not in sealed_names), key=sort_key)
    for n, s in recorded:
        if n not in now:
            report.fail("sealed.file_removed", n, "a leaf of the sealed tree is gone")
        elif now[n] != s:
            report.fail("sealed.file_changed", n,
                        "its sha256 is not the one of its leaf in the sealed tree")
    for n in extra:
        report.fail("sealed.file_added", n, "not a leaf of the sealed tree")
    head = merkle.root(leaf_hashes([(n, now[n]) for n in order + extra]))
    if head != st.head or len(order) + len(extra) != st.size:
        report.fail("sealed.tree_head", TREE,
                    f"the tree head of the stored files ({head.hex()[:16]}…, "
                    f"{len(order) + len(extra)} leaves) is not the signed statement's "
                    f"({st.head.hex()[:16]}…, {st.size} leaves)")
    prev = st.predicate.get("previous")
    if prev is not None:
        check_consistency(prev, st, report)


def check_consistency(prev: dict[str, Any], st: Statement, report: SealedReport) -> None:
    try:
        size1 = int(prev["tree_size"])
        head1 = bytes.fromhex(prev["root_sha256"])
        proof = [bytes.fromhex(p) for p in prev["consistency"]]
        ok = merkle.verify_consistency(size1, st.size, head1, st.head, proof)
    except (KeyError, TypeError, ValueError):
        ok = False
    if not ok:
        report.fail("sealed.consistency", ENVELOPE,
                    f"the consistency proof from release {prev.get('version')!r} does not hold: "
                    "this release rewrote or dropped something of that one")


def previous_of(root: Path) -> tuple[Statement, list[tuple[str, str]]]:
    """The statement and the leaves of an earlier release (for the next one's sealing and
    its consistency proof); ``ValueError`` when ``root`` is not a sealed corpus that
    verifies."""
    report = verify_sealed(root, None)
    failed = [f for f in report.findings if f[0] == "failed"]
    if failed:
        raise ValueError(f"it does not verify ({failed[0][1]} at {failed[0][2]}: "
                         f"{failed[0][3]})")
    st = read_statement((root / ENVELOPE).read_bytes(), SealedReport(), ENVELOPE, None)
    assert st is not None
    tree = json.loads((root / TREE).read_bytes())
    return st, [(str(n), str(s)) for n, s in tree["leaves"]]
