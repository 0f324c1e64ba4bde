"""The four escapes of ``--containment bwrap`` found from inside the sandbox, each performed
again from inside a real bubblewrap sandbox built with the run path's own argv
(``containment.wrap_argv`` over ``workerclient.worker_argv``, as ``Worker._argv`` builds
it; the real ``Worker`` where T0 starts the worker itself), and shown denied:

1. writing the host's kernel settings (``/proc/sys/kernel/core_pattern``; opened for
   writing only, never written);
2. an AF_VSOCK (or AF_PACKET) socket, io_uring, the x32 ABI, a nested user namespace;
3. a module planted in the staging root imported by the next worker;
4. one cell writing another session's staging directory or the staging root (a stand-in
   cell, run by the real worker, forkserver and Landlock ruleset).

Each runs as root (this machine's user) and as an unprivileged user (``setpriv`` to
``nobody``, on files it can read), where that is possible; otherwise it skips, saying why.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import bwrap_unusable, install_worker_libraries, install_worker_source

from agentprov_core.backend import containment
from agentprov_core.backend.containment import Recorded
from agentprov_core.backend.sandbox import profile
from agentprov_core.backend.workerclient import Worker, scrubbed_env, worker_argv

pytestmark = pytest.mark.skipif(bwrap_unusable() is not None,
                                reason=f"needs a working bubblewrap: {bwrap_unusable()}")
NOBODY = 65534
REC = Recorded(kind="bwrap", declared_by="probe", profile_sha256=profile.profile_sha256())

#: A stand-in for the cell module: the worker's forked child runs ``child_main`` after the
#: worker confined it, exactly where the benchmark's cell code would run.
ATTACK_CELL = '''
import errno, json, os
def child_main(req):
    own = req["staging"]
    root = os.path.dirname(own)
    sib = os.path.join(root, req["cell"]["sibling"])
    seen = {}
    def attempt(name, fn):
        try:
            fn()
            seen[name] = "done"
        except OSError as exc:
            seen[name] = errno.errorcode.get(exc.errno, str(exc.errno))
    def put(path, mode="w"):
        with open(path, mode) as f:
            f.write("tampered by another cell")
    attempt("append to the sibling's capture log", lambda: put(os.path.join(sib, "capture.jsonl"), "a"))
    attempt("truncate the sibling's capture log", lambda: os.truncate(os.path.join(sib, "capture.jsonl"), 0))
    attempt("remove the sibling's capture log", lambda: os.unlink(os.path.join(sib, "capture.jsonl")))
    attempt("a new file in the sibling's directory", lambda: put(os.path.join(sib, "result.json")))
    attempt("a file in the staging root", lambda: put(os.path.join(root, "planted.py")))
    attempt("a package in the staging root", lambda: os.mkdir(os.path.join(root, "agentprov_backend")))
    attempt("move its own file into the sibling's directory",
            lambda: (put(os.path.join(own, "x")), os.rename(os.path.join(own, "x"), os.path.join(sib, "x"))))
    attempt("its own session", lambda: put(os.path.join(own, "own.txt")))
    attempt("its home", lambda: put(os.path.join(os.environ["HOME"], "h.txt")))
    attempt("its TMPDIR", lambda: put(os.path.join(os.environ["TMPDIR"], "t.txt")))
    attempt("/dev/null", lambda: put("/dev/null"))
    with open(os.path.join(own, "result.json"), "w") as f:
        json.dump({"status": "complete", "seen": seen}, f)
'''

#: Run inside the sandbox (``python -P -c``): attacks 1 and 2; prints what it saw as JSON.
ATTACK_KERNEL = r'''
import ctypes, errno, json, os, socket
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
seen = {}
def name(code):
    return errno.errorcode.get(code, str(code))
for p in ("/proc/sys/kernel/core_pattern", "/proc/sys/kernel/core_uses_pid"):
    try:
        os.close(os.open(p, os.O_WRONLY))  # opened only: nothing is written
        seen[p] = "opened for writing"
    except OSError as exc:
        seen[p] = name(exc.errno)
for fam, kind, label in ((40, socket.SOCK_STREAM, "AF_VSOCK"), (17, socket.SOCK_RAW, "AF_PACKET")):
    try:
        socket.socket(fam, kind).close()
        seen[label] = "created"
    except OSError as exc:
        seen[label] = name(exc.errno)
fd = libc.syscall(425, ctypes.c_uint(1), ctypes.create_string_buffer(120))
seen["io_uring_setup"] = "created" if fd >= 0 else name(ctypes.get_errno())
r = libc.syscall(ctypes.c_long(0x40000000 | 39))
seen["x32 getpid"] = "worked" if r >= 0 else name(ctypes.get_errno())
pid = os.fork()
if pid == 0:
    os._exit(0 if libc.unshare(0x10000000) == 0 else ctypes.get_errno())
seen["unshare(CLONE_NEWUSER)"] = name(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])) or "created"
print(json.dumps(seen))
'''


AS_NOBODY = ("setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups")


def _base_pythons() -> list[Path]:
    """Python installs (3.11 or later: ``-P``) the attack environment can be built on: this
    interpreter's own, then the system's (a Python under a private home, such as pyenv's
    in /root, is one that nobody cannot read)."""
    found = [Path(sys.base_prefix) / "bin" / "python3"]
    for c in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(c, os.X_OK) and Path(c) not in found:
            found.append(Path(c))
    return found


def _readable_by_nobody(python: Path) -> bool:
    """``python`` runs as nobody, from its real install (its prefix readable, as bwrap must
    bind it), and is 3.11 or later."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return False
    code = "import sys; print(sys.version_info >= (3, 11), sys.base_prefix)"
    mine = subprocess.run([str(python), "-c", code], capture_output=True, text=True,
                          timeout=60)
    theirs = subprocess.run([*AS_NOBODY, str(python), "-c", code + "; import os; "
                             "os.listdir(sys.base_prefix)"], capture_output=True, text=True,
                            timeout=60)
    # the same install both ways (an exec that cannot reach it may run another Python)
    return (mine.returncode == theirs.returncode == 0 and mine.stdout == theirs.stdout
            and mine.stdout.startswith("True "))


def _attack_python() -> Path:
    """The base Python of the attack environment: the first of :func:`_base_pythons` that
    nobody can read too, so that one environment serves both users."""
    pythons = _base_pythons()
    return next((py for py in pythons if _readable_by_nobody(py)), pythons[0])


def _can_drop_to_nobody() -> str | None:
    if os.geteuid() != 0:
        return "dropping to another user needs root"
    if shutil.which("setpriv") is None:
        return "setpriv is not installed"
    if not _readable_by_nobody(_attack_python()):
        return ("no Python 3.11 or later that nobody can read: tried "
                + ", ".join(map(str, _base_pythons())))
    p = subprocess.run([*AS_NOBODY, "bwrap", *profile.NAMESPACES, "--ro-bind", "/", "/", "true"],
                       capture_output=True, timeout=60)
    if p.returncode != 0:
        return f"bubblewrap cannot run unprivileged here: {p.stderr.decode()[-200:]}"
    return None


USERS = [pytest.param("root", marks=pytest.mark.skipif(os.geteuid() != 0,
                                                       reason="this test process is not root")),
         pytest.param("nobody", marks=pytest.mark.skipif(
             _can_drop_to_nobody() is not None, reason=str(_can_drop_to_nobody())))]


@pytest.fixture(scope="module")
def attack_env():
    """A venv on a base install every user can read (:func:`_attack_python`), holding the
    worker library (the real one) with a stand-in worker source ``attack`` whose cells attack."""
    top = Path(tempfile.mkdtemp(prefix="agentprov-attack-"))
    top.chmod(0o755)
    env = top / "env"
    subprocess.run([str(_attack_python()), "-m", "venv",
                    "--without-pip", str(env)], check=True)
    site = next(env.glob("lib/python3*/site-packages"))
    install_worker_libraries(site)
    install_worker_source(site, "attack", ATTACK_CELL)
    for p in [top, *top.rglob("*")]:
        if not p.is_symlink():
            p.chmod(p.stat().st_mode | 0o555 if p.is_dir() else p.stat().st_mode | 0o444)
    yield env
    shutil.rmtree(top, ignore_errors=True)


@pytest.fixture
def area():
    """A staging root and a TMPDIR outside pytest's private temporary directory, so that
    an unprivileged user can be given them."""
    top = Path(tempfile.mkdtemp(prefix="agentprov-attack-run-"))
    top.chmod(0o755)
    (top / "staging").mkdir()
    (top / "t").mkdir()
    yield top
    shutil.rmtree(top, ignore_errors=True)


def _run_wrapped(user: str, env_dir: Path, staging: Path, tmp: Path, argv: list[str],
                 stdin: str = "") -> subprocess.CompletedProcess:
    """``argv`` under the profile, wrapped as the run path wraps the worker, started as
    ``user`` (root, or nobody through setpriv, owning staging and TMPDIR)."""
    env = scrubbed_env(env_dir, staging, tmp)
    wrapped = containment.wrap_argv(REC, argv, staging, staging / "home", {}, env_dir=env_dir,
                                    tmp=tmp)
    if user == "nobody":
        for d in (staging, tmp):
            for p in [d, *d.rglob("*")]:
                os.lchown(p, NOBODY, NOBODY)
        wrapped = [*AS_NOBODY, *wrapped]
    try:
        return subprocess.run(wrapped, cwd=staging, env=env, input=stdin, capture_output=True,
                              text=True, timeout=300, pass_fds=profile.pass_fds(wrapped))
    finally:
        profile.close_fds(wrapped)


def _python(env_dir: Path) -> str:
    return str(env_dir / "bin" / "python")


# --------------------------------------------------------------------- 1 and 2: the kernel
@pytest.mark.req("R-4.11", "R-19.8")
@pytest.mark.parametrize("user", USERS)
def test_kernel_settings_foreign_sockets_io_uring_and_nested_userns_are_denied(
        attack_env, area, user):
    before = Path("/proc/sys/kernel/core_pattern").read_bytes()
    # the worker's own start, with the attack in place of "-m agentprov_backend.worker"
    argv = worker_argv(attack_env)
    argv = argv[:argv.index("-m")] + ["-c", ATTACK_KERNEL]
    p = _run_wrapped(user, attack_env, area / "staging", area / "t", argv)
    assert p.returncode == 0, p.stderr
    seen = json.loads(p.stdout.strip().splitlines()[-1])
    assert seen["/proc/sys/kernel/core_pattern"] in ("EROFS", "EACCES"), seen
    assert seen["/proc/sys/kernel/core_uses_pid"] in ("EROFS", "EACCES"), seen
    assert (seen["AF_VSOCK"], seen["AF_PACKET"]) == ("EAFNOSUPPORT", "EAFNOSUPPORT"), seen
    assert seen["io_uring_setup"] == "ENOSYS", seen
    if os.uname().machine == "x86_64":
        assert seen["x32 getpid"] == "ENOSYS", seen
    if "--disable-userns" in profile.realise(["x"], env_dir=attack_env, staging=area, home=area,
                                             tmp=area, routes={}, seccomp_fd=-1):
        assert seen["unshare(CLONE_NEWUSER)"] in ("ENOSPC", "EPERM", "EUSERS"), seen
    assert Path("/proc/sys/kernel/core_pattern").read_bytes() == before


# ------------------------------------------------------------------ 3: a planted worker module
def _plant_worker(staging: Path) -> Path:
    ran = staging / "planted-ran"
    pkg = staging / "agentprov_backend"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "worker.py").write_text(f"open({str(ran)!r}, 'w').write('planted')\n")
    (pkg / "landlock.py").write_text(f"open({str(ran)!r}, 'w').write('planted')\n")
    return ran


@pytest.mark.req("R-4.11")
@pytest.mark.parametrize("user", USERS)
def test_a_module_planted_in_staging_is_not_what_the_next_worker_imports(attack_env, area, user):
    ran = _plant_worker(area / "staging")
    hello = json.dumps({"id": 1, "type": "hello"}) + "\n" + json.dumps(
        {"id": 2, "type": "shutdown"}) + "\n"
    p = _run_wrapped(user, attack_env, area / "staging", area / "t", worker_argv(attack_env),
                     stdin=hello)
    assert p.returncode == 0, p.stderr
    replies = [json.loads(line) for line in p.stdout.splitlines()]
    assert replies[0]["ok"] is True and replies[0]["result"]["protocol"] == "agentprov-worker/0.1"
    assert not ran.exists()


@pytest.mark.req("R-4.11")
@pytest.mark.parametrize("contained", [True, False], ids=["bwrap", "not-contained"])
def test_the_worker_t0_starts_ignores_a_planted_module_contained_or_not(attack_env, tmp_path,
                                                                        contained):
    """The real ``Worker`` (as a scripted run starts it, and under bwrap): safe-path mode
    holds in both, and for the forkserver it starts (which would import landlock)."""
    staging = tmp_path / "staging"
    ran = _plant_worker(staging)
    sib = staging / "s-b"
    sib.mkdir()
    (sib / "capture.jsonl").write_text("{}\n")
    with Worker("attack", attack_env, staging, containment=REC if contained else None) as w:
        assert w.request("hello")["protocol"] == "agentprov-worker/0.1"
        assert ("-P" in w.argv) and w.argv[w.argv.index("-P") + 1] == "-m"
        res = w.request("run-cell", session_id="s-a", staging=str(staging / "s-a"),
                        cell={"sibling": "s-b"}, agent={}, benchmark_version="v",
                        source="attack")
    assert res["status"] == "complete", res
    assert not ran.exists()


# ------------------------------------------------------------- 4: one session, one directory
@pytest.mark.req("R-4.10", "R-4.11")
@pytest.mark.parametrize("user", USERS)
def test_a_cell_cannot_write_another_session_or_the_staging_root(attack_env, area, user):
    staging = area / "staging"
    sib = staging / "s-b"
    sib.mkdir()
    (sib / "capture.jsonl").write_text('{"kind": "header", "session_id": "s-b"}\n')
    before = {p.name: p.read_bytes() for p in sib.iterdir()}
    lines = [{"id": 1, "type": "run-cell", "session_id": "s-a", "staging": str(staging / "s-a"),
              "cell": {"sibling": "s-b"}, "agent": {}, "benchmark_version": "v",
              "source": "attack"},
             {"id": 2, "type": "shutdown"}]
    p = _run_wrapped(user, attack_env, staging, area / "t", worker_argv(attack_env),
                     stdin="".join(json.dumps(x) + "\n" for x in lines))
    assert p.returncode == 0, p.stderr
    reply = next(json.loads(x) for x in p.stdout.splitlines() if json.loads(x)["id"] == 1)
    assert reply["ok"] is True, reply
    seen = reply["result"]["seen"]
    denied = {k: v for k, v in seen.items() if not k.startswith(("its ", "/dev/"))}
    assert set(denied.values()) == {"EACCES"}, seen
    assert all(seen[k] == "done" for k in ("its own session", "its home", "its TMPDIR",
                                           "/dev/null")), seen
    assert {p.name: p.read_bytes() for p in sib.iterdir()} == before
    assert not (staging / "planted.py").exists()
    assert not (staging / "agentprov_backend").exists()


@pytest.mark.req("R-4.10", "R-4.11")
def test_a_cell_of_an_unwrapped_worker_is_confined_too(attack_env, tmp_path):
    """Scripted runs are not wrapped; their cells are confined all the same."""
    staging = tmp_path / "staging"
    sib = staging / "s-b"
    sib.mkdir(parents=True)
    (sib / "capture.jsonl").write_text("{}\n")
    with Worker("attack", attack_env, staging) as w:
        res = w.request("run-cell", session_id="s-a", staging=str(staging / "s-a"),
                        cell={"sibling": "s-b"}, agent={}, benchmark_version="v",
                        source="attack")
    seen = res["seen"]
    assert seen["append to the sibling's capture log"] == "EACCES", seen
    assert seen["a file in the staging root"] == "EACCES", seen
    assert seen["its own session"] == "done", seen
    assert (sib / "capture.jsonl").read_text() == "{}\n"
