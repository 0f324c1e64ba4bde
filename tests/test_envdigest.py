"""The environment digest of every suite, after its tools changed its state: each suite of
the real AgentDojo environment (and, from their own test files, AgentDyn's and the AutoDojo
fixture's) is built, every task's ground truth and every one-time-password helper run in it,
and the worker's digest (``agentprov_dojo.envdigest``) made of it, by
``tests/envdigest_probe.py`` in the environment's own Python."""

from __future__ import annotations

import json
import subprocess

import pytest
from conftest import ROOT, BuiltEnv, child_env

PROBE = ROOT / "tests" / "envdigest_probe.py"


def probe_suites(env: BuiltEnv) -> dict[str, dict]:
    """The probe's report per suite, at the environment's default benchmark version; each
    suite's digest is checked to be made, stable, and to leave out only pending
    one-time-password actions (every one of them, each named)."""
    backend = env.env_id.split("-")[0]
    cat = json.loads((env.env_dir / "agentprov" / f"catalogue-{backend}.json").read_text())
    p = subprocess.run([str(env.env_dir / "bin" / "python"), str(PROBE),
                        cat["default_benchmark_version"]], capture_output=True, text=True,
                       env=child_env() | {"PYTHONDONTWRITEBYTECODE": "1"}, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    got = {d["suite"]: d for d in map(json.loads, p.stdout.splitlines())}
    for name, d in got.items():
        digest = d["digest"]
        assert digest["method"] in ("model_dump_json", "model_dump_json_excluding"), (name, d)
        assert len(digest["sha256"]) == 64 and d["again"] == digest, name
        assert d["ground_truth_calls"] > 0, name
        assert all(h["pushed"] == 1 for h in d["helpers"]), (name, d["helpers"])
        omitted = digest.get("omitted", [])
        assert len(omitted) == d["pending"], name
        assert all(".verification_stack[" in o["path"] and o["type"] == "tuple"
                   for o in omitted), (name, omitted)
    return got


@pytest.mark.slow
@pytest.mark.req("R-2.7")
def test_every_agentdojo_suite_digests_whole_after_its_state_changes(agentdojo_env):
    got = probe_suites(agentdojo_env)
    assert sorted(got) == ["banking", "slack", "travel", "workspace"]
    assert {d["digest"]["method"] for d in got.values()} == {"model_dump_json"}
    assert all(d["helpers"] == [] for d in got.values())


#: run in the environment's Python: the digest's methods on small models of the shapes the
#: walk meets (a cycle through a dict's tuple, a function in a list, a model pydantic cannot
#: serialise at all, an object that is no model)
METHODS = r'''
import hashlib, json
from pydantic import BaseModel, model_serializer
from agentprov_dojo import envdigest

class Account(BaseModel):
    name: str = "a"
    stack: dict = {}
    hooks: list = []

class Env(BaseModel):
    accounts: list[Account] = [Account()]

class Broken(BaseModel):
    @model_serializer
    def ser(self):
        raise RuntimeError("no")

env = Env()
whole = envdigest.digest(env)
env.accounts[0].stack["123456"] = (print, (env,))
env.accounts[0].hooks.append(len)
partial = envdigest.digest(env)
rest = env.model_dump_json(exclude={"accounts": {0: {"stack": {"123456": True},
                                                     "hooks": {0: True}}}})
print(json.dumps({"whole": whole, "whole_sha": hashlib.sha256(Env().model_dump_json().encode()).hexdigest(),
                  "partial": partial, "rest_sha": hashlib.sha256(rest.encode()).hexdigest(),
                  "broken": envdigest.digest(Broken()), "object": envdigest.digest(object())}))
'''


@pytest.mark.slow
@pytest.mark.req("R-2.7")
def test_the_digest_methods(agentdojo_env):
    """Whole when pydantic serialises the environment (the sha256 of its model_dump_json);
    otherwise without each value it cannot serialise, named by path and type, and the sha256
    of pydantic's dump of the rest; unavailable, never raising, when no value is to blame;
    repr for an object that is no model."""
    p = subprocess.run([str(agentdojo_env.env_dir / "bin" / "python"), "-c", METHODS],
                       capture_output=True, text=True, timeout=120,
                       env=child_env() | {"PYTHONDONTWRITEBYTECODE": "1"})
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout)
    assert got["whole"] == {"sha256": got["whole_sha"], "method": "model_dump_json"}
    assert got["partial"] == {"sha256": got["rest_sha"], "method": "model_dump_json_excluding",
                              "omitted": [{"path": 'accounts[0].stack["123456"]',
                                           "type": "tuple"},
                                          {"path": "accounts[0].hooks[0]",
                                           "type": "builtin_function_or_method"}]}
    assert got["broken"]["method"] == "unavailable" and got["broken"]["sha256"] is None
    assert "no value of it is to blame" in got["broken"]["error"]
    assert got["object"]["method"] == "repr" and len(got["object"]["sha256"]) == 64
