"""``agentprov package``: seal a corpus for release. Not in this build.

The order of its refusals is the specification's: without ``--spec`` it exits 2 first
(``package.usage.spec``), before the corpus is even looked at; then the corpus is opened
(``corpus.usage.not_found``, exit 2; ``corpus.environment.not_a_corpus``, exit 3); then a
restricted-use corpus is refused (``package.refused.restricted``, exit 4: it is never
deposited, whatever a later build seals, R-25.38); then a live corpus is refused
(``package.unsupported.live``, exit 5, U-18), whatever else is right or wrong with the other
options; any other corpus is refused too
(``package.unsupported.sealing``, exit 5): this build writes no sealed format. Nothing is
ever written: the corpus is only read.
"""

from __future__ import annotations

import click


@click.command()
@click.option("--corpus", metavar="DIR", help="The corpus (DIR or DIR.partial).")
@click.option("--corpus-version", metavar="V", help="The version of the sealed corpus.")
@click.option("--spec", "spec", metavar="FILE", help="The corpus spec (corpus-spec.toml).")
@click.option("--licence-file", "licences", metavar="NAME=PATH", multiple=True,
              help="A licence file to include, as NAME=PATH (repeatable).")
def package(corpus: str | None, corpus_version: str | None, spec: str | None,
            licences: tuple[str, ...]) -> None:
    """Seal a corpus for release. Live corpora are not sealed in this build (U-18), and no
    sealed format exists yet: every corpus is refused, and nothing is written."""
    from agentprov_core.audit.verification import is_live
    from agentprov_core.corpus.opening import open_corpus
    from agentprov_core.errors import AgentprovError
    from agentprov_core.run.restricted import refuse_package

    if not spec:
        raise AgentprovError("package.usage.spec")
    if not corpus:
        raise click.UsageError("Missing option '--corpus'.")
    c = open_corpus(corpus)
    refuse_package(c.manifest, c.root)  # package.refused.restricted: never deposited
    if is_live(c.manifest, c.root):
        raise AgentprovError("package.unsupported.live")
    raise AgentprovError("package.unsupported.sealing", corpus=c.root,
                         format=c.manifest.get("format"))
