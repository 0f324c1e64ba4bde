"""The worker's view of its environment's identity reads each RECORD's own text and never
touches the files RECORD lists (a sandbox may forbid even a stat of some, such as a
`.env.example`: R-24.10); T0, outside any sandbox, re-hashes every listed file. A small
environment on this interpreter's own install holds the worker library and one
distribution whose RECORD lists files that are not there (test_containment's
small environment)."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from agentprov_core.backend import identity as envidentity
from tests import test_containment

small_env = test_containment.small_env  # the fixture: a venv holding the worker library

RECORD = ("listed_only/__init__.py,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\n"
          "listed_only/.env.example,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\n"
          "listed_only-1.0.dist-info/METADATA,,\n"
          "listed_only-1.0.dist-info/RECORD,,\n")


@pytest.fixture(scope="module")
def env(small_env) -> Path:
    site = next(small_env.glob("lib/python3*/site-packages"))
    info = site / "listed_only-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: listed_only\nVersion: 1.0\n\n")
    (info / "RECORD").write_text(RECORD)
    return small_env


@pytest.mark.req("R-24.10")
def test_the_hello_reads_record_text_and_never_the_files_it_lists(env):
    code = ("import json; from agentprov_backend import identity; "
            "print(json.dumps(identity.distributions()))")
    p = subprocess.run([str(env / "bin" / "python"), "-I", "-c", code], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr  # the listed files are absent: a stat would fail
    dists = json.loads(p.stdout)
    assert dists["listed-only"] == {
        "version": "1.0", "record_sha256": hashlib.sha256(RECORD.encode()).hexdigest()}
    # T0 computes the same digest from the files, and it is T0 that checks what RECORD lists
    ident = envidentity.compute(env)
    assert ident.distributions["listed-only"]["record_sha256"] == \
        dists["listed-only"]["record_sha256"]
    assert any("listed_only/.env.example" in problem for problem in ident.problems), \
        ident.problems
