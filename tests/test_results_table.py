"""The results table (``agentprov stats --tables results``) and the comparison
(``stats --compare``), through the real CLI, over working corpora written the way T0 writes
them with chosen outcomes (tests/results_corpus.py), and the intervals against published
and hand-computed figures. The same over real scripted runs: tests/test_results_e2e.py.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
from conftest import snapshot
from results_corpus import Cell, build

from agentprov_core.audit import intervals

R = "important_instructions"
NONDET = ("agentdyn.art.nondeterministic_tools@1 reproducible: no (the tools read the clock "
          "and the random generator)")


# ------------------------------------------------------------------ the intervals
@pytest.mark.parametrize("k,n,low,high", [
    # Newcombe (1998), "Two-sided confidence intervals for the single proportion", the
    # Wilson score interval (method 3) of his examples
    (81, 263, 0.2553, 0.3662), (15, 148, 0.0624, 0.1605), (0, 20, 0.0, 0.1611),
    (1, 29, 0.0061, 0.1718),
    # and two at small n
    (0, 10, 0.0, 0.2775), (5, 10, 0.2366, 0.7634)])
def test_wilson_matches_the_published_values(k, n, low, high):
    lo, hi = intervals.wilson(k, n)
    assert (round(lo, 4), round(hi, 4)) == (low, high)
    assert intervals.wilson(n - k, n) == pytest.approx((1 - hi, 1 - lo))  # symmetric


def test_wilson_by_hand_and_at_the_edges():
    z = 1.959963984540054
    assert intervals.z_of() == pytest.approx(z, abs=1e-12)
    # 3 of 4: centre (0.75 + z²/8) / (1 + z²/4), half z/(1 + z²/4) * sqrt(0.75*0.25/4 + z²/64)
    c = (0.75 + z * z / 8) / (1 + z * z / 4)
    h = z / (1 + z * z / 4) * math.sqrt(0.75 * 0.25 / 4 + z * z / 64)
    assert intervals.wilson(3, 4) == pytest.approx((c - h, c + h), abs=1e-12)
    assert intervals.wilson(0, 0) is None
    assert intervals.wilson(2, 2)[1] == 1.0 and intervals.wilson(0, 2)[0] == 0.0
    with pytest.raises(ValueError):
        intervals.wilson(3, 2)


def test_newcombe_paired_and_hybrid_match_the_published_values():
    # Fagerland, Lydersen and Laake, "Statistical Analysis of Contingency Tables" (the
    # paired 2x2 table of Cavo et al. 2012: 59 both, 6 and 16 discordant, 80 neither): the
    # Newcombe square-and-add interval of the difference is -0.0621 (-0.1186 to -0.0046).
    d, lo, hi = intervals.paired_difference(both=59, only_a=16, only_b=6, neither=80)
    assert (round(d, 4), round(lo, 4), round(hi, 4)) == (-0.0621, -0.1186, -0.0046)
    # the same book, independent samples 7/34 against 1/34: 0.1765 (0.0189 to 0.3404)
    d, lo, hi = intervals.unpaired_difference(1, 34, 7, 34)
    assert (round(d, 4), round(lo, 4), round(hi, 4)) == (0.1765, 0.0189, 0.3404)
    assert intervals.paired_difference(0, 0, 0, 0) is None
    assert intervals.unpaired_difference(0, 0, 1, 2) is None


def test_newcombe_paired_by_hand():
    """1 of 2 in A, 2 of 2 in B, one discordant pair: a margin is 0, so the correlation is
    0 and the interval is the hybrid one: 0.5 - sqrt((1 - l_B)² + (u_A - 0.5)²) to
    0.5 + (0.5 - l_A)."""
    la, ua = intervals.wilson(1, 2)
    lb, _ = intervals.wilson(2, 2)
    d, lo, hi = intervals.paired_difference(both=1, only_a=0, only_b=1, neither=0)
    assert d == 0.5
    assert lo == pytest.approx(0.5 - math.sqrt((1 - lb) ** 2 + (ua - 0.5) ** 2), abs=1e-12)
    assert hi == pytest.approx(0.5 + (0.5 - la), abs=1e-12)
    assert (round(lo, 4), round(hi, 4)) == (-0.2726, 0.9055)
    # a positive correlation narrows the interval; the correction shrinks ad - bc by n/2:
    # 5 both, 1 only A, 1 only B, 5 neither: ad - bc = 24 > n/2 = 6, phi = 18 / 36
    la, ua = intervals.wilson(6, 12)
    phi = (5 * 5 - 1 * 1 - 6) / math.sqrt(6 * 6 * 6 * 6)
    w = math.sqrt((0.5 - la) ** 2 + (ua - 0.5) ** 2 - 2 * phi * (0.5 - la) * (ua - 0.5))
    assert intervals.paired_difference(5, 1, 1, 5) == pytest.approx((0.0, -w, w), abs=1e-12)
    assert w < intervals.unpaired_difference(6, 12, 6, 12)[2]


# ------------------------------------------------------------------ corpora
def demo_cells(defence: str = "none") -> list[Cell]:
    """Two benign and two attacked banking cells with known outcomes, plus what a table
    must leave out or flag: an errored session, a live-versus-native disagreement, an
    outcome not recorded, a unit retried after an errored attempt, an AgentDyn-style
    non-reproducible unit (whose live-versus-native check could not be made)."""
    return [
        Cell("user_task_0", defence=defence),                                  # benign, ok
        Cell("user_task_1", utility=False, defence=defence),                   # benign, fail
        Cell("user_task_0", "injection_task_0", utility=False, security=True,  # attacked
             defence=defence),
        Cell("user_task_1", "injection_task_0", defence=defence),              # resisted
        Cell("user_task_2", "injection_task_0", status="errored", utility=None,
             security=None, defence=defence),                                  # inconclusive
        Cell("user_task_3", agree=False, defence=defence),                     # disagree
        Cell("user_task_4", utility=None, defence=defence),                    # not recorded
        Cell("user_task_5", "injection_task_0", status="errored", utility=None,
             security=None, defence=defence),                                  # then retried:
        Cell("user_task_5", "injection_task_0", utility=True, security=True,
             defence=defence),
        Cell("user_task_6", instrumentation=[NONDET], agree=None, defence=defence),
    ]


@pytest.fixture
def corpora(tmp_path) -> Path:
    base = tmp_path / "corpora"
    base.mkdir()
    return base


def results(cli, *args) -> dict:
    r = cli("stats", *map(str, args), "--tables", "results", "--format", "json")
    assert r.code == 0, r.out + r.err
    return json.loads(r.out)["tables"]["results"]


def row(table: dict, **group) -> dict:
    (got,) = [r for r in table["rows"] if all(r["group"][k] == v for k, v in group.items())]
    return got


def rate(k: int, n: int) -> dict:
    lo, hi = intervals.wilson(k, n) or (None, None)
    return {"successes": k, "n": n, "rate": k / n if n else None, "low": lo, "high": hi}


def test_the_results_table_counts_conclusive_units_as_agentdojo_does(cli, corpora):
    root = build(corpora, "demo", demo_cells())
    t = results(cli, root)
    assert (t["format"], t["by"], t["level"], t["interval"]) == (
        "agentprov-results/0.1", ["model", "suite", "attack", "defence"], 0.95, "wilson")
    assert (t["units"], t["counted"]) == (9, 6)
    assert t["left_out"] == {"live_native_disagree": 1, "outcome_not_recorded": 1,
                             "inconclusive": 1}
    assert t["damaged"] == [] and t["in_progress"] is False
    benign = row(t, attack="none")
    # user_task_0 (true), user_task_1 (false), user_task_6 (true): 2 of 3
    assert benign["utility"] == rate(2, 3) and benign["attack_success"] is None
    assert benign["units"] == 3 and benign["kind"] == "agentdojo"
    assert benign["left_out"] == {"live_native_disagree": 1, "outcome_not_recorded": 1}
    assert benign["live_vs_native"] == {"agree": 2, "unchecked": 1}
    assert any(f.startswith("live_native_disagree: 1 unit(s) left out") for f in benign["flags"])
    assert any(f.startswith("not_reproducible: agentdyn.art.nondeterministic_tools@1 (1 unit")
               for f in benign["flags"])
    attacked = row(t, attack=R)
    # user_task_0 (u false, s true), user_task_1 (u true, s false), user_task_5 retried
    # (u true, s true): utility 2 of 3, attack success 2 of 3; user_task_2 never completed
    assert attacked["utility"] == rate(2, 3) and attacked["attack_success"] == rate(2, 3)
    assert attacked["left_out"] == {"inconclusive": 1}
    # no capture log is stored here: whether each payload reached the model is not
    # determined (A13), so no attack success over reached payloads either
    assert attacked["flags"] == ["payload_not_determined: 3 attacked unit(s): no capture log "
                                 "or no injection text to look for"]
    assert attacked["payload"] == {"not_determined": 3}
    assert attacked["attack_success_reached"] == rate(0, 0)
    assert attacked["group"] == {"model": "scripted", "suite": "banking", "attack": R,
                                 "defence": "none"}


def test_by_chooses_the_grouping(cli, corpora):
    root = build(corpora, "demo", demo_cells())
    t = results(cli, root, "--by", "user_task,injection_task")
    assert t["by"] == ["user_task", "injection_task"]
    assert [(r["group"]["user_task"], r["group"]["injection_task"], r["units"])
            for r in t["rows"]] == [
        ("user_task_0", "injection_task_0", 1), ("user_task_0", "none", 1),
        ("user_task_1", "injection_task_0", 1), ("user_task_1", "none", 1),
        ("user_task_2", "injection_task_0", 0), ("user_task_3", "none", 0),
        ("user_task_4", "none", 0), ("user_task_5", "injection_task_0", 1),
        ("user_task_6", "none", 1)]
    assert row(t, user_task="user_task_2")["utility"] == rate(0, 0)
    assert row(t, user_task="user_task_2")["left_out"] == {"inconclusive": 1}
    one = results(cli, root, "--by", "source")
    assert [r["group"] for r in one["rows"]] == [{"source": "agentdojo"}]
    assert one["rows"][0]["utility"] == rate(4, 6)  # every counted unit
    assert one["rows"][0]["attack_success"] == rate(2, 3)  # the attacked ones


def test_text_tsv_and_markdown_print_the_same_figures(cli, corpora):
    root = build(corpora, "demo", demo_cells())
    text = cli("stats", root, "--tables", "results")
    assert text.code == 0, text.err
    lines = text.out.splitlines()
    assert lines[0].split() == ["model", "suite", "attack", "defence", "units", "utility",
                                "attack_success", "payload_reached", "attack_success_reached",
                                "left_out", "flags"]
    assert lines[1].startswith("scripted  banking  important_instructions  none     3      "
                               "2/3 66.7% [20.8, 93.9]  2/3 66.7% [20.8, 93.9]  "
                               "0/3 (3 not determined)  0/0  "), lines[1]
    assert "demo (working): 6 of 9 unit(s) counted; left out: live_native_disagree 1, " \
           "outcome_not_recorded 1, inconclusive 1; 95% Wilson score intervals" in lines
    assert "flag: not_reproducible: agentdyn.art.nondeterministic_tools@1 (1 unit(s)): a " \
           "re-run is a new execution" in lines
    same = cli("stats", "--corpus", root, "--tables", "results")
    assert same.out == text.out  # the corpus as an argument or as --corpus
    tsv = cli("stats", root, "--tables", "results", "--format", "tsv").out.splitlines()
    head = tsv[0].split("\t")
    cells = dict(zip(head, tsv[1].split("\t"), strict=True))
    lo, hi = intervals.wilson(2, 3)
    assert (cells["utility_k"], cells["utility_n"], float(cells["utility_low"]),
            float(cells["utility_high"])) == ("2", "3", lo, hi)
    assert cells["left_out"] == "inconclusive=1"
    md = cli("stats", root, "--tables", "results", "--format", "md").out.splitlines()
    assert md[0].startswith("| model | suite | attack | defence | units | utility |")
    assert md[1] == "|---|---|---|---|---|---|---|---|---|---|---|"
    assert md[2].startswith("| scripted | banking | important_instructions | none | 3 | "
                            "2/3 66.7% [20.8, 93.9] |")


def test_results_table_is_a_function_other_parts_call(corpora):
    import msgspec

    from agentprov_core.audit.results import ResultsTable, results_table

    root = build(corpora, "demo", demo_cells())
    t = results_table(root, by=["attack"])
    assert isinstance(t, ResultsTable) and [r.group for r in t.rows] == [
        {"attack": R}, {"attack": "none"}]
    doc = msgspec.to_builtins(t)
    assert doc["rows"][0]["attack_success"]["successes"] == 2
    from agentprov_core.errors import AgentprovError

    with pytest.raises(AgentprovError) as exc:
        results_table(root, by=["colour"])
    assert exc.value.code == "stats.usage.by_key"


@pytest.mark.req("R-14.1")
def test_a_damaged_aer_is_reported_and_not_counted(cli, corpora):
    root = build(corpora, "demo", demo_cells())
    index = [json.loads(x) for x in (root / "executions.jsonl").read_text().splitlines()]
    first = root / "executions" / index[0]["execution_id"] / "aer.json"  # user_task_0 benign
    os.chmod(first, 0o644)
    first.write_bytes(first.read_bytes().replace(b'"utility":true', b'"utility":false'))
    gone = root / "executions" / index[2]["execution_id"] / "aer.json"  # user_task_0 attacked
    os.chmod(gone.parent, 0o755)
    gone.unlink()
    before = snapshot(root)
    t = results(cli, root)
    assert snapshot(root) == before
    assert (t["units"], t["counted"]) == (9, 4)
    assert t["left_out"]["aer_damaged"] == 2
    assert t["damaged"] == [
        f"executions/{index[0]['execution_id']}/aer.json: its sha256 is not the aer_sha256 "
        "executions.jsonl records (changed after it was indexed)",
        f"executions/{index[2]['execution_id']}/aer.json: cannot be read (no such file)"]
    benign = row(t, attack="none")
    assert benign["utility"] == rate(1, 2)  # the edited AER's unit is not counted either way
    assert benign["left_out"]["aer_damaged"] == 1
    assert any(f.startswith("aer_damaged: 1 unit(s) left out") for f in benign["flags"])
    text = cli("stats", root, "--tables", "results").out
    assert f"damaged: executions/{index[0]['execution_id']}/aer.json: its sha256" in text


def test_an_aer_that_is_not_one_is_damaged(cli, corpora):
    root = build(corpora, "demo", [Cell("user_task_0"), Cell("user_task_1")])
    import hashlib

    lines = (root / "executions.jsonl").read_text().splitlines()
    e = json.loads(lines[0])
    aer = root / "executions" / e["execution_id"] / "aer.json"
    os.chmod(aer, 0o644)
    aer.write_bytes(b'{"header": [1], "outcome": 2}\n')
    e["aer_sha256"] = hashlib.sha256(aer.read_bytes()).hexdigest()  # the index says so too
    from agentprov_core.corpus.selfdigest import with_line_digest

    e["line_sha256"] = ""
    lines[0] = with_line_digest(json.dumps(e, separators=(",", ":")).encode()).decode()
    (root / "executions.jsonl").write_text("\n".join(lines) + "\n")
    t = results(cli, root)
    assert t["left_out"] == {"aer_damaged": 1} and t["counted"] == 1
    assert t["damaged"][0].startswith(f"executions/{e['execution_id']}/aer.json: not an AER (")


def test_an_inspect_corpus_reports_samples_mean_score_and_refusal_rate(cli, corpora):
    score = lambda s, v, r: {"sample": s, "epoch": 1, "scorer": "combined_scorer",  # noqa: E731
                             "value": {"score": v, "refusal": r}}
    root = build(corpora, "ah", [
        Cell("not recorded", None, suite="inspect_evals/agentharm",
             scores=[score("1-1", 0.5, 1.0), score("1-2", 0.0, 0.0)]),
        Cell("not recorded", None, suite="inspect_evals/agentharm", repeat=1,
             scores=[score("2-1", 1.0, 0.0)]),
        Cell("not recorded", None, suite="inspect_evals/agentharm", repeat=2,
             status="incomplete", scores=[score("3-1", 1.0, 0.0)]),
        Cell("not recorded", None, suite="inspect_evals/agentharm", repeat=3, scores=[])],
        source="agentharm")
    t = results(cli, root, "--by", "source,suite")
    (r,) = t["rows"]
    assert r["kind"] == "inspect" and r["units"] == 2 and r["samples"] == 3
    assert r["score"] == {"n": 3, "mean": pytest.approx(0.5)}
    assert r["refusal"] == rate(1, 3)
    assert r["utility"] is None and r["attack_success"] is None
    assert r["left_out"] == {"outcome_not_recorded": 1, "inconclusive": 1}
    text = cli("stats", root, "--tables", "results", "--by", "suite").out.splitlines()
    assert text[0].split() == ["suite", "units", "samples", "score", "refusal", "left_out",
                               "flags"]
    assert text[1].split()[:6] == ["inspect_evals/agentharm", "2", "3", "0.500", "(n", "3)"]


def test_executions_no_ledger_entry_names_are_read_from_their_aer(cli, corpora):
    """A corpus an importer wrote has executions whose index lines name no ledger entry:
    each is a unit of its AER, conclusive when its session completed."""
    root = build(corpora, "imp", [Cell("user_task_0"), Cell("user_task_1", utility=False),
                                  Cell("user_task_2", status="errored", utility=None)])
    (root / "ledger.jsonl").write_text("")
    t = results(cli, root)
    assert (t["units"], t["counted"], t["left_out"]) == (3, 2, {"inconclusive": 1})
    assert t["rows"][0]["utility"] == rate(1, 2)
    index = root / "executions.jsonl"  # every line naming the same (absent) ledger entry
    index.write_text("".join(json.dumps(dict(json.loads(x), ledger_seq=0)) + "\n"
                             for x in index.read_text().splitlines()))
    assert results(cli, root)["units"] == 3


# ------------------------------------------------------------------ bad input
@pytest.mark.req("R-14.1")
@pytest.mark.parametrize("args,code,exit_,needle", [
    (["--tables", "results", "--by", "model,colour"], "stats.usage.by_key", 2,
     "--by colour: not a key of the results table"),
    (["--tables", "results", "--format", "xml"], "stats.usage.format", 2,
     "--format xml: not a format of stats; the formats are text, json, tsv, md"),
    (["--compare"], "stats.usage.compare_corpora", 2, "--compare needs at least two corpora"),
    (["--compare", "--tables", "counts"], "stats.usage.compare_tables", 2, "--tables counts"),
])
def test_bad_options_exit_2_naming_them_and_write_nothing(cli, corpora, home, args, code,
                                                          exit_, needle):
    root = build(corpora, "demo", demo_cells())
    before, home_before = snapshot(root), snapshot(home)
    r = cli("stats", root, *args)
    assert (r.code, r.error["error"]) == (exit_, code), r.err
    assert needle in r.error["message"] and r.out == ""
    assert snapshot(root) == before and snapshot(home) == home_before


def test_not_a_corpus_is_refused_by_its_code(cli, tmp_path):
    (tmp_path / "empty").mkdir()
    r = cli("stats", tmp_path / "empty", "--tables", "results")
    assert (r.code, r.error["error"]) == (3, "corpus.environment.not_a_corpus") and r.out == ""
    r = cli("stats", tmp_path / "nowhere", "--tables", "results")
    assert (r.code, r.error["error"]) == (2, "corpus.usage.not_found") and r.out == ""
    assert "nowhere" in r.error["message"]
    r = cli("stats")
    assert (r.code, r.error["error"]) == (2, "stats.usage.corpus_needed")
    r = cli("stats", tmp_path / "a", "--corpus", tmp_path / "b")
    assert (r.code, r.error["error"]) == (2, "cli.usage.exclusive")
    assert snapshot(tmp_path) == {}


# ------------------------------------------------------------------ compare
def test_compare_pairs_units_by_cell_and_gives_paired_differences(cli, corpora):
    a = build(corpora, "undefended", demo_cells())
    b = build(corpora, "defended", [
        Cell("user_task_0", defence="tool_filter"),
        Cell("user_task_1", defence="tool_filter"),  # now succeeds
        Cell("user_task_0", "injection_task_0", utility=True, security=False,
             defence="tool_filter"),  # the defence stopped it
        Cell("user_task_1", "injection_task_0", utility=False, security=False,
             defence="tool_filter"),
        Cell("user_task_5", "injection_task_0", utility=True, security=True,
             defence="tool_filter"),
        Cell("user_task_9", "injection_task_0", defence="tool_filter")])  # only in B
    r = cli("stats", "--compare", a, b, "--format", "json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["format"] == "agentprov-compare/0.1"
    assert [t["corpus_id"] for t in doc["tables"]] == ["undefended", "defended"]
    assert doc["tables"][0] == results(cli, a)  # the same table as stats prints
    (d,) = doc["differences"]
    assert (d["a"], d["b"], d["ambiguous"]) == ("undefended", "defended", 0)
    # cells of both: the benign user_task_0..1 and the attacked user_task_0, 1, 5
    # (user_task_2..4 and 6 are A's alone, user_task_9 B's alone)
    assert d["shared_cells"] == 5
    assert d["pairs"] == 5
    att = row(d, attack=R)
    assert att["group"]["defence"] == "none -> tool_filter"
    # attack success over the pairs: A (1, 0, 1), B (0, 0, 1): both 1, only A 1, neither 1
    asr = att["attack_success"]
    assert (asr["both"], asr["only_a"], asr["only_b"], asr["neither"]) == (1, 1, 0, 1)
    want = intervals.paired_difference(1, 1, 0, 1)
    assert (asr["difference"], asr["low"], asr["high"]) == pytest.approx(want)
    assert asr["difference"] == pytest.approx(-1 / 3) and asr["method"] == "newcombe-paired"
    # utility over the pairs: A (0, 1, 1), B (1, 0, 1): both 1, only A 1, only B 1
    u = att["utility"]
    assert (u["both"], u["only_a"], u["only_b"], u["neither"]) == (1, 1, 1, 0)
    assert u["difference"] == 0.0
    # unpaired: every counted attacked unit: A 2 of 3 successful attacks, B 1 of 4
    un = att["attack_success_unpaired"]
    assert (un["n_a"], un["n_b"], un["method"]) == (3, 4, "newcombe-hybrid")
    assert (un["difference"], un["low"], un["high"]) == pytest.approx(
        intervals.unpaired_difference(2, 3, 1, 4))
    ben = row(d, attack="none")
    assert ben["pairs"] == 2 and ben["attack_success"] is None
    assert (ben["utility"]["difference"], ben["utility"]["low"], ben["utility"]["high"]) == \
        pytest.approx(intervals.paired_difference(1, 0, 1, 0))
    text = cli("stats", "--compare", a, b)
    assert text.code == 0
    assert "# defended - undefended" in text.out
    assert "5 shared cell(s), 5 pair(s); differences B - A in percentage points" in text.out
    line = next(x for x in text.out.splitlines() if x.startswith("scripted  banking  "
                                                                 "important_instructions  none ->"))
    assert "-33.3 [" in line


def test_compare_refuses_corpora_that_share_no_cell(cli, corpora, home):
    a = build(corpora, "a", [Cell("user_task_0"), Cell("user_task_1")])
    b = build(corpora, "b", [Cell("user_task_2"), Cell("user_task_3")])
    c = build(corpora, "c", [Cell("user_task_0")])
    before, home_before = snapshot(corpora), snapshot(home)
    r = cli("stats", "--compare", a, c, b)  # c shares one with a; b none
    assert (r.code, r.error["error"]) == (2, "stats.usage.no_shared_cells")
    assert "a and b share no cell" in r.error["message"] and r.out == ""
    assert snapshot(corpora) == before and snapshot(home) == home_before
    ok = cli("stats", "--compare", a, c, "--format", "tsv")
    assert ok.code == 0 and "# c - a" in ok.out


def test_compare_models_in_one_corpus_pair_nothing(cli, corpora):
    """A corpus holding the same cell twice (two models) cannot pair it: ambiguous."""
    a = build(corpora, "a", [Cell("user_task_0", model="m1"), Cell("user_task_0", model="m2",
                                                                   repeat=0, defence="x"),
                             Cell("user_task_1", model="m1")])
    b = build(corpora, "b", [Cell("user_task_0", model="m3"), Cell("user_task_1", model="m3")])
    d = json.loads(cli("stats", "--compare", a, b, "--format", "json", "--by", "model").out)
    (diff,) = d["differences"]
    assert (diff["pairs"], diff["ambiguous"]) == (1, 1)
    assert [r["group"]["model"] for r in diff["rows"]] == ["m1,m2 -> m3"]


def test_compare_inspect_corpora_pairs_samples(cli, corpora):
    score = lambda s, r: {"sample": s, "epoch": 1, "scorer": "combined_scorer",  # noqa: E731
                          "value": {"score": 0.0, "refusal": r}}
    a = build(corpora, "ah-a", [Cell("not recorded", None, suite="inspect_evals/agentharm",
                                     model="m1",
                                     scores=[score("1-1", 1.0), score("1-2", 0.0),
                                             score("1-3", 1.0)])], source="agentharm")
    b = build(corpora, "ah-b", [Cell("not recorded", None, suite="inspect_evals/agentharm",
                                     model="m2",
                                     scores=[score("1-1", 0.0), score("1-2", 0.0),
                                             score("1-4", 1.0)])], source="agentharm")
    doc = json.loads(cli("stats", "--compare", a, b, "--format", "json").out)
    (d,) = doc["differences"]
    (r,) = d["rows"]
    assert r["group"]["model"] == "m1 -> m2" and r["kind"] == "inspect" and r["pairs"] == 2
    # samples 1-1 (refused, not) and 1-2 (not, not) pair; 1-3 and 1-4 are one corpus's
    p = r["refusal"]
    assert (p["both"], p["only_a"], p["only_b"], p["neither"]) == (0, 1, 0, 1)
    assert (p["difference"], p["low"], p["high"]) == pytest.approx(
        intervals.paired_difference(0, 1, 0, 1))
    u = r["refusal_unpaired"]
    assert (u["n_a"], u["n_b"], u["difference"]) == (3, 3, pytest.approx(-1 / 3))
    assert r["utility"] is None and r["attack_success"] is None


def test_a_bound_near_0_or_100_keeps_its_digits():
    from agentprov_core.audit.results import rate as mk
    from agentprov_core.cli.results_render import rate_text

    assert rate_text(mk(0, 10000)) == "0/10000 0.0% [0.0, 0.038]"
    assert rate_text(mk(10000, 10000)) == "10000/10000 100.0% [99.962, 100.0]"
    assert rate_text(mk(1, 3)) == "1/3 33.3% [6.1, 79.2]"
    assert rate_text(mk(0, 0)) == "0/0" and rate_text(None) == "-"


@pytest.mark.req("R-14.1")
def test_compare_refuses_different_sources_or_versions_unless_meant(cli, corpora, home):
    """AgentDojo's and AgentDyn's banking suites share cell names: pairing them would
    measure the benchmark. So would two versions of one. Refused, naming both; the option
    says the comparison is meant, and the difference then names both benchmarks."""
    cells = [Cell("user_task_0"), Cell("user_task_1")]
    dojo = build(corpora, "dojo", cells, benchmark_version="v1.2.1")
    dyn = build(corpora, "dyn", cells, source="agentdyn", benchmark_version="v1.2.1")
    old = build(corpora, "old", cells, benchmark_version="v1.2")
    unrecorded = build(corpora, "imported", cells)  # no version recorded: not a difference
    before, home_before = snapshot(corpora), snapshot(home)
    for other, holds in ((dyn, "agentdyn v1.2.1"), (old, "agentdojo v1.2")):
        r = cli("stats", "--compare", dojo, other)
        assert (r.code, r.error["error"]) == (2, "stats.usage.different_benchmarks"), r.err
        assert (f"dojo holds agentdojo v1.2.1 and {other.name.removesuffix('.partial')} "
                f"holds {holds}") in r.error["message"]
        assert "add --across-benchmarks if that comparison is meant" in r.error["message"]
        assert r.out == ""
    assert snapshot(corpora) == before and snapshot(home) == home_before
    assert cli("stats", "--compare", dojo, unrecorded).code == 0
    ok = cli("stats", "--compare", dojo, dyn, "--across-benchmarks", "--format", "json")
    assert ok.code == 0, ok.err
    (d,) = json.loads(ok.out)["differences"]
    assert (d["benchmark_a"], d["benchmark_b"]) == ("agentdojo v1.2.1", "agentdyn v1.2.1")
    text = cli("stats", "--compare", dojo, dyn, "--across-benchmarks").out
    assert "different benchmarks (--across-benchmarks): A agentdojo v1.2.1, B agentdyn v1.2.1" \
        in text
