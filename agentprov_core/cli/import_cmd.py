"""``agentprov import KIND LOGDIR --corpus DIR``: a directory of a benchmark's own result
files into an import-mode corpus (agentprov_core/evidence/importing.py; docs/importing.md)."""

from __future__ import annotations

import click

from agentprov_core.cli.common import echo_json, format_option

#: the findings of one code shown in text (``--format json`` lists every one)
SHOWN = 20


@click.command("import")
@click.argument("kind", metavar="KIND")
@click.argument("logdir", metavar="LOGDIR")
@click.option("--corpus", metavar="DIR", required=True,
              help="The import corpus to write (its working tree DIR.partial).")
@click.option("--source", default="agentdojo", show_default=True, metavar="NAME",
              help="The source whose benchmark wrote the files (agentdojo, agentdyn, …).")
@format_option
def import_(kind: str, logdir: str, corpus: str, source: str, fmt: str) -> int:
    """Import the result files a benchmark's own runner wrote under LOGDIR (KIND agentdojo:
    <pipeline>/<suite>/<user_task>/<attack>/<injection_task|none>.json) into an import
    corpus: each file is stored as raw evidence, ledgered and mapped to an AER of mode
    import. A file that fails is reported by name and code and kept out; re-importing adds
    nothing new. Exit 0 when every file was imported or already was, 1 when one was kept
    out."""
    from collections import Counter

    from agentprov_core.evidence.importing import run_import

    s = run_import(kind, logdir, corpus, source)
    if fmt == "json":
        echo_json({"format": "agentprov-import-report/0.1", "kind": kind, "source": source,
                   "logdir": str(logdir), "corpus": str(s.corpus), "files": s.files,
                   "configurations": s.configurations, "imported": s.imported,
                   "statuses": dict(s.statuses), "already": s.already,
                   "finished": s.finished, "redacted": s.redacted,
                   "kept_out": [{"name": f.name, "code": f.code, "why": f.why}
                                for f in s.findings]})
        return 1 if s.findings else 0
    click.echo(f"agentprov import {kind}: {s.files} file(s) under {logdir}; source {source}; "
               f"{s.configurations} configuration(s)")
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(s.statuses.items()))
    click.echo(f"  imported {s.imported}" + (f" ({statuses})" if statuses else "")
               + f", already in the corpus {s.already}, kept out {len(s.findings)}")
    if s.finished:
        click.echo(f"  mapped {s.finished} entry(ies) an earlier import ledgered and did not map")
    if s.redacted:
        click.echo(f"  redacted key-shaped strings in {s.redacted} file(s) before storing them")
    if not s.imported and not s.finished and s.already:
        click.echo("  nothing new: every file is already in the corpus")
    per_code: Counter[str] = Counter()
    for f in s.findings:
        per_code[f.code] += 1
        if per_code[f.code] <= SHOWN:
            click.echo(f"  kept out: {f.line()}")
    for code, n in sorted(per_code.items()):
        if n > SHOWN:
            click.echo(f"  kept out: {code}: {n - SHOWN} more (--format json lists them)")
    click.echo(f"  corpus   {s.corpus}")
    return 1 if s.findings else 0
