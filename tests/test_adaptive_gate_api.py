"""The adaptive start gate on an API endpoint's real path, where it is on by default: the
run configured as a real OpenRouter run reaches a loopback TLS stand-in through T0's egress
proxy (tests/test_real_campaign.py says how), which tunnels the TLS undecrypted, so the
gate learns of a 429 only from the wire log the worker stages. The stand-in answers the
first requests of the cells with 429 and ``Retry-After``; the stock element's own retries
(the SDK's) answer them inside the cell, and the gate backs off."""

from __future__ import annotations

import json

import pytest

from tests.test_real_campaign import StandIn, key_file, ledger, manifest, real_args, standin_env

pytestmark = pytest.mark.slow
pytest.importorskip("trustme")


class Limited(StandIn):
    """The stand-in, answering its first ``refuse`` requests after the preflight probe with
    429 and ``Retry-After: 1``."""

    def __init__(self, tmp, refuse: int) -> None:
        super().__init__(tmp)
        self.refuse = refuse
        self.refused = 0

    def handle(self, path, headers, body):
        probe = b"report_probe" in body
        with self.lock:
            if not probe and self.refused < self.refuse:
                self.refused += 1
                self.requests += 1
                return 429, "application/json", json.dumps(
                    {"error": {"message": "rate limited", "type": "rate_limit"}}).encode(), {
                    "Retry-After": "1"}
        return super().handle(path, headers, body)


def test_the_gate_is_on_for_an_api_endpoint_and_backs_off_on_its_429s(e2e_cli, agentdojo_env,
                                                                       tmp_path):
    s = Limited(tmp_path, refuse=2)
    try:
        env_file, sentinel = key_file(tmp_path)
        corpus = tmp_path / "api"
        r = e2e_cli(*real_args(corpus, env_file, "--max-calls", "200", "--max-cost-usd", "5",
                               "--containment", "vm", "--jobs", "2"),
                    env=standin_env(s), json_errors=False)
    finally:
        s.close()
    assert r.code == 0, r.err
    assert s.refused == 2
    m = manifest(corpus)
    assert m["live"]["endpoint_class"] == "api"
    [gate] = m["live"]["gate"]
    assert gate["policy"]["mode"] == "on"
    assert gate["policy"]["why"] == "an API endpoint (the default)"
    assert gate["signals"]["http 429"] >= 1 and gate["decreases_total"] >= 1
    assert max(p[1] for p in gate["trace"]) <= 2  # never above --jobs
    assert all(e["status"] == "complete" for e in ledger(corpus))
    assert sentinel not in r.out + r.err
