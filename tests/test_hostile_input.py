"""Hostile input to the files and options a user names: every one a refusal with its code
and exit code, naming the file or option and what is wrong, never a traceback (exit 70),
and nothing written. Each case is one an adversarial sweep found: a number of thousands of
digits, a file nested thousands of levels deep, a FIFO where a file belongs, a URL that does
not parse or holds a line break, a .env with a NUL, a directory that is not a corpus.

Through the real CLI (a subprocess, `--error-format json`), except the few readers that run
inside a campaign (the control file, a capture log's chain), which are called in-process on
real files."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import make_marker, snapshot

from agentprov_core.backend import environments

HUGE = "9" * 5000  # Python's int() refuses more than 4,300 digits
DEEP = "[" * 100_000 + "]" * 100_000  # Python's and msgspec's parsers recurse at ~1,000


@pytest.fixture
def dry(cli, corpora):
    def run(*args, env=None, stdin=None):
        return cli("run", "agentdojo", "--dry-run", "--corpus", corpora / "c", "--campaign",
                   "c", *args, env=env, stdin=stdin)
    return run


@pytest.fixture
def built(home):
    """A marker for the agentdojo environment: steps 1-3 pass the environment check."""
    from agentprov_core.plugins import source_entry

    make_marker(home, environments.environment_id(source_entry("agentdojo").source.meta))
    return home


@pytest.fixture
def fifo(tmp_path):
    """A FIFO no one writes to: reading it would wait forever."""
    p = tmp_path / "fifo"
    os.mkfifo(p)
    return p


def nothing_written(home: Path, corpora: Path, before: dict | None = None) -> None:
    assert snapshot(home) == (before or {})
    assert list(corpora.iterdir()) == []


def refused(r, code: str, exit_code: int, *needles: str) -> str:
    """The refusal's message, after checking its code, exit code and that it is no
    traceback."""
    assert "internal error" not in r.err and "Traceback" not in r.err, r.err
    assert (r.code, r.error["error"]) == (exit_code, code), r.err
    msg = r.error["message"]
    for n in needles:
        assert n in msg, msg
    assert len(msg) < 1000, msg  # a 5,000-digit value is not echoed whole
    return msg


# ------------------------------------------------------------------ task SPECs
@pytest.mark.req("R-7.5", "R-14.1", "R-16.1")
@pytest.mark.parametrize("option,spec", [
    ("--user-tasks", HUGE), ("--user-tasks", f"0-{HUGE}"), ("--injection-tasks", f"{HUGE}-1"),
])
def test_a_task_spec_of_thousands_of_digits(dry, script, option, spec, home, corpora):
    r = dry("--suite", "banking", "--attack", "important_instructions", option, spec,
            "--llm-script", script)
    refused(r, "cli.usage.task_spec", 2, option, "is out of range", "(5,000 characters)")
    nothing_written(home, corpora)


# ------------------------------------------------------------------ --plan
PLAN_HEAD = '[plan]\nformat = "agentprov-run-plan/0.1"\nbackend = "agentdojo"\n'


@pytest.mark.req("R-14.1", "R-16.1")
@pytest.mark.parametrize("case,body,needle", [
    ("huge integer", f"user_tasks = {HUGE}\n", "a number has more than 4,300 digits"),
    ("huge repeats", "repeats = 10000000000000000000000000000000000000000\n",
     "[plan].repeats: expected `int` <= 1000"),
    ("no repeats", "repeats = 0\n", "[plan].repeats: expected `int` >= 1"),
    ("deep", f"suites = {DEEP}\n", "nests arrays and tables 100000 levels deep; the limit is 64"),
    ("not UTF-8", "suites = [\"caf\xe9\"]\n", "is not UTF-8 text"),
])
def test_a_hostile_plan_file(dry, script, tmp_path, home, corpora, case, body, needle):
    plan = tmp_path / "plan.toml"
    plan.write_bytes((PLAN_HEAD + body).encode("latin-1"))
    r = dry("--plan", plan, "--llm-script", script)
    refused(r, "cli.usage.plan_file", 2, str(plan), needle)
    nothing_written(home, corpora)


@pytest.mark.req("R-14.1", "R-16.1")
def test_a_plan_or_script_that_is_no_regular_file(dry, script, tmp_path, fifo, home, corpora):
    """A FIFO is refused at once (it would wait forever for a writer); so are a directory
    and a file larger than the limit (a sparse file: its size is what is checked)."""
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(17 * 1024 * 1024)
    for path, needle in ((fifo, "is not a regular file (a FIFO, socket or device is never "
                                "read)"), (tmp_path, "is a directory, not a file"),
                         (big, "is 17,825,792 bytes; the limit is 16,777,216")):
        r = dry("--plan", path, "--llm-script", script)
        refused(r, "cli.usage.plan_file", 2, str(path), needle)
        r = dry("--suite", "banking", "--llm-script", path)
        refused(r, "cli.usage.llm_script", 2, f"--llm-script {path}: {needle}")
    nothing_written(home, corpora)


# ------------------------------------------------------------------ --llm-script
@pytest.mark.req("R-14.1", "R-16.1")
@pytest.mark.parametrize("case,data,needle", [
    ("deep", DEEP.encode(), "nests arrays and objects 100000 levels deep; the limit is 64"),
    ("deep object", b'{"a":' * 2000 + b"1" + b"}" * 2000, "2000 levels deep"),
    ("huge number", b'[{"content": "x", "usage": {"prompt_tokens": ' + HUGE.encode()
     + b', "completion_tokens": 1}}]', "a number has more than 4,300 digits"),
    ("not UTF-8", b'[{"content": "caf\xe9"}]', "is not UTF-8 text"),
])
def test_a_hostile_script(dry, tmp_path, home, corpora, case, data, needle):
    path = tmp_path / "script.json"
    path.write_bytes(data)
    r = dry("--suite", "banking", "--llm-script", path)
    refused(r, "cli.usage.llm_script", 2, f"--llm-script {path}", needle)
    nothing_written(home, corpora)


# ------------------------------------------------------------------ --base-url
@pytest.mark.req("R-12.10", "R-14.1", "R-16.3")
@pytest.mark.parametrize("url,shown,why", [
    ("http://[::1/v1", "http://[::1/v1", "it is not a valid URL (Invalid IPv6 URL)"),
    ("http://127.0.0.1:99999/v1", "http://127.0.0.1:99999/v1", "it is not a valid URL"),
    ("http://127.0.0.1:8000/v1\r\nX-Injected: 1", "http://127.0.0.1:8000/v1\\r\\nX-Injected:%201",
     "it holds a control character or a space ('\\r' at character 25)"),
    ("http://127.0.0.1:8000/v1\tx", "http://127.0.0.1:8000/v1\\tx",
     "it holds a control character or a space ('\\t' at character 25)"),
    ("http://127.0.0.1:8000/a b", "http://127.0.0.1:8000/a%20b", "a space (' ' at character 24)"),
])
def test_a_base_url_that_is_no_url(dry, built, corpora, url, shown, why):
    """A base URL that does not parse, or holds a line break (urlsplit drops it silently,
    and it would reach the request line), is ``cli.refused.endpoint`` (exit 4), the
    specification's refusal for ``--base-url``; it is refused before it decides the class
    (a malformed local URL is not taken for an API one and asked for caps)."""
    before = snapshot(built)
    for extra in ((), ("--containment", "vm")):
        r = dry("--endpoint", "ollama", "--model-id", "m", "--base-url", url, *extra)
        msg = refused(r, "cli.refused.endpoint", 4, f"the endpoint URL {shown} is refused", why)
        assert "\r" not in msg and "\n" not in msg and "\t" not in msg
    nothing_written(built, corpora, before)


# ------------------------------------------------------------------ keys: .env and stdin
SENTINEL = "AGENTPROV-TEST-SENTINEL-" + os.urandom(8).hex()
OPENROUTER = ("--model", "openrouter", "--model-id", "m", "--max-calls", "8", "--max-cost-usd",
              "1", "--price-in", "0.15", "--price-out", "0.6", "--containment", "vm")


@pytest.mark.req("R-12.2", "R-12.6", "R-14.1")
@pytest.mark.parametrize("content,code,needle", [
    (f"OPENROUTER_API_KEY={SENTINEL}\x00x\n", "cli.usage.env_file_syntax",
     "keys.env:1: the line holds a NUL character"),
    (f'OPENROUTER_API_KEY="{SENTINEL} x"\n', "cli.usage.key_value",
     "the value given for OPENROUTER_API_KEY in "),
    (f'OPENROUTER_API_KEY="{SENTINEL}\\nX-Injected: 1"\n', "cli.usage.key_value",
     "holds spaces or control characters inside"),
])
def test_a_hostile_env_file(dry, built, tmp_path, corpora, content, code, needle):
    env = tmp_path / "keys.env"
    env.write_text(content)
    before = snapshot(built)
    r = dry("--suite", "banking", *OPENROUTER, "--env-file", env)
    refused(r, code, 2, needle)
    assert SENTINEL not in r.out + r.err
    nothing_written(built, corpora, before)


@pytest.mark.req("R-12.6", "R-14.1")
def test_an_env_file_that_is_a_fifo(dry, built, fifo, corpora):
    before = snapshot(built)
    r = dry("--suite", "banking", *OPENROUTER, "--env-file", fifo)
    refused(r, "cli.usage.env_file_syntax", 2, f"{fifo}: is not a regular file")
    nothing_written(built, corpora, before)


@pytest.mark.req("R-12.2", "R-12.6", "R-14.1")
@pytest.mark.parametrize("stdin,needle", [
    (DEEP, "--env-stdin: not one object of variables: it nests arrays and objects 100000 "
           "levels deep"),
    ('{"OPENROUTER_API_KEY": ' + HUGE + "}", "a number has more than 4,300 digits"),
    (json.dumps({"OPENROUTER_API_KEY": SENTINEL + "\u0000"}),
     "the value of OPENROUTER_API_KEY holds a NUL character"),
])
def test_hostile_env_stdin(dry, built, corpora, stdin, needle):
    before = snapshot(built)
    r = dry("--suite", "banking", *OPENROUTER, "--env-stdin", stdin=stdin)
    refused(r, "cli.usage.env_stdin", 2, needle)
    assert SENTINEL not in r.out + r.err
    nothing_written(built, corpora, before)


# ------------------------------------------------------------------ numeric options
@pytest.mark.req("R-14.1", "R-16.1")
@pytest.mark.parametrize("args,needle", [
    (("--repeats", "1001"), "--repeats 1001: must be 1,000 or less"),
    (("--repeats", "99999999999999999999999"), "--repeats 99999999999999999999999: must be "
                                               "1,000 or less"),
    (("--cell-timeout", "100000000000000"), "--cell-timeout 100000000000000: must be 604,800 "
                                            "or less"),
    (("--start-stagger", "nan"), "--start-stagger nan: must be a finite number"),
    (("--start-stagger", "-1"), "--start-stagger -1.0: must be 0 or more"),
    (("--start-stagger", "1e300"), "--start-stagger 1e+300: must be 3,600 or less"),
    (("--limit", "-1"), "--limit -1: must be 0 or more"),
    (("--max-calls", "1", "--max-cost-usd", "inf", "--price-in", "1", "--price-out", "1"),
     "--max-cost-usd inf: must be a finite number"),
])
def test_numeric_options_out_of_range(dry, script, home, corpora, args, needle):
    r = dry("--suite", "banking", "--llm-script", script, *args)
    refused(r, "cli.usage.option_value", 2, needle)
    nothing_written(home, corpora)


@pytest.mark.req("R-12.14", "R-14.1")
def test_max_tokens_of_thousands_of_digits(dry, built, corpora):
    before = snapshot(built)
    r = dry("--suite", "banking", "--model", "anthropic", "--model-id", "m",
            "--max-tokens", HUGE)
    refused(r, "cli.usage.option_value", 2, "--max-tokens 9999999999", "a positive integer")
    nothing_written(built, corpora, before)


# ------------------------------------------------------------------ the corpus tools
TOOLS = (["verify"], ["validate"], ["validate", "--strict"], ["stats"], ["recompute", "--dry-run"],
         ["stats", "--tables", "results"])


@pytest.mark.req("R-27.4", "R-14.1")
@pytest.mark.parametrize("manifest,what", [
    ({"format": "agentprov-run-plan/0.1"}, "its manifest.json is a agentprov-run-plan/0.1 "
                                           "document, not a corpus's"),
    ({"format": "agentprov-env-marker/0.1", "working": True}, "not a corpus's"),
    (["agentprov-live-corpus/0.1"], "manifest.json has no agentprov 'format'"),
    (None, "nests arrays and objects 100000 levels deep"),
])
def test_a_directory_that_is_not_a_corpus_is_refused_by_every_tool(cli, tmp_path, manifest,
                                                                    what):
    """stats and recompute --dry-run counted such a directory as an empty corpus (exit 0):
    every tool now refuses it as ``corpus.environment.not_a_corpus`` (exit 3)."""
    d = tmp_path / "notacorpus"
    d.mkdir()
    (d / "manifest.json").write_text(DEEP if manifest is None else json.dumps(manifest))
    (d / "ledger.jsonl").write_text("")
    before = snapshot(d)
    for tool in TOOLS:
        r = cli(*tool, "--corpus", d)
        refused(r, "corpus.environment.not_a_corpus", 3, what)
    assert snapshot(d) == before


@pytest.fixture
def synthetic(tmp_path_factory, tmp_path):
    """The example working corpus of test_corpus_tools, copied."""
    from test_corpus_tools import build_corpus

    root = build_corpus(tmp_path_factory.mktemp("hostile"))
    copy = tmp_path / "corpora" / root.name
    shutil.copytree(root, copy)
    return copy


@pytest.mark.req("R-27.4", "R-14.1")
def test_a_manifest_or_ledger_line_nested_thousands_deep(cli, synthetic):
    """A corpus whose manifest is nested 100,000 levels deep: verify fails it (the manifest
    was altered: exit 1), the other tools refuse to read it (exit 3). A ledger line nested
    as deep fails verify, and the other tools skip it."""
    manifest = synthetic / "manifest.json"
    good = manifest.read_bytes()
    manifest.write_text(DEEP)
    r = cli("verify", "--corpus", synthetic)
    assert r.code == 1 and "failed: manifest.unreadable at manifest.json: manifest.json is not " \
                           "readable JSON (nests arrays and objects 100000 levels deep; the " \
                           "limit is 128)" in r.out, r.out + r.err
    for tool in TOOLS[1:]:
        refused(cli(*tool, "--corpus", synthetic), "corpus.environment.not_a_corpus", 3,
                "manifest.json is not readable JSON (nests arrays and objects 100000 levels")
    manifest.write_bytes(good)
    with open(synthetic / "ledger.jsonl", "a") as f:
        f.write('{"seq": 5, "setup_refusal": ' + '{"a":' * 5000 + "1" + "}" * 5001 + "\n")
    r = cli("verify", "--corpus", synthetic)
    assert r.code == 1 and "failed: ledger.parse at ledger.jsonl: line 6: nested too deeply " \
                           "to be a ledger entry: the line was altered" in r.out, r.out + r.err
    for tool in TOOLS[1:]:
        r = cli(*tool, "--corpus", synthetic)
        assert r.code == 0 and "internal error" not in r.err, (tool, r.out + r.err)


# ------------------------------------------------------------------ readers inside a run
@pytest.mark.req("R-21.25", "R-14.1")
def test_a_control_file_that_is_no_regular_file_is_no_drain(fifo, tmp_path):
    """The campaign polls --control-file before each cell: a FIFO (or a huge file) must not
    stall it; only a regular file holding ``drain`` asks for a drain."""
    from agentprov_core.run.stops import drain_requested

    assert drain_requested(str(fifo)) is False
    f = tmp_path / "control"
    f.write_text("drain\n")
    assert drain_requested(str(f)) is True
    with open(f, "wb") as out:
        out.write(b"drain")
        out.truncate(1 << 20)
    assert drain_requested(str(f)) is False


@pytest.mark.req("R-14.1")
def test_a_capture_record_nested_thousands_deep_is_damage_not_a_crash():
    """The worker writes the capture log: a record nested past the parsers' recursion is a
    problem of the chain (T0 ingests, maps and verifies the log on), and sealing such a log
    leaves it as it is."""
    import agentprov_capture

    header = agentprov_capture.canonical({"seq": 0, "prev": None, "kind": "header", "t": 0,
                                      "format": "capture/0.1"})
    deep = b'{"seq":1,"args":' + DEEP.encode() + b"}"
    chain = agentprov_capture.check(header + b"\n" + deep + b"\n")
    assert "record 1: not JSON (nested too deeply to be read)" in chain.problems
    assert chain.n_records == 2 and len(chain.records) == 1


# ------------------------------------------------------------------ a key in the base URL
def everything(home: Path, corpora: Path, r) -> bytes:
    """Every byte written: the home, the corpora, stdout and stderr."""
    files = {**snapshot(home), **snapshot(corpora)}
    return b"".join(files.values()) + r.out.encode() + r.err.encode()


@pytest.mark.req("R-12.2", "R-12.10", "R-16.3")
@pytest.mark.parametrize("path", [SENTINEL, "%41" + SENTINEL[1:], f"x{SENTINEL}y/chat"])
def test_a_local_base_url_holding_the_key_is_refused(dry, built, tmp_path, corpora, path):
    """The base URL is recorded in the corpus (the manifest, every capture header and AER)
    and printed: one that holds the key's value, as given or percent-encoded, is refused
    before anything starts, and the refusal does not show the key."""
    env = tmp_path / "omlx.env"
    env.write_text(f"OMLX_API_KEY={SENTINEL}\n")
    before = snapshot(built)
    r = dry("--endpoint", "omlx", "--model-id", "m", "--env-file", env, "--containment", "vm",
            "--base-url", f"http://127.0.0.1:9/v1/{path}")
    refused(r, "cli.refused.endpoint", 4, "it holds the value of OMLX_API_KEY: a key is never "
                                          "put in a URL", "the endpoint URL http://127.0.0.1:9/v1/")
    assert SENTINEL[1:].encode() not in everything(built, corpora, r)  # encoded or not
    nothing_written(built, corpora, before)


@pytest.mark.req("R-12.2", "R-12.9", "R-16.3")
def test_an_api_base_url_holding_the_key_is_refused(dry, built, tmp_path, corpora):
    env = tmp_path / "keys.env"
    env.write_text(f"OPENROUTER_API_KEY={SENTINEL}\n"
                   f"OPENROUTER_BASE_URL=https://openrouter.ai/api/v1/{SENTINEL}\n")
    before = snapshot(built)
    r = dry("--suite", "banking", *OPENROUTER, "--env-file", env)
    refused(r, "cli.refused.endpoint", 4, "the endpoint URL https://openrouter.ai/api/v1/… is "
                                          "refused: it holds the value of OPENROUTER_API_KEY")
    assert SENTINEL.encode() not in everything(built, corpora, r)
    nothing_written(built, corpora, before)


@pytest.mark.req("R-12.2", "R-12.10")
def test_a_key_shaped_base_url_is_refused_without_a_key(dry, built, corpora):
    shaped = "sk-" + os.urandom(16).hex()
    before = snapshot(built)
    r = dry("--endpoint", "ollama", "--model-id", "m", "--containment", "vm",
            "--base-url", f"http://127.0.0.1:9/{shaped}/v1")
    refused(r, "cli.refused.endpoint", 4, "the endpoint URL http://127.0.0.1:9/…/v1 is "
                                          "refused: it holds a key-shaped string (openai-style "
                                          "key)")
    assert shaped.encode() not in everything(built, corpora, r)
    nothing_written(built, corpora, before)


@pytest.mark.req("R-12.2", "R-21.21")
def test_the_manifest_is_scanned_for_the_key(tmp_path):
    """T0 writes the manifest from what it observed (a local server's identity, the egress
    record, the preflight): a string holding the key's value is redacted before it is
    written, and where it was is recorded."""
    from agentprov_core.corpus.working import WorkingCorpus

    wc = WorkingCorpus(tmp_path / "c.partial")
    wc.root.mkdir()
    wc.secrets = lambda: {"OMLX_API_KEY": SENTINEL}
    wc.write_manifest({"format": "agentprov-live-corpus/0.1",
                       "live": {"local_models": {"d": {"note": f"served with {SENTINEL}"}}}})
    data = (wc.root / "manifest.json").read_bytes()
    assert SENTINEL.encode() not in data
    m = wc.manifest()  # it still matches its manifest_sha256
    assert m["live"]["local_models"]["d"]["note"] == "served with …"
    assert m["redacted"] == ["live.local_models.d.note: the value of OMLX_API_KEY"]


@pytest.mark.req("R-12.2", "R-21.21")
def test_what_the_worker_returns_is_scanned_like_what_it_staged():
    """The worker's result (a reason, a setup refusal) goes into the ledger: a key in it
    quarantines the session as a key in a staged file does."""
    from agentprov_core.base import redaction

    result = {"status": "errored", "reason": f"Authorization: Bearer {SENTINEL}",
              "setup_refusal": {"detail": "sk-" + "a" * 24}}
    assert redaction.scan_value("the worker's result", result, {"OMLX_API_KEY": SENTINEL}) == [
        "the worker's result: the value of OMLX_API_KEY",
        "the worker's result: a key-shaped string (openai-style key)"]
