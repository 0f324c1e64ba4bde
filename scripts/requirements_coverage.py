"""Generate docs/requirements-coverage.md from the tests' `@pytest.mark.req(...)` marks.

    python scripts/requirements_coverage.py          # rewrite the page
    python scripts/requirements_coverage.py --check  # exit 1 if the page is stale

The requirements are ../shared/spec/requirements.md (R-ids); in a checkout without
../shared, ``--check`` compares the marks with the requirements the page lists. A
requirement is "proven" when at least one test carries its R-id; the page lists those
tests, and for every requirement not yet proven, why (the issue that delivers it, or why it
cannot be here).
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT.parent / "shared" / "spec" / "requirements.md"
PAGE = ROOT / "docs" / "requirements-coverage.md"
TEST_GLOBS = ["tests/**/*.py", "plugins/*/tests/**/*.py", "agentprov_core/testing/*.py",
              "backends/*/tests/**/*.py"]

# Why a section's requirements are not proven yet: the issue that delivers them.
WHY = {
    1: "issue 2 (parts); sealing and claims: issue 5",
    2: "issues 4-6: the worker, capture/0.1, the corpus manifest, AER/SEM/PROV",
    3: "issue 3: backend projects and environments",
    4: "issue 3: registered environments and markers",
    5: "issue 3: environment ids",
    6: "issue 3: backends build, --dry-run, --offline-check",
    7: "issue 2",
    8: "issue 3: the worker serves hello and plan for --dry-run",
    9: "not yet scheduled: estimates, priors and prices",
    10: "issues 6-7: endpoints, keys, local models",
    11: "not in an issue yet: model facts, presets and the concurrency sweep, gateway_compat "
        "(issue 7 delivered the servers, identity and checks); A13's replay probes are "
        "deferred by the spec",
    12: "issue 6: keys and API endpoints",
    13: "issue 4/6: the display-name config stop",
    14: "issue 6: keys, containment, consent per transport",
    15: "issue 6: consent, caps and campaign options",
    16: "issue 6: the later steps of the order of checks",
    17: "issue 6: what the caps count",
    18: "issue 6: the preflight probe",
    19: "issue 6: containment (sandbox-exec cannot run here: macOS only)",
    20: "issue 6: the egress proxy",
    21: "issues 4-5: canary checks, retries and run states",
    22: "issues 4-5: how a defended session is recorded",
    23: "AutoDojo's fork is not public: its backend cannot be built here",
    24: "AgentDyn's repository is not reachable from these machines",
    25: "not yet scheduled: the Inspect harness backend",
    26: "examples of the pilot: data, not behaviour",
    27: "issue 5: validate, recompute, verify, stats, package",
    28: "not yet scheduled: the local CI jobs",
    29: "the issues of the refusals they summarise",
}

# Requirements an issue replaced: shown with why, never as proven.
SUPERSEDED = {
    "R-27.10": "superseded by issue 5, which asks for the SHACL tier the spec says does not "
               "exist: `validate --release` runs it and can pass (docs/decisions.md, Validate)",
}

RID = re.compile(r"^- (R-(\d+)\.(\d+)) (.*)$")


ROW = re.compile(r"^\| (R-(\d+)\.(\d+)) \| (.*?) \| .* \|$")


def requirements() -> list[tuple[str, int, str]]:
    out = []
    for line in SPEC.read_text(encoding="utf-8").splitlines():
        m = RID.match(line)
        if m:
            text = re.sub(r"\s*\[[^\]]*\]\s*$", "", m.group(4))
            out.append((m.group(1), int(m.group(2)), text))
    return out


def requirements_of_the_page() -> list[tuple[str, int, str]]:
    """The requirements as the committed page lists them (their texts as shortened there):
    what ``--check`` compares the marks with in a checkout without ``../shared``."""
    out = []
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        m = ROW.match(line)
        if m:
            out.append((m.group(1), int(m.group(2)), m.group(4).replace("\\|", "|")))
    return out


def marks() -> dict[str, list[str]]:
    found: dict[str, set[str]] = {}
    for pattern in TEST_GLOBS:
        for path in sorted(ROOT.glob(pattern)):
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            for node in ast.walk(tree):
                if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    continue
                for dec in node.decorator_list:
                    call = dec if isinstance(dec, ast.Call) else None
                    if call is None or getattr(call.func, "attr", "") != "req":
                        continue
                    for arg in call.args:
                        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                            where = f"{path.relative_to(ROOT)}::{node.name}"
                            found.setdefault(arg.value, set()).add(where)
    return {k: sorted(v) for k, v in found.items()}


def page(reqs: list[tuple[str, int, str]]) -> str:
    proven = marks()
    known = {r for r, _, _ in reqs}
    unknown = sorted(set(proven) - known)
    n = sum(1 for r, _, _ in reqs if r in proven)
    lines = [
        "# Requirements coverage",
        "",
        "Generated by `python scripts/requirements_coverage.py` from the `@pytest.mark.req` marks",
        "of the tests; `tox -e core` fails when this page is stale. The requirements are",
        "`../shared/spec/requirements.md`.",
        "",
        f"**{n} of {len(reqs)} requirements are proven by at least one test.**",
        "",
    ]
    if unknown:
        lines += ["Marks naming no requirement (fix them): " + ", ".join(unknown), ""]
    section = None
    for rid, sec, text in reqs:
        if sec != section:
            section = sec
            lines += ["", f"## Section {sec}", "", "| R-id | requirement | proven by / why not yet |",
                      "|---|---|---|"]
        short = text if len(text) <= 110 else text[:107] + "…"
        short = short.replace("|", "\\|")
        if rid in proven:
            tests = "<br>".join(f"`{t}`" for t in proven[rid][:3])
            more = len(proven[rid]) - 3
            cell = tests + (f" (+{more})" if more > 0 else "")
        else:
            cell = SUPERSEDED.get(rid) or "not yet: " + WHY.get(sec, "not yet scheduled")
        lines.append(f"| {rid} | {short} | {cell} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    if not SPEC.is_file():
        if not args.check or not PAGE.is_file():
            print(f"requirements_coverage: {SPEC} is missing (../shared is beside the "
                  "checkout)", file=sys.stderr)
            return 3
        # a clone elsewhere has no ../shared: check the marks against the page's own list
        print(f"requirements_coverage: {SPEC} is absent; checking the tests' marks against "
              "the requirements the page lists", file=sys.stderr)
        reqs = requirements_of_the_page()
    else:
        reqs = requirements()
    text = page(reqs)
    if args.check:
        if not PAGE.is_file() or PAGE.read_text(encoding="utf-8") != text:
            print("docs/requirements-coverage.md is stale: run python "
                  "scripts/requirements_coverage.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
