"""``agentprov verify``: re-walk a corpus's capture chains, raw store digests and references
(agentprov_core/audit/verification.py says what each check holds)."""

from __future__ import annotations

import click

from agentprov_core.cli.common import echo_json, format_option


@click.command()
@click.option("--corpus", metavar="DIR", required=True,
              help="The corpus (DIR or DIR.partial, as the run wrote it).")
@format_option
def verify(corpus: str, fmt: str) -> int:
    """Re-walk every capture chain, raw store digest, ledger reference and execution digest
    of a corpus. Exit 0 when nothing failed (a working tree always passes "with unverified
    checks": nothing is sealed), 1 when a check failed, naming the file and the record."""
    from agentprov_core.audit.verification import verify_corpus

    report = verify_corpus(corpus)
    if fmt == "json":
        echo_json(report.to_json())
    else:
        click.echo(report.summary())
        for line in report.lines():
            click.echo(f"  {line}")
    return 1 if report.failed else 0
