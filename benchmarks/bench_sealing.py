"""Sealing at scale: ``agentprov package`` and ``agentprov verify`` of a sealed corpus of
10,000 executions (``benchmarks/gen_corpus.py``), each against ``sha256sum`` over the same
files in the same round; one execution's proof bundle: its size and the time
``verify --proof`` spends in agentprov's own code.

- ``package`` (a fresh process) against ``sha256sum`` over every file of the working
  corpus; its phases timed apart in this process (``check_verifies`` is verify, then
  validate --strict taking T0's records of clean validations where they hold; ``seal`` is
  the copy, the hashing of what verify did not read, tree, statement and signature), and
  how many executions were passed on their record.
- ``verify --corpus SEALED --trusted-key`` (levels chain and sealed) against
  ``sha256sum -c checksums.sha256`` in the sealed corpus.
- ``prove`` then ``verify_bundle`` in this process (agentprov's own time, without the
  interpreter's start), median of 20.

Each command's wall time and CPU time (user + system of every process it starts) are
recorded, and the load average before and after each round: on a shared machine the CPU
ratio is the steadier figure. ``--against OTHER/bin/agentprov`` times another checkout's
``package`` and ``verify`` in the same rounds, interleaved, on the same corpus.

The generator writes no end of campaign into the manifest; the benchmark records one (a
``stops`` entry, as a run's close does), so the corpus is finished.

    python benchmarks/bench_sealing.py [--executions 10000] [--rounds 2] [--work DIR]
        [--against OTHER/agentprov] [--verify-only]

``--verify-only`` times ``verify`` alone (and ``sha256sum -c``), on the sealed corpus a
run before left in ``--work`` (sealed once, untimed, when there is none).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _run(argv: list[str], env: dict[str, str], cwd: Path | None = None
         ) -> tuple[float, float]:
    """The wall time and the CPU time (user + system, every process it started) of one
    command."""
    t, c = time.perf_counter(), _children_cpu()
    p = subprocess.run(forked(argv), capture_output=True, text=True, env=env, cwd=cwd)
    wall, cpu = time.perf_counter() - t, _children_cpu() - c
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {p.returncode}: {p.stdout[-1000:]}"
                           f"{p.stderr[-1000:]}")
    return wall, cpu


def _finished(root: Path) -> None:
    from agentprov_core.corpus.working import WorkingCorpus, now

    wc = WorkingCorpus(root)
    m = wc.manifest()
    if not m.get("stops"):
        m["stops"] = [{"at": now(), "stop": "complete", "exit": 0}]
        wc.write_manifest(m)


def measure(n: int, rounds: int, work: Path, against: str | None = None,
            verify_only: bool = False) -> dict[str, Any]:
    import gen_corpus

    from agentprov_core.audit import proofs, sealing
    from agentprov_core.audit import sealed as sealed_mod
    from agentprov_core.audit.validation import Run
    from agentprov_core.audit.verification import verify_corpus
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
    names = ("sha256sum", "package", "sha256sum -c", "verify") + (
        ("package (against)", "verify (against)") if against else ())
    walls: dict[str, list[float]] = {k: [] for k in names}
    cpus: dict[str, list[float]] = {k: [] for k in names}
    load = [os.getloadavg()]
    sealed = work / "sealed"

    def timed(name: str, argv: list[str], cwd: Path | None = None) -> None:
        wall, cpu = _run(argv, env, cwd)
        walls[name].append(wall)
        cpus[name].append(cpu)

    def package(cmd: str, out: Path, r: int) -> list[str]:
        return [cmd, "package", "--corpus", str(root), "--corpus-version", f"0.{r}.0",
                "--spec", str(work / "spec.toml"), "--licence-file",
                f"LICENSE={work / 'LICENSE'}", "--sign-key", "bench", "--out", str(out)]

    def verify() -> None:
        timed("sha256sum -c", ["sha256sum", "-c", "--quiet", "checksums.sha256"], sealed)
        timed("verify", [ap, "verify", "--corpus", str(sealed), "--trusted-key", str(pub)])
        if against:
            timed("verify (against)", [against, "verify", "--corpus", str(sealed),
                                       "--trusted-key", str(pub)])
        load.append(os.getloadavg())

    if verify_only:
        if not (sealed / "seal").is_dir():
            _run(package(ap, sealed, 0), env)
        for _ in range(rounds):
            verify()
        files = sum(1 for _ in (sealed / "checksums.sha256").open("rb"))
        leaves = json.loads((sealed / "seal" / "tree.json").read_bytes())["leaves"]
        return {"executions": n, "files": files + 1, "leaves": len(leaves),
                "median": {k: statistics.median(v) for k, v in walls.items() if v},
                "cpu": {k: statistics.median(v) for k, v in cpus.items() if v}, "load": load}
    for r in range(rounds):
        shutil.rmtree(sealed, ignore_errors=True)
        timed("sha256sum", sha)
        timed("package", package(ap, sealed, r))
        if against:
            shutil.rmtree(work / "sealed-against", ignore_errors=True)
            timed("package (against)", package(against, work / "sealed-against", r))
        verify()
    # the phases of package, in this process
    phases: dict[str, tuple[float, float]] = {}
    c = open_corpus(root)

    def cpu_now() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime + _children_cpu()

    verified = sealing.Verified.start()
    read = verified.digests
    strict = Run(c.root, strict=True, release=False, skip_prov=False, fmt="json",
                 echo=lambda *a, **k: None, known=read, recorded=True)
    for name, fn in (("check_finished", lambda: sealing.check_finished(c)),
                     ("check_contents", lambda: sealing.check_contents(c)),
                     ("check_verifies: verify (level chain, the digests it read kept)",
                      lambda: verify_corpus(c.root, read)),
                     ("check_verifies: validate --strict (T0's records taken where they "
                      "hold, the rest in two processes)",
                      lambda: strict.corpus(workers=sealed_mod.WORKERS))):
        t, u = time.perf_counter(), cpu_now()
        fn()
        phases[name] = (time.perf_counter() - t, cpu_now() - u)
    recorded = strict.tally.recorded
    out2 = work / "sealed-phase"
    shutil.rmtree(out2, ignore_errors=True)
    t, u = time.perf_counter(), cpu_now()
    done = sealing.seal(sealing.Release(c, "9.9.9", work / "spec.toml",
                                        [("LICENSE", work / "LICENSE")], out2, None,
                                        verified=verified))
    phases["seal (copy, hash what verify did not read, tree, statement)"] = (time.perf_counter() - t, cpu_now() - u)
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
            "cpu": {k: statistics.median(v) for k, v in cpus.items()}, "load": load,
            "phases": phases, "recorded": recorded, "prove_s": prove_s, "bundle_bytes": bundle.stat().st_size,
            "verify_proof_ms": statistics.median(times) * 1000}


def markdown(r: dict[str, Any], rounds: int, when: str) -> str:
    m, u = r["median"], r["cpu"]

    def row(label: str, name: str, base: str) -> str:
        ratio = m[name] / m[base]
        target = "" if name == base else (
            f"within {TARGET}x: {'met' if ratio <= TARGET else '**missed**'}")
        return (f"| {label} | {m[name]:.2f} | {ratio:.2f} | {u[name]:.2f} | "
                f"{u[name] / u[base]:.2f} | {target} |")

    loads = ", ".join(" ".join(f"{x:.1f}" for x in la) for la in r["load"])
    out = [f"{r['executions']:,} executions, {r['files']:,} sealed files, a tree of "
           f"{r['leaves']:,} leaves; {rounds} rounds, each command a fresh process, median "
           f"({when}); load average (1, 5, 15 min) before and after each round: {loads}.", "",
           "| command | median wall s | ÷ sha256sum | CPU s | CPU ÷ sha256sum's | target |",
           "|---|---:|---:|---:|---:|---|",
           *([row("`sha256sum` (every file of the working corpus)", "sha256sum", "sha256sum"),
              row("`package --sign-key`", "package", "sha256sum")] if "package" in m else []),
           row("`sha256sum -c checksums.sha256` (the sealed corpus)", "sha256sum -c",
               "sha256sum -c"),
           row("`verify --trusted-key` (levels chain and sealed)", "verify", "sha256sum -c"),
           *([row("`package --sign-key` of `--against`", "package (against)", "sha256sum")]
             if "package (against)" in m else []),
           *([row("`verify --trusted-key` of `--against`", "verify (against)", "sha256sum -c")]
             if "verify (against)" in m else [])]
    if "phases" not in r:
        return "\n".join(out) + "\n"
    out += ["", "`package`'s phases, timed in one process (wall, CPU):", ""]
    out += [f"- {k}: {w:.2f} s, CPU {c:.2f} s" for k, (w, c) in r["phases"].items()]
    out += ["", f"- executions passed on T0's record of their clean validation: "
            f"{r['recorded']:,} of {r['executions']:,} (the rest validated in full)"]
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
    ap.add_argument("--against", metavar="AGENTPROV",
                    help="another agentprov (another checkout's console script): its package "
                         "and verify are timed in the same rounds, interleaved")
    ap.add_argument("--verify-only", action="store_true",
                    help="time verify alone, on the sealed corpus left in --work")
    args = ap.parse_args(argv)
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="bench-seal-"))
    work.mkdir(parents=True, exist_ok=True)
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    r = measure(args.executions, args.rounds, work, args.against, args.verify_only)
    print(json.dumps(r, indent=1) if args.json else markdown(r, args.rounds, when))


if __name__ == "__main__":
    main()
