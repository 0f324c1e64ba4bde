"""Weight hashing: agentprov's sha256 of a weight file against ``sha256sum`` on the same
file, and the digest-cache hit path.

    python benchmarks/bench_weights.py [--mib 256] [--rounds 5] [--out /tmp/bench_weights.md]

A file of random bytes (``--mib`` MiB) is written to a temporary directory and read once
before timing (both contenders then read it from the page cache: the comparison is of the
hashing, not of the disk). The two are interleaved round by round, ``sha256sum`` first in
odd rounds and second in even ones; the report gives medians and the ratio (target: within
1.2x of ``sha256sum``). Then a model folder of 4 shards is hashed once (cold, in parallel
threads) and observed again through the cache (no byte read): the hit path's time per file.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from agentprov_core.live.local import weights  # noqa: E402


def _write_random(path: Path, mib: int) -> None:
    block = os.urandom(1 << 20)
    with open(path, "wb") as f:
        for i in range(mib):
            # vary each MiB cheaply so no two blocks are equal
            f.write(i.to_bytes(8, "little") + block[8:])


def _time(fn) -> tuple[float, str]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def _sha256sum(path: Path) -> str:
    return subprocess.run(["sha256sum", str(path)], capture_output=True, text=True,
                          check=True).stdout.split()[0]


def run(mib: int, rounds: int) -> str:
    lines = ["# Weight hashing", ""]
    with tempfile.TemporaryDirectory(prefix="bench-weights-") as tmp:
        d = Path(tmp)
        big = d / "weights.bin"
        _write_random(big, mib)
        weights.sha256_file(big)  # warm the page cache
        have_sum = shutil.which("sha256sum") is not None
        ours: list[float] = []
        theirs: list[float] = []
        stdlib: list[float] = []
        for r in range(rounds):
            order = ["sum", "ours", "stdlib"] if r % 2 == 0 else ["stdlib", "ours", "sum"]
            for who in order:
                if who == "sum" and have_sum:
                    t, h = _time(lambda: _sha256sum(big))
                    theirs.append(t)
                elif who == "ours":
                    t, h_ours = _time(lambda: weights.sha256_file(big))
                    ours.append(t)
                elif who == "stdlib":
                    def fd() -> str:
                        with open(big, "rb") as f:
                            return hashlib.file_digest(f, "sha256").hexdigest()
                    t, _ = _time(fd)
                    stdlib.append(t)
        if have_sum:
            assert h == h_ours, "sha256sum and agentprov disagree"
        mo, ms, mt = (statistics.median(x) for x in (ours, stdlib, theirs or [float("nan")]))
        lines += [f"File: {mib} MiB of random bytes in the page cache; {rounds} interleaved "
                  "rounds; medians.", "",
                  "| hasher | time | throughput | vs sha256sum |", "|---|---|---|---|"]
        for name, m in (("sha256sum (coreutils)", mt),
                        ("agentprov `weights.sha256_file` (8 MiB readinto)", mo),
                        ("`hashlib.file_digest` (stdlib)", ms)):
            ratio = f"{m / mt:.2f}x" if have_sum else "n/a"
            lines.append(f"| {name} | {m * 1000:.0f} ms | {mib / m:.0f} MiB/s | {ratio} |")
        if have_sum:
            verdict = "within" if mo / mt <= 1.2 else "NOT within"
            lines += ["", f"agentprov / sha256sum = {mo / mt:.2f} ({verdict} the 1.2x target)."]

        # the folder path: cold (parallel shards) then through the cache
        folder = d / "model"
        folder.mkdir()
        shard_mib = max(1, mib // 4)
        for i in range(4):
            _write_random(folder / f"model-{i + 1:05d}-of-00004.safetensors", shard_mib)
        files = sorted(folder.glob("*.safetensors"))
        cache_file = d / "model-digests.jsonl"
        for f in files:
            weights.sha256_file(f)
        t_serial, _ = _time(lambda: [weights.sha256_file(f) for f in files])
        cold = weights.DigestCache(cache_file)
        t_cold, _ = _time(lambda: weights.digest_files(files, cold))
        hits: list[float] = []
        for _ in range(max(rounds, 5)):
            warm = weights.DigestCache(cache_file)  # a new process reads the file again
            t, _ = _time(lambda warm=warm: weights.digest_files(files, warm))
            assert warm.hits == 4 and warm.hashed == 0
            hits.append(t)
        t_hit = statistics.median(hits)
        lines += ["", f"Model folder: 4 shards of {shard_mib} MiB.", "",
                  "| path | time |", "|---|---|",
                  f"| serial, one thread | {t_serial * 1000:.0f} ms |",
                  f"| cold: `digest_files` ({min(4, os.cpu_count() or 1)} threads), "
                  f"cache written | {t_cold * 1000:.0f} ms |",
                  f"| cache hit: load the cache file + stat 4 files, no byte read | "
                  f"{t_hit * 1e6:.0f} µs ({t_hit * 1e6 / 4:.0f} µs a file) |"]
    lines += ["", f"Machine: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, "
              f"OpenSSL {__import__('ssl').OPENSSL_VERSION}."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", type=Path, help="also write the markdown report here")
    args = ap.parse_args(argv)
    text = run(args.mib, args.rounds)
    sys.stdout.write(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
