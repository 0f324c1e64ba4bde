"""The preflight probe's "unreachable" branch on the real run path: a local server that lists
and fingerprints as llama.cpp but does not answer chat completions (404, as a server started
without that route or behind the wrong base URL answers). The probe's call goes through the
real worker and recording transport; T0 judges it unreachable and the run exits 3
(``cli.environment.preflight``) before any cell starts."""

from __future__ import annotations

import json

import pytest

from tests.test_local_models import llamacpp_routes, serve  # noqa: F401 - the fixture

pytestmark = pytest.mark.slow


@pytest.mark.req("R-18.7", "R-18.1")
def test_an_endpoint_that_does_not_answer_the_probe_exits_3(e2e_cli, serve, tmp_path):  # noqa: F811
    routes = llamacpp_routes(tmp_path)
    assert ("POST", "/v1/chat/completions") not in routes  # the stand-in answers 404
    s = serve("llamacpp", routes=routes)
    corpus = tmp_path / "unreachable"
    r = e2e_cli("run", "agentdojo", "--endpoint", "llamacpp", "--base-url", s.base_url,
                "--model-id", "m", "--containment", "vm", "--i-consent-to-local-run",
                "--corpus", str(corpus), "--campaign", "u", "--suite", "banking",
                "--user-tasks", "0")
    assert (r.code, r.error["error"]) == (3, "cli.environment.preflight"), r.out + r.err
    assert "HTTP 404" in r.error["message"]
    posts = [path for method, path, _ in s.requests if method == "POST"]
    assert posts == ["/v1/chat/completions"]  # one call: an unreachable verdict is final
    work = corpus.with_name("unreachable.partial")
    assert not (work / "ledger.jsonl").exists()  # no cell started
    probes = [json.loads(x) for x in
              (work / "preflight" / "ledger.jsonl").read_text().splitlines()]
    assert [(p["call"], p["status"]) for p in probes] == [(1, "errored")]  # HTTP 404
    assert probes[0]["capture_sha256"]  # the probe's exchange is kept as evidence
