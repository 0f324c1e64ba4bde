"""One execution of a sealed corpus, proven on its own: ``agentprov prove`` writes a bundle,
``agentprov verify --proof BUNDLE --trusted-key FILE`` checks it without the corpus.

A bundle (``agentprov-proof/0.1``, one JSON file) holds the sealed statement's envelope and,
for each leaf of the execution, its name, index, sha256, bytes (base64) and RFC 9162
inclusion proof against the signed tree head. The execution's leaves are its files
(``executions/<id>/*``), its line of the index, its attempt's line of the ledger, and the
raw files its AER cites (capture log, native log). A reader checks the signature, each
leaf's bytes against its sha256, and each inclusion proof against the head: this is how
one trajectory is published from a corpus that stays private.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

from agentprov_core.audit import sealed
from agentprov_core.base import merkle
from agentprov_core.errors import AgentprovError

FORMAT = "agentprov-proof/0.1"
MAX_BYTES = 64 << 20


class _Reader:
    """The bytes of leaves of one sealed corpus; each appended file is read and split once."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.lines: dict[str, list[bytes]] = {}

    def lines_of(self, path: str) -> list[bytes]:
        if path not in self.lines:
            self.lines[path] = (self.root / path).read_bytes().splitlines(keepends=True)
        return self.lines[path]

    def __call__(self, name: str) -> bytes:
        path, _, line = name.partition("#L")
        return self.lines_of(path)[int(line) - 1] if line else (self.root / path).read_bytes()


def _names(read: _Reader, leaves: list[tuple[str, str]], execution_id: str) -> list[str]:
    """The leaves of one execution: its files, its index line, its attempt's ledger line and
    the raw files its AER cites."""
    from agentprov_core.evidence.executions import Executions

    ex = Executions(read.root)
    entry = next((e for e in ex.entries() if e.execution_id == execution_id), None)
    if entry is None:
        raise AgentprovError("package.usage.option", option="--execution", value=execution_id,
                             what=f"no execution of that id in {read.root}'s index")
    names = {n for n, _ in leaves if n.startswith(f"executions/{execution_id}/")}
    for path, key, want in (("executions.jsonl", "execution_id", execution_id),
                            ("ledger.jsonl", "seq", entry.ledger_seq)):
        for i, line in enumerate(read.lines_of(path), 1):
            try:
                if json.loads(line).get(key) == want:
                    names.add(f"{path}#L{i}")
            except (ValueError, AttributeError):
                continue
    aer = json.loads(ex.path(execution_id, "aer").read_bytes())
    cited = {str(ev.get("path")) for ev in (aer.get("header") or {}).get("evidence") or []
             if isinstance(ev, dict)}
    names |= cited & {n for n, _ in leaves}
    return sorted(names & {n for n, _ in leaves}, key=sealed.sort_key)


def write_bundle(root: Path, execution_id: str, out: Path,
                 shown: str | Path | None = None) -> dict[str, Any]:
    """Write the proof bundle of ``execution_id`` of the sealed corpus ``root`` to ``out``
    (``shown``: what errors call the corpus, the archive ``root`` was unpacked from)."""
    rep = sealed.verify_sealed(root, None)
    failed = [f for f in rep.findings if f[0] == "failed"]
    if failed:
        shown = shown or root
        raise AgentprovError("package.refused.unsealable", corpus=shown,
                             what=f"the sealed corpus does not verify ({failed[0][1]} at "
                                  f"{failed[0][2]})",
                             fix=f"agentprov verify --corpus {shown} lists what fails")
    tree = json.loads((root / sealed.TREE).read_bytes())
    leaves = [(str(n), str(s)) for n, s in tree["leaves"]]
    hashes = sealed.leaf_hashes(leaves)
    index = {n: i for i, (n, _) in enumerate(leaves)}
    entries = []
    read = _Reader(root)
    for name in _names(read, leaves, execution_id):
        i = index[name]
        entries.append({"name": name, "index": i, "sha256": leaves[i][1],
                        "content": base64.b64encode(read(name)).decode("ascii"),
                        "inclusion": [h.hex() for h in merkle.inclusion_proof(i, hashes)]})
    env = json.loads((root / sealed.ENVELOPE).read_bytes())
    doc = {"format": FORMAT, "execution_id": execution_id, "tree_size": len(leaves),
           "root_sha256": merkle.root(hashes).hex(), "envelope": env, "leaves": entries}
    data = (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode("utf-8")
    with open(out, "xb") as f:
        f.write(data)
    return {"out": str(out), "execution_id": execution_id, "leaves": len(entries),
            "bytes": len(data)}


def verify_bundle(path: Path, trusted: Any | None) -> sealed.SealedReport:
    """The findings of a proof bundle: its envelope and signature (as level sealed's), and
    each leaf's bytes and inclusion proof against the signed tree head."""
    rep = sealed.SealedReport()
    where = path.name
    try:
        raw = path.read_bytes()
        if len(raw) > MAX_BYTES:
            raise ValueError(f"larger than {MAX_BYTES} bytes")
        doc = json.loads(raw)
        if doc.get("format") != FORMAT:
            raise ValueError(f"format is {doc.get('format')!r}, not {FORMAT}")
        env = json.dumps(doc["envelope"]).encode("utf-8")
        leaves = list(doc["leaves"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise AgentprovError("verify.usage.proof", path=path, what=str(exc)) from None
    st = sealed.read_statement(env, rep, where, trusted)
    if st is None:
        return rep
    if not leaves:
        rep.fail("proof.empty", where, "the bundle proves no leaf")
    for n, leaf in enumerate(leaves):
        try:
            name, i, sha = str(leaf["name"]), int(leaf["index"]), str(leaf["sha256"])
            content = base64.b64decode(leaf["content"], validate=True)
            proof = [bytes.fromhex(h) for h in leaf["inclusion"]]
        except (KeyError, TypeError, ValueError) as exc:
            rep.fail("proof.leaf", where, f"leaf {n} is not readable ({exc})")
            continue
        if hashlib.sha256(content).hexdigest() != sha:
            rep.fail("proof.file_changed", name,
                     "its bytes are not the ones whose sha256 the leaf records")
        elif not merkle.verify_inclusion(i, st.size, merkle.leaf_hash(
                sealed.leaf_data(name, sha)), proof, st.head):
            rep.fail("proof.inclusion", name,
                     f"its inclusion proof (leaf {i} of {st.size}) does not reach the signed "
                     "tree head")
    return rep
