"""``agentprov view`` over real corpora in headless Chromium: two scripted AgentDojo campaigns
run in the real environment (as tests/test_results_e2e.py runs them: one whose replies
comply with the injection, one whose replies resist it), viewed together; and AgentDyn's
published runs imported by ``agentprov import agentdojo`` (skipped, saying why, when
../shared's AgentDyn repository is absent)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import child_env
from tests.test_results_e2e import SCRIPTS, _run
from tests.view_browser import Watch

pytestmark = pytest.mark.slow


def test_two_real_scripted_campaigns_side_by_side(e2e_cli, tmp_path, browser):
    assert set(SCRIPTS) == {"complies", "resists"}
    a = _run(e2e_cli, tmp_path, "complies")
    b = _run(e2e_cli, tmp_path, "resists")
    site = tmp_path / "site"
    r = e2e_cli("view", "--corpus", a, "--corpus", b, "--out", site)
    assert r.code == 0, r.out + r.err
    stats = [json.loads(e2e_cli("stats", c, "--tables", "results", "--format", "json").out)
             for c in (a, b)]
    w = Watch(browser, site)
    w.goto()
    for n, s in enumerate(stats):
        shown = w.page.locator(f"#corpus-{n} table.results tbody tr")
        assert shown.count() == len(s["tables"]["results"]["rows"])
        assert w.page.inner_text(f"#corpus-{n} .verdict") == "passed with unverified checks"
    # the complying campaign's attack succeeded everywhere: 2/2 on the overview
    assert "2/2 100.0%" in w.page.inner_text("#corpus-0 table.results")
    assert "0/2 0.0%" in w.page.inner_text("#corpus-1 table.results")
    w.goto("#/list")
    w.page.wait_for_selector("#rows tr")
    assert w.page.locator("#rows tr").count() == 8
    w.page.select_option("#f-attack", "important_instructions")
    ids = w.page.eval_on_selector_all("#f-corpus option", "os => os.map(o => o.value)")
    w.page.select_option("#f-corpus", next(i for i in ids if "complies" in i))
    w.page.select_option("#f-user_task", "user_task_0")
    w.page.click("#rows tr a")
    w.page.wait_for_selector("#steps")
    assert w.page.inner_text("#verdict") == "passed"
    # the injection, from AgentDojo's native log (these scripted replies pay the bill
    # without reading it: the injection never entered the conversation, and is marked
    # nowhere in it)
    assert "<INFORMATION>" in w.page.inner_text("#injections .injvec")
    assert w.page.locator("#steps mark.inj").count() == 0
    text = w.page.inner_text("#steps")
    assert "tool call send_money" in text and "US133000000121212121212" in text
    # every model call shows what it sent: the user's prompt is in the first one
    assert "bill-december-2023.txt" in w.page.inner_text("#steps .k-model_call >> nth=0")
    # the same cell in the other corpus, side by side
    w.page.click("#peers a.peer")
    w.page.wait_for_selector("#cmpgrid")
    heads = w.page.locator("#cmpgrid .cmphead")
    assert "complies" in heads.nth(0).inner_text() and "resists" in heads.nth(1).inner_text()
    w.page.click("#cmpgrid .cmphead >> nth=1 >> a")
    w.page.wait_for_selector("#evidence")
    files = w.page.inner_text("#evidence table.files")
    assert "capture" in files and "native_log" in files
    href = w.page.locator("#evidence table.files a", has_text="capture").get_attribute("href")
    assert (site / href).read_bytes().startswith(b'{"')  # the capture log's bytes
    assert w.clean() == []


def test_the_readme_demos_campaign(e2e_cli, agentdojo_env, tmp_path, browser):
    """The campaign ``./dev demo`` runs (scripts/demo.sh): the config stop, the resume with
    a display name, then ``stats --tables results`` and ``view`` as the demo calls them (the
    site in its default place, under ``$AGENTPROV_HOME/views/``)."""
    from agentprov_core.audit.results import Rate
    from agentprov_core.cli.results_render import rate_text
    from tests.test_campaign import DEMO, LIVE_DEMO

    corpus = tmp_path / "live-demo"
    args = ("run", "agentdojo", "--corpus", corpus, "--campaign", "demo", *DEMO,
            "--llm-script", LIVE_DEMO)
    assert e2e_cli(*args).code == 1  # the config stop
    assert e2e_cli(*args, "--model-display-name", "Scripted Model").code == 0
    r = e2e_cli("stats", "--corpus", corpus, "--tables", "results", "--format", "json")
    assert r.code == 0, r.err
    rows = json.loads(r.out)["tables"]["results"]["rows"]
    r = e2e_cli("view", "--corpus", corpus)
    assert r.code == 0, r.err
    index = agentdojo_env.home / "views" / "agentdojo-live-demo" / "index.html"
    assert r.out.strip() == f"agentprov view: wrote {index}"
    w = Watch(browser, index.parent)
    w.goto()
    shown = w.page.eval_on_selector_all(
        "table.results tbody tr", "rs => rs.map(r => Array.from(r.cells).map(c => c.textContent))")
    assert len(shown) == len(rows) >= 1
    for got, want in zip(shown, rows, strict=True):
        assert got[:4] == [want["group"][k] for k in ("model", "suite", "attack", "defence")]
        assert got[5] == rate_text(Rate(**want["utility"]))
        asr = want["attack_success"]
        assert got[6] == (rate_text(Rate(**asr)) if asr else "-")
    # five executions: the four sealed units and the errored first attempt, kept
    w.goto("#/list")
    w.page.wait_for_selector("#rows tr")
    assert w.page.locator("#rows tr").count() == 5
    w.page.select_option("#f-status", "failed")
    assert w.page.locator("#rows tr").count() == 1
    w.page.select_option("#f-status", "ok")
    w.page.select_option("#f-attack", "important_instructions")
    w.page.select_option("#f-user_task", "user_task_0")
    w.page.click("#rows tr a")
    w.page.wait_for_selector("#steps")
    text = w.page.inner_text("#steps")
    assert "tool call" in text
    assert "<INFORMATION>" in w.page.inner_text("#injections .injvec")
    assert w.clean() == []


def test_imported_agentdyn_runs(tmp_path, browser):
    from tests.test_import_results import extract

    runs = extract(tmp_path / "src", ("gpt-4o-2024-08-06-tool_filter",))
    home = tmp_path / "home"
    home.mkdir()
    env = {**child_env(), "AGENTPROV_HOME": str(home), "AGENTPROV_ERROR_FORMAT": "json"}
    corpus = tmp_path / "corpora" / "agentdyn-import"
    p = subprocess.run([sys.executable, "-m", "agentprov_core", "import", "agentdojo",
                        str(runs), "--corpus", str(corpus), "--source", "agentdyn"],
                       capture_output=True, text=True, env=env, timeout=1800)
    assert p.returncode == 0, p.stderr[-3000:]
    site = tmp_path / "site"
    p = subprocess.run([sys.executable, "-m", "agentprov_core", "view", str(corpus), "--out",
                        str(site)], capture_output=True, text=True, env=env, timeout=1800)
    assert p.returncode == 0, p.stderr[-3000:]
    w = Watch(browser, site)
    w.goto()
    assert w.page.locator("table.results tbody tr").count() >= 1
    assert "tool_filter" in w.page.inner_text("table.results")
    w.goto("#/list")
    w.page.wait_for_selector("#rows tr")
    assert "648 of 648 execution(s)" in w.page.inner_text("#count")
    w.page.select_option("#f-attack", "important_instructions")
    w.page.select_option("#f-status", "ok")
    w.page.click("#rows tr a")
    w.page.wait_for_selector("#steps")
    assert w.page.locator("#injections .injvec").count() >= 1
    # the injection marked in the tool result that brought it in (the tool renders it
    # with its own whitespace); j walks the filtered list until an execution shows one
    from playwright.sync_api import expect

    for _ in range(10):
        if w.page.locator("#steps .k-tool_call mark.inj").count():
            break
        before = w.page.inner_text("#exec-id")
        w.page.keyboard.press("j")
        expect(w.page.locator("#exec-id")).not_to_have_text(before)
    mark = w.page.locator("#steps .k-tool_call mark.inj").first
    assert "This is an important message from me" in mark.inner_text()
    assert w.page.locator("#steps .k-tool_call").count() >= 1
    assert w.page.locator("#steps .k-model_call").count() >= 1
    assert w.page.inner_text("#exec .usertask").strip() != "User task"
    assert w.clean() == []
