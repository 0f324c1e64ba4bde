"""The ``bwrap`` profile: a deterministic description of the sandbox, its digest, and its
realisation as a bubblewrap argv for one worker.

The description (:data:`PROFILE`) holds the argv template with its placeholders, the
rules that expand them, and the sha256 of the in-sandbox launcher. Its digest
(:func:`profile_sha256`) is what a build's probe records and what ``--containment bwrap``
checks: a change to any rule is a new profile, and a run refuses it until the build has
probed it. The realised argv depends on the machine (which system paths exist, where the
Python install lives, the staging directory); the rules that produce it do not.

No Landlock ruleset is applied: the network namespace leaves no route out (TCP, UDP and
raw sockets alike, which Landlock's TCP-only port rules could not match), and the mount
namespace shows only the bound paths. See docs/containment.md.
"""

from __future__ import annotations

import os
import shutil
import threading
from functools import cache
from pathlib import Path

from agentprov_core.digests import digest, sha256_hex

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


def launcher_source() -> str:
    return (HERE / "_launch.py").read_text(encoding="utf-8")


#: The argv template. ``{...}`` tokens are expanded by :func:`realise`; every other token
#: is passed as it stands.
TEMPLATE = (
    "bwrap", *NAMESPACES, "--die-with-parent", "--cap-drop", "ALL",
    "--tmpfs", "/",
    "{system}",                       # --ro-bind /usr; /bin, /lib, ... as on the host
    "{etc}",                          # --ro-bind-try for each path of ETC
    "--proc", "/proc", "--dev", "/dev",
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
               "host_loopback_ports": "bridged by T0 (agentprov_core.sandbox.bridge)"},
    "network": "own namespace (loopback only); no other interface",
    "writable": ["{staging}", "{home}", "{tmp}"],
    "landlock": None,
}


@cache
def profile_sha256() -> str:
    """The digest of the profile: its rules plus the launcher that runs inside."""
    return digest(PROFILE | {"launcher_sha256": sha256_hex(launcher_source().encode())})


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
            routes: dict[int, str], bwrap: str | None = None) -> list[str]:
    """The bwrap argv that runs ``argv`` under the profile. ``routes`` maps a port the
    worker may connect to on 127.0.0.1 to the host Unix socket it is relayed to."""
    bwrap = bwrap or shutil.which("bwrap") or "bwrap"
    env_dir, staging, home, tmp = (Path(os.path.abspath(p)) for p in (env_dir, staging, home, tmp))
    prefix = python_prefix(env_dir)
    inside_python = str(env_dir / "bin" / "python")
    expand: dict[str, list[str]] = {
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
