"""Sealing at scale: ``agentprov package`` and ``agentprov verify`` of a sealed corpus of
10,000 executions (``benchmarks/gen_corpus.py``), each against ``sha256sum`` over the same
files in the same round; one execution's proof bundle: its size and the time
``verify --proof`` spends in agentprov's own code.

- ``package`` (a fresh process) against ``sha256sum`` over every file of the working
  corpus; its phases timed apart in this process (``check_verifies`` is verify and
  validate --strict; ``seal`` is the copy, hashing, tree, statement and signature).
- ``verify --corpus SEALED --trusted-key`` (levels chain and sealed) against
  ``sha256sum -c checksums.sha256`` in the sealed corpus.
- ``prove`` then ``verify_bundle`` in this process (agentprov's own time, without the
  interpreter's start), median of 20.

The generator writes no end of campaign into the manifest; the benchmark records one (a
``stops`` entry, as a run's close does), so the corpus is finished.

    python benchmarks/bench_sealing.py [--executions 10000] [--rounds 2] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from benchutil import child_env, forked  # noqa: E402

TARGET = 1.3


def _run(argv: list[str], env: dict[str, str], cwd: Path | None = None) -> float:
    t = time.perf_counter()
    p = subprocess.run(forked(argv), capture_output=True, text=True, env=env, cwd=cwd)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {p.returncode}: {p.stdout[-1000:]}"
                           f"{p.stderr[-1000:]}")
    return wall


def _finished(root: Path) -> None:
    from agentprov_core.corpus.working import WorkingCorpus, now

    wc = WorkingCorpus(root)
    m = wc.manifest()
    if not m.get("stops"):
        m["stops"] = [{"at": now(), "stop": "complete", "exit": 0}]
        wc.write_manifest(m)


def measure(n: int, rounds: int, work: Path) -> dict[str, Any]:
    import gen_corpus

    from agentprov_core.audit import proofs, sealing
    from agentprov_core.base import dsse
    from agentprov_core.corpus.opening import open_corpus

    env = child_env(str(work / "home"))
    env["AGENTPROV_LOAD_PLUGINS"] = "agentdojo"
    root = work / f"c{n}.partial"
    if not (root / "executions.jsonl").is_file():
        gen_corpus.generate(work / f"c{n}", n)
    _finished(root)
    (work / "spec.toml").write_text('format = "agentprov-corpus-spec/0.2"\n')
    (work / "LICENSE").write_text("MIT\n")
    ap = str(Path(sys.executable).with_name("agentprov"))
    home = Path(env["AGENTPROV_HOME"])
    if not (home / "signing-keys" / "bench.pub").is_file():
        subprocess.run([ap, "keys", "signing", "new", "bench"], env=env, check=True,
                       capture_output=True)
    pub = work / "bench.pub"
    pub.write_bytes((home / "signing-keys" / "bench.pub").read_bytes())
    sha = ["/bin/sh", "-c", f"find '{root}' -type f -print0 | xargs -0 sha256sum > /dev/null"]
    walls: dict[str, list[float]] = {k: [] for k in
                                     ("sha256sum", "package", "sha256sum -c", "verify")}
    sealed = work / "sealed"
    for r in range(rounds):
        shutil.rmtree(sealed, ignore_errors=True)
        walls["sha256sum"].append(_run(sha, env))
        walls["package"].append(_run([ap, "package", "--corpus", str(root), "--corpus-version",
                                      f"0.{r}.0", "--spec", str(work / "spec.toml"),
                                      "--licence-file", f"LICENSE={work / 'LICENSE'}",
                                      "--sign-key", "bench", "--out", str(sealed)], env))
        walls["sha256sum -c"].append(_run(["sha256sum", "-c", "--quiet", "checksums.sha256"],
                                          env, cwd=sealed))
        walls["verify"].append(_run([ap, "verify", "--corpus", str(sealed), "--trusted-key",
                                     str(pub)], env))
    # the phases of package, in this process
    phases: dict[str, float] = {}
    c = open_corpus(root)
    for name, fn in (("check_finished", sealing.check_finished),
                     ("check_contents", sealing.check_contents),
                     ("check_verifies (verify, validate --strict)", sealing.check_verifies)):
        t = time.perf_counter()
        fn(c)
        phases[name] = time.perf_counter() - t
    out2 = work / "sealed-phase"
    shutil.rmtree(out2, ignore_errors=True)
    t = time.perf_counter()
    done = sealing.seal(sealing.Release(c, "9.9.9", work / "spec.toml",
                                        [("LICENSE", work / "LICENSE")], out2, None))
    phases["seal (copy, hash, tree, statement)"] = time.perf_counter() - t
    # one execution's bundle
    eid = json.loads((root / "executions.jsonl").read_bytes().split(b"\n", 1)[0])[
        "execution_id"]
    bundle = work / "one.proof.json"
    bundle.unlink(missing_ok=True)
    t = time.perf_counter()
    proofs.write_bundle(sealed, eid, bundle)
    prove_s = time.perf_counter() - t
    key = dsse.load_public(pub.read_bytes())
    times = []
    for _ in range(20):
        t = time.perf_counter()
        rep = proofs.verify_bundle(bundle, key)
        times.append(time.perf_counter() - t)
        assert rep.result == "passed", rep.findings
    return {"executions": n, "files": done["files"], "leaves": done["tree_size"],
            "median": {k: statistics.median(v) for k, v in walls.items()},
            "phases": phases, "prove_s": prove_s, "bundle_bytes": bundle.stat().st_size,
            "verify_proof_ms": statistics.median(times) * 1000}


def markdown(r: dict[str, Any], rounds: int, when: str) -> str:
    m = r["median"]
    pk, vf = m["package"] / m["sha256sum"], m["verify"] / m["sha256sum -c"]
    out = [f"{r['executions']:,} executions, {r['files']:,} sealed files, a tree of "
           f"{r['leaves']:,} leaves; {rounds} rounds, each command a fresh process, median "
           f"({when}).", "",
           "| command | median s | ÷ sha256sum | target |", "|---|---:|---:|---|",
           f"| `sha256sum` (every file of the working corpus) | {m['sha256sum']:.2f} | 1.00 | |",
           f"| `package --sign-key` | {m['package']:.2f} | {pk:.2f} | within {TARGET}x: "
           f"{'met' if pk <= TARGET else '**missed**'} |",
           f"| `sha256sum -c checksums.sha256` (the sealed corpus) | {m['sha256sum -c']:.2f} "
           "| 1.00 | |",
           f"| `verify --trusted-key` (levels chain and sealed) | {m['verify']:.2f} | {vf:.2f} "
           f"| within {TARGET}x: {'met' if vf <= TARGET else '**missed**'} |", "",
           "`package`'s phases, timed in one process:", ""]
    out += [f"- {k}: {v:.2f} s" for k, v in r["phases"].items()]
    out += ["", f"- one execution's proof bundle: {r['bundle_bytes']:,} bytes (target under "
            f"100 KB: {'met' if r['bundle_bytes'] < 100_000 else '**missed**'}), written in "
            f"{r['prove_s']:.2f} s; `verify_bundle` {r['verify_proof_ms']:.1f} ms of "
            f"agentprov's own time (median of 20; target under 100 ms: "
            f"{'met' if r['verify_proof_ms'] < 100 else '**missed**'})."]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--executions", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--work", help="a directory to keep the corpus in (reused if there)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="bench-seal-"))
    work.mkdir(parents=True, exist_ok=True)
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    r = measure(args.executions, args.rounds, work)
    print(json.dumps(r, indent=1) if args.json else markdown(r, args.rounds, when))


if __name__ == "__main__":
    main()
