"""A14's re-observation on loopback stand-ins: what T0 spends before each cell outside the
server, side by side in one run.

    python benchmarks/bench_probe.py [--rounds 200]

Two stand-ins (``http.server`` on loopback, answering at once): a llama.cpp-shaped one
(``/v1/models`` and ``/props``, no weight file) and a generic OpenAI-compatible one
(``/v1/models`` only, the ``openai_compat`` endpoint). For each, interleaved rounds time
``local.identity.reobserve`` as the campaign calls it, with the TLS context every probe
shares, against the same call with a context built for that probe (what httpx builds for a
client by default: it reads the CA bundle). Reported: the medians, their ratio and the
requests one re-observation makes. A real server answers more slowly
(docs/performance.md, "A14 on a real server").
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agentprov_core.live.local import identity as li  # noqa: E402
from agentprov_core.live.local import kinds  # noqa: E402

ROUTES = {
    "llamacpp": {"/v1/models": {"object": "list", "data": [
                     {"id": "m", "object": "model", "owned_by": "llamacpp"}]},
                 "/props": {"default_generation_settings": {"n_ctx": 4096, "params": {}},
                            "total_slots": 1, "model_alias": "m", "build_info": "b1"}},
    "openai_compat": {"/v1/models": {"object": "list", "data": [
                          {"id": "m", "object": "model", "owned_by": "sglang"}]}},
}


@dataclass(frozen=True)
class Endpoint:
    name: str
    kind: str
    base_url: str


def stand_in(routes: dict) -> tuple[ThreadingHTTPServer, list[str]]:
    seen: list[str] = []

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a: object) -> None:
            pass

        def do_GET(self) -> None:
            seen.append(self.path)
            body = json.dumps(routes[self.path]).encode() if self.path in routes else b"{}"
            self.send_response(200 if self.path in routes else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, args=(0.02,), daemon=True).start()
    return srv, seen


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=200)
    args = ap.parse_args(argv)
    print("| stand-in | shared TLS context, median | a context per probe, median | ratio "
          "| requests per re-observation |")
    print("|---|---|---|---|---|")
    for kind, routes in ROUTES.items():
        srv, seen = stand_in(routes)
        ep = Endpoint(kind, kind, f"http://127.0.0.1:{srv.server_address[1]}/v1")
        ident = li.observe(ep, "m")
        shared: list[float] = []
        fresh: list[float] = []
        before = len(seen)
        for _ in range(args.rounds):
            for times, clear in ((shared, False), (fresh, True)):
                if clear:
                    kinds._tls_context.cache_clear()  # built again inside this call
                t0 = time.perf_counter()
                same, changed, _ = li.reobserve(ident, ep)
                times.append(time.perf_counter() - t0)
                assert same, changed
        per = (len(seen) - before) / (2 * args.rounds)
        a, b = statistics.median(shared) * 1e3, statistics.median(fresh) * 1e3
        print(f"| {kind} | {a:.2f} ms | {b:.2f} ms | {a / b:.3f} | {per:g} |")
        srv.shutdown()
        srv.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
