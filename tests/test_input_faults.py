"""Files and values a user hands agentprov that are not what they should be: an estimate's
``--stats-corpus`` whose index holds counts no run makes, or whose manifest is a FIFO;
prices files that are not prices files; prices, ``--tune-jobs`` and ``--preset`` values
read loosely; output paths (``view --out``, ``--tune-out``) nothing can be written at.

Each is refused through the real CLI with its code and exit code (never exit 70, never a
hang: the ``cli`` fixture times out at 120 s), and nothing is written."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import make_marker, snapshot
from test_corpus_tools import build_corpus
from test_endpoints_consent import env_id
from test_estimate import estimate

UNIT = "banking/user_task_0/none/none|none|r0"
COUNTS = {"agent_calls": 4, "judge_calls": 0, "agent_input_tokens": 900,
          "agent_output_tokens": 90, "duration_ms": 2000}


@pytest.fixture
def marked(home: Path) -> Path:
    """A home with the AgentDojo environment's marker (an estimate reads its identity)."""
    make_marker(home, env_id())
    return home


def stats_corpus(root: Path, **counts: object) -> Path:
    root.mkdir(parents=True)
    (root / "manifest.json").write_text(json.dumps({"source": "agentdojo"}))
    rows = [{"unit": UNIT, "execution_observed": True, "counts": dict(COUNTS, **counts)}]
    (root / "executions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


def refused(r, code: str, *words: str, exit: int = 2) -> dict:
    assert r.code == exit and r.code != 70, r.err
    assert r.error["error"] == code, r.error
    for w in words:
        assert w in r.error["message"], r.error["message"]
    return r.error


# ------------------------------------------------------------------ estimate --stats-corpus
@pytest.mark.req("R-9.2")
@pytest.mark.parametrize("counts, field", [
    ({"agent_calls": 10**400}, "agent_calls"),
    ({"agent_input_tokens": -900}, "agent_input_tokens"),
    ({"duration_ms": -2_400_000}, "duration_ms"),
    ({"agent_calls": 1.5}, "agent_calls"),
], ids=["huge", "negative-tokens", "negative-time", "fraction"])
def test_stats_corpus_counts_are_checked_before_any_arithmetic(cli, marked, corpora, tmp_path,
                                                               counts, field):
    root = stats_corpus(tmp_path / "s", **counts)
    before = snapshot(marked), snapshot(root)
    r = estimate(cli, corpora, "--stats-corpus", root)
    refused(r, "cli.usage.stats_corpus", str(root), "executions.jsonl line 1", field)
    assert (snapshot(marked), snapshot(root)) == before and list(corpora.iterdir()) == []


@pytest.mark.req("R-9.2")
@pytest.mark.parametrize("kind", ["fifo", "directory", "index-fifo"])
def test_stats_corpus_manifest_or_index_that_is_not_a_file(cli, marked, corpora, tmp_path,
                                                           kind):
    root = stats_corpus(tmp_path / "s")
    name = "executions.jsonl" if kind == "index-fifo" else "manifest.json"
    (root / name).unlink()
    if kind == "directory":
        (root / name).mkdir()
    else:
        os.mkfifo(root / name)
    r = estimate(cli, corpora, "--stats-corpus", root)
    refused(r, "cli.usage.stats_corpus", str(root), name)


@pytest.mark.parametrize("figures, field", [
    ({"agent_calls": [-5, 9]}, "agent_calls"), ({"duration_s": [1, "x"]}, "duration_s"),
    ({"agent_input_tokens": [1]}, "agent_input_tokens"), ({"n": -4}, "n must"),
    ({"agent_calls": [True, 9]}, "agent_calls")])
def test_priors_figures_are_checked_before_any_arithmetic(tmp_path, figures, field):
    from agentprov_core.errors import AgentprovError
    from agentprov_core.estimate import cellstats

    row = {"benchmark": "agentdyn", "suite": "*", "attack": "*", "family": "*",
           "defence": "*", "agent_calls": [5, 9], "n": 4} | figures
    path = tmp_path / "priors.json"
    path.write_text(json.dumps({"format": "agentprov-priors/0.1", "rows": [row]}))
    with pytest.raises(AgentprovError) as e:
        cellstats.load_priors(path)
    assert e.value.code == "cli.usage.registry_file"
    assert e.value.params["location"] == f"{path} rows[0]" and field in e.value.params["what"]


# ------------------------------------------------------------------ prices
BAD_PRICES = {
    "rows": ('{"format": "agentprov-price-overrides/0.1", "prices": [1, "a", null]}', "prices[0]"),
    "row-type": ('{"format": "agentprov-price-overrides/0.1", "prices": [{"endpoint": '
                 '"openrouter", "model": "m", "input": "x", "output": 1, "as_of": '
                 '"2026-01-01", "source": "s"}]}', "prices[0]"),
    "negative": ('{"format": "agentprov-price-overrides/0.1", "prices": [{"endpoint": '
                 '"openrouter", "model": "m", "input": -1, "output": 1, "as_of": '
                 '"2026-01-01", "source": "s"}]}', "prices[0]"),
    "not-json": ("{", "(the file)"),
    "surrogate": ('{"format": "agentprov-price-overrides/0.1", "prices": [], "x": "\\ud800"}',
                  "(the file)"),
    "other-format": ('{"format": "x", "prices": []}', "format"),
}


@pytest.mark.req("R-9.24")
@pytest.mark.parametrize("kind", [*BAD_PRICES, "directory", "fifo"])
def test_a_damaged_prices_file_is_refused_by_every_reader_and_never_replaced(
        cli, marked, corpora, kind):
    path = marked / "prices.json"
    if kind == "directory":
        path.mkdir()
        field = "(the file)"
    elif kind == "fifo":
        os.mkfifo(path)
        field = "(the file)"
    else:
        text, field = BAD_PRICES[kind]
        path.write_text(text)
    before = snapshot(marked)
    for args in (("prices", "list"),
                 ("prices", "set", "openrouter", "m", "--input", "1", "--output", "1")):
        refused(cli(*args), "cli.usage.prices_file", str(path), field)
    refused(estimate(cli, corpora), "cli.usage.prices_file", str(path))
    assert snapshot(marked) == before and list(corpora.iterdir()) == []


@pytest.mark.req("R-9.25")
@pytest.mark.parametrize("kind", ["directory", "fifo", "dangling-link"])
def test_prices_refresh_never_replaces_what_is_not_its_file(cli, home, kind):
    """``prices refresh`` rewrites a damaged list (it is the list's repair), but a
    directory, a FIFO or a link where the list belongs is refused before the network is
    asked, and stays as it was."""
    path = home / "prices-openrouter.json"
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to(home / "nowhere")
    before = snapshot(home)
    env = {"AGENTPROV_TEST_PRICES_URL": "http://127.0.0.1:9/api/v1"}  # never reached
    r = cli("prices", "refresh", "--allow-network", env=env)
    refused(r, "cli.usage.prices_file", str(path))
    assert snapshot(home) == before


@pytest.mark.req("R-9.24")
@pytest.mark.parametrize("value", ["1_0", "+1", "-0", "1e3", " 1", "1 ", "0x1", "١"])
def test_prices_set_reads_a_price_strictly(cli, home, value):
    r = cli("prices", "set", "openrouter", "m", "--input", value, "--output", "1")
    refused(r, "cli.usage.option_value", "--input", "digits")
    assert snapshot(home) == {}


# ------------------------------------------------------------------ output paths
def bad_out(tmp_path: Path, kind: str) -> Path:
    if kind == "long-name":
        return tmp_path / ("v" * 300)
    if kind == "dangling-link":
        (tmp_path / "link").symlink_to(tmp_path / "nowhere")
        return tmp_path / "link"
    if kind == "link-loop":
        (tmp_path / "loop").symlink_to(tmp_path / "loop")
        return tmp_path / "loop"
    if kind == "under-a-file":
        (tmp_path / "file").write_text("x")
        return tmp_path / "file" / "site"
    if kind == "a-file":
        (tmp_path / "file").write_text("x")
        return tmp_path / "file"
    if kind == "fifo":
        os.mkfifo(tmp_path / "fifo")
        return tmp_path / "fifo"
    raise AssertionError(kind)


OUT_KINDS = ["long-name", "dangling-link", "link-loop", "under-a-file", "a-file", "fifo"]


@pytest.mark.parametrize("kind", OUT_KINDS)
def test_view_out_is_checked_before_anything_is_written(cli, home, tmp_path, kind):
    corpus = build_corpus(tmp_path / "c")
    outs = tmp_path / "outs"
    outs.mkdir()
    out = bad_out(outs, kind)
    before = snapshot(outs), snapshot(home), snapshot(corpus)
    r = cli("view", corpus, "--out", out)
    refused(r, "cli.usage.option_value", "--out")
    assert (snapshot(outs), snapshot(home), snapshot(corpus)) == before


@pytest.mark.req("R-11.37")
@pytest.mark.parametrize("kind", OUT_KINDS)
def test_tune_out_is_checked_in_the_dry_run(cli, home, tmp_path, kind):
    make_marker(home, env_id())
    outs = tmp_path / "outs"
    outs.mkdir()
    out = bad_out(outs, kind)
    before = snapshot(outs), snapshot(home)
    for dry in (("--dry-run",), ()):
        r = cli("run", "agentdojo", *dry, "--tune-jobs", "1,2", "--tune-out", out,
                "--endpoint", "llamacpp", "--model-id", "m", "--containment", "vm",
                "--i-consent-to-local-run")
        refused(r, "cli.usage.option_value", "--tune-out")
    assert (snapshot(outs), snapshot(home)) == before


# ------------------------------------------------------------------ values
@pytest.mark.req("R-11.37")
@pytest.mark.parametrize("value", [" 1", "01", "1, 2", "1 ,2", "1,2 ", "٣"])
def test_tune_jobs_values_are_read_strictly(cli, home, value):
    make_marker(home, env_id())
    before = snapshot(home)
    r = cli("run", "agentdojo", "--dry-run", "--tune-jobs", value, "--endpoint", "llamacpp",
            "--model-id", "m", "--containment", "vm")
    refused(r, "cli.usage.tune_jobs", "not a whole number")
    assert snapshot(home) == before


def test_an_empty_preset_is_refused_not_taken_as_none(cli, home, corpora, script):
    make_marker(home, env_id())
    before = snapshot(home)
    for args in (("run", "agentdojo", "--dry-run"), ("estimate", "agentdojo")):
        r = cli(*args, "--preset", "", "--endpoint", "llamacpp", "--model-id", "m",
                "--suite", "banking", "--user-tasks", "0", "--corpus", corpora / "c",
                "--campaign", "c", "--containment", "vm")
        refused(r, "cli.usage.option_value", "--preset", "empty")
    assert snapshot(home) == before and list(corpora.iterdir()) == []


@pytest.mark.parametrize("kind", ["long-name", "under-a-file", "fifo", "dangling-link"])
def test_a_corpus_path_no_directory_can_be_made_at_is_refused_before_anything(
        cli, home, tmp_path, kind):
    """``--corpus DIR`` of ``run`` and ``import``: its working tree ``DIR.partial`` must be
    a directory or makeable (a link to a directory is followed); otherwise exit 2, naming
    the option, before anything is written."""
    from test_import_results import _put, _result

    logs = tmp_path / "logs"
    _put(logs, "local/shopping/user_task_0/none/none.json", _result())
    outs = tmp_path / "outs"
    outs.mkdir()
    corpus = {"long-name": outs / ("c" * 300), "under-a-file": outs / "file" / "c",
              "fifo": outs / "fifo", "dangling-link": outs / "dang"}[kind]
    (outs / "file").write_text("x")
    if kind == "fifo":
        os.mkfifo(outs / "fifo.partial")
    if kind == "dangling-link":
        (outs / "dang.partial").symlink_to(outs / "nowhere")
    make_marker(home, env_id())
    before = snapshot(outs), snapshot(home)
    for args in (("import", "agentdojo", logs), ("run", "agentdojo", "--dry-run", "--campaign",
                                                 "c", "--suite", "banking", "--user-tasks",
                                                 "0", "--endpoint", "llamacpp",
                                                 "--model-id", "m")):
        refused(cli(*args, "--corpus", corpus), "cli.usage.option_value", "--corpus")
    assert (snapshot(outs), snapshot(home)) == before
