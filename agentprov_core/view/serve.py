"""``agentprov view --serve``: the site served on loopback (127.0.0.1, a free port the
system picks) until Ctrl-C, by the standard library's file server, with the page's
Content-Security-Policy also sent as a header, ``nosniff``, and the copied stored files as
plain text (a stored file holding HTML is shown, never rendered)."""

from __future__ import annotations

import functools
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from agentprov_core.view.pages import CSP

HOST = "127.0.0.1"


class Handler(SimpleHTTPRequestHandler):
    extensions_map = {**SimpleHTTPRequestHandler.extensions_map,
                      ".txt": "text/plain; charset=utf-8", ".js": "text/javascript",
                      ".html": "text/html; charset=utf-8", ".css": "text/css"}

    def end_headers(self) -> None:
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def list_directory(self, path):  # type: ignore[no-untyped-def]
        """No directory listings: the site's pages link every file they show."""
        self.send_error(404, "No listing")
        return None

    def log_message(self, format: str, *args: object) -> None:  # quiet: the CLI says where
        return


def server(site: Path, port: int = 0) -> ThreadingHTTPServer:
    """A server of ``site`` bound to loopback (``port`` 0: a free one)."""
    handler = functools.partial(Handler, directory=str(site))
    return ThreadingHTTPServer((HOST, port), handler)


def url(srv: ThreadingHTTPServer) -> str:
    return f"http://{HOST}:{srv.server_address[1]}/index.html"
