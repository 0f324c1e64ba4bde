"""The screenshots of docs/view.md (docs/view/*.png), taken in headless Chromium from the
site ``agentprov view`` writes of a small synthetic working corpus: the cells of
tests/test_view.py (attacked and benign, one defended by the tool filter, two attempts of
one cell, one errored), whose records carry the injection where it entered.

    python scripts/view_screenshots.py [--out docs/view]

Each image is the browser's viewport (1280 x 860), under 300 KB."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SHOTS = (("overview", "", "table.results"), ("list", "#/list", "#rows tr"),
         ("execution", "#/x/3", "#steps"), ("side-by-side", "#/cmp/0/1", "#cmpgrid"))


def main(argv: list[str] | None = None) -> None:
    from tests.results_corpus import build
    from tests.test_view import cells
    from tests.view_browser import Watch, launched

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "view")
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="agentprov-view-shots-") as d:
        root = build(Path(d) / "corpora", "agentdojo-demo", cells())
        site = Path(d) / "site"
        env = {**os.environ, "AGENTPROV_HOME": str(Path(d) / "home")}
        subprocess.run([sys.executable, "-m", "agentprov_core", "view", str(root), "--out",
                        str(site)], check=True, env=env)
        with launched() as b:
            for name, frag, ready in SHOTS:
                w = Watch(b, site, width=1280, height=860)
                w.goto(frag)
                w.page.wait_for_selector(ready)
                if name == "execution":  # the marked injection in view
                    w.page.locator("#steps .k-tool_call").first.scroll_into_view_if_needed()
                    w.page.evaluate("() => window.scrollBy(0, -260)")
                if name == "list":
                    w.page.keyboard.press("j")
                    w.page.keyboard.press("j")
                path = a.out / f"{name}.png"
                w.page.screenshot(path=str(path))
                problems = w.clean()
                if problems:
                    sys.exit(f"view_screenshots: {name}: {problems}")
                print(f"{path} {path.stat().st_size:,} bytes")
                w.page.close()


if __name__ == "__main__":
    main()
