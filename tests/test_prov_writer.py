"""The PROV graph is written directly as PROV-JSON (``agentprov_core.evidence.prov.graph``),
byte for byte what the ``prov`` library's serialiser writes for the same graph built as a
``ProvDocument`` (``tests/provlib.py``): on AERs with the values a hostile or damaged log can
hold, and on every execution of real scripted runs (several suites, attacked and benign
cells, an errored and an aborted attempt). A change of the writer, of the reference, or of
how the library writes a graph fails here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from conftest import ROOT, child_env
from provlib import library_bytes
from test_prov_validate import make_aer

from agentprov_core.evidence import aer as A
from agentprov_core.evidence import prov, validation
from agentprov_core.evidence import sem as semmod
from agentprov_core.evidence.canonical import stored

replace = msgspec.structs.replace


def both(aer: A.AER) -> tuple[bytes, bytes]:
    """The stored graph of ``aer`` by the writer and by the library."""
    aer_bytes = A.encode(aer)
    sem = semmod.derive(aer)
    sem_bytes = stored(sem)
    return (prov.derive(aer, aer_bytes, sem, sem_bytes),
            library_bytes(aer, aer_bytes, sem, sem_bytes))


def variants() -> dict[str, A.AER]:
    """AERs whose values take every branch of the writer's encoding."""
    base = make_aer("s-x", defence="tool_filter")
    h = base.header
    call, tool, call2 = base.records
    actors = [A.Actor(id="defense:tool_filter", kind="defense", name="tool_filter",
                      pipeline_name="local-tool_filter", elements=["ToolFilter"],
                      code_sha256="c" * 64, parameters_sha256="d" * 64, weights_sha256=["e" * 64]),
              A.Actor(id="judge0", kind="judge", name="refusal_judge", model="openai/gpt-4o"),
              A.Actor(id="judge1", kind="judge", name="grader")]
    numbers = replace(call, retries=2**40, t=1e16, call_id="c1", attempts=[
        replace(call.attempts[0], elapsed_ms=2**31), replace(call.attempts[0], attempt_index=1,
                                                             attempt_id="a9", elapsed_ms=-(2**70))])
    odd = replace(call2, t=float("nan"), served_model="ünïcödé \x00 apid:looks-like-a-name",
                  finish_reason={"nested": [1, 2.5, None]})
    return {
        "plain": base,
        "failed": make_aer("s-f", failed=True),
        "benign": make_aer("s-n"),
        "no evidence": make_aer("s-e", evidence=False),
        "numbers and odd values": replace(base, records=[numbers, tool, odd, replace(
            call2, call_id="c3", t=float("-inf"), retries=-1)]),
        "a defence and judges as actors": replace(
            base, header=replace(h, actors=actors),
            records=[replace(call, actor="defense:tool_filter"), replace(
                tool, actor="defense:tool_filter", denied=True, error="denied"),
                     replace(call2, actor="judge0", call_id="c9")]),
        "duplicate identifiers": replace(base, records=[
            call, replace(call, t=9.5, served_model="other"), tool, tool, call2]),
        "a record twice": replace(base, records=[call, tool, call, call2]),
        "offsets and times": replace(base, header=replace(
            h, started_at="2026-11-29T10:52:16.5+05:30", ended_at="2026-11-29T10:52:17+00:00:30")),
        "naive and unreadable times": replace(base, header=replace(
            h, started_at="2026-11-29T10:52:16", ended_at="yesterday")),
        "no environment id, evidence twice, an unknown role": replace(base, header=replace(
            h, backend=A.Backend(id="agentdojo"),
            evidence=[*h.evidence, h.evidence[0], replace(h.evidence[1], role="other",
                                                           sha256="9" * 64)])),
        "identifiers to encode": replace(make_aer("s/ä:b c"), header=replace(
            make_aer("s/ä:b c").header, producer=replace(h.producer, version="1.0+local/x"))),
    }


@pytest.mark.parametrize("name", list(variants()))
def test_the_writer_writes_what_the_library_writes(name: str):
    written, library = both(variants()[name])
    assert written == library


def test_the_writer_and_the_library_differ_when_the_graph_does():
    """The comparison can fail: a graph with one attribute more is not the library's."""
    aer = make_aer("s-x")
    aer_bytes, sem = A.encode(aer), semmod.derive(aer)
    container = prov.graph(aer, aer_bytes, sem, stored(sem))
    container["activity"]["apid:s-x/session"]["agentprov:extra"] = "x"
    assert stored(container) != library_bytes(aer, aer_bytes, sem, stored(sem))


def test_the_library_reads_back_what_the_writer_wrote():
    """What the writer wrote, the library reads back in validation with no problem (no
    warning, nothing to unify), for each variant but those the reader warns of (an offset
    of seconds, identifiers used twice)."""
    for name, aer in variants().items():
        written, _ = both(aer)
        doc, problems = validation._deserialise(written)
        assert doc is not None, name
        if name not in ("offsets and times", "duplicate identifiers", "a record twice"):
            assert problems == [], (name, problems)


# ------------------------------------------------------------------ real sessions
READ = {"tool_calls": [{"name": "read_file", "arguments": {"file_path": "bill-december-2023.txt"}}]}
DONE = {"content": "I have read the bill; nothing was paid."}


def _run(home: Path, corpus: Path, script: Path, *args: str) -> subprocess.CompletedProcess:
    env = child_env()
    env["AGENTPROV_HOME"] = str(home)
    return subprocess.run([sys.executable, "-m", "agentprov_core", "run", "agentdojo",
                           "--corpus", str(corpus), "--llm-script", str(script), *args],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)


@pytest.mark.slow
@pytest.mark.req("R-2.10", "R-27.9")
def test_every_graph_of_real_runs_is_what_the_library_writes(agentdojo_env, tmp_path: Path):
    """Scripted AgentDojo runs: three suites, attacked and benign cells (the banking script's
    tool call fails in the other suites), an errored attempt (HTTP 500 to every request) and
    an aborted one (an endpoint that never answers, ``--cell-timeout 20``: time enough on a
    loaded host for the cell to start). Every stored
    ``prov.json`` is what the library writes for the graph, and passed validation."""
    demo = json.loads((ROOT / "examples" / "scripts" / "live-demo.json").read_text())
    runs = [
        (demo, ["--suite", "banking,slack,travel", "--user-tasks", "0,1",
                "--attack", "important_instructions", "--model-display-name", "GPT-4"], 0),
        ([{"http_error": {"status": 500, "headers": {"retry-after-ms": "10"}}}] * 9,
         ["--suite", "banking", "--user-tasks", "0"], 1),
        ([{"hang": True}], ["--suite", "banking", "--user-tasks", "1", "--cell-timeout", "20"], 1),
    ]
    statuses: set[str] = set()
    graphs = 0
    for i, (replies, args, code) in enumerate(runs):
        script = tmp_path / f"s{i}.json"
        script.write_text(json.dumps(replies))
        corpus = tmp_path / f"c{i}"
        p = _run(agentdojo_env.home, corpus, script, "--campaign", f"w{i}", *args)
        assert p.returncode == code, p.stderr
        part = corpus.with_name(corpus.name + ".partial")
        statuses |= {json.loads(line)["status"]
                     for line in (part / "ledger.jsonl").read_text().splitlines()}
        for d in sorted((part / "executions").iterdir()):
            aer_bytes, sem_bytes = (d / "aer.json").read_bytes(), (d / "sem.json").read_bytes()
            aer = A.decode(aer_bytes)
            written = (d / "prov.json").read_bytes()
            assert written == library_bytes(aer, aer_bytes, semmod.derive(aer), sem_bytes), d
            assert json.loads((d / "validation.json").read_bytes())["status"] == "passed", d
            graphs += 1
    assert {"complete", "errored", "aborted"} <= statuses
    assert graphs >= 40
