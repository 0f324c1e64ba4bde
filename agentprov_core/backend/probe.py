"""The build-time probe of the ``bwrap`` profile: 17 checks (12 denials, 5 allowances),
each tried inside the sandbox with the environment's own Python and checked from outside.

Denials: read the repository (agentprov's own source), read a planted ``~/.ssh/id_rsa``,
read ``~/.aws``, ``~/.config/gh`` and the keyring directory (planted in a temporary
operator HOME), read a ``.env`` or ``.env.*``, write outside staging, connect anywhere
but the allowed ports (another loopback port with a listener; a way out judged from the
namespace's interfaces and routes, so that nothing is ever sent off the machine), open a
kernel setting for writing (``/proc/sys/kernel/core_pattern``; never written), create an
AF_VSOCK, AF_PACKET, Bluetooth or AF_ALG socket, use io_uring or the x32 ABI, create a
user namespace, have the worker import a module planted in its working directory, and
(as a cell confined by the worker) write another session's directory or the staging
root. Allowances: import the backend, write staging, write the private home, connect to
the allowed ports (a bridged loopback port, as an endpoint, and a Unix socket route, as
the egress proxy), read the Python install.

From outside: each planted secret exists and T0 can read it (a denial is never vacuous)
and never appears in anything the sandbox printed; every write target outside staging is
byte-for-byte unchanged; the listener on the forbidden port saw no connection; the kernel
settings read the same before and after; the sandbox ran under the profile's seccomp
filter (reported by the kernel in ``/proc/self/status``) and, where bubblewrap has it,
``--disable-userns``; the planted module left no trace; the sibling session and the
staging root are unchanged and the confined cell's own file holds the token; the allowed
listeners received the token; the staged and home files hold it; the Python file read
inside hashes the same outside.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import platform
import secrets
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from agentprov_core.backend.sandbox import profile, seccomp
from agentprov_core.backend.sandbox.bridge import Bridge
from agentprov_core.base.digests import file_sha256

HERE = Path(__file__).resolve().parent
DENIALS = ("read_repository", "read_ssh_key", "read_aws_and_credential_dirs", "read_dotenv",
           "write_outside_staging", "connect_elsewhere", "write_kernel_settings",
           "open_foreign_sockets", "use_io_uring_or_foreign_abi", "create_user_namespace",
           "import_from_staging", "write_other_session", "reach_the_forkserver",
           "change_sibling_metadata", "signal_sibling_or_worker")
ALLOWANCES = ("import_backend", "write_staging", "write_private_home", "connect_allowed",
              "read_python_install")
#: Opened for writing inside (and closed at once, never written); read outside, before and
#: after, to see them unchanged.
KERNEL_SETTINGS = ("/proc/sys/kernel/core_pattern", "/proc/sys/kernel/core_uses_pid",
                   "/proc/sysrq-trigger")


class _Listener:
    """A TCP (loopback) or Unix listener that records the first line of each connection."""

    def __init__(self, unix_path: str | None = None) -> None:
        if unix_path:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.bind(unix_path)
            self.port = 0
        else:
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.sock.bind(("127.0.0.1", 0))
            self.port = self.sock.getsockname()[1]
        self.sock.listen(16)
        self.received: list[str] = []
        self.connections = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                conn.settimeout(5)
                with contextlib.suppress(OSError):
                    self.received.append(conn.makefile("rb").readline().decode().strip())

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _site_packages(env_dir: Path) -> Path | None:
    found = sorted((env_dir / "lib").glob("python3*/site-packages"))
    return found[0] if found else None


def default_modules(env_dir: Path, hello: dict[str, Any] | None) -> list[str]:
    """The worker module, each served source's worker package (the module its entry point
    names), and each served source that is an importable top-level package."""
    site = _site_packages(env_dir)
    mods = ["agentprov_backend.worker"]
    served = (hello or {}).get("served") or {}
    for s in (hello or {}).get("sources", []):
        module = str((served.get(s) or {}).get("entry_point") or "").partition(":")[0]
        if module and module not in mods:
            mods.append(module)
        if site is not None and ((site / s).is_dir() or (site / f"{s}.py").is_file()):
            mods.append(s)
    return mods


def _python_file(env_dir: Path) -> Path:
    prefix = profile.python_prefix(env_dir)
    found = sorted(prefix.glob("lib/python3*/os.py"))
    return found[0] if found else prefix / "lib" / "os.py"


def _plant(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _state(p: Path) -> tuple | None:
    try:
        st = p.stat()
        return (p.read_bytes(), st.st_mtime_ns, st.st_size)
    except OSError:
        return None


def _tree(d: Path) -> dict[str, tuple | None]:
    return {str(p.relative_to(d)): _state(p) for p in sorted(d.rglob("*"))}


def _bwrap_version(bwrap: str) -> str:
    try:
        return subprocess.run([bwrap, "--version"], capture_output=True, text=True,
                              timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


#: The kernel settings that decide whether an unprivileged process may create the user
#: namespace bubblewrap needs (Debian's switch, the general limit, Ubuntu's AppArmor gate).
USERNS_SETTINGS = (("kernel.unprivileged_userns_clone", "/proc/sys/kernel/unprivileged_userns_clone"),
                   ("user.max_user_namespaces", "/proc/sys/user/max_user_namespaces"),
                   ("kernel.apparmor_restrict_unprivileged_userns",
                    "/proc/sys/kernel/apparmor_restrict_unprivileged_userns"))


def landlock_abi() -> int:
    """The kernel's Landlock ABI version (``landlock_create_ruleset`` with the version
    flag), 0 without Landlock; what the worker's cells are confined with."""
    if not sys.platform.startswith("linux"):
        return 0
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    r = libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return int(r) if r > 0 else 0


def machine() -> dict[str, Any]:
    """What the probe's result depends on besides the profile, as the probe records it:
    the bubblewrap it finds on ``PATH`` (path, version, sha256 of the file) or ``None``,
    whether it runs as root (root needs no unprivileged user namespaces), the kernel's
    user-namespace settings (``user.max_user_namespaces`` as ``0`` or ``> 0``) and its
    Landlock ABI version (0: none)."""
    bwrap = shutil.which("bwrap")
    found = None
    if bwrap is not None:
        try:
            sha = file_sha256(Path(os.path.realpath(bwrap)))
        except OSError:
            sha = None
        found = {"path": bwrap, "version": _bwrap_version(bwrap), "sha256": sha}
    userns = {}
    for key, where in USERNS_SETTINGS:
        try:
            value = Path(where).read_text(encoding="utf-8").strip()
        except OSError:
            continue
        userns[key] = ("0" if value == "0" else "> 0") if key == "user.max_user_namespaces" \
            else value
    return {"bwrap": found, "root": os.geteuid() == 0, "userns": userns,
            "landlock_abi": landlock_abi()}


def changes(was: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """How the machine ``now`` differs from the one a probe ran on (``was``), in words."""
    out = []
    a, b = was.get("bwrap"), now.get("bwrap")
    if a is None and b is not None:
        out.append(f"bubblewrap is now installed at {b.get('path')}")
    elif a is not None and b is None:
        out.append(f"bubblewrap is no longer installed (the probe ran {a.get('path')})")
    elif a != b:
        out.append(f"bubblewrap changed from {_bwrap_text(a)} to {_bwrap_text(b)}")
    if bool(was.get("root")) != bool(now.get("root")):
        out.append("agentprov now runs as root, the probe did not" if now.get("root")
                   else "the probe ran as root, agentprov now does not")
    old, new = was.get("userns") or {}, now.get("userns") or {}
    out += [f"{key} was {old.get(key, 'absent')}, is {new.get(key, 'absent')}"
            for key in sorted(set(old) | set(new)) if old.get(key) != new.get(key)]
    if was.get("landlock_abi") != now.get("landlock_abi"):
        out.append(f"the kernel's Landlock ABI was {was.get('landlock_abi', 'not recorded')}, "
                   f"is {now.get('landlock_abi', 'not recorded')}")
    return out


def stale(entry: dict[str, Any]) -> list[str]:
    """Why a recorded probe no longer describes this machine (empty: it does)."""
    was = entry.get("machine")
    if not isinstance(was, dict):
        return ["the marker records no machine state for it"]
    return changes(was, machine())


def _bwrap_text(b: dict[str, Any]) -> str:
    version = str(b.get("version") or "no version").removeprefix("bubblewrap ")
    return f"{b.get('path')} {version} sha256 {str(b.get('sha256'))[:12]}…"


def run(env_dir: Path, hello: dict[str, Any] | None = None, *,
        modules: list[str] | None = None, timeout: float = 300.0) -> dict[str, Any]:
    """Run the probe against the environment ``env_dir``; return what the marker records
    (with :func:`machine`, what it ran against)."""
    base: dict[str, Any] = {"provider": "bwrap", "profile_sha256": profile.profile_sha256(),
                            "platform": sys.platform,
                            "ran_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    if not sys.platform.startswith("linux"):
        return base | {"status": "not applicable", "passed": False}
    here = machine()
    base["machine"] = here
    bwrap = here["bwrap"]["path"] if here["bwrap"] else None
    if bwrap is None:
        return base | {"status": "unavailable", "passed": False,
                       "detail": "bwrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)"}
    base |= {"bwrap": here["bwrap"]["version"], "kernel": platform.release()}
    env_dir = Path(os.path.abspath(env_dir))
    modules = modules if modules is not None else default_modules(env_dir, hello)
    work = Path(tempfile.mkdtemp(prefix="agentprov-probe-"))
    listeners: list[_Listener] = []
    bridge: Bridge | None = None
    try:
        endpoint = _Listener()
        forbidden = _Listener()
        egress = _Listener(unix_path=str(work / "egress.sock"))
        listeners += [endpoint, forbidden, egress]
        bridge = Bridge((endpoint.port,))
        egress_port = _free_port()
        routes = {endpoint.port: bridge.sockets[endpoint.port], egress_port: str(work / "egress.sock")}
        checks, elapsed, hardening = _probe(env_dir, modules, work, bwrap, routes, endpoint, forbidden,
                                 egress, timeout)
    except _ProbeError as exc:
        return base | {"status": "failed", "passed": False, "detail": str(exc)}
    finally:
        for lst in listeners:
            lst.close()
        if bridge is not None:
            bridge.close()
        shutil.rmtree(work, ignore_errors=True)
    passed = all(c["passed"] or c.get("enforced_here") is False for c in checks)
    return base | {"status": "passed" if passed else "failed", "passed": passed,
                   "counts": {"checks": len(checks), "denials": len(DENIALS),
                              "allowances": len(ALLOWANCES)},
                   "modules": modules, "elapsed_ms": elapsed, "hardening": hardening,
                   "checks": checks}


class _ProbeError(Exception):
    pass


def _probe(env_dir: Path, modules: list[str], work: Path, bwrap: str, routes: dict[int, str],
           endpoint: _Listener, forbidden: _Listener, egress: _Listener,
           timeout: float) -> tuple[list[dict[str, Any]], int, dict[str, Any]]:
    from agentprov_core.backend.workerclient import scrubbed_env, worker_argv

    sentinel = "AGENTPROV-PROBE-SECRET-" + secrets.token_hex(12)
    token = "agentprov-probe-" + secrets.token_hex(8)
    staging, tmp, operator = work / "staging", work / "t", work / "operator-home"
    home = staging / "home"
    env = scrubbed_env(env_dir, staging, tmp)
    secret = f"{sentinel}\n"
    ssh = [_plant(operator / ".ssh" / "id_rsa", "fake id_rsa planted by agentprov's containment probe (not a key)\n" + secret)]
    creds = [_plant(operator / ".aws" / "credentials", "[default]\naws_secret_access_key=" + secret),
             _plant(operator / ".config" / "gh" / "hosts.yml", "oauth_token: " + secret),
             _plant(operator / ".local" / "share" / "keyrings" / "login.keyring", secret)]
    dotenv = [_plant(operator / "project" / ".env", "OPENAI_API_KEY=" + secret),
              _plant(staging / ".env", "OPENAI_API_KEY=" + secret),
              _plant(home / ".env.local", "ANTHROPIC_API_KEY=" + secret)]
    real_home = Path.home()
    ssh += [real_home / ".ssh" / n for n in ("id_rsa", "id_ed25519", "id_ecdsa")]
    creds += [real_home / ".aws" / "credentials", real_home / ".config" / "gh" / "hosts.yml"]
    import agentprov_core

    pkg = Path(agentprov_core.__file__).resolve().parent
    repo = [pkg / "__init__.py"] + [r / f for r in [pkg.parent] for f in ("pyproject.toml", "README.md")
                                    if (r / f).is_file()]
    canary = _plant(operator / "canary.txt", "unchanged\n")
    write_targets = [canary, work / "outside-staging.txt", env_dir / "agentprov" / ".probe-write",
                     pkg / ".probe-write", Path("/probe-write")]
    before = {str(p): _state(p) for p in write_targets}
    kernel_before = {p: _state(Path(p)) for p in KERNEL_SETTINGS}
    # the worker's working directory holds a planted package of its own name: imported,
    # it would leave planted-ran behind
    planted_ran = staging / "planted-ran"
    _plant(staging / "agentprov_backend" / "__init__.py", "")
    _plant(staging / "agentprov_backend" / "worker.py",
           f"open({str(planted_ran)!r}, 'w').write('planted')\n")
    own, sibling = staging / "probe-session-own", staging / "probe-session-sibling"
    own.mkdir(parents=True)
    _plant(sibling / "capture.jsonl", '{"kind": "header", "session_id": "probe-sibling"}\n')
    sibling_before = _tree(sibling)
    cells = {}  # each round of the cell checks: a staging root of its own (the worker's
    for attack, where in (("forkserver", "probe-cells"), ("metadata", "probe-cells"),
                          ("signal", "probe-cells-signal")):  # cwd), a victim, an attacker
        root = staging / where
        cells[attack] = {"root": str(root), "victim": str(root / "victim"),
                         "attacker": str(root / "attacker"),
                         "plant": [str(root / "victim" / "planted-by-forkserver"),
                                   str(root / "planted-by-forkserver")]}
        root.mkdir(exist_ok=True)
    # the metadata round's victim keeps the capture log T0 plants, of a mode and times T0
    # knows, and T0 sees them unchanged after
    victim_log = _plant(Path(cells["metadata"]["victim"]) / "capture.jsonl",
                        '{"kind": "header", "session_id": "probe-victim"}\n')
    victim_log.chmod(0o640)
    os.utime(victim_log, ns=(1_000_000_000, 1_000_000_000))
    cells["metadata"]["planted"] = _meta(victim_log)
    pyfile = _python_file(env_dir)
    cfg = {"sentinel": sentinel, "token": token, "modules": modules,
           "repository": [str(p) for p in repo], "ssh": [str(p) for p in ssh],
           "credentials": [str(p) for p in creds], "dotenv": [str(p) for p in dotenv],
           "write_targets": [str(p) for p in write_targets],
           "forbidden_ports": [forbidden.port], "kernel_settings": list(KERNEL_SETTINGS),
           "worker_argv": worker_argv(env_dir), "staging_root": str(staging),
           "planted_ran": str(planted_ran), "own_session": str(own),
           "sibling_session": str(sibling), "cells": cells,
           "allowed_ports": sorted(routes), "python_file": str(pyfile),
           "staging_file": str(staging / "probe-staging.txt"),
           "home_file": str(home / ".cache" / "probe-home.txt")}
    child = (HERE / "_probe_child.py").read_text(encoding="utf-8")
    argv = profile.realise([str(env_dir / "bin" / "python"), "-I", "-c", child, json.dumps(cfg)],
                           env_dir=env_dir, staging=staging, home=home, tmp=tmp, routes=routes,
                           bwrap=bwrap)
    t0 = time.monotonic()
    try:
        proc = subprocess.run(argv, cwd=staging, env=env, capture_output=True, text=True,
                              timeout=timeout, start_new_session=True,
                              pass_fds=profile.pass_fds(argv))
    except subprocess.TimeoutExpired:
        raise _ProbeError(f"the sandboxed probe did not finish within {timeout:.0f}s") from None
    finally:
        profile.close_fds(argv)
    elapsed = int((time.monotonic() - t0) * 1000)
    time.sleep(0.05)  # let the listeners record the last connection
    lines = proc.stdout.strip().splitlines()
    try:
        seen = json.loads(lines[-1])
    except (IndexError, ValueError):
        tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
        raise _ProbeError(f"the sandbox did not start (exit {proc.returncode}): {tail}") from None
    leaked = sentinel in proc.stdout or sentinel in proc.stderr
    hardening = {"seccomp_sha256": seccomp.filter_sha256(),
                 "seccomp_in_force": seen.get("_seccomp") == "2",
                 "disable_userns": "--disable-userns" in argv,
                 "proc_read_only_or_masked": [p for p in profile.PROC_READ_ONLY + profile.PROC_MASKED
                                              if p in argv],
                 "staging_isolation": (f"landlock ABI {seen['_landlock']['abi']}"
                                       if isinstance(seen.get("_landlock"), dict)
                                       else f"not available ({seen.get('_landlock')})"),
                 **cell_hardening(seen.get("_cells"))}

    def outside_read(paths: list[Path]) -> tuple[bool, str]:
        planted = [p for p in paths if str(p).startswith(str(work))]
        ok = all(p.is_file() and sentinel in p.read_text() for p in planted) or not planted
        if str(repo[0]) in (str(p) for p in paths):
            ok = all(p.is_file() and os.access(p, os.R_OK) for p in paths)
        return ok and not leaked, (("present and readable outside" if ok else "missing outside")
                                   + ("; the secret appeared in the sandbox's output" if leaked else ""))

    out: dict[str, tuple[bool, str]] = {
        "read_repository": outside_read(repo),
        "read_ssh_key": outside_read(ssh),
        "read_aws_and_credential_dirs": outside_read(creds),
        "read_dotenv": outside_read(dotenv),
    }
    changed = [k for k, v in before.items() if _state(Path(k)) != v]
    for p in write_targets:  # a failed denial must not leave its mark
        if before[str(p)] is None and p.exists():
            with contextlib.suppress(OSError):
                p.unlink()
    out["write_outside_staging"] = (not changed, "unchanged: " + ", ".join(
        p.name for p in write_targets) if not changed else "changed: " + ", ".join(changed))
    out["connect_elsewhere"] = (forbidden.connections == 0,
                                f"the listener on 127.0.0.1:{forbidden.port} saw "
                                f"{forbidden.connections} connection(s); nothing was sent "
                                "elsewhere (the namespace's routes were read, not tried)")
    moved = [p for p, v in kernel_before.items() if _state(Path(p)) != v]
    out["write_kernel_settings"] = (not moved, "unchanged: " + ", ".join(
        Path(p).name for p, v in kernel_before.items() if v is not None) if not moved
        else "changed: " + ", ".join(moved))
    filtered = seen.get("_seccomp") == "2"
    sc = (f"the sandbox ran under the profile's seccomp filter (sha256 "
          f"{seccomp.filter_sha256()[:12]}…; the kernel reports Seccomp: {seen.get('_seccomp')})")
    out["open_foreign_sockets"] = (filtered, sc)
    out["use_io_uring_or_foreign_abi"] = (filtered, sc)
    disabled = "--disable-userns" in argv
    out["create_user_namespace"] = (disabled, "started with --disable-userns" if disabled else
                                    f"bubblewrap {_bwrap_version(bwrap)} has no --disable-userns "
                                    "(0.8.0 or later has it)")
    out["import_from_staging"] = (not planted_ran.exists(),
                                  "the planted agentprov_backend left no trace" if not
                                  planted_ran.exists() else "the planted module ran")
    own_ok = (own / "probe-own.txt").is_file() and (own / "probe-own.txt").read_text() == token
    kept = _tree(sibling) == sibling_before and not any(
        (staging / n).exists() for n in ("planted.txt", "planted-dir"))  # what the cell tried
    out["write_other_session"] = (own_ok and kept, (
        "the sibling session and the staging root are unchanged" if kept else
        "the sibling session or the staging root changed")
        + ("; the confined cell's own session holds the token" if own_ok else
           "; the confined cell could not write its own session"))
    out |= _cell_checks(seen.get("_cells") or {}, cells)
    site = _site_packages(env_dir)
    tops = {m.split(".")[0] for m in modules}
    present = site is not None and all((site / t).exists() or (site / f"{t}.py").exists()
                                       for t in tops)
    out["import_backend"] = (present, f"{', '.join(sorted(tops))} installed in the environment"
                             if present else "not found in the environment's site-packages")
    for name, path in (("write_staging", staging / "probe-staging.txt"),
                       ("write_private_home", home / ".cache" / "probe-home.txt")):
        ok = path.is_file() and path.read_text() == token
        out[name] = (ok, f"{path.name} holds the token" if ok else f"{path.name} absent outside")
    got = [endpoint.received.count(token), egress.received.count(token)]
    out["connect_allowed"] = (got == [1, 1],
                              f"endpoint 127.0.0.1:{endpoint.port} received {got[0]}, egress "
                              f"socket (port {min(set(routes) - {endpoint.port})} inside) received {got[1]}")
    outside_hash = hashlib.sha256(pyfile.read_bytes()).hexdigest() if pyfile.is_file() else None
    inside = seen.get("read_python_install", {})
    out["read_python_install"] = (inside.get("detail") == outside_hash,
                                  f"{pyfile.name} sha256 {'matches' if inside.get('detail') == outside_hash else 'differs'}")
    checks = []
    for kind, names in (("denial", DENIALS), ("allowance", ALLOWANCES)):
        for name in names:
            s = seen.get(name, {"ok": None, "detail": "not reported"})
            inside_ok = s["ok"] is (kind == "allowance")
            outside_ok, outside = out[name]
            checks.append({"name": name, "kind": kind,
                           "expected": "denied" if kind == "denial" else "allowed",
                           "inside": ("allowed" if s["ok"] else "denied") if s["ok"] is not None
                           else "not reported",
                           "inside_detail": str(s["detail"])[:300], "outside": outside,
                           "passed": bool(inside_ok and outside_ok)})
            if name in KERNEL_DEPENDENT and landlock_abi() < KERNEL_DEPENDENT[name]:
                checks[-1]["enforced_here"] = False  # the kernel cannot: said, not refused
    return checks, elapsed, hardening


#: The checks whose protection needs a Landlock ABI this kernel may lack, and that ABI.
#: On a kernel below it the check is recorded with ``"enforced_here": false``, does not
#: fail the probe, and the dry run and the manifest say so
#: (:func:`agentprov_core.backend.containment.not_enforced`).
KERNEL_DEPENDENT = {"signal_sibling_or_worker": 6}


def cell_hardening(rounds: dict[str, Any] | None) -> dict[str, str]:
    """What protects one cell from another on this machine, from what confined the probe's
    attacking cell (``agentprov_backend.landlock.confine_cell``)."""
    attacker = ((rounds or {}).get("forkserver") or {}).get("attacker") or {}
    confined = attacker.get("confined")
    if not isinstance(confined, dict):
        why = "the cell was not confined: no Landlock" if attacker else "no cell ran"
        return {"cell_server": "a socket pair held by the worker",
                "cell_signals": f"not available ({why})",
                "cell_metadata": f"not available ({why})"}
    abi = confined.get("abi")
    return {"cell_server": "a socket pair held by the worker",
            "cell_signals": (f"landlock ABI {abi} signal and abstract socket scoping"
                             if "signal" in (confined.get("scoped") or ())
                             else f"not available (Landlock ABI {abi}; scoping needs 6)"),
            "cell_metadata": ("seccomp: " + str(confined.get("metadata"))
                              if confined.get("metadata") == "metadata calls refused"
                              else str(confined.get("metadata") or "not available"))}


def _meta(path: Path) -> list[int]:
    """Mode, mtime and ctime: a change of mode, owner, times or extended attributes moves
    the ctime, which no system call sets."""
    st = path.lstat()
    return [stat.S_IMODE(st.st_mode), st.st_mtime_ns, st.st_ctime_ns]


def _cell_checks(rounds: dict[str, Any], where: dict[str, Any]) -> dict[str, tuple[bool, str]]:
    """The outside half of the three cell checks: no planted file, the victim's capture log
    as it was, the victim ended by itself and the worker answered after."""
    planted = [p for p in where["forkserver"]["plant"] if os.path.lexists(p)]
    for p in planted:  # a failed denial must not leave its mark
        with contextlib.suppress(OSError):
            os.unlink(p)
    try:
        now = _meta(Path(where["metadata"]["victim"]) / "capture.jsonl")
    except OSError:
        now = None
    kept = now == where["metadata"]["planted"]  # as T0 planted it
    sig = rounds.get("signal") or {}
    status = (sig.get("victim") or {}).get("status")
    alive = status == "complete" and bool(sig.get("hello"))
    return {
        "reach_the_forkserver": (not planted, "nothing planted in the sibling session or the "
                                 "staging root" if not planted else "planted: " + ", ".join(planted)),
        "change_sibling_metadata": (kept, "the sibling's capture log keeps the mode and times "
                                    "T0 gave it" if kept else "the sibling's capture log "
                                    f"changed (mode, mtime, ctime: {now}, planted "
                                    f"{where['metadata']['planted']})"),
        "signal_sibling_or_worker": (alive, "the sibling cell ended by itself and the worker "
                                     "answered after" if alive else
                                     f"the sibling cell: {status or 'no result'}; the worker "
                                     f"{'answered' if sig.get('hello') else 'did not answer'}"),
    }
