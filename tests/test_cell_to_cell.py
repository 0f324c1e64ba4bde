"""One cell cannot reach another: two cells run at once through the real worker, its cell
server and the cells' confinement (``agentprov_backend.landlock`` and ``cellfilter``),
under ``--containment bwrap`` (the real ``Worker`` with the recorded profile) and not
contained. A stand-in worker source plays both cells: the victim writes its capture log,
says it is ready and waits; the attacker then attacks it, says it is done, and the victim
ends. What the attacker tries:

1. **the forkserver**: every Unix socket it can find (the standard library's forkserver
   listener in the TMPDIR the cells share, every name in ``/proc/net/unix``) is sent the
   forkserver's own request (four descriptors by ``multiprocessing.reduction.sendfds``, a
   pickle whose ``__reduce__`` plants a file in the sibling's session and the staging
   root); every descriptor of its parent it can take (``pidfd_getfd``) is sent a cell
   request for the staging root;
2. **metadata**: ``chmod``, ``utime``, ``chown``, extended attributes on the sibling's
   capture log, by path and through a descriptor;
3. **signals**: ``SIGKILL`` to the sibling cell, the cell server (its parent) and the worker.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import bwrap_unusable, install_worker_libraries, install_worker_source

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

CELLS = r'''
import ctypes, errno, glob, json, os, pickle, signal, socket, time

def _wait_for(path, seconds=60):
    end = time.time() + seconds
    while not os.path.exists(path) and time.time() < end:
        time.sleep(0.05)

def _err(exc):
    return errno.errorcode.get(exc.errno, str(exc.errno))

def _stat(path):
    st = os.stat(path)
    return [st.st_mode, st.st_atime_ns, st.st_mtime_ns, st.st_uid, st.st_gid,
            sorted(os.listxattr(path))]

def child_main(req):
    cell = req["cell"]
    own = req["staging"]
    if cell["role"] == "planter":  # what a request that reached a cell server would run
        for p in cell["plant"]:
            open(p, "w").write("planted")
        return
    if cell["role"] == "victim":
        cap = os.path.join(own, "capture.jsonl")
        with open(cap, "w") as f:
            f.write('{"kind": "header", "session_id": "victim"}\n')
        before = _stat(cap)
        open(os.path.join(own, "ready"), "w").close()
        _wait_for(cell["attacker_done"])
        with open(os.path.join(own, "result.json"), "w") as f:
            json.dump({"status": "complete", "before": before, "after": _stat(cap),
                       "pid": os.getpid()}, f)
        return
    _wait_for(cell["victim_ready"])
    seen = globals()["attack_" + cell["attack"]](req, cell)
    with open(os.path.join(own, "result.json"), "w") as f:
        json.dump({"status": "complete", "seen": seen}, f)
    open(cell["attacker_done"], "w").close()


class Payload:
    def __init__(self, paths):
        self.code = "".join(f"open({p!r}, 'w').write('forkserver payload')\n" for p in paths)
    def __reduce__(self):
        return (exec, (self.code,))


def _unix_names():
    """Every Unix socket name this process can see: paths and abstract names."""
    names = set(glob.glob(os.path.join(os.environ.get("TMPDIR", "/tmp"), "pymp-*", "listener-*")))
    try:
        with open("/proc/net/unix") as f:
            for line in f.readlines()[1:]:
                parts = line.split()
                if len(parts) >= 8:
                    names.add(parts[7])
    except OSError:
        pass
    return sorted(n for n in names if n)


def attack_forkserver(req, cell):
    from multiprocessing import reduction
    seen = {}
    for name in _unix_names():
        addr = "\0" + name[1:] if name.startswith("@") else name
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(5)
            s.connect(addr)
            r, w = os.pipe()
            os.write(w, pickle.dumps(Payload(cell["plant"])))
            extra = [os.open(os.devnull, os.O_RDONLY) for _ in range(2)]
            reduction.sendfds(s, [r, w] + extra)
            s.sendall(json.dumps({"op": "cell", "token": 999, "req": {
                "session_id": "x", "staging": os.path.dirname(own_dir(req)), "source": req["source"],
                "cell": {"role": "planter", "plant": cell["plant"]}}}).encode() + b"\n")
            try:
                s.recv(64)
            except OSError:
                pass
            seen[name] = "sent"
            time.sleep(1)
        except OSError as exc:
            seen[name] = _err(exc)
    # a descriptor of the parent (the cell server, or the stdlib forkserver)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    pidfd = libc.syscall(434, os.getppid(), 0)  # pidfd_open
    taken = []
    if pidfd >= 0:
        for target in range(3, 32):
            fd = libc.syscall(438, pidfd, target, 0)  # pidfd_getfd
            if fd >= 0:
                taken.append(target)
                try:
                    s = socket.socket(fileno=os.dup(fd))
                    s.settimeout(2)
                    s.sendall(json.dumps({"op": "cell", "token": 999, "req": {
                        "session_id": "x", "staging": os.path.dirname(own_dir(req)),
                        "source": req["source"],
                        "cell": {"role": "planter", "plant": cell["plant"]}}}).encode() + b"\n")
                except OSError:
                    pass
            else:
                seen.setdefault("pidfd_getfd", errno.errorcode.get(ctypes.get_errno(), "?"))
    else:
        seen["pidfd_open"] = errno.errorcode.get(ctypes.get_errno(), "?")
    seen["parent descriptors taken"] = taken
    for fd in range(3, 32):
        try:
            os.close(os.open(f"/proc/{os.getppid()}/fd/{fd}", os.O_RDWR))
            seen.setdefault("parent /proc fds opened", []).append(fd)
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                seen.setdefault("/proc/PPID/fd", _err(exc))
    time.sleep(1)
    return seen


def own_dir(req):
    return req["staging"]


def attack_metadata(req, cell):
    cap = os.path.join(cell["victim"], "capture.jsonl")
    seen = {}
    def attempt(name, fn):
        try:
            fn()
            seen[name] = "done"
        except OSError as exc:
            seen[name] = _err(exc)
    attempt("chmod 000", lambda: os.chmod(cap, 0))
    attempt("utime to 1970", lambda: os.utime(cap, (0, 0)))
    attempt("utime to now", lambda: os.utime(cap))
    attempt("chown to its own owner", lambda: os.chown(cap, os.getuid(), os.getgid()))
    attempt("setxattr", lambda: os.setxattr(cap, "user.agentprov", b"x"))
    def by_fd():
        fd = os.open(cap, os.O_RDONLY)
        try:
            os.fchmod(fd, 0)
        finally:
            os.close(fd)
    attempt("fchmod through a read-only descriptor", by_fd)
    def futimes():
        fd = os.open(cap, os.O_RDONLY)
        try:
            os.utime(fd, (0, 0))
        finally:
            os.close(fd)
    attempt("futimens through a read-only descriptor", futimes)
    return seen


def _processes():
    out = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    out[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    return out


def attack_signal(req, cell):
    seen = {}
    procs = _processes()
    me, parent = os.getpid(), os.getppid()
    worker = procs.get(parent)
    siblings = [p for p, pp in procs.items() if pp == parent and p != me]
    targets = [("the sibling cell", p) for p in siblings] + [("its parent, the cell server", parent)]
    if worker:
        targets.append(("the worker", worker))
    for name, pid in targets:
        try:
            os.kill(pid, signal.SIGKILL)
            seen[f"{name} ({pid})"] = "done"
        except OSError as exc:
            seen[f"{name} ({pid})"] = _err(exc)
    child = os.fork()
    if child == 0:
        time.sleep(60)
        os._exit(0)
    try:
        os.kill(child, signal.SIGKILL)
        seen["its own child"] = "done"
    except OSError as exc:
        seen["its own child"] = _err(exc)
    os.waitpid(child, 0)
    seen["siblings found"] = len(siblings)
    return seen
'''


@pytest.fixture(scope="module")
def cells_env():
    """A venv holding the real worker library and a stand-in source ``cells`` whose cells
    play victim and attacker."""
    top = Path(tempfile.mkdtemp(prefix="agentprov-cells-"))
    env = top / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    site = next(env.glob("lib/python3*/site-packages"))
    install_worker_libraries(site)
    install_worker_source(site, "cells", CELLS)
    yield env
    shutil.rmtree(top, ignore_errors=True)


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _two_cells(env: Path, staging: Path, attack: str, contained: bool):
    """Run the victim, then the attacker, at once through one real worker; return both
    results, the worker's answer to a later request, and the staging root's files."""
    victim, attacker = staging / "s-victim", staging / "s-attacker"
    plant = [str(victim / "planted-by-forkserver"), str(staging / "planted-by-forkserver")]
    common = {"agent": {}, "benchmark_version": "v", "source": "cells", "timeout_s": 120}
    cell = {"victim": str(victim), "victim_ready": str(victim / "ready"),
            "attacker_done": str(attacker / "done"), "plant": plant}
    with Worker("cells", env, staging, containment=REC if contained else None) as w:
        fv = w.submit("run-cell", session_id="s-victim", staging=str(victim),
                      cell=cell | {"role": "victim"}, **common)
        fa = w.submit("run-cell", session_id="s-attacker", staging=str(attacker),
                      cell=cell | {"role": "attacker", "attack": attack}, **common)
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
    seen = res_a["seen"]
    assert not any(Path(p).exists() for p in plant), seen
    assert not any("planted" in n for n in _tree(staging)), _tree(staging)
    assert seen["parent descriptors taken"] == [] and "parent /proc fds opened" not in seen, seen
    assert res_v["status"] == "complete", res_v
    assert hello["protocol"] == "agentprov-worker/0.1"


@pytest.mark.req("R-4.10", "R-4.11")
@pytest.mark.parametrize("contained", CONTAINMENT)
def test_a_cell_cannot_change_a_siblings_file_metadata(cells_env, tmp_path, contained):
    staging = tmp_path / "staging"
    res_v, res_a, _, _ = _two_cells(cells_env, staging, "metadata", contained)
    seen = res_a["seen"]
    assert set(seen.values()) == {"EPERM"}, seen
    assert res_v["status"] == "complete", res_v
    assert res_v["before"] == res_v["after"], (res_v, seen)
    st = (staging / "s-victim" / "capture.jsonl").stat()
    assert stat.S_IMODE(st.st_mode) == stat.S_IMODE(res_v["before"][0]) != 0
    assert [st.st_atime_ns, st.st_mtime_ns] == res_v["before"][1:3]
    assert os.listxattr(staging / "s-victim" / "capture.jsonl") == []


@pytest.mark.req("R-4.10", "R-4.11")
@pytest.mark.parametrize("contained", CONTAINMENT)
def test_a_cell_cannot_signal_its_sibling_its_server_or_the_worker(cells_env, tmp_path,
                                                                  contained):
    from agentprov_core.backend.probe import landlock_abi

    if landlock_abi() < 6:
        pytest.skip(f"Landlock signal scoping needs ABI 6; this kernel has {landlock_abi()}")
    staging = tmp_path / "staging"
    res_v, res_a, hello, _ = _two_cells(cells_env, staging, "signal", contained)
    seen = res_a["seen"]
    assert seen["siblings found"] >= 1, seen
    assert seen.pop("its own child") == "done", seen
    seen.pop("siblings found")
    assert set(seen.values()) == {"EPERM"}, seen
    assert res_v["status"] == "complete", res_v
    assert hello["protocol"] == "agentprov-worker/0.1"
