"""One cell cannot reach another: two cells run at once through the real worker, its cell
server and the cells' confinement (``agentprov_backend.landlock`` and ``cellfilter``),
under ``--containment bwrap`` (the real ``Worker`` with the recorded profile) and not
contained. The containment probe's cell body (``agentprov_backend.cellprobe``, a
``run-cell`` request with ``"probe": true``) plays both cells: the victim writes its
capture log, says it is ready and waits; the attacker then attacks it, says it is done,
and the victim ends. Each test makes one attack, so that removing one protection fails
exactly its test. What the attacker tries:

1. **the forkserver**: every Unix socket it can find (the standard library's forkserver
   listener in the TMPDIR the cells share, every name in ``/proc/net/unix``) is sent the
   forkserver's own request (four descriptors by ``multiprocessing.reduction.sendfds``, a
   pickle whose ``__reduce__`` plants a file in the sibling's session and the staging
   root); every descriptor of its parent it can take (``pidfd_getfd``) is sent a cell
   request for the staging root;
2. **metadata**: ``chmod``, ``utime``, ``chown``, extended attributes on the sibling's
   capture log, by path, through a descriptor, a symlink and a ``..``, and by raw system
   calls; its own file's mode and times it can change;
3. **signals**: ``SIGKILL`` to the sibling cell, the cell server (its parent) and the worker.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import bwrap_unusable, install_worker_libraries

from agentprov_core.backend.containment import Recorded
from agentprov_core.backend.sandbox import profile
from agentprov_core.backend.workerclient import Worker

REC = Recorded(kind="bwrap", declared_by="probe", profile_sha256=profile.profile_sha256())
CONTAINMENT = [pytest.param(True, id="bwrap", marks=pytest.mark.skipif(
                   bwrap_unusable() is not None,
                   reason=f"needs a working bubblewrap: {bwrap_unusable()}")),
               pytest.param(False, id="not-contained")]
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the cells' confinement is Linux only")

@pytest.fixture(scope="module")
def cells_env():
    """A venv holding the real worker library (the probe's cell body among it)."""
    top = Path(tempfile.mkdtemp(prefix="agentprov-cells-"))
    env = top / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    install_worker_libraries(next(env.glob("lib/python3*/site-packages")))
    yield env
    shutil.rmtree(top, ignore_errors=True)


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _two_cells(env: Path, staging: Path, attack: str, contained: bool):
    """Run the victim, then the attacker, at once through one real worker; return both
    results, the worker's answer to a later request, and the staging root's files."""
    victim, attacker = staging / "s-victim", staging / "s-attacker"
    plant = [str(victim / "planted-by-forkserver"), str(staging / "planted-by-forkserver")]
    common = {"probe": True, "timeout_s": 120}
    cell = {"victim": str(victim), "victim_ready": str(victim / "ready"),
            "attacker_done": str(attacker / "done"), "plant": plant}
    with Worker("cells", env, staging, containment=REC if contained else None) as w:
        fv = w.submit("run-cell", session_id="s-victim", staging=str(victim),
                      cell=cell | {"role": "victim"}, **common)
        fa = w.submit("run-cell", session_id="s-attacker", staging=str(attacker),
                      cell=cell | {"role": "attacker", "attacks": [attack]}, **common)
        res_a = w.result(fa, timeout=180)
        res_v = w.result(fv, timeout=180)
        hello = w.request("hello")
    return res_v, res_a, hello, plant


@pytest.mark.req("R-4.10", "R-4.11")
@pytest.mark.parametrize("contained", CONTAINMENT)
def test_a_cell_gets_no_unconfined_process_through_the_forkserver(cells_env, tmp_path,
                                                                 contained):
    staging = tmp_path / "staging"
    res_v, res_a, hello, plant = _two_cells(cells_env, staging, "forkserver", contained)
    assert res_a["status"] == "complete", res_a
    seen = res_a["seen"]["forkserver"]
    assert not any(Path(p).exists() for p in plant), seen
    assert not any("planted" in n for n in _tree(staging)), _tree(staging)
    assert seen["parent descriptors taken"] == seen["parent /proc fds opened"] == [], seen
    assert res_v["status"] == "complete", res_v
    assert hello["protocol"] == "agentprov-worker/0.1"


@pytest.mark.req("R-4.10", "R-4.11")
@pytest.mark.parametrize("contained", CONTAINMENT)
def test_a_cell_cannot_change_a_siblings_file_metadata(cells_env, tmp_path, contained):
    staging = tmp_path / "staging"
    res_v, res_a, _, _ = _two_cells(cells_env, staging, "metadata", contained)
    seen = res_a["seen"]["metadata"]
    denied = {k: v for k, v in seen.items() if not k.startswith("its own file")}
    assert set(denied.values()) == {"EPERM"}, seen
    assert res_v["status"] == "complete", res_v
    assert res_v["before"] == res_v["after"], (res_v, seen)
    st = (staging / "s-victim" / "capture.jsonl").stat()
    assert stat.S_IMODE(st.st_mode) == stat.S_IMODE(res_v["before"][0]) != 0
    assert [st.st_atime_ns, st.st_mtime_ns] == res_v["before"][1:3]
    assert os.listxattr(staging / "s-victim" / "capture.jsonl") == []


@pytest.mark.req("R-4.10")
@pytest.mark.parametrize("contained", CONTAINMENT)
def test_a_cell_changes_its_own_files_metadata_through_its_server(cells_env, tmp_path,
                                                                  contained):
    """The filter refuses the system calls; the cell's Python asks its cell server, which
    makes the change beneath the cell's own directories (``agentprov_backend.metabroker``)."""
    staging = tmp_path / "staging"
    _, res_a, _, _ = _two_cells(cells_env, staging, "metadata", contained)
    own = {k: v for k, v in res_a["seen"]["metadata"].items() if k.startswith("its own file")}
    assert own and set(own.values()) == {"done"}, res_a["seen"]
    st = (staging / "s-attacker" / "own.txt").stat()
    assert (stat.S_IMODE(st.st_mode), st.st_mtime_ns) == (0o640, 1_000_000_000)


@pytest.mark.req("R-4.10", "R-4.11")
@pytest.mark.parametrize("contained", CONTAINMENT)
def test_a_cell_cannot_signal_its_sibling_its_server_or_the_worker(cells_env, tmp_path,
                                                                  contained):
    from agentprov_core.backend.probe import landlock_abi

    if landlock_abi() < 6:
        pytest.skip(f"Landlock signal scoping needs ABI 6; this kernel has {landlock_abi()}")
    staging = tmp_path / "staging"
    res_v, res_a, hello, _ = _two_cells(cells_env, staging, "signal", contained)
    seen = res_a["seen"]["signal"]
    assert seen["siblings found"] >= 1, seen
    assert seen.pop("its own child") == "done", seen
    seen.pop("siblings found")
    assert set(seen.values()) == {"EPERM"}, seen
    assert res_v["status"] == "complete", res_v
    assert hello["protocol"] == "agentprov-worker/0.1"
