"""When an attempt counts as conclusive (R-21.29): its session is complete and its
accounting (the worker's count of its model calls against the capture's) is consistent or
unverifiable. A complete session whose counts differ, or whose two views (the capture and
the benchmark's native log) disagree, is inconsistent; one that did not complete is
inconclusive. Real capture logs (written by the
worker's CaptureWriter) are mapped by T0's mapping, then counted as the run summary counts
them."""

from __future__ import annotations

import json
from types import SimpleNamespace

import msgspec
import pytest

from agentprov_core.run import attempt, mappings, summary
from agentprov_core.run.options import RunOptions
from tests.test_mapping import MANIFEST, complete_session, corpus_with, native_log

CASES = {
    # session status, native log, the check's verdict, how the summary counts it
    "consistent": ("complete", native_log(), "agree", "conclusive"),
    "unverifiable": ("complete", b"not an AgentDojo log", "unchecked", "conclusive"),
    "inconsistent": ("complete", native_log(utility=False, final="I did something else."),
                     "disagree", "inconsistent"),
    "not complete": ("errored", None, "unchecked", "inconclusive"),
}


@pytest.mark.req("R-21.29", "R-21.33")
@pytest.mark.parametrize("case", list(CASES))
def test_a_unit_is_conclusive_when_complete_and_its_accounting_holds(tmp_path, case):
    status, native, verdict, counted = CASES[case]
    p = tmp_path / "capture.jsonl"
    complete_session(p, status=status)
    root, att = corpus_with(tmp_path, p.read_bytes(), native)
    att = msgspec.structs.replace(att, status=status, conclusive=status == "complete")
    (root / "manifest.json").write_text(json.dumps(MANIFEST))
    tally = summary.Tally()
    wc = SimpleNamespace(root=root, manifest=lambda: MANIFEST,
                         manifest_as_read=lambda: MANIFEST)
    prepared = SimpleNamespace(request=SimpleNamespace(options=RunOptions()))
    mapped = mappings.map_counted(prepared, wc, att, tally)
    assert mapped is not None and mapped.entry.live_vs_native == verdict
    summary.count(tally, att, None, mapped)
    counts = {"conclusive": tally.conclusive, "inconsistent": tally.inconsistent,
              "inconclusive": tally.inconclusive}
    assert counts == {k: int(k == counted) for k in counts}
    assert (tally.attempts, tally.derived) == (1, 1)


@pytest.mark.req("R-21.29", "R-21.33")
def test_a_complete_session_whose_call_count_disagrees_is_inconsistent(tmp_path):
    """The accounting of R-21.29: the worker's own count of its model calls (the capture's
    end record) against the model calls the capture records. Equal, or no count at all
    (unverifiable), a complete session is conclusive; different, it is inconsistent and
    its ledger entry does not settle the unit, so the unit is attempted again."""
    p = tmp_path / "capture.jsonl"
    complete_session(p)  # two model calls, and the worker counted 2
    records = [json.loads(x) for x in p.read_text().splitlines()]
    assert attempt.accounting(records) == "consistent"
    unverifiable = records[:-1] + [{k: v for k, v in records[-1].items() if k != "calls"}]
    assert attempt.accounting(unverifiable) == "unverifiable"
    miscounted = records[:-1] + [dict(records[-1], calls=3)]
    assert attempt.accounting(miscounted) == (
        "accounting: the worker counted 3 model call(s), the capture records 2")
    assert attempt.accounting(records[:-1] + [dict(records[-1], calls=True)]) == "unverifiable"
    root, att = corpus_with(tmp_path, p.read_bytes(), native_log())
    tally = summary.Tally()
    summary.count(tally, msgspec.structs.replace(att, conclusive=False))
    assert (tally.sealed, tally.conclusive, tally.inconsistent, tally.inconclusive) == (1, 0, 1, 0)
