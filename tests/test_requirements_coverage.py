"""The requirements coverage page's tables (scripts/requirements_coverage.py): every
requirement is proven by a test or says why not, and no reason outlives its requirement's
first test."""

from __future__ import annotations

import importlib.util
import re

import pytest
from conftest import ROOT

spec = importlib.util.spec_from_file_location("requirements_coverage",
                                              ROOT / "scripts" / "requirements_coverage.py")
cov = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cov)
pytestmark = pytest.mark.skipif(not cov.SPEC.is_file(), reason=f"{cov.SPEC} is missing")


def test_every_requirement_is_proven_or_says_why_not():
    reqs, proven = cov.requirements(), cov.marks()
    assert cov.problems(reqs, proven) == []
    rows = {m[1]: line for line in cov.page(reqs).splitlines()
            if (m := re.match(r"\| (R-\d+\.\d+) \|", line))}
    assert set(rows) == {rid for rid, _, _ in reqs}
    for rid, sec, _ in reqs:
        if rid not in proven:
            kind, reason = cov.why_not(rid, sec)
            assert reason in rows[rid] and "issue" not in reason, rid


def test_a_stale_or_missing_reason_is_reported(monkeypatch):
    reqs, proven = cov.requirements(), cov.marks()
    tested = next(rid for rid, _, _ in reqs if rid in proven and rid not in cov.PARTLY)
    monkeypatch.setitem(cov.NOT_BUILT, tested, "something")
    assert cov.problems(reqs, proven) == [
        f"{tested}: NOT_BUILT says why it is not proven, but {proven[tested][0]} proves it: "
        "remove the entry"]
    monkeypatch.delitem(cov.NOT_BUILT, tested)
    monkeypatch.delitem(cov.NOT_BUILT, "R-19.6")  # section 19 has no section-wide reason
    assert cov.problems(reqs, proven) == ["R-19.6: no test proves it and no table says why"]
    monkeypatch.setitem(cov.PARTLY, "R-19.6", "something")
    assert "R-19.6: PARTLY needs a test that proves the rest" in cov.problems(reqs, proven)


def test_the_page_lists_what_a_checkout_without_shared_checks_against():
    """A clone elsewhere has no ../shared: ``--check`` then reads the requirements from the
    committed page's rows, and must rebuild the very same page from them."""
    from_page = cov.requirements_of_the_page()
    assert [r for r, _, _ in from_page] == [r for r, _, _ in cov.requirements()]
    assert cov.page(from_page, cov.facts_of_the_page()) == cov.page(cov.requirements()) == \
        cov.PAGE.read_text(encoding="utf-8")


def test_a_mark_naming_a_fact_is_listed_and_one_naming_nothing_is_reported(monkeypatch):
    """A test may hold one of the specification's facts (an F-id) besides its requirements:
    the page lists it under the facts; a mark naming neither is reported for fixing."""
    proven = cov.marks()
    held = sorted(f for f in proven if f.startswith("F-"))
    assert held, "no test marks a fact: this test needs one"
    text = cov.page(cov.requirements())
    assert "Marks naming no requirement" not in text
    facts_part = text.split("## Facts the tests hold", 1)[1]
    for fid in held:
        assert f"| {fid} | " in facts_part
    monkeypatch.setattr(cov, "marks", lambda: {**proven, "F-999": ["tests/x.py::t"]})
    assert "Marks naming no requirement (fix them): F-999" in cov.page(cov.requirements())
