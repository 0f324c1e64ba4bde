"""Every live source against its benchmark's own runner (``tox -e agreement``).

Runs :mod:`agreement_dojo` (AgentDojo, AgentDyn, the AutoDojo fixture: AgentDojo's runner)
and :mod:`agreement_inspect` (AgentHarm: Inspect's own ``eval``) for the sources asked, each
against its own deterministic loopback server, and exits 1 when either found a divergence of
a verdict, a score or a request body (docs/performance.md, "Agreement with each benchmark's
own runner").

    python benchmarks/agreement.py [--sources agentdojo,agentdyn,autodojo,agentharm]
                                   [--home DIR] [--json] [--rounds N]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import agreement_dojo  # noqa: E402
import agreement_inspect  # noqa: E402

INSPECT = ("agentharm",)
ALL = (*agreement_dojo.SOURCES, *INSPECT)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sources", default=",".join(ALL), help=f"of {', '.join(ALL)}")
    ap.add_argument("--home", type=Path, help="an AGENTPROV_HOME whose built environments are "
                    "reused (built there when absent); default: a new one per check")
    ap.add_argument("--json", action="store_true", help="print the full results as JSON")
    ap.add_argument("--rounds", type=int, default=1,
                    help="AgentHarm: compare this many times (wall times: the medians)")
    args = ap.parse_args(argv)
    sources = [s for s in args.sources.split(",") if s]
    unknown = [s for s in sources if s not in ALL]
    if unknown:
        ap.error(f"unknown source(s) {', '.join(unknown)}: choose from {', '.join(ALL)}")
    common = [*(["--home", str(args.home)] if args.home else []),
              *(["--json"] if args.json else [])]
    status = 0
    dojo = [s for s in sources if s in agreement_dojo.SOURCES]
    if dojo:
        status |= agreement_dojo.main([*common, "--sources", ",".join(dojo)])
    if any(s in INSPECT for s in sources):
        status |= agreement_inspect.main([*common, "--rounds", str(args.rounds)])
    return 1 if status else 0


if __name__ == "__main__":
    sys.exit(main())
