"""A14 on a real server: the time T0 spends re-observing a local model before each cell,
against the wall time of the cells that run recorded on the same server.

    python benchmarks/bench_a14.py --base-url http://127.0.0.1:8080/v1 --model-id ID \\
        --corpus CORPUS [--kind llamacpp] [--rounds 20]

``scripts/realmodel/run.py`` runs it as its last step, with the server of the run still up
and the corpus just written (docs/first-real-run.md). It observes the model once (the
identity record of the run's step 4, weights through the digest cache of
``$AGENTPROV_HOME``), then times ``--rounds`` re-observations exactly as the campaign
makes them before each cell (``local.identity.reobserve``: list, fingerprint,
props, weight files through the cache). The cells' wall times are the ledger's
``started_at`` to ``ended_at`` of the corpus's attempts. Reported: the median and the
largest re-observation, the median cell, and the per-cell overhead (median re-observation
over median cell).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from agentprov_core.live.local import identity as li  # noqa: E402


@dataclass(frozen=True)
class Endpoint:
    name: str
    kind: str
    base_url: str


def cell_seconds(corpus: Path) -> list[float]:
    """Wall time of every attempt of the corpus's ledger (working or sealed)."""
    for root in (corpus, corpus.with_name(corpus.name + ".partial")):
        ledger = root / "ledger.jsonl"
        if ledger.is_file():
            break
    else:
        raise SystemExit(f"bench_a14: no ledger.jsonl in {corpus} (or {corpus}.partial)")
    out = []
    for line in ledger.read_text().splitlines():
        r = json.loads(line)
        if r.get("started_at") and r.get("ended_at"):
            t0 = datetime.fromisoformat(r["started_at"].replace("Z", "+00:00"))
            t1 = datetime.fromisoformat(r["ended_at"].replace("Z", "+00:00"))
            out.append((t1 - t0).total_seconds())
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--model-id", required=True)
    ap.add_argument("--corpus", required=True, type=Path)
    ap.add_argument("--kind", default="llamacpp")
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args(argv)

    ep = Endpoint(args.kind, args.kind, args.base_url)
    opts = li.ObserveOptions()
    ident = li.observe(ep, args.model_id, opts)
    times, mismatches = [], 0
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        same, _changed, _seen = li.reobserve(ident, ep, opts)
        times.append(time.perf_counter() - t0)
        mismatches += not same
    cells = cell_seconds(args.corpus)
    if not cells:
        raise SystemExit("bench_a14: the ledger has no attempt with both times")
    med, worst, cell = statistics.median(times), max(times), statistics.median(cells)
    files = len([f for f in ident.files or [] if f.role == "weights"])
    print(f"A14 re-observation of {args.model_id} ({args.kind} at {args.base_url}; "
          f"{files} weight file(s), digest cache hit): median {med * 1e3:.1f} ms, largest "
          f"{worst * 1e3:.1f} ms over {args.rounds} rounds; {mismatches} mismatch(es)")
    print(f"cells of {args.corpus.name}: {len(cells)}, median wall time {cell:.1f} s "
          f"({', '.join(f'{c:.1f}' for c in cells)} s)")
    print(f"A14 overhead per cell: {med / cell * 100:.3f} % of the median cell "
          f"({med * 1e3:.1f} ms / {cell:.1f} s)")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
