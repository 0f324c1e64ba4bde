"""Headless Chromium for the viewer's tests, screenshots and benchmark: Debian's
``chromium`` (``.ci/run`` installs it) driven by the ``playwright`` package's bundled driver
(``playwright install`` is never run). :func:`browser` skips the calling test, saying why,
when either is missing. :class:`Watch` records what a page did that a person would not see:
console errors, page errors, dialogs and every request that was not for one of the site's
own files."""

from __future__ import annotations

import shutil
from contextlib import contextmanager
from pathlib import Path

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@contextmanager
def launched():
    """A launched browser (raises when Chromium or playwright is missing)."""
    from playwright.sync_api import sync_playwright

    exe = chromium()
    if exe is None:
        raise RuntimeError("no chromium binary on PATH")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=ARGS)
        try:
            yield b
        finally:
            b.close()


def skip_reason() -> str | None:
    if chromium() is None:
        return "no chromium binary on PATH (Debian: apt-get install chromium; .ci/run does)"
    try:
        import playwright  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (tox -e core installs it)"
    return None


class Watch:
    """A page of ``site`` with what it did recorded."""

    def __init__(self, browser, site: Path, *, width: int = 1200, height: int = 900) -> None:
        self.site = site.resolve()
        self.page = browser.new_page(viewport={"width": width, "height": height})
        self.console: list[str] = []
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.requests: list[str] = []
        self.foreign: list[str] = []
        self.page.on("console", lambda m: self.console.append(f"{m.type}: {m.text}")
                     if m.type in ("error", "warning") else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))

        def dialog(d) -> None:
            self.dialogs.append(d.message)
            d.dismiss()

        self.page.on("dialog", dialog)
        self.page.on("request", self._request)

    def _request(self, req) -> None:
        self.requests.append(req.url)
        url = req.url
        own = url.startswith(self.site.as_uri() + "/") or url.startswith("http://127.0.0.1:")
        if not own:
            self.foreign.append(url)

    def goto(self, fragment: str = "", base: str | None = None) -> None:
        self.page.goto((base or (self.site / "index.html").as_uri()) + fragment)

    def clean(self) -> list[str]:
        """Everything that should not have happened: empty on a good page."""
        return ([f"console {c}" for c in self.console] + [f"page error {e}" for e in self.errors]
                + [f"dialog {d}" for d in self.dialogs]
                + [f"request {u}" for u in self.foreign])
