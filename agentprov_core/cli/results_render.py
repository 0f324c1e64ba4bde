"""The results table and the comparison as text, TSV and Markdown (``--format json`` prints
the structs of results.py and compare.py as they are).

Text and Markdown print a rate as ``k/n pct% [low, high]`` (the 95 % Wilson interval, in
percent, one decimal) and a difference as ``+d [low, high]`` in percentage points; TSV
prints every number in its own column, unrounded, for other programs.
"""

from __future__ import annotations

from typing import Any

from agentprov_core.audit.compare import Comparison, Difference
from agentprov_core.audit.results import (
    DASH,
    Rate,
    ResultsTable,
    Row,
    payload_text,
    percent,
    rate_text,
)

FORMATS = ("text", "json", "tsv", "md")
def diff_text(d: Difference | None) -> str:
    if d is None or d.difference is None:
        return DASH
    return (f"{100 * d.difference:+.1f} [{100 * (d.low or 0):+.1f}, "
            f"{100 * (d.high or 0):+.1f}]")


def _left(left: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in left.items()) or DASH


def _flags(row: Row) -> str:
    return "; ".join(f.split(":", 1)[0] + (" " + f.split(": ", 1)[1].split(" ", 1)[0]
                                           if ": " in f else "") for f in row.flags) or DASH


def grid(header: list[str], rows: list[list[str]], fmt: str) -> str:
    from agentprov_core.cli.common import table

    if fmt == "tsv":
        return "\n".join("\t".join(r) for r in [header, *rows])
    if fmt == "md":
        esc = [[c.replace("|", "\\|") for c in r] for r in [header, *rows]]
        return "\n".join(["| " + " | ".join(esc[0]) + " |",
                          "|" + "---|" * len(header)]
                         + ["| " + " | ".join(r) + " |" for r in esc[1:]])
    return table(rows, header) if rows else "  ".join(header)


def _num(x: Any) -> str:
    return "" if x is None else repr(x) if isinstance(x, float) else str(x)


def _rate_cols(name: str, r: Rate | None) -> list[str]:
    if r is None:
        return [""] * 5
    return [str(r.successes), str(r.n), _num(r.rate), _num(r.low), _num(r.high)]


def table_text(t: ResultsTable, fmt: str) -> str:
    dojo = any(r.kind == "agentdojo" for r in t.rows)
    insp = any(r.kind == "inspect" for r in t.rows)
    if fmt == "tsv":
        header = [*t.by, "kind", "units"]
        if dojo or not insp:
            header += [f"utility_{c}" for c in ("k", "n", "rate", "low", "high")]
            header += [f"attack_success_{c}" for c in ("k", "n", "rate", "low", "high")]
            header += ["payload_reached", "payload_not_reached", "payload_not_determined"]
            header += [f"attack_success_reached_{c}" for c in ("k", "n", "rate", "low", "high")]
            header += ["vacuous_utility"]
        if insp:
            header += ["samples", "score_n", "score_mean"]
            header += [f"refusal_{c}" for c in ("k", "n", "rate", "low", "high")]
        header += ["left_out", "flags"]
        rows = []
        for r in t.rows:
            cells = [r.group[k] for k in t.by] + [r.kind, str(r.units)]
            if dojo or not insp:
                cells += _rate_cols("utility", r.utility) + _rate_cols("asr", r.attack_success)
                cells += [str(r.payload.get(k, 0)) if r.payload else ""
                          for k in ("reached", "not_reached", "not_determined")]
                cells += _rate_cols("asr_reached", r.attack_success_reached)
                cells += [",".join(f"{k}={v}" for k, v in r.vacuous_utility.items())]
            if insp:
                cells += [_num(r.samples), _num(r.score.n if r.score else None),
                          _num(r.score.mean if r.score else None)]
                cells += _rate_cols("refusal", r.refusal)
            cells += [",".join(f"{k}={v}" for k, v in r.left_out.items()),
                      " | ".join(r.flags)]
            rows.append(cells)
        return grid(header, rows, fmt)
    header = [*t.by, "units"]
    if dojo or not insp:
        header += ["utility", "attack_success", "payload_reached", "attack_success_reached"]
    if insp:
        header += ["samples", "score", "refusal"]
    header += ["left_out", "flags"]
    rows = []
    for r in t.rows:
        cells = [r.group[k] for k in t.by] + [str(r.units)]
        if dojo or not insp:
            cells += [rate_text(r.utility), rate_text(r.attack_success), payload_text(r.payload),
                      rate_text(r.attack_success_reached)]
        if insp:
            cells += [_num(r.samples) or DASH,
                      DASH if r.score is None or r.score.mean is None
                      else f"{r.score.mean:.3f} (n {r.score.n})", rate_text(r.refusal)]
        cells += [_left(r.left_out), _flags(r)]
        rows.append(cells)
    return grid(header, rows, fmt)


def notes(t: ResultsTable) -> list[str]:
    """What a reader of the table must know: what was counted, left out and damaged."""
    out = [f"{t.corpus_id} ({t.state}): {t.counted} of {t.units} unit(s) counted"
           + (f"; left out: {_left(t.left_out)}" if t.left_out else "")
           + f"; {round(100 * t.level)}% Wilson score intervals"]
    out += [f"damaged: {d}" for d in t.damaged]
    if t.in_progress:
        out.append("a run holds the corpus: this is what it had written when stats began")
    seen: list[str] = []
    for r in t.rows:
        for f in r.flags:
            if not f.startswith(("live_native_unchecked", "aer_damaged")) and f not in seen:
                seen.append(f)
    out += [f"flag: {f}" for f in seen]
    return out


def render_table(t: ResultsTable, fmt: str) -> str:
    body = table_text(t, fmt)
    if fmt == "tsv":
        return body
    lines = notes(t)
    if fmt == "md":
        return body + "\n\n" + "\n".join(f"- {n}" for n in lines)
    return body + "\n\n" + "\n".join(lines)


def _diff_cols(d: Difference | None) -> list[str]:
    if d is None:
        return [""] * 7
    return [str(d.n_a), str(d.n_b), _num(d.rate_a), _num(d.rate_b), _num(d.difference),
            _num(d.low), _num(d.high)]


def render_comparison(c: Comparison, fmt: str) -> str:
    blocks = []
    for t in c.tables:
        title = f"# {t.corpus_id}"
        blocks.append(f"{title}\n{render_table(t, fmt)}" if fmt != "tsv"
                      else f"{title}\n{table_text(t, fmt)}")
    for d in c.differences:
        insp = any(r.kind == "inspect" for r in d.rows)
        dojo = any(r.kind == "agentdojo" for r in d.rows) or not insp
        if fmt == "tsv":
            header = [*c.by, "kind", "pairs"]
            names = (["utility", "utility_unpaired", "attack_success",
                      "attack_success_unpaired"] if dojo else []) + \
                (["refusal", "refusal_unpaired"] if insp else [])
            for n in names:
                header += [f"{n}_{x}" for x in ("n_a", "n_b", "rate_a", "rate_b", "diff",
                                                "low", "high")]
            rows = [[r.group[k] for k in c.by] + [r.kind, str(r.pairs)]
                    + [x for n in names for x in _diff_cols(getattr(r, n))] for r in d.rows]
        else:
            header = [*c.by, "pairs"]
            if dojo:
                header += ["utility A", "utility B", "Δ utility (paired)", "Δ utility (unpaired)",
                           "ASR A", "ASR B", "Δ ASR (paired)", "Δ ASR (unpaired)"]
            if insp:
                header += ["refusal A", "refusal B", "Δ refusal (paired)",
                           "Δ refusal (unpaired)"]
            rows = []
            for r in d.rows:
                cells = [r.group[k] for k in c.by] + [str(r.pairs)]
                if dojo:
                    for p, u in ((r.utility, r.utility_unpaired),
                                 (r.attack_success, r.attack_success_unpaired)):
                        cells += [percent(p.rate_a) if p else DASH, percent(p.rate_b) if p else DASH,
                                  diff_text(p), diff_text(u)]
                if insp:
                    p, u = r.refusal, r.refusal_unpaired
                    cells += [percent(p.rate_a) if p else DASH, percent(p.rate_b) if p else DASH,
                              diff_text(p), diff_text(u)]
                rows.append(cells)
        text = grid(header, rows, fmt)
        title = f"# {d.b} - {d.a}"
        if fmt != "tsv":
            note = (f"{d.shared_cells} shared cell(s), {d.pairs} pair(s)"
                    + (f", {d.ambiguous} unit(s) held twice in one corpus, not paired"
                       if d.ambiguous else "")
                    + "; differences B - A in percentage points, 95% intervals: paired "
                      "Newcombe (method 10) over the pairs, unpaired Newcombe hybrid score "
                      "over every counted unit")
            if d.benchmark_a != d.benchmark_b:
                note += (f"; different benchmarks (--across-benchmarks): A {d.benchmark_a}, "
                         f"B {d.benchmark_b}")
            text += "\n\n" + (f"- {note}" if fmt == "md" else note)
        blocks.append(f"{title}\n{text}")
    return "\n\n".join(blocks)
