"""Generate docs/requirements-coverage.md from the tests' `@pytest.mark.req(...)` marks.

    python scripts/requirements_coverage.py          # rewrite the page
    python scripts/requirements_coverage.py --check  # exit 1 if the page is stale or a
                                                     # table is wrong (below)

The requirements are ../shared/spec/requirements.md (R-ids); in a checkout without
../shared, ``--check`` compares the marks with the requirements the page lists. A requirement
is "proven"
when at least one test carries its R-id; the page lists those tests. Every other
requirement says why, from the tables below: what this build does not have (NOT_BUILT,
or the section's one missing feature), why it is not a behaviour to test (an example, a
note about the text, a roadmap), or what was decided instead (DECIDED). A proven
requirement of which part is not built says which part (PARTLY). `--check` also fails when
a requirement has neither a test nor a reason, or when a reason names a proven requirement.
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

# What is not built, as the rows say it ("not built: <what>").
AUTODOJO = ("AutoDojo's fork itself: it (aa458794) is not public, so `backends/autodojo/` "
            "has been built and tested from a fixture fork only (agentdojo 0.1.35's code "
            "with the fork's attacks as stand-ins, under the test pin override), never "
            "from the fork")
INSPECT = ("the restricted, private AgentHarm corpus (kept under $AGENTPROV_HOME, never "
           "deposited)")
DATASET = ("the pinned AgentHarm dataset (revision e23b3fe6) is not reachable from these "
           "machines: the environment is built from a local copy or the project's fixture "
           "(`--dataset DIR`), and says which")
IN_A_RUN = ("against the real fork: proven through `run autodojo --dry-run` on an "
            "environment built from a fixture fork, and on T0's own step-5 functions; "
            + AUTODOJO)

# Behaviour this build does not have, one reason per requirement.
NOT_BUILT = {
    "R-3.3": AUTODOJO,
    "R-3.4": AUTODOJO + "; its catalogue (declared, not verified) lists AgentDyn's three "
             "suites",
    "R-4.6": AUTODOJO + ", nor its NLTK `punkt_tab`",
    "R-4.8": DATASET,
    "R-22.10": "`--defence-endpoint` is refused before anything starts (exit 5): no defence "
               "endpoint's key or egress pair is wired, so no second key enters the worker",
    "R-19.6": "a desktop app: this build has none",
    # 25. Inspect: what T0 would check or count is not built either
    "R-25.13": "the import-only parts (WhistleBench, ATIA): `agentprov run whistlebench` is an "
               "unknown source (exit 2)",
}

# A section that is one feature this build does not have: the reason of its requirements
# that neither a test nor NOT_BUILT covers.
SECTION_NOT_BUILT = {
    23: AUTODOJO,
    25: INSPECT,
}

# Requirements that are not a behaviour to test: examples, notes about the text, roadmaps.
NOT_BEHAVIOUR = {
    "R-1.9": "a note about the specification's text (its closing table repeats the status "
             "table)",
    "R-4.4": "an example: one development machine's environments (this build's ids follow "
             "R-5.1 to R-5.3)",
    "R-4.5": "an example environment: one built with the Mandate, MELON and PI-detector "
             "assets, whose pinned files this build's registry does not hold",
    "R-22.31": "an example: the pilot's real-model runs, all undefended",
    "R-5.5": "history of the example environment's id",
    "R-9.9": "example figures of `agentprov estimate` for a placeholder model (this build's "
             "figures come from its own priors, docs/estimates.md)",
    "R-17.12": "what the recorded `spend_upper_bound_usd` means (a ceiling; the pilot's "
               "figures are an example); how it is computed is R-17.2 to R-17.8",
    "R-19.11": "a statement of scope: the containment wraps the worker's process only "
               "(docs/containment.md); a local model server is the user's own process",
    "R-23.13": "what a live AutoDojo run is (a new execution, never a reproduction of "
               "ROPE-hosted runs); " + AUTODOJO,
}
SECTION_NOT_BEHAVIOUR = {
    26: "the pilot's runs: historical data of real runs, an example",
}

# Requirements decided otherwise: shown with why, never as proven.
DECIDED = {
    "R-28.6": "decided otherwise: the local CI has an AgentDyn job (`backend-agentdyn`) and "
              "an Inspect one (`inspect-agentharm`) besides the spec's (tools/ci_local.py)",
    "R-12.5": "decided otherwise (docs/decisions.md, Keys): the .env reader is part of the "
              "core, so `--env-file` needs no extra",
    "R-9.16": "decided otherwise: the spec's priors count corpora this project does not have; "
              "the shipped priors count AgentDyn's 47,723 published runs, tokens estimated "
              "(docs/estimates.md)",
    "R-9.18": "about the spec's priors (CaMeL input tokens of the regeneration round's "
              "corpora), which are not shipped (R-9.16)",
    "R-9.19": "about the spec's priors (the round's AgentDojo rows), which are not shipped "
              "(R-9.16); the shipped priors have no AgentDojo rows of their own",
    "R-1.8": "superseded: a finished live corpus seals as agentprov-corpus/0.3 "
             "(docs/decisions.md, Sealed corpora); no corpus supports a \"Live Capture\" "
             "claim yet (R-27.16)",
    "R-27.13": "superseded: `package` seals a finished live corpus (docs/decisions.md, "
               "Sealed corpora); its other refusals keep the spec's order",
    "R-29.15": "superseded with R-27.13: `package.unsupported.live` is no longer raised",
    "R-27.10": "superseded: `validate --release` has a SHACL tier, and a good corpus passes "
               "it (docs/decisions.md, Validate); `--strict` is the mode the guide uses",
}

# Proven requirements of which a part is not built: that part.
NOT_AUTODOJO = ("AutoDojo's backend (this is proven for AgentDojo and AgentDyn): AutoDojo's "
                "fork is not public, so no environment of it has been built here; its "
                "worker runs AgentDojo's cells (`agentprov_dojo`) as AgentDyn's does")
PARTLY = {
    "R-2.7": NOT_AUTODOJO,
    "R-2.8": NOT_AUTODOJO,
    "R-6.7": "the NLTK (AutoDojo) and dataset (Inspect) digests, of what cannot be "
             "provisioned here, and the defence-asset digests (`backends build --defence-assets` "
             "is not built)",
    "R-11.24": "a desktop app (Settings › Keys): this build has none",
    "R-16.5": "the attack-cache (AutoDojo) identity check " + IN_A_RUN,
    "R-23.5": "the worker's replay of a variant (the fork's attack; the fallback count and "
              "its report are T0's, and proven); " + AUTODOJO,
    "R-23.6": "a fetch with `run --allow-network`: the fork has no public URL, so only "
              "`backends build autodojo --source-repo URL` fills the fetch cache",
    "R-23.7": IN_A_RUN,
    "R-23.8": IN_A_RUN,
    "R-27.17": "placing a corpus under `$AGENTPROV_HOME`: a corpus goes where `--corpus` "
               "names, outside the repository",
}

RID = re.compile(r"^- (R-(\d+)\.(\d+)) (.*)$")


ROW = re.compile(r"^\| (R-(\d+)\.(\d+)) \| (.*?) \| .* \|$")

FACT = re.compile(r"^- (F-\d+) (.*)$")

FACT_ROW = re.compile(r"^\| (F-\d+) \| (.*?) \| .* \|$")


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


def facts() -> list[tuple[str, str]]:
    """The specification's facts and figures (F-ids): counts, defaults and limits that tests
    may hold beside the requirements they prove."""
    return [(m.group(1), m.group(2))
            for m in map(FACT.match, SPEC.read_text(encoding="utf-8").splitlines()) if m]


def facts_of_the_page() -> list[tuple[str, str]]:
    """The facts the committed page lists as held by a test (their texts as shortened there)."""
    return [(m.group(1), m.group(2).replace("\\|", "|"))
            for m in map(FACT_ROW.match, PAGE.read_text(encoding="utf-8").splitlines()) if m]


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


def why_not(rid: str, sec: int) -> tuple[str, str] | None:
    """(kind, reason) of a requirement no test proves, or None when nothing says why."""
    if rid in DECIDED:
        return "decided", DECIDED[rid]
    if rid in NOT_BEHAVIOUR:
        return "not a behaviour", NOT_BEHAVIOUR[rid]
    if rid in NOT_BUILT:
        return "not built", NOT_BUILT[rid]
    if sec in SECTION_NOT_BEHAVIOUR:
        return "not a behaviour", SECTION_NOT_BEHAVIOUR[sec]
    if sec in SECTION_NOT_BUILT:
        return "not built", SECTION_NOT_BUILT[sec]
    return None


def problems(reqs: list[tuple[str, int, str]], proven: dict[str, list[str]]) -> list[str]:
    """What makes the tables wrong: a requirement with neither a test nor a reason, a reason
    for a proven requirement (stale: remove it), a part-built note without a test, or an
    entry naming no requirement."""
    known = {r for r, _, _ in reqs}
    out = [f"{rid}: no test proves it and no table says why" for rid, sec, _ in reqs
           if rid not in proven and why_not(rid, sec) is None]
    for name, table in (("NOT_BUILT", NOT_BUILT), ("NOT_BEHAVIOUR", NOT_BEHAVIOUR),
                        ("DECIDED", DECIDED)):
        out += [f"{rid}: {name} says why it is not proven, but "
                f"{proven[rid][0]} proves it: remove the entry" for rid in table if rid in proven]
    out += [f"{rid}: PARTLY needs a test that proves the rest" for rid in PARTLY
            if rid not in proven]
    every = {**NOT_BUILT, **NOT_BEHAVIOUR, **DECIDED, **PARTLY}
    out += [f"{rid}: a table names no such requirement" for rid in sorted(set(every) - known)]
    return out


def page(reqs: list[tuple[str, int, str]], figures: list[tuple[str, str]] | None = None) -> str:
    proven = marks()
    figures = facts() if figures is None else figures
    known = {r for r, _, _ in reqs} | {f for f, _ in figures}
    unknown = sorted(set(proven) - known)
    n = sum(1 for r, _, _ in reqs if r in proven)
    partly = sum(1 for r, _, _ in reqs if r in proven and r in PARTLY)
    kinds: dict[str, int] = {}
    for rid, sec, _ in reqs:
        if rid not in proven:
            kind = (why_not(rid, sec) or ("unexplained", ""))[0]
            kinds[kind] = kinds.get(kind, 0) + 1
    lines = [
        "# Requirements coverage",
        "",
        "Generated by `python scripts/requirements_coverage.py` from the `@pytest.mark.req` marks",
        "of the tests and the script's tables of reasons; `tox -e core` fails when this page is",
        "stale. The requirements are `../shared/spec/requirements.md`.",
        "",
        f"**{n} of {len(reqs)} requirements are proven by at least one test** ({partly} of them "
        "only in part: their row names the part that is not built). Of the others, "
        f"{kinds.get('not built', 0)} are not built, {kinds.get('not a behaviour', 0)} are not "
        f"a behaviour (examples, notes about the text, a roadmap) and "
        f"{kinds.get('decided', 0)} were decided otherwise; each row says why.",
        "",
    ]
    if unknown:
        lines += ["Marks naming no requirement (fix them): " + ", ".join(unknown), ""]
    section = None
    for rid, sec, text in reqs:
        if sec != section:
            section = sec
            lines += ["", f"## Section {sec}", "", "| R-id | requirement | proven by / why not |",
                      "|---|---|---|"]
        short = text if len(text) <= 110 else text[:107] + "…"
        short = short.replace("|", "\\|")
        if rid in proven:
            tests = "<br>".join(f"`{t}`" for t in proven[rid][:3])
            more = len(proven[rid]) - 3
            cell = tests + (f" (+{more})" if more > 0 else "")
            if rid in PARTLY:
                cell += f"<br>in part; not built: {PARTLY[rid]}"
        else:
            kind, reason = why_not(rid, sec) or ("unexplained", "no test, and no reason given")
            cell = reason if kind == "decided" else f"{kind}: {reason}"
        cell = cell.replace("|", "\\|")
        lines.append(f"| {rid} | {short} | {cell} |")
    held = [(fid, text) for fid, text in figures if fid in proven]
    if held:
        lines += ["", "## Facts the tests hold", "",
                  "The specification's facts and figures (F-ids) that a test checks besides the "
                  "requirements it proves.", "", "| F-id | fact | held by |", "|---|---|---|"]
        for fid, text in held:
            short = (text if len(text) <= 110 else text[:107] + "…").replace("|", "\\|")
            cell = "<br>".join(f"`{t}`" for t in proven[fid][:3]).replace("|", "\\|")
            lines.append(f"| {fid} | {short} | {cell} |")
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
        reqs, figures = requirements_of_the_page(), facts_of_the_page()
    else:
        reqs, figures = requirements(), facts()
    text = page(reqs, figures)
    wrong = problems(reqs, marks())
    for line in wrong:
        print(f"requirements_coverage: {line}", file=sys.stderr)
    if args.check:
        if not PAGE.is_file() or PAGE.read_text(encoding="utf-8") != text:
            print("docs/requirements-coverage.md is stale: run python "
                  "scripts/requirements_coverage.py", file=sys.stderr)
            return 1
        return 1 if wrong else 0
    PAGE.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
