"""Containment: the providers, the bwrap profile and its probe (each denial denied and each
allowance allowed, checked from outside the sandbox), resolve() against a marker, and the
worker wrapped by it.

The fast tests build a small environment from this interpreter's own Python install (a
venv holding the worker library and a stand-in backend package); the slow ones use the
real AgentDojo build. The macOS sandbox-exec probe cannot run here (it needs macOS): only
its refusal off macOS is tested.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from agentprov_core import containment
from agentprov_core.containment import Allowed, Recorded
from agentprov_core.errors import AgentprovError
from agentprov_core.sandbox import probe, profile

ROOT = Path(__file__).resolve().parent.parent
linux_bwrap = pytest.mark.skipif(not sys.platform.startswith("linux") or not shutil.which("bwrap"),
                                 reason="the bwrap provider needs Linux and bubblewrap")


@pytest.fixture(scope="module")
def small_env(tmp_path_factory) -> Path:
    """A venv on this interpreter's base install, with agentprov_backend and a stand-in
    backend package ``probe_backend`` copied in (nothing points back into the repository)."""
    d = tmp_path_factory.mktemp("env") / "env"
    base = Path(sys.base_prefix) / "bin" / "python3"
    subprocess.run([str(base), "-m", "venv", "--without-pip", str(d)], check=True)
    site = next(d.glob("lib/python3*/site-packages"))
    shutil.copytree(ROOT / "backends/shared/src/agentprov_backend", site / "agentprov_backend",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (site / "probe_backend").mkdir()
    (site / "probe_backend" / "__init__.py").write_text("VALUE = 42\n")
    return d


@pytest.fixture(scope="module")
def probed(small_env) -> dict:
    return probe.run(small_env, modules=["agentprov_backend.worker", "probe_backend"])


def marker_with(entry: dict | None) -> dict:
    return {"probe": {"sandbox_exec": {"status": "not applicable", "platform": sys.platform},
                      **({"bwrap": entry} if entry is not None else {})}}


# ------------------------------------------------------------------------------ providers
@pytest.mark.req("R-19.3", "R-19.4")
@pytest.mark.parametrize(("name", "kind"), [("dedicated-user", "dedicated_user"), ("vm", "vm")])
def test_declared_providers_are_recorded_not_checked(name, kind):
    rec = containment.resolve(name, marker_with(None))  # no probe needed, nothing checked
    assert rec.as_json() == {"kind": kind, "declared_by": "operator"}
    assert containment.wrap_argv(rec, ["python", "-m", "w"], Path("/s"), Path("/s/home"), {},
                                 env_dir=Path("/e"), tmp=Path("/t")) == ["python", "-m", "w"]


@pytest.mark.req("R-19.1", "R-19.5")
@pytest.mark.skipif(sys.platform == "darwin", reason="off macOS only")
def test_sandbox_exec_is_refused_off_macos_with_exit_4():
    with pytest.raises(AgentprovError) as e:
        containment.resolve("sandbox-exec", marker_with(None), backend="agentdojo")
    assert e.value.code == "cli.refused.containment" and e.value.exit_code == 4
    assert '"not applicable"' in e.value.message and "dedicated-user or vm" in e.value.message
    p = containment.providers()["sandbox-exec"]
    assert (p.recorded_as, p.declared_by, p.platforms) == ("sandbox_exec", "probe", ("darwin",))
    assert len(p.profile_sha256) == 64


@pytest.mark.req("R-19.1")
def test_sandbox_exec_on_macos_without_a_probe_is_refused_too():
    """This build cannot run the macOS probe, so a macOS marker says 'not run'."""
    m = {"probe": {"sandbox_exec": {"status": "not run", "note": "this build cannot run the "
                                    "macOS probe"}}}
    with pytest.raises(AgentprovError) as e:
        containment.resolve("sandbox-exec", m, platform="darwin")
    assert e.value.exit_code == 4 and "declare dedicated-user or vm" in e.value.message


def test_the_core_registers_its_providers_through_the_hook():
    assert list(containment.providers()) == ["sandbox-exec", "bwrap", "dedicated-user", "vm"]
    b = containment.providers()["bwrap"]
    assert (b.declared_by, b.platforms, b.profile_sha256) == ("probe", ("linux",),
                                                              profile.profile_sha256())


def test_the_profile_digest_is_deterministic_and_covers_the_launcher():
    a = profile.profile_sha256()
    assert a == profile.profile_sha256() and len(a) == 64
    from agentprov_core.digests import digest, sha256_hex

    assert a == digest(profile.PROFILE | {"launcher_sha256": sha256_hex(
        profile.launcher_source().encode())})


# ------------------------------------------------------------------- resolve with the marker
def passed_entry(**over) -> dict:
    return {"provider": "bwrap", "status": "passed", "passed": True,
            "profile_sha256": profile.profile_sha256(),
            "checks": [{"name": n, "passed": True} for n in probe.DENIALS + probe.ALLOWANCES]
            } | over


@pytest.mark.req("R-19.2")
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bwrap is Linux only")
def test_bwrap_accepted_only_with_a_passed_probe_of_this_exact_profile():
    rec = containment.resolve("bwrap", marker_with(passed_entry()))
    assert rec.as_json() == {"kind": "bwrap", "declared_by": "probe",
                             "profile_sha256": profile.profile_sha256()}
    for entry, says in [(None, "records no probe"),
                        (passed_entry(profile_sha256="0" * 64), "this agentprov's profile"),
                        (passed_entry(status="failed", passed=False,
                                      checks=[{"name": "read_ssh_key", "passed": False}]),
                         "read_ssh_key"),
                        (passed_entry(passed="yes"), "its probe failed"),
                        ({"status": "unavailable", "passed": False,
                          "profile_sha256": profile.profile_sha256(),
                          "detail": "bwrap is not installed"}, "bwrap is not installed")]:
        with pytest.raises(AgentprovError) as e:
            containment.resolve("bwrap", marker_with(entry), backend="agentdojo")
        assert e.value.code == "cli.refused.containment" and e.value.exit_code == 4, entry
        assert says in e.value.message
        assert "agentprov backends build agentdojo" in e.value.message  # the fix


@pytest.mark.req("R-19.2")
def test_a_tampered_recorded_digest_is_refused_at_the_wrap():
    rec = Recorded(kind="bwrap", declared_by="probe", profile_sha256="f" * 64)
    with pytest.raises(AgentprovError) as e:
        containment.wrap_argv(rec, ["python"], Path("/s"), Path("/s/home"), {},
                              env_dir=Path("/e"), tmp=Path("/t"))
    assert e.value.exit_code == 4


def test_bwrap_is_refused_off_linux():
    with pytest.raises(AgentprovError) as e:
        containment.resolve("bwrap", marker_with(passed_entry()), platform="darwin")
    assert e.value.exit_code == 4 and "linux only" in e.value.message


# ------------------------------------------------------------------------------- the probe
@linux_bwrap
@pytest.mark.req("R-19.9", "R-19.7", "R-19.8")
def test_the_probe_passes_here_with_11_checks(probed):
    assert probed["status"] == "passed" and probed["passed"] is True, probed
    assert probed["profile_sha256"] == profile.profile_sha256()
    assert probed["counts"] == {"checks": 11, "denials": 6, "allowances": 5}
    assert [c["name"] for c in probed["checks"]] == list(probe.DENIALS + probe.ALLOWANCES)


@linux_bwrap
@pytest.mark.req("R-19.8", "R-4.11")
@pytest.mark.parametrize("name", probe.DENIALS)
def test_each_denial_is_denied_inside_and_confirmed_outside(probed, name):
    c = next(c for c in probed["checks"] if c["name"] == name)
    assert (c["kind"], c["inside"], c["passed"]) == ("denial", "denied", True), c
    assert not c["outside"].startswith("changed:") and "appeared" not in c["outside"]


@linux_bwrap
@pytest.mark.req("R-19.7", "R-4.10")
@pytest.mark.parametrize("name", probe.ALLOWANCES)
def test_each_allowance_is_allowed_inside_and_confirmed_outside(probed, name):
    c = next(c for c in probed["checks"] if c["name"] == name)
    assert (c["kind"], c["inside"], c["passed"]) == ("allowance", "allowed", True), c


@linux_bwrap
def test_the_probe_catches_a_weakened_profile(small_env, monkeypatch):
    """A negative control: the same probe against a sandbox that also binds the temporary
    directory (where it plants the operator's secrets) and the repository fails those
    denials, so a passing probe is not vacuous."""
    import tempfile

    real = profile.realise

    def weak(argv, **kw):
        out = real(argv, **kw)
        at = out.index("--tmpfs") + 2
        tmp = str(Path(tempfile.gettempdir()).resolve())
        out[at:at] = ["--bind", tmp, tmp, "--ro-bind", str(ROOT), str(ROOT)]
        return out

    monkeypatch.setattr(probe.profile, "realise", weak)
    r = probe.run(small_env, modules=["probe_backend"])
    assert r["passed"] is False and "checks" in r, r
    failed = {c["name"] for c in r["checks"] if not c["passed"]}
    assert failed == {"read_repository", "read_ssh_key", "read_aws_and_credential_dirs",
                      "read_dotenv", "write_outside_staging"}


def test_the_probe_is_not_applicable_off_linux(small_env, monkeypatch):
    monkeypatch.setattr(probe.sys, "platform", "darwin")
    assert probe.run(small_env)["status"] == "not applicable"


def test_without_bwrap_the_probe_records_unavailable(small_env, monkeypatch):
    monkeypatch.setattr(probe.shutil, "which", lambda name: None)
    r = probe.run(small_env)
    if sys.platform.startswith("linux"):
        assert (r["status"], r["passed"]) == ("unavailable", False)


# ------------------------------------------------------------------------ the wrapped worker
class _Echo:
    """A loopback server that answers one line with ``echo:LINE``."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with c:
                c.sendall(b"echo:" + c.makefile("rb").readline())


@linux_bwrap
@pytest.mark.req("R-19.7", "R-19.8")
def test_the_worker_runs_under_bwrap_and_reaches_only_its_allowed_port(small_env, tmp_path):
    from agentprov_core.workerclient import Worker

    rec = containment.resolve("bwrap", marker_with(passed_entry()))
    echo, other = _Echo(), _Echo()
    staging = tmp_path / "staging"
    staging.mkdir()
    (staging / ".env").write_text("OPENAI_API_KEY=sk-test-sentinel\n")
    with Worker("small", small_env, staging, containment=rec,
                allowed=Allowed(loopback_ports=(echo.port,))) as w:
        assert w.argv[0].endswith("bwrap") and "--unshare-net" in w.argv
        hello = w.request("hello")
        assert hello["protocol"] == "agentprov-worker/0.1"
    # the same argv, with a one-off program in place of the worker: what can it reach?
    code = ("import socket,sys,os\n"
            "def conn(p):\n"
            "    try:\n"
            "        s=socket.create_connection(('127.0.0.1',p),timeout=3); s.sendall(b'hi\\n')\n"
            "        return s.makefile('rb').readline().decode().strip()\n"
            "    except OSError as e: return type(e).__name__\n"
            "def rd(p):\n"
            "    try: return len(open(p,'rb').read())\n"
            "    except OSError as e: return type(e).__name__\n"
            f"print({{'allowed': conn({echo.port}), 'other': conn({other.port}),"
            f" 'repo': rd({str(ROOT / 'pyproject.toml')!r}), 'env': rd('.env'),"
            " 'home': os.environ['HOME']})\n")
    from agentprov_core.sandbox.bridge import Bridge

    with Bridge((echo.port,)) as b:
        argv = containment.wrap_argv(rec, [str(small_env / "bin/python"), "-I", "-c", code],
                                     staging, staging / "home", b.sockets, env_dir=small_env,
                                     tmp=tmp_path / "t")
        (tmp_path / "t").mkdir()
        from agentprov_core.workerclient import scrubbed_env

        out = subprocess.run(argv, cwd=staging, capture_output=True, text=True, timeout=60,
                             env=scrubbed_env(small_env, staging, tmp_path / "t"))
    assert out.stdout.strip(), out.stderr
    seen = eval(out.stdout.strip().splitlines()[-1])  # noqa: S307 - our own printed dict
    assert seen["allowed"] == "echo:hi"
    assert seen["other"] in ("ConnectionRefusedError", "OSError")
    assert seen["repo"] == "FileNotFoundError" and seen["env"] == "PermissionError"
    assert seen["home"] == str(staging / "home")


@linux_bwrap
def test_routes_to_a_unix_socket_reach_the_egress_proxy_shape(small_env, tmp_path):
    """The egress proxy may listen on a Unix socket: the worker reaches it at a loopback
    port of its own namespace."""
    path = tmp_path / "proxy.sock"
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(str(path))
    srv.listen(1)
    got = []

    def serve():
        c, _ = srv.accept()
        with c:
            got.append(c.makefile("rb").readline())
            c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")

    threading.Thread(target=serve, daemon=True).start()
    rec = containment.resolve("bwrap", marker_with(passed_entry()))
    code = ("import socket; s=socket.create_connection(('127.0.0.1', 3128)); "
            "s.sendall(b'CONNECT api.example:443 HTTP/1.1\\r\\n'); print(s.recv(100))")
    (tmp_path / "st").mkdir()
    (tmp_path / "t").mkdir()
    argv = containment.wrap_argv(rec, [str(small_env / "bin/python"), "-I", "-c", code],
                                 tmp_path / "st", tmp_path / "st/home",
                                 dict(Allowed(unix_sockets=((3128, str(path)),)).unix_sockets),
                                 env_dir=small_env, tmp=tmp_path / "t")
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert "200 Connection established" in out.stdout, out.stderr
    assert got == [b"CONNECT api.example:443 HTTP/1.1\r\n"]


# --------------------------------------------------------------------------- the real build
@pytest.mark.slow
@linux_bwrap
@pytest.mark.req("R-6.2", "R-19.9", "R-19.10", "R-4.9")
def test_the_build_records_a_passed_probe_and_offline_check_reports_it(agentdojo_env, e2e_cli):
    m = json.loads((agentdojo_env.env_dir / "AGENTPROV_ENV.json").read_text())
    entry = m["probe"]["bwrap"]
    assert entry["passed"] is True and entry["profile_sha256"] == profile.profile_sha256()
    assert "agentdojo" in entry["modules"]
    assert m["probe"]["sandbox_exec"]["status"] == "not applicable"
    r = e2e_cli("backends", "build", "agentdojo", "--offline-check")
    assert r.code == 0, r.err
    assert ("containment probe (recorded at build, not re-run): bwrap passed (11/11 checks"
            in r.out)
    again = json.loads((agentdojo_env.env_dir / "AGENTPROV_ENV.json").read_text())
    assert again["probe"]["bwrap"]["ran_at"] == entry["ran_at"]  # not re-run
    assert containment.resolve("bwrap", m).profile_sha256 == profile.profile_sha256()


@pytest.mark.slow
@linux_bwrap
@pytest.mark.req("R-19.7")
def test_the_real_worker_answers_hello_under_bwrap(agentdojo_env, tmp_path):
    from agentprov_core.workerclient import Worker

    m = json.loads((agentdojo_env.env_dir / "AGENTPROV_ENV.json").read_text())
    rec = containment.resolve("bwrap", m)
    with Worker(agentdojo_env.env_id, agentdojo_env.env_dir, tmp_path, containment=rec) as w:
        hello = w.request("hello")
    assert hello["distributions"] == m["hello"]["distributions"]
