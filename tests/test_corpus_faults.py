"""A corpus that faults left behind, read by the corpus tools: a worker killed while a
cell's staged capture log was still empty (the AER then takes the plan and configuration
digests from the ledger line T0 wrote, so ``verify`` passes), entries that are not regular
files (a directory, a FIFO, a link where a file belongs; a file where a directory belongs),
which every tool reports at once (never a hang, never exit 70), and an index whose lines
were reordered (its order is free: docs/corpus-tools.md says why).

The corpus is the example of ``test_corpus_tools`` (written the way T0 writes one); the
empty-capture attempt is ledgered and mapped by the functions a live run uses."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import ROOT, snapshot
from test_corpus_tools import CONFIG, MANIFEST, PLAN, build_corpus, index_entries

from agentprov_core.corpus.ledger import Attempt, Ledger
from agentprov_core.corpus.store import RawStore
from agentprov_core.evidence import live_mapping

#: every corpus tool a user points at a corpus, and the exit codes each may give
TOOLS = (("verify", "--corpus"), ("validate", "--strict", "--corpus"),
         ("recompute", "--dry-run", "--corpus"), ("stats", "--corpus"))


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    return build_corpus(tmp_path_factory.mktemp("pristine"))


@pytest.fixture
def corpus(pristine: Path, tmp_path: Path) -> Path:
    root = tmp_path / "corpora" / pristine.name
    shutil.copytree(pristine, root)
    return root


def first_execution(root: Path) -> Path:
    return root / "executions" / index_entries(root)[0].execution_id


# ------------------------------------------------------------ the empty-capture kill window
@pytest.mark.req("R-21.28")
def test_an_attempt_whose_capture_log_stayed_empty_maps_to_an_execution_verify_passes(
        cli, corpus):
    """The worker killed after the cell created ``capture.jsonl`` and before it wrote the
    header: T0 stores the empty log and ledgers the attempt ``aborted`` with its plan and
    configuration digests. The AER of that attempt has no capture header to read them from;
    it takes them from the ledger line, so ``verify`` (which checks the AER against the
    ledger) passes, and the attempt is a failed execution."""
    store, ledger = RawStore(corpus / "raw"), Ledger(corpus / "ledger.jsonl")
    seq = len(ledger.read())
    cap = store.put_bytes(b"")
    attempt = Attempt(seq=seq, invocation="2099cb0463c1", unit="banking/user_task_1/none/none|none|r0",
                      cell_key="banking/user_task_1/none/none", defence="none", repeat=0,
                      attempt=2, session_id="s-00ffabcdef012345",
                      started_at="2026-11-29T10:53:00.000000Z",
                      ended_at="2026-11-29T10:53:01.000000Z", status="aborted",
                      conclusive=False, capture_sha256=cap, capture_head_sha256=None,
                      capture_records=0, reason="the capture log has no end record",
                      plan_sha256=PLAN, config_digest=CONFIG)
    ledger.append(attempt)
    mapped = live_mapping.map_attempt(corpus, attempt, MANIFEST,
                                      mapped_at="2026-11-29T10:53:02.000000Z")
    assert mapped is not None
    h = mapped.aer.header
    assert (h.plan_sha256, h.config_digest) == (PLAN, CONFIG)
    assert mapped.aer.outcome.status == "failed"
    r = cli("verify", "--corpus", corpus, "--format", "json")
    doc = json.loads(r.out)
    assert r.code == 0, [f for f in doc["findings"] if f["kind"] == "failed"]
    assert doc["result"] == "passed with unverified checks"
    assert doc["counts"]["executions"] == 6
    from agentprov_core.corpus.working import WorkingCorpus
    from agentprov_core.run import mappings

    wc = WorkingCorpus(corpus)
    assert mappings.unrepairable(wc, wc.attempts()) == []  # nothing for a re-run to name


def test_an_execution_an_earlier_build_wrote_without_the_digests_is_named_by_the_run(
        cli, corpus):
    """A corpus an earlier agentprov mapped in that window holds an AER whose digests are
    'not recorded': ``verify`` fails it, and since an execution is written once the run
    cannot repair it; what a run reads of the corpus before any new work names it (never a
    silent exit 0 over a corpus that fails verify)."""
    import msgspec

    from agentprov_core.corpus.working import WorkingCorpus
    from agentprov_core.run import mappings

    store, ledger = RawStore(corpus / "raw"), Ledger(corpus / "ledger.jsonl")
    attempt = Attempt(seq=len(ledger.read()), invocation="2099cb0463c1",
                      unit="banking/user_task_1/none/none|none|r0",
                      cell_key="banking/user_task_1/none/none", defence="none", repeat=0,
                      attempt=2, session_id="s-00eeabcdef012345",
                      started_at="2026-11-29T10:53:00.000000Z",
                      ended_at="2026-11-29T10:53:01.000000Z", status="aborted",
                      conclusive=False, capture_sha256=store.put_bytes(b""),
                      capture_records=0, plan_sha256=PLAN, config_digest=CONFIG)
    ledger.append(attempt)
    # mapped as an earlier build did: no digests from the ledger line
    earlier = msgspec.structs.replace(attempt, plan_sha256="", config_digest="")
    live_mapping.map_attempt(corpus, earlier, MANIFEST, mapped_at="2026-11-29T10:53:02.000000Z")
    v = cli("verify", "--corpus", corpus, "--format", "json")
    assert v.code == 1 and any(f["code"] == "executions.aer" and "plan_sha256" in f["message"]
                               for f in json.loads(v.out)["findings"])
    wc = WorkingCorpus(corpus)
    assert mappings.unrepairable(wc, wc.attempts()) == ["s-00eeabcdef012345"]


# ------------------------------------------------------------ entries that are not files
def aer_as_directory(root: Path) -> str:
    aer = first_execution(root) / "aer.json"
    aer.unlink()
    aer.mkdir()
    return "aer.json"


def aer_as_fifo(root: Path) -> str:
    aer = first_execution(root) / "aer.json"
    aer.unlink()
    os.mkfifo(aer)
    return "aer.json"


def aer_as_link(root: Path) -> str:
    aer = first_execution(root) / "aer.json"
    data = aer.read_bytes()
    (root.parent / "elsewhere.json").write_bytes(data)
    aer.unlink()
    aer.symlink_to(root.parent / "elsewhere.json")
    return "aer.json"


def _first_capture(root: Path) -> Path:
    """The first ledger entry's stored capture log, removed (the caller puts what it
    wants in its place)."""
    p = RawStore(root / "raw").path(Ledger(root / "ledger.jsonl").read()[0].capture_sha256)
    p.unlink()
    return p


def capture_as_fifo(root: Path) -> str:
    p = _first_capture(root)
    os.mkfifo(p)
    return p.name


def capture_as_link_loop(root: Path) -> str:
    p = _first_capture(root)
    p.symlink_to(p)
    return p.name


def executions_as_file(root: Path) -> str:
    shutil.rmtree(root / "executions")
    (root / "executions").write_text("not a directory\n")
    return "executions"


def raw_as_file(root: Path) -> str:
    shutil.rmtree(root / "raw")
    (root / "raw").write_text("not a directory\n")
    return "raw"


DAMAGE = {f.__name__: f for f in (aer_as_directory, aer_as_fifo, aer_as_link, capture_as_fifo,
                                  capture_as_link_loop, executions_as_file, raw_as_file)}


@pytest.mark.req("R-27.4")
@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_corpus_entries_that_are_not_regular_files_are_reported_at_once(cli, corpus, tmp_path,
                                                                        damage):
    """``verify``, ``validate --strict``, ``recompute --dry-run``, ``stats`` and ``view``
    (with and without verify's checks) answer at once (the fixture's timeout is 120 s; a
    FIFO opened for reading without a writer would block for ever), never exit 70, and
    ``verify`` fails naming the entry. Nothing is written into the corpus."""
    what = DAMAGE[damage](corpus)
    before = snapshot(corpus)
    codes = {}
    for tool in TOOLS:
        r = cli(*tool, corpus)
        codes[tool[0]] = r.code
        assert r.code != 70 and "Traceback" not in r.err, (tool, r.err)
    assert codes["verify"] == 1
    v = cli("verify", "--corpus", corpus, "--format", "json")
    assert any(what in f["path"] and f["kind"] == "failed"
               for f in json.loads(v.out)["findings"]), v.out
    for extra in ((), ("--no-verify",)):
        r = cli("view", corpus, "--out", tmp_path / f"site{len(extra)}", *extra)
        assert r.code in (0, 1, 3), r.err
        assert r.code != 70 and "Traceback" not in r.err, r.err
    assert snapshot(corpus) == before


# ------------------------------------------------------------ the index's order
def test_the_index_order_is_free_and_documented(cli, corpus):
    """Two index lines swapped: every line names its ledger line and carries its own digest,
    so no fact changes; ``verify`` and ``stats`` answer as before, and the corpus tools' page
    says the order is free and why (a re-run maps an attempt an earlier run could not after
    later ones)."""
    before = cli("stats", "--corpus", corpus, "--format", "json")
    p = corpus / "executions.jsonl"
    lines = p.read_bytes().splitlines(keepends=True)
    lines[0], lines[1] = lines[1], lines[0]
    p.write_bytes(b"".join(lines))
    assert cli("verify", "--corpus", corpus).code == 0
    after = cli("stats", "--corpus", corpus, "--format", "json")
    assert after.code == before.code == 0 and after.out == before.out
    page = (ROOT / "docs" / "corpus-tools.md").read_text(encoding="utf-8")
    assert "The order of `executions.jsonl` is free" in page


@pytest.mark.req("R-27.4")
@pytest.mark.parametrize("name", ["executions.jsonl", "ledger.jsonl"])
@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_an_appended_file_that_is_not_a_file_is_refused_at_once(cli, corpus, tmp_path, name,
                                                                 kind):
    """The index or the ledger replaced by a FIFO (a read would wait for ever) or a
    directory: every corpus tool answers at once, naming it, and writes nothing."""
    p = corpus / name
    p.unlink()
    if kind == "fifo":
        os.mkfifo(p)
    else:
        p.mkdir()
    before = snapshot(corpus)
    for tool in (*TOOLS, ("view", "--no-verify", "--out", tmp_path / "site")):
        r = cli(*tool, corpus)
        assert r.code in (1, 3) and "Traceback" not in r.err, (tool, r.code, r.err)
        assert name in r.out + r.err, (tool, r.out, r.err)
    assert snapshot(corpus) == before
