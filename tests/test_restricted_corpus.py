"""A restricted source's corpus (R-25.38, R-25.39): AgentHarm's plugin declares its live
corpus restricted-use and private; ``agentprov run`` refuses a ``--corpus`` that resolves
outside ``$AGENTPROV_HOME`` (exit 4, before consent, nothing written), the manifest records
the restriction, ``agentprov package`` refuses the corpus (exit 4), and validate, verify,
stats and recompute still read it.

The CLI tests run the real CLI against an environment marker written the way ``backends
build`` writes one (steps 1 and 2 read nothing else of the environment; the refusal is at
step 3, before any worker starts), so no Inspect environment is built. The acceptance of a
corpus under the home, and its manifest, run ``prepare`` in process against the same
marker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT, snapshot

from agentprov_core.backend import environments, marker
from agentprov_core.base.digests import file_sha256
from agentprov_core.corpus.working import WorkingCorpus
from agentprov_core.plugins import source_entry
from agentprov_core.run import prepare as planning
from agentprov_core.run.manifest import manifest_of
from agentprov_core.run.runrequest import RunRequest
from tests.test_corpus_tools import build_corpus

INSPECT = ("--task", "inspect_evals/agentharm", "--samples", "limit:2", "--message-limit",
           "10", "--token-limit", "20000", "--time-limit", "600", "--judge",
           "refusal_judge=example-model", "--judge", "semantic_judge=example-model",
           "--cell-size", "1")


def agentharm_marker(home: Path) -> str:
    """A marker for the inspect-agentharm environment under ``home`` (its id, the
    repository's lock and defence registry): step 2's environment check passes."""
    meta = source_entry("agentharm").source.meta
    env_id = environments.environment_id(meta)
    d = home / "envs" / env_id
    d.mkdir(parents=True)
    marker.write(d, marker.Marker(
        format=marker.FORMAT, environment_id=env_id, backend="inspect-agentharm",
        project="backends/inspect/envs/agentharm", built_at="2026-12-01T00:00:00Z",
        agentprov="0.1.0", python="3.12.1", uv="uv",
        lock_sha256=file_sha256(ROOT / "backends/inspect/envs/agentharm/uv.lock"),
        exclude_newer=None, pinned_commit=None, distributions={}, files_verified=0,
        guarded={}, defence_registry_sha256=file_sha256(ROOT / "registry/defences.toml"),
        hello={}, probe={}, identity_sha256="0" * 64))
    return env_id


@pytest.fixture
def built(home: Path) -> Path:
    agentharm_marker(home)
    return home


def run_args(corpus: Path, script: Path, *extra: str) -> tuple[str, ...]:
    return ("run", "agentharm", "--corpus", str(corpus), "--campaign", "ah", *INSPECT,
            "--llm-script", str(script), *extra)


# ------------------------------------------------------------------------ the declaration
@pytest.mark.req("R-25.38")
def test_agentharm_declares_its_corpus_restricted_and_agentdojo_does_not():
    r = source_entry("agentharm").source.meta.restricted
    assert r is not None
    assert "additional clause" in r.licence and "AI safety and security" in r.licence
    assert "harmful prompts" in r.holds and "verbatim" in r.holds
    assert "restricted-use" in r.why and "private" in r.why
    assert source_entry("agentdojo").source.meta.restricted is None


# ------------------------------------------------------------------------ agentprov run
@pytest.mark.req("R-25.38")
@pytest.mark.parametrize("mode", [("--dry-run",), ()], ids=["dry-run", "run"])
def test_a_corpus_outside_the_home_is_refused_before_anything_is_written(
        cli, built, corpora, script, mode):
    """Exit 4 naming the corpus, $AGENTPROV_HOME and the fix; a run (not only a dry run)
    is refused before consent and before any worker starts: nothing is written."""
    before = snapshot(built)
    r = cli(*run_args(corpora / "ah", script, *mode))
    assert (r.code, r.error["error"]) == (4, "cli.refused.restricted_corpus"), r.err
    msg = r.error["message"]
    assert f"--corpus {corpora / 'ah'}:" in msg
    assert f"outside $AGENTPROV_HOME ({built.resolve()})" in msg
    assert f"e.g. --corpus {built.resolve() / 'corpora' / 'ah'}" in msg
    assert "restricted-use corpus, private" in msg
    assert r.out == ""
    assert snapshot(built) == before and list(corpora.iterdir()) == []


@pytest.mark.req("R-25.38")
def test_the_human_message_names_the_corpus_the_home_and_the_fix(cli, built, corpora, script):
    r = cli(*run_args(corpora / "ah", script, "--dry-run"), json_errors=False)
    assert r.code == 4
    assert r.err.startswith(f"agentprov: error [cli.refused.restricted_corpus]: --corpus "
                            f"{corpora / 'ah'}: {corpora / 'ah'} resolves to "
                            f"{(corpora / 'ah').resolve()}, outside $AGENTPROV_HOME"), r.err
    assert "Traceback" not in r.err


@pytest.mark.req("R-25.38")
@pytest.mark.parametrize("linked", ["corpora", "ah.partial"])
def test_a_symlink_under_the_home_that_leaves_it_is_refused(cli, built, tmp_path, script,
                                                            linked):
    """The corpus path is resolved: ``$AGENTPROV_HOME/corpora`` linked elsewhere, or only the
    working directory ``ah.partial`` linked elsewhere, is outside the home."""
    outside = tmp_path / "outside"
    outside.mkdir()
    corpora = built / "corpora"
    if linked == "corpora":
        corpora.symlink_to(outside, target_is_directory=True)
    else:
        corpora.mkdir()
        (corpora / "ah.partial").symlink_to(outside, target_is_directory=True)
    before = snapshot(built)
    r = cli(*run_args(corpora / "ah", script, "--dry-run"))
    assert (r.code, r.error["error"]) == (4, "cli.refused.restricted_corpus"), r.err
    where = corpora / ("ah" if linked == "corpora" else "ah.partial")
    assert f"{where} resolves to {where.resolve()}" in r.error["message"]
    assert snapshot(built) == before and list(outside.iterdir()) == []


@pytest.mark.req("R-25.38")
def test_a_relative_corpus_is_resolved_from_the_working_directory(cli, built, tmp_path,
                                                                  script):
    """``--corpus ../x`` from a directory under the home names a directory outside it."""
    cwd = built / "work"
    cwd.mkdir()
    before = snapshot(built)
    r = cli(*run_args(Path("../../ah"), script, "--dry-run"), cwd=cwd)
    assert (r.code, r.error["error"]) == (4, "cli.refused.restricted_corpus"), r.err
    assert snapshot(built) == before and not (tmp_path / "ah.partial").exists()


# ------------------------------------------------------------- a corpus under the home
@pytest.fixture
def inproc(home, monkeypatch, script):
    """In-process planning of a scripted agentharm plan against :func:`agentharm_marker`."""
    monkeypatch.setenv("AGENTPROV_HOME", str(home))
    agentharm_marker(home)

    def prepare(corpus: Path):
        options = dict(corpus=str(corpus), campaign="ah", task="inspect_evals/agentharm",
                       samples="limit:2", message_limit=10, token_limit=20000,
                       time_limit=600, cell_size=1, llm_script=str(script), dry_run=True,
                       judge=("refusal_judge=example-model", "semantic_judge=example-model"))
        return planning.prepare(RunRequest.of("agentharm", options, set(options)))

    return prepare


@pytest.mark.req("R-25.38", "R-25.39")
def test_a_corpus_under_the_home_is_planned_as_agentharm_live_campaign(inproc, home):
    before = snapshot(home)
    prepared = inproc(home / "corpora" / "ah")
    assert prepared.plan.corpus_id == "agentharm-live-ah"
    assert len(prepared.plan.cells) == 2
    linked = home / "elsewhere"  # a symlink that stays inside the home is inside it
    (home / "real").mkdir()
    linked.symlink_to(home / "real", target_is_directory=True)
    assert inproc(linked / "ah").plan.corpus_id == "agentharm-live-ah"
    assert {k: v for k, v in snapshot(home).items() if k in before} == before
    assert not (home / "corpora").exists()  # planning wrote no corpus


@pytest.mark.req("R-25.38")
def test_the_manifest_records_the_restriction(inproc, home):
    prepared = inproc(home / "corpora" / "ah")
    m = manifest_of(prepared, None)
    r = prepared.source.meta.restricted
    assert m["restricted"] == {"why": r.why, "licence": r.licence, "holds": r.holds,
                               "private": True, "deposit": "never",
                               "release": "needs a separate decision of the project owner"}
    assert m["source_meta"]["restricted"] == {"why": r.why, "licence": r.licence,
                                              "holds": r.holds}
    assert m["corpus_id"] == "agentharm-live-ah"


# --------------------------------------------------------------------- the corpus tools
def restricted_corpus(base: Path, block: dict | None, snapshot_meta: bool) -> Path:
    """The corpus tools' example corpus with its manifest marked restricted the way T0
    writes it (``restricted``, and the source's declaration in ``source_meta``)."""
    root = build_corpus(base)
    wc = WorkingCorpus(root)
    m = wc.manifest()
    if block is not None:
        m["restricted"] = block
    if snapshot_meta:
        m["source_meta"] = {"name": "agentdojo", "restricted": {
            "why": "a test corpus, restricted", "licence": "MIT+", "holds": "verbatim text"}}
    wc.write_manifest(m)
    return root


BLOCK = {"why": "a live AgentHarm corpus is its own restricted-use corpus, private",
         "licence": "MIT with an additional clause", "holds": "harmful prompts, verbatim",
         "private": True, "deposit": "never",
         "release": "needs a separate decision of the project owner"}


@pytest.mark.req("R-25.38")
@pytest.mark.parametrize("block,snapshot_meta", [(BLOCK, True), (None, True)],
                         ids=["restricted", "source_meta-only"])
def test_package_refuses_a_restricted_corpus_and_writes_nothing(cli, tmp_path, block,
                                                                snapshot_meta):
    """Before the live refusal (exit 5): a restricted corpus is never deposited, whatever a
    later build seals; the declaration in ``source_meta`` alone is enough."""
    root = restricted_corpus(tmp_path / "corpora", block, snapshot_meta)
    spec = tmp_path / "corpus-spec.toml"
    spec.write_text('format = "agentprov-corpus-spec/0.2"\n')
    before = snapshot(root.parent)
    r = cli("package", "--corpus", root, "--corpus-version", "0.1.0", "--spec", spec)
    assert (r.code, r.error["error"]) == (4, "package.refused.restricted"), r.err
    msg = r.error["message"]
    assert str(root) in msg and "never deposited" in msg and "project owner" in msg
    why = (block or {}).get("why") or "a test corpus, restricted"
    assert why in msg
    assert snapshot(root.parent) == before


@pytest.mark.req("R-25.38")
def test_validate_verify_stats_and_recompute_read_a_restricted_corpus(cli, tmp_path):
    root = restricted_corpus(tmp_path / "corpora", BLOCK, True)
    before = snapshot(root)
    v = cli("validate", "--corpus", root, "--strict")
    assert v.code == 0 and "5 passed, 0 failed" in v.out, v.out + v.err
    ver = cli("verify", "--corpus", root, "--format", "json")
    assert ver.code == 0 and json.loads(ver.out)["result"] == "passed with unverified checks"
    s = cli("stats", "--corpus", root, "--tables", "counts", "--format", "json")
    assert s.code == 0 and json.loads(s.out)["tables"]["counts"][0]["n_executions"] == 4
    rc = cli("recompute", "--corpus", root, "--dry-run")
    assert rc.code == 0 and "5 identical, 0 changed" in rc.out, rc.out + rc.err
    assert snapshot(root) == before


# ------------------------------------------------- the real run path (slow: the environment)
@pytest.mark.slow
@pytest.mark.req("R-25.38", "R-25.39")
def test_a_scripted_agentharm_run_under_the_home_records_restricted(agentharm_env, tmp_path):
    """The real inspect-agentharm environment (fixture dataset): a scripted run into
    ``$AGENTPROV_HOME/corpora`` is admitted and writes a manifest that records
    ``restricted``; validate reads it; package refuses it; the same run into a directory
    outside the home is refused, nothing written."""
    import subprocess
    import sys

    from conftest import Result, child_env

    def cli(*args: str) -> Result:
        e = child_env() | {"AGENTPROV_HOME": str(agentharm_env.home),
                           "AGENTPROV_ERROR_FORMAT": "json"}
        p = subprocess.run([sys.executable, "-m", "agentprov_core", *map(str, args)],
                           capture_output=True, text=True, env=e, cwd=ROOT, timeout=600)
        return Result(p.returncode, p.stdout, p.stderr)

    script = tmp_path / "script.json"
    script.write_text("[]")
    args = ("--campaign", "rc", "--task", "inspect_evals/agentharm", "--samples", "limit:1",
            "--message-limit", "10", "--token-limit", "20000", "--time-limit", "600",
            "--judge", "refusal_judge=m", "--judge", "semantic_judge=m", "--cell-size", "1",
            "--llm-script", str(script))
    outside = tmp_path / "outside"
    outside.mkdir()
    before = snapshot(agentharm_env.home)
    r = cli("run", "agentharm", "--corpus", outside / "rc", *args)
    assert (r.code, r.error["error"]) == (4, "cli.refused.restricted_corpus"), r.err
    assert snapshot(agentharm_env.home) == before and list(outside.iterdir()) == []

    corpus = agentharm_env.home / "corpora" / "rc"
    r = cli("run", "agentharm", "--corpus", corpus, *args)
    assert r.code in (0, 1), r.err  # admitted: the empty script's cell may fail, and stays
    m = json.loads((corpus.with_name("rc.partial") / "manifest.json").read_text())
    assert m["corpus_id"] == "agentharm-live-rc"
    assert m["restricted"]["private"] is True and m["restricted"]["deposit"] == "never"
    assert "AI safety and security" in m["restricted"]["licence"]
    assert m["source_meta"]["restricted"]["why"] == m["restricted"]["why"]
    v = cli("validate", "--corpus", corpus, "--strict")
    assert v.code == 0 and "of agentharm-live-rc (working)" in v.out, v.out + v.err
    assert "1 passed, 0 failed" in v.out
    spec = tmp_path / "corpus-spec.toml"
    spec.write_text('format = "agentprov-corpus-spec/0.2"\n')
    p = cli("package", "--corpus", corpus, "--spec", spec, "--corpus-version", "0.1.0")
    assert (p.code, p.error["error"]) == (4, "package.refused.restricted"), p.err
