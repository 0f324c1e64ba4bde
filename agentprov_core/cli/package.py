"""``agentprov package``: seal a finished live corpus as ``agentprov-corpus/0.3``
(:mod:`agentprov_core.audit.sealing`; docs/corpus-tools.md, "package").

The order of its refusals is the specification's, with sealing where it said "not in this
build" (docs/decisions.md, "Sealed corpora"): without ``--spec`` it exits 2 first
(``package.usage.spec``), before the corpus is even looked at; then the other usage errors
(``package.usage.version``, ``package.usage.option``: the spec or a licence file unreadable,
``--out`` taken), still before the corpus; then the corpus is opened
(``corpus.usage.not_found``, exit 2; ``corpus.environment.not_a_corpus``, exit 3); then a
restricted-use corpus is refused (``package.refused.restricted``, exit 4: never deposited,
R-25.38); a corpus that is not live (an import) is refused
(``package.unsupported.sealing``, exit 5); then the signing key is read
(``keys.environment.signing_missing``, exit 3); then what may be sealed is checked
(``package.refused.unfinished``, ``package.refused.unsealable``,
``package.refused.rewritten``: exit 4). Every refusal writes nothing.
"""

from __future__ import annotations

from pathlib import Path

import click

from agentprov_core.cli.common import echo_json, format_option


def _readable(option: str, value: str) -> Path:
    from agentprov_core.errors import AgentprovError

    p = Path(value)
    if not p.is_file() or p.is_symlink():
        raise AgentprovError("package.usage.option", option=option, value=value,
                             what="not a regular file")
    return p


@click.command()
@click.option("--corpus", metavar="DIR", help="The corpus (DIR or DIR.partial).")
@click.option("--corpus-version", metavar="V", help="The version of the sealed corpus.")
@click.option("--spec", "spec", metavar="FILE", help="The corpus spec (corpus-spec.toml).")
@click.option("--licence-file", "licences", metavar="NAME=PATH", multiple=True,
              help="A licence file to include, as NAME=PATH (repeatable).")
@click.option("--out", metavar="DIR",
              help="The sealed corpus to write: a new directory (default: CORPUS_ID-V beside "
                   "the corpus), or, for a name ending in .tar, one deterministic archive of "
                   "it.")
@click.option("--sign-key", metavar="NAME",
              help="Sign the seal with the signing key NAME (agentprov keys signing new). "
                   "Without it the seal is unsigned, and says so.")
@click.option("--previous", metavar="DIR",
              help="The sealed release before this one: the new release must only add to "
                   "it, and its statement carries the RFC 9162 consistency proof.")
@format_option
def package(corpus: str | None, corpus_version: str | None, spec: str | None,
            licences: tuple[str, ...], out: str | None, sign_key: str | None,
            previous: str | None, fmt: str) -> int:
    """Seal a finished live corpus as agentprov-corpus/0.3: its files unchanged, with
    checksums.sha256, an RFC 9162 Merkle tree and a DSSE-signed in-toto statement. A
    scripted (test_only) corpus seals as such. Nothing is written on a refusal."""
    from agentprov_core.audit import sealing
    from agentprov_core.audit.verification import is_live
    from agentprov_core.corpus.opening import open_corpus
    from agentprov_core.errors import AgentprovError
    from agentprov_core.run.restricted import refuse_package

    if not spec:
        raise AgentprovError("package.usage.spec")
    if not corpus:
        raise click.UsageError("Missing option '--corpus'.")
    if not corpus_version:
        raise AgentprovError("package.usage.version")
    spec_path = _readable("--spec", spec)
    lic: list[tuple[str, Path]] = []
    for item in licences:
        name, sep, path = item.partition("=")
        if not sep or not name or "/" in name or name.startswith(".") or name in (
                n for n, _ in lic):
            raise AgentprovError("package.usage.option", option="--licence-file", value=item,
                                 what="not NAME=PATH with a new file name NAME")
        lic.append((name, _readable("--licence-file", path)))
    c = open_corpus(corpus)
    target = Path(out) if out else c.root.parent / f"{c.corpus_id}-{corpus_version}"
    if target.exists() or target.is_symlink():
        raise AgentprovError("package.usage.option", option="--out", value=target,
                             what="exists: a sealed corpus is written to a new directory")
    if target.resolve().is_relative_to(c.root.resolve()):
        raise AgentprovError("package.usage.option", option="--out", value=target,
                             what="is inside the corpus, which is never written to")
    refuse_package(c.manifest, c.root)  # package.refused.restricted: never deposited
    if not is_live(c.manifest, c.root):
        raise AgentprovError("package.unsupported.sealing", corpus=c.root,
                             format=c.manifest.get("format"))
    key = None
    if sign_key:
        from agentprov_core.live import signingkeys

        key = signingkeys.private(sign_key)
    sealing.check_finished(c)
    sealing.check_contents(c)
    verified = sealing.check_verifies(c)
    done = sealing.seal(sealing.Release(
        c, corpus_version, spec_path, lic, target, key,
        Path(previous) if previous else None, verified))
    del key
    if fmt == "json":
        echo_json(done)
        return 0
    click.echo(f"package: sealed {c.corpus_id} {corpus_version} as {done['format']} in "
               f"{done['out']}: {done['files']} files, a tree of {done['tree_size']} leaves, "
               f"head {done['root_sha256']}")
    if done["previous"]:
        click.echo(f"package: a later release of {done['previous']} (its statement carries "
                   "the consistency proof)")
    if done["signed_by"]:
        click.echo(f"package: signed by {sign_key} (key {done['signed_by']})")
    else:
        click.echo("package: unsigned: nothing says who sealed it (give --sign-key NAME)")
    if done["test_only"]:
        click.echo("package: test_only: a scripted corpus, sealed as such; it never supports "
                   "a \"Live Capture\" claim")
    return 0
