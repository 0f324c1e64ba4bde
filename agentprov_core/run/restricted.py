"""Where a restricted source's corpus may live, and what its manifest records (R-25.38).

A source whose :class:`~agentprov_core.source.SourceMeta` declares ``restricted`` writes a
restricted-use corpus, private: it stays under ``$AGENTPROV_HOME``. ``agentprov run``
refuses a ``--corpus`` whose directory or working directory (``DIR.partial``) resolves,
symlinks followed, outside it (``cli.refused.restricted_corpus``, exit 4), before consent
and before anything is written; a dry run reports the same refusal (it checks everything a
run would). ``agentprov package`` refuses such a corpus (``package.refused.restricted``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentprov_core.base import paths
from agentprov_core.corpus.opening import restricted_block
from agentprov_core.corpus.working import partial_dir
from agentprov_core.errors import AgentprovError
from agentprov_core.source import Restricted, SourceMeta


def _inside(path: Path, root: Path) -> bool:
    return root in path.parents


def check_location(meta: SourceMeta, corpus: str | None) -> None:
    """Refuse a restricted source's ``corpus`` outside ``$AGENTPROV_HOME`` (both paths
    resolved: a symlink under the home that points elsewhere is outside it). No corpus (a
    ``--preflight-only`` probe writes none) and an unrestricted source pass."""
    if meta.restricted is None or not corpus:
        return
    home = paths.home().resolve()
    given = Path(corpus).absolute()
    for where in (given, partial_dir(given)):
        resolved = where.resolve()
        if not _inside(resolved, home):
            raise AgentprovError(
                "cli.refused.restricted_corpus", corpus=corpus, where=where,
                resolved=resolved, home=home, why=meta.restricted.why,
                suggestion=home / "corpora" / given.name.removesuffix(".partial"))


def manifest_record(restricted: Restricted) -> dict[str, Any]:
    """The manifest's ``restricted`` block: the source's declaration, and that the corpus is
    private (never deposited; a release needs the project owner's separate decision)."""
    return {"why": restricted.why, "licence": restricted.licence, "holds": restricted.holds,
            "private": True, "deposit": "never",
            "release": "needs a separate decision of the project owner"}


def refuse_package(manifest: dict[str, Any], root: Path) -> None:
    """``agentprov package``: a corpus whose manifest records ``restricted`` is never
    deposited (``package.refused.restricted``, exit 4)."""
    block = restricted_block(manifest)
    if block is None:
        return
    raise AgentprovError("package.refused.restricted", corpus=root,
                         why=block.get("why") or "a restricted-use corpus, private",
                         holds=block.get("holds") or "restricted evidence",
                         licence=block.get("licence") or "not recorded")
