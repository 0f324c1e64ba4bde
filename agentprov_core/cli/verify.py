"""``agentprov verify``: re-walk a corpus's capture chains, raw store digests and references
(agentprov_core/audit/verification.py says what each check holds); for a sealed corpus
(``agentprov-corpus/0.3``) also level ``sealed`` (agentprov_core/audit/sealed.py); and a
proof bundle of one execution on its own (``--proof``, agentprov_core/audit/proofs.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from agentprov_core.cli.common import echo_json, format_option


def _trusted(path: str | None) -> Any:
    from agentprov_core.base import dsse
    from agentprov_core.errors import AgentprovError

    if path is None:
        return None
    try:
        return dsse.load_public(Path(path).read_bytes())
    except (OSError, ValueError) as exc:
        raise AgentprovError("verify.usage.trusted_key", path=path, what=str(exc)) from None


def _sealed_json(rep: Any) -> dict[str, Any]:
    return {"level": "sealed", "result": rep.result, "signed_by": rep.signer,
            "version": rep.version, "tree_size": rep.tree_size, "root_sha256": rep.head,
            "findings": [{"kind": k, "code": c, "path": p, "message": m}
                         for k, c, p, m in rep.findings]}


@click.command()
@click.option("--corpus", metavar="DIR",
              help="The corpus (DIR or DIR.partial, as the run wrote it; or a sealed corpus, "
                   "a directory or its NAME.tar archive).")
@click.option("--proof", metavar="BUNDLE",
              help="A proof bundle of one execution (agentprov prove), checked on its own.")
@click.option("--trusted-key", metavar="FILE",
              help="The PEM public key a sealed corpus or a proof bundle must be signed by.")
@format_option
def verify(corpus: str | None, proof: str | None, trusted_key: str | None, fmt: str) -> int:
    """Re-walk every capture chain, raw store digest, ledger reference and execution digest
    of a corpus. Exit 0 when nothing failed (a working tree always passes "with unverified
    checks": nothing is sealed), 1 when a check failed, naming the file and the record.
    A sealed corpus adds level sealed, which passes only when every file, the tree head and
    the signature of the trusted key hold; with --proof, one execution's bundle is checked
    without the corpus."""
    from agentprov_core.errors import AgentprovError

    if corpus is None and proof is None:
        raise click.UsageError("give --corpus DIR, or --proof BUNDLE")
    if corpus is not None and proof is not None:
        raise AgentprovError("cli.usage.exclusive", first="--corpus", second="--proof")
    trusted = _trusted(trusted_key)
    if proof is not None:
        from agentprov_core.audit.proofs import verify_bundle

        rep = verify_bundle(Path(proof), trusted)
        if fmt == "json":
            echo_json({"format": "agentprov-verify/0.1", "proof": proof, **_sealed_json(rep)})
        else:
            click.echo(rep.line("proof"))
            for k, c, p, m in rep.findings:
                click.echo(f"  {k}: {c} at {p}: {m}")
        return 0 if rep.result == "passed" else 1
    from agentprov_core.audit import archive

    if archive.is_archive(corpus) and Path(corpus).is_file():
        with archive.unpacked(Path(corpus)) as root:
            return _corpus(root, trusted, fmt, shown=corpus)
    return _corpus(Path(corpus), trusted, fmt)


def _corpus(corpus: Path, trusted: Any, fmt: str, shown: str | None = None) -> int:
    """Levels chain and (for a sealed corpus) sealed of ``corpus``, reported as ``shown``
    (the archive it was unpacked from) when given."""
    from agentprov_core.audit import sealed
    from agentprov_core.audit.verification import verify_corpus

    # a sealed corpus: level chain keeps the digest of each file it reads, for level sealed,
    # which reads the rest (the statement, the tree, the list of files) beside it
    read: dict[str, str] | None = {} if sealed.is_sealed(corpus) else None
    prepared: list[sealed.Prepared] = []
    report = verify_corpus(corpus, read, beside=None if read is None else (
        lambda: prepared.append(sealed.prepare(corpus, trusted))))
    srep = None
    if sealed.is_sealed(report.corpus):
        mine = [p for p in prepared if p.root.resolve() == report.corpus.resolve()]
        srep = sealed.verify_sealed(report.corpus, trusted, read, mine[0] if mine else None)
    if shown is not None:
        report.corpus = Path(shown)
    if fmt == "json":
        doc = report.to_json()
        if srep is not None:
            doc["sealed"] = _sealed_json(srep)
        echo_json(doc)
    else:
        click.echo(report.summary())
        for line in report.lines():
            click.echo(f"  {line}")
        if srep is not None:
            click.echo(srep.line())
            for k, c, p, m in srep.findings:
                click.echo(f"  {k}: {c} at {p}: {m}")
    if report.failed:
        return 1
    return 0 if srep is None or srep.result == "passed" else 1
