"""The worker host's libraries, which ``agentprov backends build`` installs into every
backend environment: ``agentprov-backend`` (the worker, its host of worker packages, the
recording transport, Landlock) and ``agentprov-capture`` (the capture/0.1 writer).

They are agentprov's, not the benchmark's: a backend project does not lock them, and a
third party's project needs no path into this repository nor a package index that has
them. The copy installed is the one that ships with the running agentprov: inside its
wheel as ``agentprov_core/_worker/<distribution>/`` (each a small project with its
``pyproject.toml`` and sources), or, in a checkout, ``backends/shared`` and
``packages/capture``. The marker records which (:func:`record`), and the worker's hello
reports the digest of the sources it runs, which T0 compares with this copy's
(``cli.environment.stale_worker``).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from agentprov_core.base import paths


@dataclass(frozen=True)
class HostLibrary:
    #: the distribution's name, as the environment's RECORDs and the lock name it
    distribution: str
    #: the hello's field holding the worker's digest of the package's sources
    hello_key: str
    #: the import package, relative to the project directory
    package: str
    #: where the library's project is in a checkout, relative to the repository root
    checkout: str


LIBRARIES = (
    HostLibrary("agentprov-backend", "agentprov_backend_sources_sha256",
                "src/agentprov_backend", "backends/shared"),
    HostLibrary("agentprov-capture", "agentprov_capture_sources_sha256",
                "src/agentprov_capture", "packages/capture"),
)
NAMES = frozenset(lib.distribution for lib in LIBRARIES)


@dataclass(frozen=True)
class Located:
    library: HostLibrary
    #: the library's project directory (``pyproject.toml`` and ``src/``)
    directory: Path
    #: where it comes from, as the marker and ``--dry-run`` say it
    origin: str

    @property
    def sources(self) -> Path:
        return self.directory / self.library.package


def _packaged() -> Path | None:
    try:
        found = resources.files("agentprov_core").joinpath("_worker")
    except (ImportError, TypeError):  # pragma: no cover - agentprov_core is importable
        return None
    return found if isinstance(found, Path) and found.is_dir() else None


def locate() -> list[Located]:
    """Every host library this agentprov ships, where its project is: the checkout's (the
    directory holding ``backends/``, which ``$AGENTPROV_BACKENDS`` names while developing;
    else this agentprov's own checkout), else the copy inside the installed wheel; empty
    when none is at hand (nothing can then be built or compared)."""
    from agentprov_core import __version__

    base = paths.backends_dir()
    root = paths.repo_root()
    tops = [t for t in (base.parent if base is not None else None, root) if t is not None]
    packaged = _packaged()
    out = []
    for lib in LIBRARIES:
        top = next((t for t in tops if (t / lib.checkout / "pyproject.toml").is_file()), None)
        if top is not None:
            out.append(Located(lib, top / lib.checkout,
                               f"the agentprov {__version__} checkout's {lib.checkout}"))
        elif packaged is not None and (packaged / lib.distribution / "pyproject.toml").is_file():
            out.append(Located(lib, packaged / lib.distribution,
                               f"the copy shipped with agentprov {__version__}"))
    return out


def digests() -> dict[str, str]:
    """The digests of the host libraries' sources, by the hello's field (the algorithm the
    worker's hello uses: ``agentprov_capture.sources``, loaded when first needed, since
    ``agentprov info`` imports this module)."""
    from agentprov_capture.sources import sources_sha256

    return {loc.library.hello_key: sources_sha256(loc.sources) for loc in locate()
            if loc.sources.is_dir()}


def record(found: list[Located]) -> dict[str, dict[str, str]]:
    """What the marker records of the host libraries a build installed: version, where the
    copy came from, and the digest of its sources."""
    from agentprov_capture.sources import sources_sha256

    out = {}
    for loc in found:
        text = (loc.directory / "pyproject.toml").read_text(encoding="utf-8")
        project = tomllib.loads(text).get("project") or {}
        out[loc.library.distribution] = {"version": str(project.get("version", "")),
                                         "from": loc.origin,
                                         "sources_sha256": sources_sha256(loc.sources)}
    return out



def locked(lock: dict) -> list[str]:
    """The host libraries a parsed ``uv.lock`` locks (a backend project must lock none:
    ``backends build`` installs agentprov's own copies)."""
    from packaging.utils import canonicalize_name

    return sorted(NAMES & {canonicalize_name(p.get("name", "")) for p in lock.get("package", [])})
