"""``agentprov prove``: the proof bundle of one execution of a sealed corpus
(agentprov_core/audit/proofs.py), checked by ``agentprov verify --proof BUNDLE``."""

from __future__ import annotations

from pathlib import Path

import click

from agentprov_core.cli.common import echo_json, format_option


@click.command()
@click.option("--corpus", metavar="DIR", required=True,
              help="The sealed corpus (a directory, or its NAME.tar archive).")
@click.option("--execution", "execution_id", metavar="ID", required=True,
              help="The execution's id (its directory under executions/).")
@click.option("--out", metavar="FILE",
              help="The bundle to write (a new file; default: ID.proof.json here).")
@format_option
def prove(corpus: str, execution_id: str, out: str | None, fmt: str) -> int:
    """Write one execution's stored files, their RFC 9162 inclusion proofs and the signed
    statement to one file, which agentprov verify --proof checks without the corpus."""
    from agentprov_core.audit import archive
    from agentprov_core.errors import AgentprovError

    target = Path(out) if out else Path(f"{execution_id}.proof.json")
    if target.exists():
        raise AgentprovError("package.usage.option", option="--out", value=target,
                             what="exists: a bundle is written to a new file")
    if archive.is_archive(corpus) and Path(corpus).is_file():
        with archive.unpacked(Path(corpus)) as root:
            return _prove(root, corpus, execution_id, target, fmt)
    return _prove(Path(corpus), corpus, execution_id, target, fmt)


def _prove(root: Path, corpus: str, execution_id: str, target: Path, fmt: str) -> int:
    from agentprov_core.audit import sealed
    from agentprov_core.audit.proofs import write_bundle
    from agentprov_core.errors import AgentprovError

    if not (root / sealed.ENVELOPE).is_file():
        raise AgentprovError("package.usage.option", option="--corpus", value=corpus,
                             what="not a sealed corpus (no seal/statement.dsse.json): "
                                  "agentprov package seals one")
    done = write_bundle(root, execution_id, target, shown=corpus)
    if fmt == "json":
        echo_json(done)
    else:
        click.echo(f"prove: {done['leaves']} leaves of execution {execution_id} with their "
                   f"inclusion proofs in {done['out']} ({done['bytes']:,} bytes)")
    return 0
