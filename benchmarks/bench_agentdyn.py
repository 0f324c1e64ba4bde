"""The AgentDyn backend environment, built from its pinned commit: the build from the fetch
cache and ``--offline-check`` against raw hashing of the same files.

Everything happens in a temporary ``AGENTPROV_HOME``. The first build is ``agentprov backends
build agentdyn --source-repo REPO --allow-network``: it fetches the pinned commit
(``5353cf76``) from REPO into the fetch cache, extracts it with ``git archive`` and lets uv
install the locked environment (downloading only what uv's cache lacks). The environment is
then deleted and built again without ``--source-repo``: the commit comes from the fetch cache
and uv's cache is warm for certain, which is the "build from the fetch cache (warm uv cache)"
figure. REPO is ``../shared/sources/AgentDyn.git`` beside the checkout, or ``--source-repo``;
without it, or when the build cannot run here, the benchmark is skipped and says why.

Then, interleaved after an untimed warm-up round (forward order on even rounds, reverse on
odd), exactly as the AgentDojo benchmark does (``bench_backend.measure_offline_check``):
(a) ``agentprov backends build agentdyn --offline-check``; (b) ``sha256sum`` and (b′)
``openssl dgst -sha256`` over exactly the files the check re-hashes (every file with a hash
in every RECORD of the environment); (c) the network-blocked hello; (d) T0's recomputation
of the identity. The ratio a/b is the result (the target: within 2x).

Run it alone (``python benchmarks/bench_agentdyn.py``) or through ``run_all.py --only
agentdyn``. The ratios are the result; the absolute times belong to the machine.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from bench_backend import TARGET_RATIO, Skip, _ms, build, measure_offline_check

BACKEND = "agentdyn"
ROOT = Path(__file__).resolve().parent.parent
SHARED_REPO = ROOT.parent / "shared" / "sources" / "AgentDyn.git"


def run(rounds: int = 5, source_repo: str | None = None) -> dict[str, Any]:
    repo = source_repo or (str(SHARED_REPO) if (SHARED_REPO / "HEAD").is_file() else None)
    if repo is None:
        return {"skipped": f"no copy of AgentDyn's pinned commit: {SHARED_REPO} is absent "
                           "(give --source-repo)"}
    with tempfile.TemporaryDirectory(prefix="agentprov-bench-") as tmp:
        home, scratch = Path(tmp) / "home", Path(tmp) / "cwd"
        home.mkdir()
        scratch.mkdir()
        cwd = str(scratch)
        try:
            built = build(home, cwd, BACKEND, ("--source-repo", repo))
        except Skip as exc:
            return {"skipped": str(exc)}
        env_dir = Path(built["env_dir"])
        upstream = json.loads((env_dir / "agentprov" / "upstream.json").read_text("utf-8"))
        check = measure_offline_check(rounds, env_dir, built["env_id"], home, cwd, BACKEND)
    return {"build": built, "upstream": upstream, "offline_check": check,
            "source_repo": "../shared/sources/AgentDyn.git" if repo == str(SHARED_REPO)
            else repo, "target_ratio": TARGET_RATIO}


def markdown(res: dict[str, Any]) -> str:
    out = ["### The AgentDyn backend environment", ""]
    if "skipped" in res:
        return "\n".join(out + [f"Skipped: {res['skipped']}", ""])
    b, up, oc = res["build"], res["upstream"], res["offline_check"]
    r = oc["rows"]
    out += [f"`{b['env_id']}` ({up['repository']} at {up['commit'][:8]}, tree "
            f"{up['tree'][:8]}): {b['distributions']} distributions, Python {b['python']}, "
            f"{b['uv']}, in a temporary `AGENTPROV_HOME`.", "",
            "| step | wall time |", "|---|---:|",
            f"| first build: `--source-repo {res['source_repo']} --allow-network` (the commit "
            f"fetched into the fetch cache; uv downloads what its cache lacks) | "
            f"{b['first_s']:.1f} s |",
            f"| from the fetch cache, uv's cache warm: the environment deleted and built again "
            f"(no `--source-repo`) | **{b['warm_s']:.1f} s** |", "",
            f"`--offline-check` against raw hashing, {oc['rounds']} interleaved rounds after a "
            f"warm-up: the check re-hashes {oc['files']:,} files, {oc['bytes'] / 2**20:.1f} MiB "
            "(every file with a hash in every RECORD of the environment; the hashers read "
            "exactly that list, checked once against the RECORDs' digests).", "",
            "| | what | median ms | p90 ms | ÷ (b) |", "|---|---|---:|---:|---:|"]
    bm = r["b"]["median"] if "b" in r else None

    def row(label: str, what: str, key: str) -> str:
        div = f"{r[key]['median'] / bm:.2f}" if bm else "–"
        return f"| {label} | {what} | {_ms(r[key]['median'])} | {_ms(r[key]['p90'])} | {div} |"

    out.append(row("(a)", "`agentprov backends build agentdyn --offline-check`", "a"))
    if "b" in r:
        out.append(row("(b)", f"`{oc['hashers']['b']}` (coreutils)", "b"))
    if "b2" in r:
        out.append(row("(b′)", f"`{oc['hashers']['b2']}`", "b2"))
    out += [row("(c)", "the network-blocked hello: worker start, `hello`, shutdown", "c"),
            row("(d)", "T0's recomputation: `envidentity.compute(env)`", "d"), ""]
    if bm:
        ratio = r["a"]["median"] / bm
        verdict = "met" if ratio <= res["target_ratio"] else "**missed**"
        out.append(f"Target: within {res['target_ratio']:g}x of `sha256sum`: (a) ÷ (b) = "
                   f"{ratio:.2f}, {verdict}."
                   + (f" Against `openssl` (which uses the CPU's SHA instructions), (a) ÷ (b′) "
                      f"= {r['a']['median'] / r['b2']['median']:.2f}." if "b2" in r else ""))
    else:
        out.append("(b) not measured: `sha256sum` was not found.")
    return "\n".join(out + [""])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5, help="rounds of the offline check [5]")
    ap.add_argument("--source-repo", metavar="URL",
                    help="where AgentDyn's pinned commit comes from "
                         "[../shared/sources/AgentDyn.git]")
    ap.add_argument("--json", action="store_true", help="print the raw results as JSON")
    args = ap.parse_args(argv)
    res = run(args.rounds, args.source_repo)
    print(json.dumps(res, indent=1) if args.json else markdown(res))


if __name__ == "__main__":
    main()
