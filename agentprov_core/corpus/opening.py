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


def open_corpus(given: str | Path) -> OpenCorpus:
    """Resolve ``given`` to a corpus: the directory itself, else ``given.partial``.

    Raises ``corpus.usage.not_found`` (exit 2) when neither exists and
    ``corpus.environment.not_a_corpus`` (exit 3) for a directory without a readable
    manifest and ledger.
    """
    p = Path(given)
    candidates = [p] if p.name.endswith(".partial") else [p, p.with_name(p.name + ".partial")]
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
        manifest = json.loads(mf.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise AgentprovError("corpus.environment.not_a_corpus", corpus=root,
                             what=f"manifest.json is not readable JSON ({exc})") from None
    if not isinstance(manifest, dict) or not str(manifest.get("format", "")).startswith(
            "agentprov-"):
        raise AgentprovError("corpus.environment.not_a_corpus", corpus=root,
                             what="manifest.json has no agentprov 'format'")
    if not (root / "ledger.jsonl").is_file():
        raise AgentprovError("corpus.environment.not_a_corpus", corpus=root,
                             what="it has no ledger.jsonl")
    return OpenCorpus(root, manifest)
