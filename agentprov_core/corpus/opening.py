"""Opening a corpus by the path a user gave a corpus tool (validate, recompute, verify,
stats, package): ``DIR`` or ``DIR.partial``, checked to be a corpus before anything reads it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentprov_core.errors import AgentprovError


class OpenCorpus:
    """A corpus on disk, working (``DIR.partial``) or not."""

    def __init__(self, root: Path, manifest: dict[str, Any]) -> None:
        self.root = root
        self.manifest = manifest

    @property
    def working(self) -> bool:
        return self.root.name.endswith(".partial")

    @property
    def corpus_id(self) -> str:
        return str(self.manifest.get("corpus_id") or self.root.name.removesuffix(".partial"))

    @property
    def state(self) -> str:
        return "working" if self.working else "sealed"

    @property
    def restricted(self) -> dict[str, Any] | None:
        """The manifest's ``restricted`` block (:func:`restricted_block`)."""
        return restricted_block(self.manifest)


def restricted_block(manifest: Any) -> dict[str, Any] | None:
    """The ``restricted`` block a corpus's manifest records (else the declaration its
    ``source_meta`` snapshots), or None for a corpus that is not restricted. A block that
    is not a table still marks the corpus restricted: its text becomes ``why``."""
    if not isinstance(manifest, dict):
        return None
    block = manifest.get("restricted")
    meta = manifest.get("source_meta")
    if block is None and isinstance(meta, dict):
        block = meta.get("restricted")
    if block is None:
        return None
    return block if isinstance(block, dict) else {"why": str(block)}


def read_manifest(path: Path) -> Any:
    """The JSON document of a corpus's ``manifest.json``; ``ValueError`` saying why when it
    is not one: not a regular file, too large, not UTF-8, not JSON, nested too deeply."""
    from agentprov_core.base import inputfile

    return parse_manifest(inputfile.read_bytes(path))


def parse_manifest(data: bytes) -> Any:
    """:func:`read_manifest` of bytes already read."""
    from agentprov_core.base import inputfile

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text (byte {exc.start})") from None
    inputfile.check_json_depth(text, MANIFEST_DEPTH)
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError(f"nested more than {MANIFEST_DEPTH} levels deep") from None


#: The manifest formats of a corpus: a live one (written by a run) and a sealed or imported
#: one (``agentprov-corpus/0.2``; this build reads it only to refuse sealing it again).
CORPUS_FORMATS = ("agentprov-live-corpus/", "agentprov-corpus/")
#: The deepest nesting a manifest may hold (T0 writes a dozen levels at most).
MANIFEST_DEPTH = 128


def open_corpus(given: str | Path) -> OpenCorpus:
    """Resolve ``given`` to a corpus: the directory itself, else ``given.partial``.

    Raises ``corpus.usage.not_found`` (exit 2) when neither exists and
    ``corpus.environment.not_a_corpus`` (exit 3) for a directory without a readable
    manifest and ledger.
    """
    p = Path(given)
    if p.name in ("", ".."):  # ".", "..", "/": the directory by its own name
        p = p.resolve()
    candidates = [p] if not p.name or p.name.endswith(".partial") else [
        p, p.with_name(p.name + ".partial")]
    root = next((c for c in candidates if c.is_dir()), None)
    if root is None:
        if p.exists():
            raise AgentprovError("corpus.environment.not_a_corpus", corpus=p,
                                 what="it is a file, not a directory")
        raise AgentprovError("corpus.usage.not_found", corpus=p)
    mf = root / "manifest.json"
    if not mf.is_file():
        raise AgentprovError("corpus.environment.not_a_corpus", corpus=root,
                             what="it has no manifest.json")
    try:
        manifest = read_manifest(mf)
    except ValueError as exc:
        raise AgentprovError("corpus.environment.not_a_corpus", corpus=root,
                             what=f"manifest.json is not readable JSON ({exc})") from None
    if not isinstance(manifest, dict) or not str(manifest.get("format", "")).startswith(
            "agentprov-"):
        raise AgentprovError("corpus.environment.not_a_corpus", corpus=root,
                             what="manifest.json has no agentprov 'format'")
    fmt = str(manifest["format"])
    if not fmt.startswith(CORPUS_FORMATS):
        raise AgentprovError("corpus.environment.not_a_corpus", corpus=root,
                             what=f"its manifest.json is a {fmt} document, not a corpus's "
                                  f"({' or '.join(f + '…' for f in CORPUS_FORMATS)})")
    if not (root / "ledger.jsonl").is_file():
        raise AgentprovError("corpus.environment.not_a_corpus", corpus=root,
                             what="it has no ledger.jsonl")
    return OpenCorpus(root, manifest)
