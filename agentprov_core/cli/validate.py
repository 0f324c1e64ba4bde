"""``agentprov validate``: check every execution of a corpus in tiers (aer, sem, prov,
linkage, and shacl with ``--release``); the walk is :mod:`agentprov_core.audit.validation`.

The summary line is the spec's::

    validated 5 execution(s) of agentdojo-live-demo (working) in release mode, tiers
    aer,sem,prov,linkage: 5 passed, 0 failed; linkage resolved 5/5 (100.00%); stored results
    reproduced 0, differ 0

``--strict`` is ``release`` mode (warnings and unvalidated executions fail); ``--release``
is release mode plus the shacl tier.
"""

from __future__ import annotations

import click

from agentprov_core.audit.validation import REPORT_FORMAT, Run, summary_line
from agentprov_core.cli.common import echo_json, format_option
from agentprov_core.errors import AgentprovError


@click.command()
@click.option("--corpus", "corpus", required=True, metavar="DIR",
              help="The corpus: DIR or DIR.partial (a working corpus).")
@click.option("--strict", is_flag=True,
              help="Release mode: warnings and unvalidated executions fail.")
@click.option("--release", is_flag=True,
              help="Release mode and the shacl tier (needs the 'release' extra: rdflib, "
                   "pyshacl).")
@click.option("--skip-prov-conformance", is_flag=True,
              help="Skip the prov tier; the executions are then unvalidated.")
@format_option
def validate(corpus: str, strict: bool, release: bool, skip_prov_conformance: bool,
             fmt: str) -> int:
    """Validate a corpus's executions: tiers aer, sem, prov, linkage (and shacl).

    Exit 0 when every execution passed (or, in standard mode, is unvalidated), 1 when any
    failed. Each failure is a line naming the execution, tier, file and what is wrong.
    """
    for first, second, on in (("--strict", "--release", strict and release),
                              ("--release", "--skip-prov-conformance",
                               release and skip_prov_conformance),
                              ("--strict", "--skip-prov-conformance",
                               strict and skip_prov_conformance)):
        if on:
            raise AgentprovError("cli.usage.exclusive", first=first, second=second)
    from agentprov_core.corpus.opening import open_corpus
    from agentprov_core.evidence import validation as valmod

    oc = open_corpus(corpus)
    if release and (missing := valmod.release_missing()):
        raise AgentprovError("validate.environment.release", missing=", ".join(missing))
    run = Run(oc.root, strict=strict, release=release, skip_prov=skip_prov_conformance,
              fmt=fmt, echo=click.echo)
    failed = run.corpus()
    t = run.tally
    tiers = list(valmod.RELEASE_TIERS if release else valmod.TIERS)
    if skip_prov_conformance:
        tiers.remove("prov")
    tiers_text = ",".join(tiers) + (" (prov skipped)" if skip_prov_conformance else "")
    mode = "release" if (strict or release) else "standard"
    line = summary_line(n=t.executions, corpus_id=oc.corpus_id, state=oc.state, mode=mode,
                        tiers=tiers_text, passed=t.passed, failed=t.failed,
                        unvalidated=t.unvalidated, resolved=t.linkage_resolved,
                        total=t.linkage_total, reproduced=t.reproduced, differ=t.differ)
    note = ("unvalidated: the prov tier was skipped (--skip-prov-conformance); the corpus "
            "stays unvalidated until a full recompute --out" if skip_prov_conformance else None)
    held = run.snap.note() if run.snap is not None else None
    if held is not None:
        held += f"; {t.in_progress} attempt(s) are not mapped yet"
    if fmt == "json":
        echo_json({"format": REPORT_FORMAT, "corpus_id": oc.corpus_id, "state": oc.state,
                   "in_progress": held,
                   "mode": mode, "tiers": tiers, "skipped": ["prov"] if skip_prov_conformance
                   else [], "executions": t.executions, "passed": t.passed,
                   "failed": t.failed, "unvalidated": t.unvalidated,
                   "linkage": {"resolved": t.linkage_resolved, "total": t.linkage_total},
                   "stored_results": {"reproduced": t.reproduced, "differ": t.differ},
                   "failures": t.failures, "corpus_problems": t.corpus_problems,
                   "summary": line, "note": note, "exit": 1 if failed else 0})
    else:
        click.echo(line)
        if note:
            click.echo(note)
        if held is not None:
            click.echo(f"note: {held}")
    return 1 if failed else 0
