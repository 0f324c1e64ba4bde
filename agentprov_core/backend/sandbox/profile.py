"""The ``bwrap`` profile: a deterministic description of the sandbox, its digest, and its
realisation as a bubblewrap argv for one worker.

The description (:data:`PROFILE`) holds the argv template with its placeholders, the
rules that expand them, and the sha256 of the in-sandbox launcher. Its digest
(:func:`profile_sha256`) is what a build's probe records and what ``--containment bwrap``
checks: a change to any rule is a new profile, and a run refuses it until the build has
probed it. The realised argv depends on the machine (which system paths exist, where the
Python install lives, the staging directory); the rules that produce it do not.

Besides the namespaces: the kernel's write surfaces under ``/proc`` are read-only or
masked (bubblewrap leaves ``/proc/sys`` writable to a sandbox started by root), a seccomp
filter (:mod:`agentprov_core.backend.sandbox.seccomp`, passed on a file descriptor) limits the
socket families and denies io_uring and foreign ABIs, and where bubblewrap supports it
(0.8.0 and later) the sandbox cannot create further user namespaces. No Landlock ruleset is
applied to the worker as a whole: the network namespace leaves no route out, and the mount
namespace shows only the bound paths; the worker applies one to each cell it forks (its
own session directory, home and TMPDIR only). See docs/containment.md.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import threading
from functools import cache
from pathlib import Path

from agentprov_core.backend.sandbox import seccomp
from agentprov_core.base.digests import digest, sha256_hex

FORMAT = "agentprov-bwrap-profile/0.1"
HERE = Path(__file__).resolve().parent
ROUTE_DIR = "/run/agentprov"

#: System directories mirrored read-only (a symlink on a merged-/usr system).
SYSTEM_DIRS = ("/usr",)
MIRRORED = ("/bin", "/lib", "/lib32", "/lib64", "/sbin")
#: The only parts of /etc the worker sees (each bound read-only when it exists): the
#: dynamic linker's cache, name-service basics, time zone, and the TLS trust store.
ETC = ("/etc/alternatives", "/etc/ca-certificates", "/etc/ca-certificates.conf",
       "/etc/group", "/etc/host.conf", "/etc/hosts", "/etc/ld.so.cache", "/etc/ld.so.conf",
       "/etc/ld.so.conf.d", "/etc/localtime", "/etc/mime.types", "/etc/nsswitch.conf",
       "/etc/passwd", "/etc/pki", "/etc/ssl", "/etc/timezone")
NAMESPACES = ("--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
              "--unshare-cgroup-try", "--unshare-net")
DOTENV = (".env", ".env.*")
#: The kernel's write surfaces under /proc (Docker's lists): bound read-only onto
#: themselves, each where it exists (root in the sandbox could otherwise write the host's
#: kernel settings, core_pattern among them) ...
PROC_READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs",
                  "/proc/asound")
#: ... and what reveals kernel memory, keys and timers: a file is covered by /dev/null on
#: a no-device mount (opening it fails), a directory by an empty read-only tmpfs.
PROC_MASKED = ("/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/timer_stats",
               "/proc/sched_debug", "/proc/latency_stats", "/proc/interrupts", "/proc/acpi",
               "/proc/scsi")


def launcher_source() -> str:
    return (HERE / "_launch.py").read_text(encoding="utf-8")


#: The argv template. ``{...}`` tokens are expanded by :func:`realise`; every other token
#: is passed as it stands.
TEMPLATE = (
    "bwrap", *NAMESPACES, "{disable_userns}", "--die-with-parent", "--cap-drop", "ALL",
    "--seccomp", "{seccomp_fd}",     # the filter of agentprov_core.backend.sandbox.seccomp
    "--tmpfs", "/",
    "{system}",                       # --ro-bind /usr; /bin, /lib, ... as on the host
    "{etc}",                          # --ro-bind-try for each path of ETC
    "--proc", "/proc",
    "{proc_masks}",                   # PROC_READ_ONLY bound read-only, PROC_MASKED covered
    "--dev", "/dev",
    "--ro-bind", "{python_prefix}", "{python_prefix}",
    "--ro-bind", "{env_dir}", "{env_dir}",
    "--bind", "{staging}", "{staging}",
    "{home}",                         # --bind HOME HOME unless it lies in staging
    "--bind", "{tmp}", "{tmp}",
    "{dotenv_masks}",                 # --ro-bind /dev/null F for each .env, .env.* found
    "{routes}",                       # --ro-bind SOCKET /run/agentprov/PORT.sock
    "--remount-ro", "/",
    "--chdir", "{staging}",
    "--",
    "{launcher}",                     # PYTHON -I -S -c LAUNCHER ROUTES_JSON (when routed)
    "{argv}",
)

PROFILE = {
    "format": FORMAT,
    "provider": "bwrap",
    "argv_template": list(TEMPLATE),
    "system_dirs": list(SYSTEM_DIRS),
    "mirrored": list(MIRRORED),
    "etc": list(ETC),
    "dotenv": {"names": list(DOTENV), "searched": ["{env_dir}", "{python_prefix}",
                                                   "{staging}", "{home}", "{tmp}"],
               "replaced_by": "/dev/null"},
    "routes": {"inside": "127.0.0.1:PORT", "to": ROUTE_DIR + "/PORT.sock",
               "host_loopback_ports": "bridged by T0 (agentprov_core.backend.sandbox.bridge)"},
    "network": "own namespace (loopback only); no other interface",
    "writable": ["{staging}", "{home}", "{tmp}"],
    "proc": {"read_only": list(PROC_READ_ONLY), "masked": list(PROC_MASKED),
             "masked_by": {"file": "/dev/null", "directory": "empty read-only tmpfs"}},
    "seccomp": seccomp.describe(),
    "disable_userns": "--disable-userns where bubblewrap has it (0.8.0 and later)",
    "landlock": None,
    "cell_landlock": {"applied_by": "agentprov_backend.landlock, in each forked cell",
                      "writable": ["the cell's session directory", "{home}", "{tmp}",
                                   "character devices /dev/null, /dev/zero, /dev/full, "
                                   "/dev/tty, /dev/random, /dev/urandom"],
                      "scoped": "signals and abstract Unix sockets (Landlock ABI 6 and later)"},
    "cell_seccomp": {"applied_by": "agentprov_backend.cellfilter, in each forked cell",
                     "refused_eperm": ["chmod", "fchmod", "fchmodat", "fchmodat2", "chown",
                                       "fchown", "lchown", "fchownat", "utime", "utimes",
                                       "futimesat", "utimensat", "setxattr", "lsetxattr",
                                       "fsetxattr", "setxattrat", "removexattr",
                                       "lremovexattr", "fremovexattr", "removexattrat"]},
    "cell_server": "agentprov_backend.cellserver: forks the cells on JSON requests over a "
                   "socket pair only the worker holds; no listener; makes a cell's own "
                   "metadata changes beneath its session directory, {home} and {tmp} "
                   "(agentprov_backend.metabroker, openat2 RESOLVE_BENEATH)",
}


@cache
def profile_sha256() -> str:
    """The digest of the profile: its rules, the seccomp program's bytes and the launcher
    that runs inside."""
    return digest(PROFILE | {"launcher_sha256": sha256_hex(launcher_source().encode()),
                             "seccomp_sha256": sha256_hex(seccomp.filter_bytes())})


@cache
def disable_userns_supported(bwrap: str) -> bool:
    """Whether this bubblewrap has ``--disable-userns`` (0.8.0 and later): its help says."""
    try:
        out = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--disable-userns" in out.stdout + out.stderr


@cache
def _proc_masks() -> tuple[str, ...]:
    out: list[str] = []
    for p in PROC_READ_ONLY:
        if os.path.exists(p):
            out += ["--ro-bind", p, p]
    for p in PROC_MASKED:
        if os.path.isdir(p):
            out += ["--tmpfs", p, "--remount-ro", p]
        elif os.path.exists(p):
            out += ["--ro-bind", "/dev/null", p]
    return tuple(out)


#: bubblewrap's options that take a file descriptor the caller must pass (``pass_fds``).
FD_OPTIONS = ("--seccomp",)


def pass_fds(argv: list[str]) -> tuple[int, ...]:
    """The file descriptors a realised argv names (the seccomp filter's): pass them to
    the child (``subprocess.Popen(pass_fds=...)``) and close them once it has started.
    Only bubblewrap's own options count (those before ``--``)."""
    own = argv[:argv.index("--")] if "--" in argv else argv
    return tuple(int(own[i + 1]) for i, a in enumerate(own[:-1])
                 if a in FD_OPTIONS and own[i + 1].isdigit())


def close_fds(argv: list[str]) -> None:
    for fd in pass_fds(argv):
        with contextlib.suppress(OSError):
            os.close(fd)


def python_prefix(env_dir: Path) -> Path:
    """The Python install an environment runs on (``home`` in its pyvenv.cfg, one up)."""
    cfg = env_dir / "pyvenv.cfg"
    if cfg.is_file():
        for line in cfg.read_text(encoding="utf-8").splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "home":
                return Path(value.strip()).resolve().parent
    return Path(os.path.realpath(env_dir / "bin" / "python")).parent.parent


def _inside(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
        return True
    except ValueError:
        return False


def _system() -> list[str]:
    out: list[str] = []
    for d in SYSTEM_DIRS:
        out += ["--ro-bind", d, d]
    for d in MIRRORED:
        if os.path.islink(d):
            out += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            out += ["--ro-bind", d, d]
    return out


@cache
def _dotenv_in_tree(root: str) -> tuple[str, ...]:
    """Read-only trees (the environment, the Python install) are walked once a process."""
    walk = _prewalks.get(root)
    if walk is not None:
        walk.join()  # started by prewalk: its result is cached below, once
        if root in _prewalked:
            return _prewalked[root]
    return tuple(_walk_dotenv(root))


_prewalks: dict[str, threading.Thread] = {}
_prewalked: dict[str, tuple[str, ...]] = {}


def prewalk(env_dir: Path) -> None:
    """Walk the environment and its Python install for ``.env`` files in background threads
    (about 50 ms of CPU for the AgentDojo environment), while T0 waits for other work, so
    that :func:`realise` finds them walked. The trees are read-only after the build."""
    for root in (str(Path(os.path.abspath(env_dir))), str(python_prefix(env_dir))):
        if root in _prewalks:
            continue

        def walk(root: str = root) -> None:
            _prewalked[root] = tuple(_walk_dotenv(root))

        _prewalks[root] = t = threading.Thread(target=walk, daemon=True,
                                               name="agentprov-dotenv")
        t.start()


def _walk_dotenv(root: str) -> list[str]:
    found = []
    for dirpath, _dirs, files in os.walk(root):
        found += [os.path.join(dirpath, f) for f in files
                  if f == ".env" or f.startswith(".env.")]
    return sorted(found)


def dotenv_files(env_dir: Path, prefix: Path, writable: list[Path]) -> list[str]:
    found = {*_dotenv_in_tree(str(env_dir)), *_dotenv_in_tree(str(prefix))}
    for d in writable:
        found.update(_walk_dotenv(str(d)))
    return sorted(found)


def realise(argv: list[str], *, env_dir: Path, staging: Path, home: Path, tmp: Path,
            routes: dict[int, str], bwrap: str | None = None,
            seccomp_fd: int | None = None) -> list[str]:
    """The bwrap argv that runs ``argv`` under the profile. ``routes`` maps a port the
    worker may connect to on 127.0.0.1 to the host Unix socket it is relayed to.
    ``seccomp_fd`` holds the seccomp program (by default a new one is opened): the argv
    names it, and the caller passes it to bwrap (:func:`pass_fds`) and closes it after the
    start (:func:`close_fds`); it serves one start."""
    bwrap = bwrap or shutil.which("bwrap") or "bwrap"
    env_dir, staging, home, tmp = (Path(os.path.abspath(p)) for p in (env_dir, staging, home, tmp))
    prefix = python_prefix(env_dir)
    inside_python = str(env_dir / "bin" / "python")
    if seccomp_fd is None:
        seccomp_fd = seccomp.open_fd()
    expand: dict[str, list[str]] = {
        "{disable_userns}": ["--disable-userns"] if disable_userns_supported(bwrap) else [],
        "{seccomp_fd}": [str(seccomp_fd)],
        "{proc_masks}": list(_proc_masks()),
        "{system}": _system(),
        "{etc}": [a for p in ETC for a in ("--ro-bind-try", p, p)],
        "{python_prefix}": [str(prefix)],
        "{env_dir}": [str(env_dir)],
        "{staging}": [str(staging)],
        "{home}": [] if _inside(home, staging) else ["--bind", str(home), str(home)],
        "{tmp}": [str(tmp)],
        "{dotenv_masks}": [a for f in dotenv_files(env_dir, prefix, [staging, home, tmp])
                           for a in ("--ro-bind", "/dev/null", f)],
        "{routes}": [a for port, sock in sorted(routes.items())
                     for a in ("--ro-bind", sock, f"{ROUTE_DIR}/{port}.sock")],
        "{launcher}": [] if not routes else [
            inside_python, "-I", "-S", "-c", launcher_source(),
            '{"routes": [' + ", ".join(f'[{p}, "{ROUTE_DIR}/{p}.sock"]'
                                       for p in sorted(routes)) + "]}"],
        "{argv}": list(argv),
    }
    out: list[str] = []
    for token in TEMPLATE:
        if token == "bwrap":
            out.append(bwrap)
        elif token in expand:
            out += expand[token]
        else:
            out.append(token)
    return out
