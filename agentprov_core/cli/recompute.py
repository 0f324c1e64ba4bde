"""``agentprov recompute``: re-derive SEM, PROV and validation from the stored AERs and
compare (agentprov_core/evidence/recompute.py classifies each execution)."""

from __future__ import annotations

from pathlib import Path

import click

from agentprov_core.cli.common import echo_json, format_option


def _check_out(out: Path, corpus_root: Path) -> Path:
    from agentprov_core.errors import AgentprovError

    o = out.resolve()
    root = corpus_root.resolve()
    if o == root or root in o.parents:
        raise AgentprovError("recompute.usage.out", out=out,
                             what="it is inside the corpus, and a corpus is never rewritten")
    if o.exists() and (not o.is_dir() or any(o.iterdir())):
        raise AgentprovError("recompute.usage.out", out=out,
                             what="it exists and is not an empty directory; give a new one")
    return o


@click.command()
@click.option("--corpus", metavar="DIR", required=True,
              help="The corpus (DIR or DIR.partial, as the run wrote it).")
@click.option("--dry-run", is_flag=True, help="Derive and compare; write nothing.")
@click.option("--out", metavar="DIR", type=click.Path(path_type=Path),
              help="Write the re-derived executions and their index to this new directory.")
@click.option("--remap", is_flag=True,
              help="Re-map from the raw evidence first (refused for a live corpus, D-43).")
@format_option
def recompute(corpus: str, dry_run: bool, out: Path | None, remap: bool, fmt: str) -> int:
    """Re-derive SEM, PROV and validation from each stored AER and compare them with the
    stored ones: identical, changed (explained), unexplained, failed or unverified. The
    corpus is never rewritten: without --dry-run, --out DIR receives a new tree. Exit 1
    when an execution is unexplained or failed."""
    from agentprov_core.audit.verification import is_live
    from agentprov_core.corpus.opening import open_corpus
    from agentprov_core.errors import AgentprovError
    from agentprov_core.evidence import recompute as rc

    c = open_corpus(corpus)
    if remap:
        if is_live(c.manifest, c.root):
            raise AgentprovError("recompute.unsupported.remap_live")
        raise AgentprovError("recompute.unsupported.remap")
    if dry_run:
        if out is not None:
            raise AgentprovError("recompute.usage.out", out=out,
                                 what="a dry run writes nothing; drop --dry-run or --out")
    elif out is None:
        raise AgentprovError("recompute.usage.out_needed")
    else:
        out = _check_out(out, c.root)
    from agentprov_core.corpus.snapshot import take

    stages = ",".join(rc.STAGES)
    snap = take(c.root)  # the same lines counted, derived and reported
    units = rc.count_units(c.root, snap)
    if fmt == "text":
        click.echo(f"agentprov recompute: units={units} plan={stages} workers=0")
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    s = rc.run(c.root, c.manifest, out, snap)
    n = s.counts
    verb = "would derive" if dry_run else "derived"
    if fmt == "json":
        echo_json({"format": "agentprov-recompute-report/0.1", "corpus": str(c.root),
                   "corpus_id": c.corpus_id, "dry_run": dry_run,
                   "out": str(out) if out else None, "units": s.units,
                   "stages": list(rc.STAGES), "workers": 0, "counts": n,
                   "index_rows_refreshed": s.refreshed, "index_rows_written": s.written,
                   "unmapped_attempts": s.unmapped, "in_progress": snap.note(),
                   "executions": [{"execution_id": r.execution_id, "class": r.cls,
                                   "reasons": r.reasons} for r in s.details]})
        return 0 if s.ok else 1
    click.echo(f"agentprov recompute: {verb} {s.units} execution(s); recomputed stages: "
               f"{stages}; {n['identical']} identical, {n['changed']} changed (explained), "
               f"{n['unexplained']} unexplained, {n['failed']} failed, {n['unverified']} "
               f"unverified; {s.refreshed} index row(s) refreshed")
    for r in s.details:
        for reason in r.reasons:
            click.echo(f"  {r.execution_id}: {reason}")
    if out is not None:
        click.echo(f"agentprov recompute: wrote {s.written} execution(s) and {s.written} index "
                   f"row(s) to {out}; the corpus was not changed")
    if s.unmapped:
        why = ("not mapped yet: a run holds the corpus, and maps them" if snap.held else
               "never mapped; a live corpus is not re-mapped from its raw evidence (D-43)")
        click.echo(f"agentprov recompute: {s.unmapped} ledgered attempt(s) have no execution "
                   f"({why})")
    return 0 if s.ok else 1
