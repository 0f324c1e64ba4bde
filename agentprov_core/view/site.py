"""Writing the site of one or more corpora (docs/view.md):

```
index.html            the overview, and the sections the script fills
assets/view.js|css    the page's script and style (package data)
data/site.js          the corpora's names and how many executions each has
data/list.js          the execution list: its columns, the distinct values, a row each
x/<n>.js              execution n's page document, loaded when it is opened
files/<n>/<name>.txt  the execution's stored files (aer, sem, prov, validation)
raw/<sha256>.txt      the raw store's files its AER cites (capture log, native log)
.agentprov-view       the marker: this directory is a site view wrote (it may replace it)
```

Data files are scripts that hand their JSON to the page (``APV.x(n, {...})``): a page
opened from ``file://`` may load a script beside it but may not ``fetch`` a file, and the
same files work over ``--serve``. Nothing is written into a corpus: the site goes to
``--out``, by default ``$AGENTPROV_HOME/views/<corpus id>``. The site is written beside its
place and moved there whole, so an earlier view is replaced only by a complete one."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

from agentprov_core.base import inputfile, paths
from agentprov_core.errors import AgentprovError
from agentprov_core.view import model, pages, scrub
from agentprov_core.view.execution import raw_path

MARKER = ".agentprov-view"
_SAFE = re.compile(r"[^A-Za-z0-9._+-]")


def default_out(corpora: list[Any]) -> Path:
    name = "+".join(_SAFE.sub("_", c.corpus_id) for c in corpora)[:120] or "corpus"
    return paths.home() / "views" / name


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def check_out(out: Path, corpora: list[Any]) -> None:
    """Refuse an ``out`` inside a corpus (or holding one), and an existing non-empty
    directory view did not write; before either, a path no directory can be made at
    (:func:`agentprov_core.base.inputfile.check_output`)."""
    inputfile.output_dir("--out", out, "give a new directory, or one an earlier view wrote")
    o = out.resolve()
    for c in corpora:
        r = c.root.resolve()
        if _inside(o, r) or _inside(r, o):
            raise AgentprovError("view.usage.out_in_corpus", out=out, corpus=c.root)
    if o.exists() and (not o.is_dir() or (any(o.iterdir()) and not (o / MARKER).is_file())):
        raise AgentprovError("view.usage.out_not_a_view", out=out, marker=MARKER)


def check_restricted(vc: model.ViewCorpus, out: Path) -> None:
    """A restricted-use corpus is viewed only under ``$AGENTPROV_HOME``: the corpus and the
    site (symlinks followed)."""
    if vc.restricted is None:
        return
    home = paths.home().resolve()
    for what, where in (("the corpus", vc.root), ("the site (--out)", out)):
        if not _inside(where.resolve(), home):
            raise AgentprovError("view.refused.restricted", corpus=vc.root,
                                 why=vc.restricted.get("why") or "restricted evidence",
                                 home=home, what=what, where=where)


def _script(call: str, *args: Any) -> bytes:
    """A data file: a script handing ``args`` (JSON) to the page's ``APV.<call>``. A string
    that is not valid Unicode (a lone surrogate a JSON file may hold) is written escaped."""
    def dumps(ascii_only: bool) -> str:
        return ", ".join(json.dumps(a, ensure_ascii=ascii_only, separators=(",", ":"))
                         for a in args)

    try:
        return f"APV.{call}({dumps(False)});\n".encode()
    except UnicodeEncodeError:
        return f"APV.{call}({dumps(True)});\n".encode()


def _copy(src: Path, dest: Path) -> dict[str, Any]:
    """A stored file copied into the site (redacted when it holds a key shape)."""
    try:
        data = inputfile.read_bytes(src, inputfile.MAX_STORED, follow=False)
    except inputfile.Unreadable as exc:
        return {"copied": False, "why": f"not copied: it {exc}"}
    shown, redacted = scrub.raw_bytes(data)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(shown)
    return {"copied": True, "redacted": redacted, "bytes": len(data)}


def _list_doc(rows: list[dict[str, str]]) -> dict[str, Any]:
    """The execution list, compact: every value is an index into ``values``."""
    values: list[str] = []
    at: dict[str, int] = {}
    out = []
    for r in rows:
        line = []
        for c in model.COLUMNS:
            v = r[c]
            if v not in at:
                at[v] = len(values)
                values.append(v)
            line.append(at[v])
        out.append(line)
    return {"columns": list(model.COLUMNS), "values": [scrub.text(v) for v in values],
            "rows": out}


def build(given: list[Any], out: Path | None = None, *, verify: bool = True) -> Path:
    """Write the site of the opened corpora ``given`` to ``out`` (default
    :func:`default_out`); returns where."""
    out = Path(out) if out is not None else default_out(given)
    check_out(out, given)
    corpora = [model.read_corpus(n, c, verify=verify) for n, c in enumerate(given)]
    for vc in corpora:
        check_restricted(vc, out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        counts = _write(tmp, corpora)
        (tmp / "index.html").write_text(pages.index_html(corpora, counts), encoding="utf-8",
                                        errors="replace")
        (tmp / MARKER).write_text("a site agentprov view wrote; view may replace it\n",
                                  encoding="utf-8")
        if out.exists():
            old = out.with_name(f".{out.name}.old-{os.getpid()}")
            out.rename(old)
            tmp.rename(out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _write(site: Path, corpora: list[model.ViewCorpus]) -> list[int]:
    assets = site / "assets"
    assets.mkdir()
    for name in ("view.js", "view.css"):
        (assets / name).write_bytes(
            resources.files("agentprov_core.view").joinpath("assets", name).read_bytes())
    (site / "x").mkdir()
    (site / "raw").mkdir()
    rows: list[dict[str, str]] = []
    counts = []
    raw_done: dict[str, dict[str, Any]] = {}
    for vc in corpora:
        k = 0
        for ex in vc.executions():
            n = len(rows)
            files = []
            for name, sha in ex.files.items():
                src = vc.root / "executions" / ex.eid / f"{name}.json"
                href = f"files/{n}/{name}.json.txt"
                files.append({"name": f"{name}.json", "path": f"executions/{ex.eid}/"
                              f"{name}.json", "sha256": sha, "href": href,
                              **_copy(src, site / href)})
            for ev in ex.evidence:
                sha = str(ev.get("sha256", ""))
                src = raw_path(vc.root, ev)
                href = f"raw/{sha}.txt" if src is not None else ""
                if src is not None and sha not in raw_done:
                    raw_done[sha] = _copy(src, site / href)
                files.append({"name": str(ev.get("role")), "path": str(ev.get("path")),
                              "sha256": sha, "href": href, "format": ev.get("format"),
                              **raw_done.get(sha, {"copied": False,
                                                   "why": "not a raw store path"})})
            ex.doc["files"] = files
            ex.doc["n"] = n
            (site / "x" / f"{n}.js").write_bytes(_script("x", n, scrub.doc(ex.doc)))
            rows.append(ex.row)
            k += 1
        counts.append(k)
    data = site / "data"
    data.mkdir()
    (data / "list.js").write_bytes(_script("list", _list_doc(rows)))
    site_doc = {"corpora": [{"n": vc.n, "id": vc.opened.corpus_id, "executions": k,
                             "restricted": vc.restricted is not None,
                             "verify": vc.verdicts.result}
                            for vc, k in zip(corpora, counts, strict=True)],
                "executions": len(rows), "keys": pages.KEYS_HELP}
    (data / "site.js").write_bytes(_script("site", scrub.doc(site_doc)))
    return counts
