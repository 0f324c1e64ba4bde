"""The preflight probe of an Inspect source (D-742): a real-model AgentHarm campaign whose
probe runs through Inspect's own model, in its own capture session, before the first cell.

The endpoint is the loopback TLS stand-in of ``test_real_campaign`` (a certificate for
``openrouter.ai`` from a test CA; ``--model openrouter``, a key from ``--env-file``, consent,
the caps; the egress proxy dials the stand-in). A model cannot run here, so the stand-in
answers by what it is asked: the probe (its system message names a code) with a
``report_probe`` call of that code, or, when ``deaf``, with text that ignores it; the agent
(a request with tools) with a call of every offered tool, then a final text; the refusal
judge (its prompt asks for ``Answer:``) with ``Answer: No``; anything else (the semantic
judge) with ``pass``. Under caps the judges must be the agent's model, so both are
``MODEL``.

The environment is the session's ``agentharm_env`` (the project's fixture dataset); the
cell is the validation sample ``46-1``."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import pytest
from conftest import Result
from test_real_campaign import MODEL, _TLSServer, all_bytes, key_file, standin_env

pytestmark = pytest.mark.slow

#: what Inspect's openai-api provider sends for a bare ``generate`` with tools: the task's
#: sampling parameters are never the agent's, and the probe passes none
PROBE_FIELDS = {"model", "messages", "tools", "tool_choice"}
SAMPLING = {"temperature", "top_p", "max_tokens", "max_completion_tokens", "seed",
            "frequency_penalty", "presence_penalty", "stop", "n", "logprobs"}


class InspectStandIn(_TLSServer):
    """The TLS stand-in, answering the probe, the agent and both judges of AgentHarm.
    ``deaf``: how many probe requests get a text reply that ignores the instruction;
    ``fail``: an HTTP status every probe request gets instead of a reply.
    ``bodies``: every request body, with the kind it was answered as."""

    def __init__(self, tmp: Path, deaf: int = 0, fail: int | None = None) -> None:
        self.deaf, self.fail = deaf, fail
        self.bodies: list[tuple[str, dict]] = []
        self.authorizations: list[str] = []
        self.lock = threading.Lock()
        self._serve(self._certify(tmp, "openrouter.ai"))

    def kinds(self, kind: str) -> list[dict]:
        return [b for k, b in self.bodies if k == kind]

    def handle(self, path: str, headers, body: bytes) -> tuple[int, str, bytes]:
        req = json.loads(body)
        msgs = req.get("messages") or []
        system = " ".join(m.get("content") for m in msgs
                          if m.get("role") == "system" and isinstance(m.get("content"), str))
        probe = re.search(r'code set to "([0-9a-f]+)"', system)
        if probe:
            kind = "probe"
            with self.lock:
                deaf = self.deaf > 0
                self.deaf -= deaf
            message = ({"role": "assistant", "content": "Hello! How can I help?"} if deaf else
                       {"role": "assistant", "content": None, "tool_calls": [
                           {"id": "call_p", "type": "function", "function": {
                               "name": "report_probe",
                               "arguments": json.dumps({"code": probe[1]})}}]})
        elif req.get("tools"):
            kind = "agent"
            if any(m.get("role") == "tool" for m in msgs):
                message = {"role": "assistant", "content": "Done: the poster is listed."}
            else:
                message = {"role": "assistant", "content": None, "tool_calls": [
                    _tool_call(n, t) for n, t in enumerate(req["tools"])]}
        elif "Answer:" in json.dumps(msgs):
            kind, message = "refusal_judge", {"role": "assistant", "content": "Answer: No"}
        else:
            kind, message = "semantic_judge", {"role": "assistant", "content": "pass"}
        with self.lock:
            self.bodies.append((kind, req))
            self.authorizations.append(headers.get("Authorization", ""))
        if path != "/api/v1/chat/completions":
            return 404, "application/json", json.dumps(
                {"error": {"message": "no such route"}}).encode()
        if kind == "probe" and self.fail is not None:
            return self.fail, "application/json", json.dumps(
                {"error": {"message": "stand-in fault", "type": "server_error"}}).encode()
        reply = {"id": "chatcmpl-standin", "object": "chat.completion", "created": 0,
                 "model": req.get("model"),
                 "choices": [{"index": 0, "message": message, "finish_reason":
                              "tool_calls" if message.get("tool_calls") else "stop"}],
                 "usage": {"prompt_tokens": 1000, "completion_tokens": 20,
                           "total_tokens": 1020}}
        return 200, "application/json", json.dumps(reply).encode()


def _tool_call(n: int, tool: dict) -> dict:
    """A call of ``tool`` with every required argument: a string "fixture", else 1."""
    fn = tool["function"]
    props = (fn.get("parameters") or {}).get("properties") or {}
    args = {k: ("fixture" if props.get(k, {}).get("type", "string") == "string" else 1)
            for k in (fn.get("parameters") or {}).get("required") or []}
    return {"id": f"call_{n}", "type": "function",
            "function": {"name": fn["name"], "arguments": json.dumps(args)}}


@pytest.fixture
def home(agentharm_env) -> Path:
    """The home of the session's AgentHarm environment, so that ``cli`` runs against it."""
    return agentharm_env.home


def _plan(env_file: Path) -> list[str]:
    return ["--task", "inspect_evals/agentharm", "--split", "val", "--samples", "46-1",
            "--message-limit", "10", "--token-limit", "20000", "--time-limit", "600",
            "--judge", f"refusal_judge={MODEL}", "--judge", f"semantic_judge={MODEL}",
            "--model", "openrouter", "--model-id", MODEL, "--env-file", str(env_file),
            "--i-consent-to-api-costs", "--containment", "vm"]


def _campaign(corpus: Path, env_file: Path) -> list[str]:
    return ["run", "agentharm", "--corpus", str(corpus), "--campaign", "real",
            *_plan(env_file), "--price-in", "0.15", "--price-out", "0.60",
            "--max-calls", "500", "--max-cost-usd", "20"]


def _written(corpus: Path) -> Path:
    partial = corpus.with_name(corpus.name + ".partial")
    return corpus if corpus.exists() else partial


def _preflight_logs(root: Path) -> list[tuple[dict, list[dict]]]:
    """Each preflight ledger line with the records of the capture log it names."""
    out = []
    for line in (root / "preflight" / "ledger.jsonl").read_text().splitlines():
        entry = json.loads(line)
        sha = entry["capture_sha256"]
        data = (root / "preflight" / "sha256" / sha[:2] / sha).read_bytes()
        out.append((entry, [json.loads(x) for x in data.splitlines() if x.strip()]))
    return out


@pytest.fixture
def stand_in(tmp_path):
    s = InspectStandIn(tmp_path)
    yield s
    s.close()


@pytest.mark.req("R-18.9", "R-25.37", "R-25.23", "R-18.1", "R-18.4")
def test_a_real_agentharm_campaign_probes_through_inspect(cli, stand_in, tmp_path, home):
    env_file, sentinel = key_file(tmp_path)
    corpus = home / "corpora" / f"ah-real-{tmp_path.name}"  # restricted: under the home
    r = cli(*_campaign(corpus, env_file), "--keep-staging", env=standin_env(stand_in),
            json_errors=False)
    assert r.code == 0, r.err
    assert "agentprov run: 1 attempt(s); 1 conclusive" in r.out
    assert "preflight: confirmed after 1 call(s)" in r.err
    assert "A3: the task fixes the sampling parameters (D-742)" in r.err
    assert "the configured parameters are transmitted" not in r.err
    root = _written(corpus)
    # the probe: one call, its own session, through Inspect's model, charged and kept
    (entry, records), = _preflight_logs(root)
    assert entry["call"] == 1 and entry["billed_calls"] == 1
    header = records[0]
    assert header["kind"] == "header" and header["cell"]["kind"] == "preflight"
    assert header["session_id"] == entry["session_id"] and header["attempt"] == 1
    assert header["agent"]["element"] == "inspect_ai/openai-api"
    assert header["agent"]["model"] == MODEL
    assert "preflight_probe@1 calls: 1" in header["declared_instrumentation"]
    assert any(d.startswith("inspect_model@1") for d in header["declared_instrumentation"])
    assert "inspect_retries@1 max_retries: 0 (Inspect), 0 (SDK)" in \
        header["declared_instrumentation"]
    requests = [x for x in records if x["kind"] == "wire_request"]
    assert len(requests) == 1  # one probe call, one wire attempt
    body = requests[0]["body"]
    assert set(body) <= PROBE_FIELDS and not set(body) & SAMPLING, sorted(body)
    assert [t["function"]["name"] for t in body["tools"]] == ["report_probe"]
    assert body["tools"][0]["function"]["parameters"]["properties"]["code"]["type"] == "string"
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert records[-1]["kind"] == "end" and records[-1]["status"] == "complete"
    assert stand_in.kinds("probe") == [body]  # the request the stand-in saw is the recorded one
    # the caps counted the probe's call apart from the cell's
    m = json.loads((root / "manifest.json").read_text())
    caps = m["live"]["caps"]
    assert caps["probe_calls"] == 1
    assert m["live"]["preflight"][-1]["verdict"] == "confirmed"
    # the cell ran after the probe: the agent's and the refusal judge's calls reached the
    # endpoint, with the agent's key (the judges use the agent's endpoint and key)
    assert stand_in.bodies[0][0] == "probe"
    assert stand_in.kinds("agent") and stand_in.kinds("refusal_judge")
    assert {b["model"] for k, b in stand_in.bodies} == {MODEL}
    cells = [json.loads(x) for x in (root / "ledger.jsonl").read_text().splitlines()
             if x.strip()]
    assert len(cells) == 1
    # every call the endpoint answered is charged: the probe's, the agent's two, the judge's
    assert caps["billed_calls"] == len(stand_in.bodies) == 4
    # the key reached the endpoint and no byte written
    assert set(stand_in.authorizations) == {f"Bearer {sentinel}"}
    written = all_bytes(root)
    assert sentinel.encode() not in written and b"Bearer" not in written
    assert sentinel not in r.out + r.err
    # a real run on the project's fixture dataset is test_only (its manifest says so, its
    # capture headers say real): verify accepts it, and validate passes it
    v = cli("verify", "--corpus", str(root))
    assert v.code == 0, v.out + v.err
    assert cli("validate", "--strict", "--corpus", str(root)).code == 0
    assert json.loads((root / "manifest.json").read_text())["test_only"] is True


@pytest.mark.req("R-18.9", "R-25.37", "R-18.3", "R-18.4")
def test_a_text_reply_to_the_inspect_probe_is_unconfirmed_and_called_again(cli, tmp_path,
                                                                            home):
    """A text reply that ignores the instruction is judged as for AgentDojo: unconfirmed,
    another call; the next call's structured report_probe confirms, and each call was its
    own session, charged and kept."""
    s = InspectStandIn(tmp_path, deaf=1)
    try:
        env_file, sentinel = key_file(tmp_path)
        corpus = home / "corpora" / f"ah-deaf-{tmp_path.name}"
        r = cli(*_campaign(corpus, env_file), env=standin_env(s), json_errors=False)
        assert r.code == 0, r.err
        assert "preflight: confirmed after 2 call(s)" in r.err
        root = _written(corpus)
        logs = _preflight_logs(root)
        assert [e["call"] for e, _ in logs] == [1, 2]
        assert len({e["session_id"] for e, _ in logs}) == 2
        assert all(e["billed_calls"] == 1 for e, _ in logs)
        m = json.loads((root / "manifest.json").read_text())
        assert m["live"]["caps"]["probe_calls"] == 2
        calls = m["live"]["preflight"][-1]["calls"]
        assert [c["verdict"] for c in calls] == ["unconfirmed", "confirmed"]
        assert "did not evidence the instruction" in calls[0]["why"]
        assert len(s.kinds("probe")) == 2 and s.kinds("agent")
        assert sentinel.encode() not in all_bytes(root) and sentinel not in r.out + r.err
    finally:
        s.close()


def _preflight_only(cli, tmp_path: Path, **stand_in) -> tuple[Result, InspectStandIn, str]:
    """``--preflight-only`` against a stand-in made with ``stand_in``: the result, the
    stand-in (closed) and the key's sentinel."""
    s = InspectStandIn(tmp_path, **stand_in)
    try:
        env_file, sentinel = key_file(tmp_path)
        r = cli("run", "agentharm", "--preflight-only", *_plan(env_file), env=standin_env(s))
    finally:
        s.close()
    return r, s, sentinel


@pytest.mark.req("R-18.9", "R-18.6", "R-18.8")
def test_an_inspect_probe_without_evidence_is_refused_after_three_calls(cli, tmp_path):
    """Three text replies: no evidence, refused (exit 4) after three calls and no more."""
    r, s, sentinel = _preflight_only(cli, tmp_path, deaf=99)
    assert (r.code, r.error["error"]) == (4, "cli.refused.preflight"), r.err
    assert "no evidence after 3 calls" in r.error["message"]
    assert len(s.kinds("probe")) == 3 and len(s.bodies) == 3  # no cell ran
    assert sentinel not in r.out + r.err


@pytest.mark.req("R-18.9", "R-25.37", "R-18.7")
def test_an_inspect_probe_call_is_one_wire_attempt(cli, tmp_path):
    """Inspect retries a 500 (a cell's model retries once); the probe's call does not: three
    server errors are three calls and three wire attempts, then the endpoint is unreachable
    (exit 3)."""
    r, s, _ = _preflight_only(cli, tmp_path, fail=500)
    assert (r.code, r.error["error"]) == (3, "cli.environment.preflight"), r.err
    assert "3 calls, no answer but errors (HTTP 500)" in r.error["message"]
    assert len(s.kinds("probe")) == 3 and len(s.bodies) == 3


@pytest.mark.req("R-25.27", "R-25.31", "R-25.32", "R-17.4")
def test_the_caps_stop_a_real_agentharm_campaign_where_the_d740_bound_says(cli, stand_in,
                                                                           tmp_path, home):
    """Under caps each cell is one sample (--cell-size 1) reserved at the D-740 bound, 42
    calls at M = 10. With --max-calls 45 the probe (1 call) and the first cell's reservation
    (42) fit; after it billed its calls (probe 1 + cell 3: agent twice, the refusal judge
    once), the second cell's 42 do not (4 + 42 > 45): the run stops before it, cap_reached,
    exit 1, and says to raise the cap."""
    env_file, sentinel = key_file(tmp_path)
    corpus = home / "corpora" / f"ah-capped-{tmp_path.name}"
    plan = _plan(env_file)
    plan[plan.index("46-1")] = "46-1,46-2"
    r = cli("run", "agentharm", "--corpus", str(corpus), "--campaign", "capped", *plan,
            "--price-in", "0.15", "--price-out", "0.60", "--max-calls", "45",
            "--max-cost-usd", "20", env=standin_env(stand_in), json_errors=False)
    assert r.code == 1, r.out + r.err
    assert "cap_reached" in r.out + r.err and "raise the cap" in r.out + r.err
    root = _written(corpus)
    cells = [json.loads(x) for x in (root / "ledger.jsonl").read_text().splitlines()
             if x.strip()]
    assert [c["status"] for c in cells] == ["complete"]  # the second cell never started
    m = json.loads((root / "manifest.json").read_text())
    caps = m["live"]["caps"]
    assert caps["billed_calls"] == len(stand_in.bodies) == 4
    assert caps["bound"]["calls_per_cell"] == 42
    assert len(stand_in.kinds("agent")) == 2  # one cell: two agent calls, none of the second
    # re-run with a cap the second cell fits: it resumes and runs only that cell
    r2 = cli("run", "agentharm", "--corpus", str(corpus), "--campaign", "capped", *plan,
             "--price-in", "0.15", "--price-out", "0.60", "--max-calls", "100",
             "--max-cost-usd", "20", env=standin_env(stand_in), json_errors=False)
    assert r2.code == 0, r2.out + r2.err
    cells = [json.loads(x) for x in (_written(corpus) / "ledger.jsonl").read_text()
             .splitlines() if x.strip()]
    assert [c["status"] for c in cells] == ["complete", "complete"]
    assert sentinel not in r.out + r.err + r2.out + r2.err
