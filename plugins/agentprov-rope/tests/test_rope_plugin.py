"""The rope source plugin: a planned part with no backend; every run exits 5."""

import json
import subprocess
import sys

import pytest


@pytest.mark.req("R-1.6")
@pytest.mark.parametrize("args", [("--catalogue",), ("--dry-run", "--corpus", "/tmp/nowhere/c",
                                                     "--campaign", "c", "--llm-script", "SCRIPT")])
def test_rope_exits_5(args, tmp_path):
    (tmp_path / "script.json").write_text("[]")
    args = [str(tmp_path / "script.json") if a == "SCRIPT" else a for a in args]
    r = subprocess.run([sys.executable, "-m", "agentprov_core", "--error-format", "json", "run",
                        "rope", *args], capture_output=True, text=True)
    assert (r.returncode, json.loads(r.stderr)["error"]) == (5, "run.unsupported.no_live_capability")
