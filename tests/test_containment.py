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
import os
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import ROOT, bwrap_unusable, child_env, install_worker_libraries

from agentprov_core.backend import containment, probe
from agentprov_core.backend.containment import Allowed, Recorded
from agentprov_core.backend.sandbox import profile
from agentprov_core.base.digests import file_sha256
from agentprov_core.errors import AgentprovError

linux_bwrap = pytest.mark.skipif(bwrap_unusable() is not None,
                                 reason=f"the bwrap provider needs Linux and a bubblewrap that "
                                        f"works: {bwrap_unusable()}")


@pytest.fixture(scope="module")
def small_env(tmp_path_factory) -> Path:
    """A venv on this interpreter's base install, with the worker's libraries and a stand-in
    backend package ``probe_backend`` copied in (nothing points back into the repository)."""
    d = tmp_path_factory.mktemp("env") / "env"
    base = Path(sys.base_prefix) / "bin" / "python3"
    subprocess.run([str(base), "-m", "venv", "--without-pip", str(d)], check=True)
    site = next(d.glob("lib/python3*/site-packages"))
    install_worker_libraries(site)
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


def test_the_profile_digest_is_deterministic_and_covers_the_launcher_and_the_seccomp_bytes(
        monkeypatch):
    a = profile.profile_sha256()
    assert a == profile.profile_sha256() and len(a) == 64
    from agentprov_core.backend.sandbox import seccomp
    from agentprov_core.base.digests import digest, sha256_hex

    assert a == digest(profile.PROFILE | {
        "launcher_sha256": sha256_hex(profile.launcher_source().encode()),
        "seccomp_sha256": sha256_hex(seccomp.filter_bytes())})
    # another program (one instruction more) is another profile
    monkeypatch.setattr(seccomp, "filter_bytes", lambda: seccomp.encode(
        seccomp.program() + (seccomp.program()[-1],), "little"))
    profile.profile_sha256.cache_clear()
    try:
        assert profile.profile_sha256() != a
    finally:
        profile.profile_sha256.cache_clear()


# ------------------------------------------------------------------- resolve with the marker
def passed_entry(**over) -> dict:
    """A passed probe as a build on this machine records it (``machine``: this one)."""
    return {"provider": "bwrap", "status": "passed", "passed": True,
            "profile_sha256": profile.profile_sha256(), "machine": probe.machine(),
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
                          "profile_sha256": profile.profile_sha256(), "machine": probe.machine(),
                          "detail": "bwrap is not installed"}, "bwrap is not installed")]:
        with pytest.raises(AgentprovError) as e:
            containment.resolve("bwrap", marker_with(entry), backend="agentdojo")
        assert e.value.code == "cli.refused.containment" and e.value.exit_code == 4, entry
        assert says in e.value.message
        assert "agentprov backends build agentdojo" in e.value.message  # the fix


def test_the_machine_changes_a_probe_can_see_are_said_in_words():
    bw = {"path": "/usr/bin/bwrap", "version": "bubblewrap 0.8.0", "sha256": "a" * 64}
    was = {"bwrap": bw, "root": False, "userns": {"kernel.unprivileged_userns_clone": "1"},
           "landlock_abi": 7}
    assert probe.changes(was, was) == []
    assert probe.changes(was, was | {"landlock_abi": 0}) == [
        "the kernel's Landlock ABI was 7, is 0"]
    assert probe.changes(was, was | {"bwrap": None}) == [
        "bubblewrap is no longer installed (the probe ran /usr/bin/bwrap)"]
    assert probe.changes(was | {"bwrap": None}, was) == [
        "bubblewrap is now installed at /usr/bin/bwrap"]
    assert probe.changes(was, was | {"bwrap": bw | {"sha256": "b" * 64, "version": "bubblewrap 0.9.0"}}) == [
        f"bubblewrap changed from /usr/bin/bwrap 0.8.0 sha256 {'a' * 12}… to /usr/bin/bwrap "
        f"0.9.0 sha256 {'b' * 12}…"]
    assert probe.changes(was, was | {"root": True}) == ["agentprov now runs as root, the probe did not"]
    assert probe.changes(was | {"root": True}, was) == ["the probe ran as root, agentprov now does not"]
    assert probe.changes(was, was | {"userns": {"kernel.unprivileged_userns_clone": "0"}}) == [
        "kernel.unprivileged_userns_clone was 1, is 0"]


def test_the_probe_records_the_machine_it_ran_against(small_env):
    """Whatever it finds (passed, failed, unavailable), the probe records this machine."""
    r = probe.run(small_env, modules=["probe_backend"])
    assert r["machine"] == probe.machine()
    assert probe.stale(r) == []
    here = probe.machine()
    assert here["root"] is (os.geteuid() == 0)
    assert isinstance(here["landlock_abi"], int) and here["landlock_abi"] >= 0
    if shutil.which("bwrap"):
        assert here["bwrap"]["path"] == shutil.which("bwrap")
        assert here["bwrap"]["sha256"] == file_sha256(os.path.realpath(shutil.which("bwrap")))
    else:
        assert here["bwrap"] is None and r["status"] == "unavailable"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bwrap is Linux only")
def test_a_probe_recorded_on_another_machine_state_is_stale_and_refused():
    here = probe.machine()
    other_bwrap = {"path": "/opt/bwrap/bin/bwrap", "version": "bubblewrap 0.1.0",
                   "sha256": "0" * 64}
    cases = [(here | {"bwrap": None}, "bubblewrap is now installed") if here["bwrap"] else
             (here | {"bwrap": other_bwrap}, "bubblewrap is no longer installed"),
             (here | {"root": not here["root"]}, "as root"),
             (here | {"userns": here["userns"] | {"kernel.unprivileged_userns_clone": "7"}},
              "kernel.unprivileged_userns_clone was 7"),
             (None, "the marker records no machine state")]
    if here["bwrap"]:
        cases.append((here | {"bwrap": here["bwrap"] | {"sha256": "0" * 64}},
                      "bubblewrap changed from"))
    prov = containment.providers()["bwrap"]
    for was, says in cases:
        entry = passed_entry(machine=was) if was is not None else {
            k: v for k, v in passed_entry().items() if k != "machine"}
        assert any(says in r for r in containment.stale_reasons(prov, entry)), (was, says)
        with pytest.raises(AgentprovError) as e:
            containment.resolve("bwrap", marker_with(entry), backend="agentdojo")
        assert e.value.code == "cli.refused.containment" and e.value.exit_code == 4
        assert "is stale" in e.value.message and says in e.value.message
        assert "run agentprov backends build agentdojo (it re-runs the probe)" in e.value.message
    assert containment.stale_reasons(prov, passed_entry()) == []  # this machine: it stands


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bwrap is Linux only")
def test_a_build_knows_when_the_recorded_probe_must_run_again():
    from agentprov_core.backend import buildprobe as backends
    from agentprov_core.backend.marker import Marker

    def m(entry):
        return Marker(format="agentprov-env-marker/0.1", environment_id="agentdojo-00000000",
                      backend="agentdojo", project="backends/agentdojo", built_at="x",
                      agentprov="0", python="3.12.1", uv="uv", lock_sha256="0" * 64,
                      exclude_newer=None, pinned_commit=None, distributions={},
                      files_verified=0, guarded={}, defence_registry_sha256=None, hello={},
                      probe=marker_with(entry)["probe"], identity_sha256="0" * 64)

    here = probe.machine()
    assert backends.probe_rerun(m(passed_entry())) == []
    assert backends.probe_lines(m(passed_entry()))[0].startswith(
        "  containment probe (recorded at build, not re-run): bwrap passed (20/20 checks")
    isolated = passed_entry(hardening={"staging_isolation": "landlock ABI 7"})
    assert "checks, profile " in backends.probe_lines(m(isolated))[0]
    assert "…; staging isolation: Landlock); " in backends.probe_lines(m(isolated))[0]
    no_ll = passed_entry(status="failed", passed=False,
                         hardening={"staging_isolation": "not available (this kernel has no "
                                                         "Landlock)"},
                         checks=[{"name": n, "passed": n != "write_other_session"}
                                 for n in probe.DENIALS + probe.ALLOWANCES])
    assert ("bwrap failed (19/20 checks, profile " in backends.probe_lines(m(no_ll))[0]
            and "…; failed: write_other_session; staging isolation: not available); "
            in backends.probe_lines(m(no_ll))[0])
    assert backends.probe_rerun(m(None)) == ["no probe is recorded"]
    failed = passed_entry(status="failed", passed=False, detail="the sandbox did not start")
    assert backends.probe_rerun(m(failed)) == ["its last run failed"]
    moved = passed_entry(machine=here | {"root": not here["root"]})
    assert len(backends.probe_rerun(m(moved))) == 1 and "as root" in backends.probe_rerun(m(moved))[0]
    line = backends.probe_lines(m(moved))[0]
    assert line.startswith("  containment probe (recorded at build, stale: ")
    assert line.endswith("; agentprov backends build agentdojo re-runs it): bwrap passed "
                         f"(20/20 checks, profile {profile.profile_sha256()[:12]}…); "
                         "sandbox-exec not applicable")


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
def test_the_probe_passes_here_with_20_checks(probed):
    assert probed["status"] == "passed" and probed["passed"] is True, probed
    assert probed["profile_sha256"] == profile.profile_sha256()
    assert probed["counts"] == {"checks": 20, "denials": 15, "allowances": 5}
    assert [c["name"] for c in probed["checks"]] == list(probe.DENIALS + probe.ALLOWANCES)
    hard = probed["hardening"]
    assert hard["seccomp_in_force"] is True and hard["disable_userns"] is True
    assert hard["staging_isolation"].startswith("landlock ABI ")
    assert "/proc/sys" in hard["proc_read_only_or_masked"]
    assert hard["cell_server"] == "a socket pair held by the worker"
    assert hard["cell_metadata"] == "seccomp: metadata calls refused"
    if probe.landlock_abi() >= 6:
        assert hard["cell_signals"].startswith("landlock ABI "), hard
        assert not any("enforced_here" in c for c in probed["checks"])


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


def _drop(argv: list[str], *tokens_with_args: tuple[str, int]) -> list[str]:
    """``argv`` without each option of ``tokens_with_args`` (name, how many arguments)."""
    out, i = [], 0
    while i < len(argv):
        hit = next((n for t, n in tokens_with_args if argv[i] == t), None)
        if hit is None:
            out.append(argv[i])
            i += 1
        else:
            i += 1 + hit
    return out


def _no_proc_masks(argv: list[str]) -> list[str]:
    at, end = argv.index("/proc") + 1, argv.index("--dev")  # after --proc /proc
    return argv[:at] + argv[end:]


#: How a weakened worker library differs: (module, text, replaced by), or text appended
WEAK_LIBRARY = {
    "landlock": ("landlock.py", None, "\n\ndef confine_cell(session_dir):\n    return None\n"),
    "cell_server": ("worker.py", "    proc = _cells().start(req)\n", (
        "    import multiprocessing\n    from agentprov_backend import landlock\n"
        "    ctx = multiprocessing.get_context('forkserver')\n"
        "    proc = ctx.Process(target=landlock.cell_main, args=(req,), daemon=True)\n"
        "    proc.start()\n")),
    "cell_metadata": ("landlock.py", "metadata = cellfilter.load()",
                      'metadata = "metadata calls refused"'),
    "cell_signals": ("landlock.py", "scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0",
                     "scoped = 0"),
}


def _weak_env(small_env: Path, tmp_path: Path, weakening: str) -> Path:
    """The small environment with a worker library weakened as :data:`WEAK_LIBRARY` says."""
    weak = tmp_path / "weak-env"
    shutil.copytree(small_env, weak, symlinks=True)
    site = next(weak.glob("lib/python3*/site-packages"))
    module, old, new = WEAK_LIBRARY[weakening]
    f = site / "agentprov_backend" / module
    text = f.read_text()
    assert old is None or old in text, (module, old)
    f.write_text(text + new if old is None else text.replace(old, new))
    for f in weak.glob("bin/*"):  # the venv's scripts name their own directory
        if f.is_file() and not f.is_symlink():
            f.write_text(f.read_text().replace(str(small_env), str(weak)))
    cfg = weak / "pyvenv.cfg"
    cfg.write_text(cfg.read_text().replace(str(small_env), str(weak)))
    return weak


WEAKENINGS = {
    # name: (what is dropped, the checks it must fail)
    "proc_masks": ("the /proc masks", {"write_kernel_settings"}),
    "seccomp": ("the seccomp filter", {"open_foreign_sockets", "use_io_uring_or_foreign_abi"}),
    "disable_userns": ("--disable-userns", {"create_user_namespace"}),
    "safe_path": ("-P and PYTHONSAFEPATH", {"import_from_staging"}),
    "landlock": ("the cells' Landlock ruleset and its scoping",
                 {"write_other_session", "signal_sibling_or_worker"}),
    # the standard library's forkserver has no metadata broker: the probe's attacking cell
    # cannot change its own file's metadata either, which its metadata check requires
    "cell_server": ("the cell server (the standard library's forkserver instead)",
                    {"reach_the_forkserver", "change_sibling_metadata"}),
    "cell_metadata": ("the cells' metadata filter", {"change_sibling_metadata"}),
    "cell_signals": ("the cells' signal scoping", {"signal_sibling_or_worker"}),
}


@linux_bwrap
@pytest.mark.req("R-4.11", "R-19.9")
@pytest.mark.parametrize("weakening", sorted(WEAKENINGS))
def test_each_new_check_fails_on_a_profile_weakened_for_it(small_env, tmp_path, monkeypatch,
                                                           weakening):
    """A negative control for each hardening: the probe against a profile (or worker start,
    or cell confinement) without it fails exactly the checks that watch it."""
    from agentprov_core.backend import workerclient

    if weakening == "proc_masks" and os.geteuid() != 0:
        pytest.skip("unprivileged, the kernel refuses the write without the mask too")
    if weakening == "disable_userns" and "--disable-userns" not in profile.realise(
            ["x"], env_dir=small_env, staging=tmp_path, home=tmp_path, tmp=tmp_path,
            routes={}, seccomp_fd=-1):
        pytest.skip("this bubblewrap has no --disable-userns")
    real, env_dir = profile.realise, small_env

    def weak(argv, **kw):
        out = real(argv, **kw)
        if weakening == "proc_masks":
            return _no_proc_masks(out)
        if weakening == "seccomp":
            profile.close_fds(out)
            return _drop(out, ("--seccomp", 1))
        if weakening == "disable_userns":
            return _drop(out, ("--disable-userns", 0))
        return out

    if weakening == "safe_path":
        plain_argv, plain_env = workerclient.worker_argv, workerclient.scrubbed_env
        monkeypatch.setattr(workerclient, "worker_argv",
                            lambda e: [a for a in plain_argv(e) if a != "-P"])
        monkeypatch.setattr(workerclient, "scrubbed_env", lambda *a, **k: {
            k2: v for k2, v in plain_env(*a, **k).items() if k2 != "PYTHONSAFEPATH"})
    if weakening == "cell_signals" and probe.landlock_abi() < 6:
        pytest.skip(f"this kernel has Landlock ABI {probe.landlock_abi()}: no signal scoping")
    if weakening in WEAK_LIBRARY:
        env_dir = _weak_env(small_env, tmp_path, weakening)
    monkeypatch.setattr(probe.profile, "realise", weak)
    r = probe.run(env_dir, modules=["agentprov_backend.worker"])
    assert r["passed"] is False and "checks" in r, r
    failed = {c["name"] for c in r["checks"] if not c["passed"]}
    assert failed == WEAKENINGS[weakening][1], r["checks"]
    hard = r["hardening"]
    assert hard["staging_isolation"] == ("not available (this kernel has no Landlock)"
                                         if weakening == "landlock" else "landlock ABI "
                                         f"{hard['staging_isolation'].split()[-1]}")
    assert hard["seccomp_in_force"] is (weakening != "seccomp")
    assert hard["disable_userns"] is (weakening != "disable_userns")
    for c in r["checks"]:
        if c["name"] in failed:
            assert c["inside"] == "allowed" or c["outside"], c


@linux_bwrap
@pytest.mark.req("R-19.9")
def test_a_kernel_without_signal_scoping_is_said_not_refused(small_env, tmp_path, monkeypatch):
    """Below Landlock ABI 6 a cell's signals cannot be scoped: the probe records the check
    as not enforced here (the attack got through, and the check says so), passes, and the
    run's sandbox record and the offline check name it. Simulated on this kernel by a
    worker library that scopes nothing and a probe that reads ABI 5."""
    from agentprov_core.backend import buildprobe as backends
    from agentprov_core.backend.marker import Marker

    env_dir = _weak_env(small_env, tmp_path, "cell_signals")
    monkeypatch.setattr(probe, "landlock_abi", lambda: 5)
    r = probe.run(env_dir, modules=["agentprov_backend.worker"])
    check = next(c for c in r["checks"] if c["name"] == "signal_sibling_or_worker")
    assert (check["passed"], check["enforced_here"], check["inside"]) == (False, False, "allowed")
    assert r["passed"] is True and r["status"] == "passed", r["checks"]
    assert r["hardening"]["cell_signals"].startswith("not available"), r["hardening"]
    rec = containment.resolve("bwrap", marker_with(r | {"machine": probe.machine()}))
    assert rec.as_json()["not_enforced"] == ["signal_sibling_or_worker"]
    from agentprov_core.run.consent import containment_line

    assert containment_line(rec.as_json()) == (  # the dry run's and the consent's line
        "containment: bwrap (declared by probe); not enforced on this kernel: "
        "signal_sibling_or_worker")
    m = Marker(format="agentprov-env-marker/0.1", environment_id="agentdojo-00000000",
               backend="agentdojo", project="backends/agentdojo", built_at="x", agentprov="0",
               python="3.12.1", uv="uv", lock_sha256="0" * 64, exclude_newer=None,
               pinned_commit=None, distributions={}, files_verified=0, guarded={},
               defence_registry_sha256=None, hello={}, probe=marker_with(r)["probe"],
               identity_sha256="0" * 64)
    line = backends.probe_lines(m)[0]
    assert "bwrap passed (19/20 checks, profile " in line, line
    assert ("; not enforced on this kernel: signal_sibling_or_worker; staging isolation: "
            "Landlock; cells: forkserver on a socket pair, metadata refused, signals not "
            "scoped)") in line, line
    assert "failed:" not in line
    # a kernel that has it enforces it: the same entry from a passing probe names nothing
    assert "not_enforced" not in containment.resolve("bwrap", marker_with(passed_entry())).as_json()


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
    from agentprov_core.backend.workerclient import Worker

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
    from agentprov_core.backend.sandbox.bridge import Bridge

    with Bridge((echo.port,)) as b:
        argv = containment.wrap_argv(rec, [str(small_env / "bin/python"), "-I", "-c", code],
                                     staging, staging / "home", b.sockets, env_dir=small_env,
                                     tmp=tmp_path / "t")
        (tmp_path / "t").mkdir()
        from agentprov_core.backend.workerclient import scrubbed_env

        try:
            out = subprocess.run(argv, cwd=staging, capture_output=True, text=True, timeout=60,
                                 env=scrubbed_env(small_env, staging, tmp_path / "t"),
                                 pass_fds=profile.pass_fds(argv))
        finally:
            profile.close_fds(argv)
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
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60,
                             pass_fds=profile.pass_fds(argv))
    finally:
        profile.close_fds(argv)
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
    assert ("containment probe (recorded at build, not re-run): bwrap passed (20/20 checks"
            in r.out)
    assert ("; staging isolation: Landlock; cells: forkserver on a socket pair, metadata "
            "refused, signals " + ("scoped)" if probe.landlock_abi() >= 6 else "not scoped)")
            in r.out), r.out
    assert entry["hardening"]["seccomp_in_force"] is True
    again = json.loads((agentdojo_env.env_dir / "AGENTPROV_ENV.json").read_text())
    assert again["probe"]["bwrap"]["ran_at"] == entry["ran_at"]  # not re-run
    assert containment.resolve("bwrap", m).profile_sha256 == profile.profile_sha256()


@pytest.mark.slow
@linux_bwrap
@pytest.mark.req("R-19.7")
def test_the_real_worker_answers_hello_under_bwrap(agentdojo_env, tmp_path):
    from agentprov_core.backend.workerclient import Worker

    m = json.loads((agentdojo_env.env_dir / "AGENTPROV_ENV.json").read_text())
    rec = containment.resolve("bwrap", m)
    with Worker(agentdojo_env.env_id, agentdojo_env.env_dir, tmp_path, containment=rec) as w:
        hello = w.request("hello")
    assert hello["distributions"] == m["hello"]["distributions"]


# ------------------------------------------------------------- the probe follows the machine
def _private_copy(agentdojo_env, tmp_path: Path) -> Path:
    """The session's environment in a home of this test's own (hard links: the build
    replaces the marker, never edits a file in place), so that its probe can be re-run
    without touching the session's marker."""
    home = tmp_path / "home"
    shutil.copytree(agentdojo_env.env_dir, home / "envs" / agentdojo_env.env_id,
                    symlinks=True, copy_function=os.link)
    return home


def _agentprov(home: Path, *args: str, path: str | None = None) -> subprocess.CompletedProcess:
    env = child_env()
    env |= {"AGENTPROV_HOME": str(home), "AGENTPROV_ERROR_FORMAT": "json"}
    if path is not None:
        env["PATH"] = path
    return subprocess.run([sys.executable, "-m", "agentprov_core", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=600)


def _bwrap_entry(home: Path, env_id: str) -> dict:
    return json.loads((home / "envs" / env_id / "AGENTPROV_ENV.json").read_text())["probe"]["bwrap"]


@pytest.mark.slow
@linux_bwrap
@pytest.mark.req("R-19.2", "R-19.10")
def test_the_probe_follows_bubblewrap_removed_installed_and_replaced(agentdojo_env, tmp_path):
    from conftest import path_without

    home, env_id = _private_copy(agentdojo_env, tmp_path), agentdojo_env.env_id
    real = shutil.which("bwrap")
    gone = path_without("bwrap", tmp_path / "no-bwrap")
    built = f"agentprov backends build: {env_id} already built"

    # removed: the next build re-runs the probe, which records it unavailable
    r = _agentprov(home, "backends", "build", "agentdojo", path=gone)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"{built} (containment probe re-run: bubblewrap is no longer "
                               f"installed (the probe ran {real})) at "), r.stdout
    entry = _bwrap_entry(home, env_id)
    assert (entry["status"], entry["machine"]["bwrap"]) == ("unavailable", None)
    r = _agentprov(home, "backends", "build", "agentdojo", path=gone)
    assert r.stdout.startswith(f"{built} at "), r.stdout  # nothing changed: not re-run
    assert _bwrap_entry(home, env_id)["ran_at"] == entry["ran_at"]
    r = _agentprov(home, "backends", "build", "agentdojo", "--offline-check", path=gone)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1] == ("  containment probe (recorded at build, not re-run): "
                                        "bwrap unavailable; sandbox-exec not applicable")

    # installed again: the check says the record is stale (and re-runs nothing), a run
    # refuses it naming the fix, and the next build re-runs the probe, which passes
    marker_bytes = (home / "envs" / env_id / "AGENTPROV_ENV.json").read_bytes()
    r = _agentprov(home, "backends", "build", "agentdojo", "--offline-check")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1] == (
        f"  containment probe (recorded at build, stale: bubblewrap is now installed at {real}; "
        "agentprov backends build agentdojo re-runs it): bwrap unavailable; sandbox-exec not "
        "applicable")
    assert (home / "envs" / env_id / "AGENTPROV_ENV.json").read_bytes() == marker_bytes
    corpus = tmp_path / "corpora" / "c"
    r = _agentprov(home, "run", "agentdojo", "--dry-run", "--corpus", str(corpus), "--campaign",
                   "c", "--suite", "banking", "--user-tasks", "0", "--endpoint", "ollama",
                   "--model-id", "m", "--containment", "bwrap")
    err = json.loads(r.stderr.strip().splitlines()[-1])
    assert (r.returncode, err["error"]) == (4, "cli.refused.containment")
    assert f"is stale: bubblewrap is now installed at {real}" in err["message"]
    assert "run agentprov backends build agentdojo (it re-runs the probe)" in err["message"]
    assert not corpus.parent.exists()
    r = _agentprov(home, "backends", "build", "agentdojo")
    assert r.stdout.startswith(f"{built} (containment probe re-run: bubblewrap is now installed "
                               f"at {real}) at "), r.stdout
    entry = _bwrap_entry(home, env_id)
    assert entry["passed"] is True and entry["counts"]["checks"] == 20
    assert entry["machine"] == probe.machine()

    # a different binary (a wrapper that runs the real one): re-run, and it still passes
    wrapper = tmp_path / "other-bwrap" / "bwrap"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    r = _agentprov(home, "backends", "build", "agentdojo",
                   path=f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}")
    assert f"(containment probe re-run: bubblewrap changed from {real} " in r.stdout, r.stdout
    assert f" to {wrapper} " in r.stdout
    entry = _bwrap_entry(home, env_id)
    assert entry["passed"] is True and entry["machine"]["bwrap"]["path"] == str(wrapper)
    assert entry["machine"]["bwrap"]["sha256"] == file_sha256(wrapper)


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bwrap is Linux only")
def test_a_failed_probe_is_tried_again_and_an_absent_one_is_not(agentdojo_env, tmp_path):
    """Runs on any Linux machine: a ``bwrap`` that cannot start anything (a broken
    install) makes the real probe fail; every build tries a failed probe again (its cause
    may lie outside what the probe records), while an unavailable one waits for bubblewrap
    to appear."""
    from conftest import path_without

    home, env_id = _private_copy(agentdojo_env, tmp_path), agentdojo_env.env_id
    gone = path_without("bwrap", tmp_path / "no-bwrap")
    broken = tmp_path / "broken" / "bwrap"
    broken.parent.mkdir()
    broken.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    broken.chmod(0o755)
    with_broken = f"{broken.parent}{os.pathsep}{gone}"
    r = _agentprov(home, "backends", "build", "agentdojo", path=with_broken)
    assert r.returncode == 0, r.stderr
    assert "already built (containment probe re-run: bubblewrap " in r.stdout, r.stdout
    entry = _bwrap_entry(home, env_id)
    assert entry["status"] == "failed" and "Permission denied" in entry["detail"]
    assert entry["machine"]["bwrap"]["path"] == str(broken)
    r = _agentprov(home, "backends", "build", "agentdojo", path=with_broken)
    assert "already built (containment probe re-run: its last run failed) at " in r.stdout
    r = _agentprov(home, "run", "agentdojo", "--dry-run", "--corpus", str(tmp_path / "c"),
                   "--campaign", "c", "--suite", "banking", "--user-tasks", "0", "--endpoint",
                   "ollama", "--model-id", "m", "--containment", "bwrap", path=with_broken)
    err = json.loads(r.stderr.strip().splitlines()[-1])
    assert (r.returncode, err["error"]) == (4, "cli.refused.containment")
    assert "its probe failed (the sandbox did not start" in err["message"]
    r = _agentprov(home, "backends", "build", "agentdojo", path=gone)
    assert (f"already built (containment probe re-run: bubblewrap is no longer installed "
            f"(the probe ran {broken})) at ") in r.stdout, r.stdout
    r = _agentprov(home, "backends", "build", "agentdojo", path=gone)
    assert f"{env_id} already built at " in r.stdout, r.stdout
    assert _bwrap_entry(home, env_id)["status"] == "unavailable"
