"""The site's one HTML page: the campaign overview rendered here, in Python, every value
passed through :func:`html.escape`, and the empty sections the page's script fills (the
execution list, one execution, two side by side) from the data files it loads on demand.

The page carries its Content-Security-Policy: scripts and styles from the site's own files
only (no inline script, no ``eval``), no connection anywhere (``connect-src 'none'``), no
frames, no forms, no base URL."""

from __future__ import annotations

import json
from html import escape
from typing import Any

from agentprov_core.audit.results import DASH, Rate, payload_text, rate_text
from agentprov_core.view import plot, scrub

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'none'; base-uri 'none'; form-action 'none'")
KEYS_HELP = ("j / k (↓ / ↑ in the list): next / previous execution · Enter: open it · / : search · "
             "c: compare with another attempt of the same cell · o: overview · l: list · "
             "Esc: leave the search")


def _rate(r: dict[str, Any] | None) -> str:
    """A rate of the table's JSON form as ``stats --tables results`` prints it."""
    return rate_text(Rate(**r) if r else None)


def _e(v: Any) -> str:
    return escape(v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str))


def results_html(table: dict[str, Any]) -> str:
    by = table["by"]
    rows = table["rows"]
    dojo = any(r["kind"] == "agentdojo" for r in rows)
    insp = any(r["kind"] == "inspect" for r in rows)
    head = [*by, "units"]
    if dojo:
        head += ["utility", "attack success", "payload reached", "attack success (reached)"]
    if insp:
        head += ["samples", "mean score", "refusal"]
    head += ["left out", "flags"]
    out = ['<table class="results"><thead><tr>'
           + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr></thead><tbody>"]
    for r in rows:
        cells = [r["group"].get(k, "") for k in by] + [str(r["units"])]
        if dojo:
            cells += [_rate(r.get("utility")), _rate(r.get("attack_success")),
                      payload_text(r.get("payload") or {}),
                      _rate(r.get("attack_success_reached"))]
        if insp:
            score = r.get("score") or {}
            cells += [DASH if r.get("samples") is None else str(r["samples"]),
                      DASH if score.get("mean") is None else f"{score['mean']:.3f}",
                      _rate(r.get("refusal"))]
        cells += [", ".join(f"{k} {v}" for k, v in r["left_out"].items()) or DASH,
                  "; ".join(r["flags"]) or DASH]
        out.append("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in cells) + "</tr>")
    out.append("</tbody></table>")
    if not rows:
        out = ['<p class="muted">No unit of this corpus counts yet.</p>']
    left = ", ".join(f"{k} {v}" for k, v in table["left_out"].items()) or "none"
    out.append(f'<p class="muted">{table["units"]} unit(s), {table["counted"]} counted; left '
               f"out: {escape(left)}. Rates are k/n with their 95 % Wilson interval "
               f"({escape(table['interval'])}), the figures of <code>agentprov stats "
               "--tables results</code>.</p>")
    for d in table.get("damaged") or []:
        out.append(f'<p class="bad">damaged: {escape(d)}</p>')
    return "".join(out)


def records_html(records: Any, depth: int = 0) -> str:
    """A manifest's record (JSON values) as nested definition lists."""
    if isinstance(records, dict):
        if not records:
            return '<span class="muted">(empty)</span>'
        return "<dl>" + "".join(f"<dt>{_e(str(k))}</dt><dd>{records_html(v, depth + 1)}</dd>"
                                for k, v in records.items()) + "</dl>"
    if isinstance(records, list):
        if not records:
            return '<span class="muted">(none)</span>'
        if depth > 2 or all(not isinstance(v, dict | list) for v in records):
            return escape(", ".join(v if isinstance(v, str) else json.dumps(v) for v in records))
        return "<ol>" + "".join(f"<li>{records_html(v, depth + 1)}</li>" for v in records) \
            + "</ol>"
    if records is None:
        return '<span class="muted">none</span>'
    return _e(records)


def quality_lines(quality: Any) -> list[str]:
    """The run's quality lines, as ``agentprov run`` prints them
    (:func:`agentprov_core.live.quality.lines`), from the manifest's ``live.quality``; none
    when it holds none or not in that form."""
    from agentprov_core.live.quality import lines

    if not isinstance(quality, dict) or not quality:
        return []
    try:
        return [x.strip() for x in lines(quality)]
    except (KeyError, TypeError, AttributeError):
        return []


def corpus_html(c: Any, n_exec: int) -> str:
    """One corpus's overview; everything shown from the corpus is redacted
    (:mod:`agentprov_core.view.scrub`) and escaped."""
    t = scrub.doc(c.table)
    v = c.verdicts
    cid = scrub.text(c.opened.corpus_id)
    parts = [f'<section class="corpus" id="corpus-{c.n}"><h2>Corpus '
             f"<span class=\"cid\">{escape(cid)}</span></h2>"]
    if c.restricted is not None:
        why = scrub.text(str(c.restricted.get("why") or ""))
        parts.append('<p class="warn">A restricted-use corpus, private: '
                     f"{escape(why)}. Its prompts are collapsed "
                     "behind a warning on each execution's page.</p>")
    parts.append(f'<p>{escape(t["state"])} corpus at <code>{escape(scrub.text(str(c.root)))}'
                 f"</code>; {n_exec} execution(s). verify: <span class=\"verdict "
                 f"v-{escape(v.result.split()[0])}\">{escape(v.result)}</span></p>")
    parts.append("<h3>Results</h3>" + results_html(t))
    parts.append("<h3>Utility against attack success</h3>"
                 + plot.svg(t["rows"], f"utility against attack success: {cid}"))
    runrec = scrub.doc(c.run_records())
    qline = quality_lines(runrec.get("quality"))
    if qline:
        parts.append("<h3>Quality</h3><pre class=\"quality\">" + escape("\n".join(qline))
                     + "</pre>")
    parts.append("<h3>Run records</h3>" + (records_html(runrec) if runrec else
                 '<p class="muted">The manifest holds no run records (caps, quality, canary, '
                 "egress): an import corpus, or a run that never started a cell.</p>"))
    findings = scrub.doc(v.corpus)
    if findings:
        parts.append("<h3>verify: the corpus's findings</h3><ul class=\"findings\">"
                     + "".join(f"<li class=\"f-{escape(f['kind'])}\">{escape(f['kind'])}: "
                               f"{escape(f['code'])} at {escape(f['path'])}: "
                               f"{escape(f['message'])}</li>" for f in findings) + "</ul>")
    parts.append("<details><summary>Manifest</summary>" + records_html(scrub.doc(c.about()))
                 + "</details></section>")
    return "".join(parts)


def index_html(corpora: list[Any], counts: list[int]) -> str:
    names = scrub.text(", ".join(c.opened.corpus_id for c in corpora))
    body = "".join(corpus_html(c, n) for c, n in zip(corpora, counts, strict=True))
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="referrer" content="no-referrer">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>agentprov view: {escape(names)}</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="assets/view.css">
<script src="assets/view.js" defer></script>
<script src="data/site.js" defer></script>
</head><body>
<header><nav><a href="#/" id="nav-overview">Overview</a> <a href="#/list" id="nav-list">Executions</a></nav>
<p class="keys" id="keys">Keys: {escape(KEYS_HELP)}</p></header>
<main>
<section id="overview" class="route">{body}</section>
<section id="list" class="route" hidden></section>
<section id="exec" class="route" hidden></section>
<section id="cmp" class="route" hidden></section>
<noscript><p>The execution pages need JavaScript (the site's own script, nothing from the
network); the overview above does not.</p></noscript>
</main>
</body></html>
"""
