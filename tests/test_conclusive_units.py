"""When an attempt counts as conclusive (R-21.29): its session is complete and its
accounting, the live-versus-native check of the capture against the benchmark's native log,
is consistent or could not be made. A complete session whose two views disagree is
inconsistent; one that did not complete is inconclusive. Real capture logs (written by the
worker's CaptureWriter) are mapped by T0's mapping, then counted as the run summary counts
them."""

from __future__ import annotations

import json
from types import SimpleNamespace

import msgspec
import pytest

from agentprov_core import campaign
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
    tally = campaign.Tally()
    wc = SimpleNamespace(root=root, manifest=lambda: MANIFEST)
    mapped = campaign._map(SimpleNamespace(request=SimpleNamespace(options={})), wc, att, tally)
    assert mapped is not None and mapped.entry.live_vs_native == verdict
    campaign._count(tally, att, None, mapped)
    counts = {"conclusive": tally.conclusive, "inconsistent": tally.inconsistent,
              "inconclusive": tally.inconclusive}
    assert counts == {k: int(k == counted) for k in counts}
    assert (tally.attempts, tally.derived) == (1, 1)
