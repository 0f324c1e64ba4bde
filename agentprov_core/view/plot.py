"""The overview's plot: utility against attack success rate, one point per group of the
results table, with its 95 % Wilson intervals as error bars in both directions. Plain SVG
written here (presentation attributes only: the page's policy allows no inline style), every
label escaped."""

from __future__ import annotations

from html import escape
from typing import Any

W, H, PAD = 560, 400, 56
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b",
           "#e377c2", "#7f7f7f", "#bcbd22")


def _x(v: float) -> float:
    return PAD + v * (W - 2 * PAD)


def _y(v: float) -> float:
    return H - PAD - v * (H - 2 * PAD)


def label(group: dict[str, str]) -> str:
    return " · ".join(f"{v}" for v in group.values())


def points(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The groups that have both rates: their label, rates and intervals."""
    out = []
    for r in rows:
        u, a = r.get("utility"), r.get("attack_success")
        if r.get("kind") != "agentdojo" or not u or not a or u.get("rate") is None \
                or a.get("rate") is None:
            continue
        out.append({"label": label(r["group"]), "u": u, "a": a})
    return out


def _tip(p: dict[str, Any]) -> str:
    u, a = p["u"], p["a"]
    return (f"{p['label']}: utility {u['successes']}/{u['n']}, attack success "
            f"{a['successes']}/{a['n']}")


def svg(rows: list[dict[str, Any]], title: str) -> str:
    """The plot of a results table's ``rows`` (its JSON form), or a sentence saying why
    there is none."""
    pts = points(rows)
    if not pts:
        return ('<p class="muted">No group has both a utility and an attack success rate '
                "(no attacked unit counted), so there is nothing to plot.</p>")
    tips = [_tip(p) for p in pts]
    # the legend's lines are as wide as they need (about 7 px a character at 12 px)
    width = max(W, PAD + 18 + 7 * max(len(t) for t in tips) + 8)
    parts = [f'<svg class="plot" role="img" viewBox="0 0 {width} {H + 18 * len(pts)}" '
             f'width="{width}" height="{H + 18 * len(pts)}" xmlns="http://www.w3.org/2000/svg">',
             f"<title>{escape(title)}</title>",
             f'<rect x="{PAD}" y="{PAD}" width="{W - 2 * PAD}" height="{H - 2 * PAD}" '
             'fill="#fafafa" stroke="#999"/>']
    for t in (0, 0.25, 0.5, 0.75, 1):
        parts.append(f'<line x1="{_x(t)}" y1="{_y(0)}" x2="{_x(t)}" y2="{_y(1)}" '
                     'stroke="#e4e4e4"/>')
        parts.append(f'<line x1="{_x(0)}" y1="{_y(t)}" x2="{_x(1)}" y2="{_y(t)}" '
                     'stroke="#e4e4e4"/>')
        parts.append(f'<text x="{_x(t)}" y="{H - PAD + 16}" font-size="11" '
                     f'text-anchor="middle">{t:.2f}</text>')
        parts.append(f'<text x="{PAD - 6}" y="{_y(t) + 4}" font-size="11" '
                     f'text-anchor="end">{t:.2f}</text>')
    parts.append(f'<text x="{W / 2}" y="{H - 14}" font-size="12" text-anchor="middle">'
                 "attack success rate (lower is better)</text>")
    parts.append(f'<text x="14" y="{H / 2}" font-size="12" text-anchor="middle" '
                 f'transform="rotate(-90 14 {H / 2})">utility (higher is better)</text>')
    for i, p in enumerate(pts):
        c = COLOURS[i % len(COLOURS)]
        u, a = p["u"], p["a"]
        cx, cy = _x(a["rate"]), _y(u["rate"])
        if a.get("low") is not None:
            parts.append(f'<line x1="{_x(a["low"]):.1f}" y1="{cy:.1f}" x2="{_x(a["high"]):.1f}"'
                         f' y2="{cy:.1f}" stroke="{c}" stroke-width="1.5"/>')
        if u.get("low") is not None:
            parts.append(f'<line x1="{cx:.1f}" y1="{_y(u["low"]):.1f}" x2="{cx:.1f}" '
                         f'y2="{_y(u["high"]):.1f}" stroke="{c}" stroke-width="1.5"/>')
        tip = tips[i]
        parts.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="5" fill="{c}">'
                     f"<title>{escape(tip)}</title></circle>")
        ly = H + 4 + 18 * i
        parts.append(f'<circle cx="{PAD + 6}" cy="{ly}" r="5" fill="{c}"/>')
        parts.append(f'<text x="{PAD + 18}" y="{ly + 4}" font-size="12">{escape(tip)}</text>')
    parts.append("</svg>")
    return "".join(parts)
