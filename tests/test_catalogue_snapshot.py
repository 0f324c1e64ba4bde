"""The agentdojo catalogue, generated in a built backend environment, equals the committed
snapshot byte for byte, and carries the spec's headline numbers (R-7.14, R-7.15).

The environment-backed tests are marked slow (``tox -e e2e``): they use the environment
named by ``AGENTPROV_TEST_BACKEND_ENV`` (a venv, e.g. the one ``scripts/snapshot_catalogue.py``
builds), else build the real one once per session (the ``agentdojo_env`` fixture).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = (
    ROOT
    / "plugins"
    / "agentprov-agentdojo"
    / "src"
    / "agentprov_agentdojo"
    / "catalogue.snapshot.json"
)
ENV_VAR = "AGENTPROV_TEST_BACKEND_ENV"

VERSIONS = ["v1", "v1.1", "v1.1.1", "v1.1.2", "v1.2", "v1.2.1", "v1.2.2"]
# suite: (user tasks, injection tasks, tools, tool_definitions_bytes) at v1.2.2
SUITES_V122 = {
    "workspace": (40, 14, 24, 12666),
    "travel": (20, 7, 28, 15132),
    "banking": (16, 9, 11, 4886),
    "slack": (21, 5, 11, 3989),
}
DOS = {"dos", "swearwords_dos", "captcha_dos", "offensive_email_dos", "felony_dos"}
NOT_NAMING_MODEL = {"manual", "direct", "ignore_previous", "system_message", "injecagent"}


def _env_python(request: pytest.FixtureRequest) -> Path:
    env = os.environ.get(ENV_VAR)
    if not env:  # build the real environment once for the session (tox -e e2e)
        env = str(request.getfixturevalue("agentdojo_env").env_dir)
    for rel in ("bin/python", "Scripts/python.exe"):
        if (Path(env) / rel).exists():
            return Path(env) / rel
    pytest.skip(f"{ENV_VAR}={env} is not a built environment (no bin/python)")


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> bytes:
    python = _env_python(request)
    environ = {
        k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"}
    }
    environ["PYTHONDONTWRITEBYTECODE"] = "1"  # leave the environment's files as built
    done = subprocess.run(
        [str(python), "-m", "agentprov_backend.catalogue", "agentdojo"],
        cwd=tmp_path_factory.mktemp("catalogue-cwd"),
        env=environ,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")
    return done.stdout


def assert_headline(doc: dict) -> None:
    assert doc["format"] == "agentprov-catalogue/0.1"
    assert doc["source"] == doc["backend"] == "agentdojo"
    assert doc["provenance"]["packages"]["agentdojo"] == "0.1.35"
    assert doc["benchmark_versions"] == VERSIONS
    assert doc["default_benchmark_version"] == "v1.2.2"
    assert doc["tasks"] == []

    rows = [s for s in doc["suites"] if s["benchmark_version"] == "v1.2.2"]
    assert len(rows) == 4
    got = {
        s["name"]: (
            len(s["user_tasks"]),
            len(s["injection_tasks"]),
            s["tools"],
            s["tool_definitions_bytes"],
        )
        for s in rows
    }
    assert got == SUITES_V122
    assert sum(len(s["user_tasks"]) for s in rows) == 97
    assert sum(len(s["injection_tasks"]) for s in rows) == 35
    slack = next(s for s in rows if s["name"] == "slack")
    assert slack["injection_tasks"] == [f"injection_task_{i}" for i in range(1, 6)]
    assert {s["benchmark_version"] for s in doc["suites"]} == set(VERSIONS)

    attacks = doc["attacks"]
    assert len(attacks) == 17
    assert [a["name"] for a in attacks] == sorted(a["name"] for a in attacks)
    assert {a["name"] for a in attacks if a["dos"]} == DOS
    assert {a["name"] for a in attacks if not a["names_model"]} == NOT_NAMING_MODEL
    assert not any(a["refused"] for a in attacks)

    defences = doc["defences"]
    enabled = [d for d in defences if d["enabled"]]
    assert len(enabled) == 10
    melon = [d for d in enabled if d["name"].startswith("melon")]
    assert len(melon) == 3
    assert all(d["port"] for d in melon)


@pytest.mark.req("R-7.15")
@pytest.mark.req("R-7.14")
@pytest.mark.slow
def test_generated_catalogue_equals_committed_snapshot(generated: bytes) -> None:
    assert generated == SNAPSHOT.read_bytes(), (
        "run python3 scripts/snapshot_catalogue.py --check for a diff"
    )


@pytest.mark.req("R-7.15")
@pytest.mark.req("R-7.14")
@pytest.mark.slow
def test_generated_catalogue_headline_numbers(generated: bytes) -> None:
    assert generated.endswith(b"\n")
    assert_headline(json.loads(generated))


@pytest.mark.req("R-7.15")
@pytest.mark.req("R-7.14")
def test_committed_snapshot_headline_numbers() -> None:
    """The same numbers on the committed snapshot: needs no environment."""
    assert_headline(json.loads(SNAPSHOT.read_bytes()))
