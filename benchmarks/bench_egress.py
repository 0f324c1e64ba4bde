"""The egress proxy: what a CONNECT tunnel adds to an HTTPS request, against a direct
loopback connection, side by side in one run.

Three processes, as in a real run: a TLS server (a threaded ``http.server`` that echoes a
POST body, with a certificate from a test certificate authority made by ``trustme``) stands
in for the API endpoint; the egress proxy runs in a process of its own, as it runs in T0,
with a resolver that dials the server under the name ``openrouter.ai``; this process is the
client (httpx, ``verify=`` the test CA). Eight series of HTTPS POSTs, each echoed back:

* direct (``https://127.0.0.1:PORT``, the same certificate) or through the proxy
  (``https://openrouter.ai/…`` with ``proxy=`` the proxy: a CONNECT tunnel);
* keep-alive (one client, one connection, one tunnel for the whole series) or a new
  connection each request (a new TCP connection, a new CONNECT and a new TLS handshake);
* a small body (256 bytes) or 1 MiB (1 MiB up and 1 MiB back).

The series are interleaved, one request of each per round, in forward order on even
rounds and reverse order on odd ones, after a few untimed warm-up rounds. The report gives
the median and p90 of each, the ratio of the medians (proxy over direct), the median of the
per-round differences (the added latency of one request), the throughput of the 1 MiB
requests, and the proxy process's CPU time per relayed MiB. The ratios are the result; the
absolute times belong to the machine.

    python benchmarks/bench_egress.py [--rounds 200] [--out /tmp/bench_egress.md]
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

API = "openrouter.ai"
SIZES = {"small": 256, "1 MiB": 1 << 20}
MODES = ("keep-alive", "new connection")
ROUTES = ("direct", "proxy")


# ----------------------------------------------------------------------------- children
class Echo(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else the body waits for the header's delayed ACK

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


class TLSServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, ctx: ssl.SSLContext) -> None:
        self.ctx = ctx
        super().__init__(("127.0.0.1", 0), Echo)

    def finish_request(self, request, client_address):  # noqa: ANN001
        try:
            request = self.ctx.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            return
        try:
            super().finish_request(request, client_address)
        finally:
            request.close()  # the wrapped socket: socketserver closes only the plain one


def child_server(cert: str) -> None:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert)
    srv = TLSServer(ctx)
    threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True).start()
    print(json.dumps({"port": srv.server_address[1]}), flush=True)
    sys.stdin.readline()  # until the parent says stop (or exits)


def child_proxy(server_port: int) -> None:
    from agentprov_core.live.egress import EgressProxy

    with EgressProxy(allowed=[(API, 443)], resolver={API: ("127.0.0.1", server_port)}) as p:
        print(json.dumps({"url": p.url}), flush=True)
        sys.stdin.readline()
    print(json.dumps(p.record()), flush=True)


def spawn(*args: str) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    proc = subprocess.Popen([sys.executable, __file__, "--child", *args], text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline())


def finish(proc: subprocess.Popen[str]) -> tuple[str, float | None]:
    """Tell a child to stop; its remaining stdout and its CPU time (user + system)."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("stop\n")
    proc.stdin.flush()
    out = proc.stdout.read()
    if hasattr(os, "wait4"):
        _, _, ru = os.wait4(proc.pid, 0)
        proc.returncode = 0
        return out, ru.ru_utime + ru.ru_stime
    proc.wait()  # pragma: no cover - Windows
    return out, None


# ----------------------------------------------------------------------------- measuring
def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10, method="inclusive")[-1]


def run(rounds: int = 200, warmup: int = 5) -> dict[str, Any]:
    import httpx
    import trustme

    ca = trustme.CA()
    with tempfile.TemporaryDirectory(prefix="agentprov-bench-egress-") as tmp:
        cert = Path(tmp) / "server.pem"
        ca.issue_cert(API, "127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(cert))
        server, s_info = spawn("server", str(cert))
        proxy, p_info = spawn("proxy", str(s_info["port"]))
        ctx = ssl.create_default_context()
        ca.configure_trust(ctx)
        base = {"direct": f"https://127.0.0.1:{s_info['port']}", "proxy": f"https://{API}"}
        clients: dict[tuple[str, str], httpx.Client] = {}
        for route in ROUTES:
            for mode in MODES:
                limits = httpx.Limits(max_keepalive_connections=0 if mode != "keep-alive"
                                      else 1)
                clients[route, mode] = httpx.Client(
                    verify=ctx, trust_env=False, limits=limits, timeout=30,
                    proxy=p_info["url"] if route == "proxy" else None)
        bodies = {size: os.urandom(n) for size, n in SIZES.items()}
        series = [(r, m, s) for m in MODES for s in SIZES for r in ROUTES]
        samples: dict[tuple[str, str, str], list[float]] = {k: [] for k in series}
        try:
            for i in range(warmup + rounds):
                for key in (series if i % 2 == 0 else list(reversed(series))):
                    route, mode, size = key
                    t0 = time.perf_counter()
                    r = clients[route, mode].post(f"{base[route]}/v1/echo", content=bodies[size])
                    took = time.perf_counter() - t0
                    if r.status_code != 200 or r.content != bodies[size]:
                        raise RuntimeError(f"{key}: HTTP {r.status_code}, "
                                           f"{len(r.content)} bytes back")
                    if i >= warmup:
                        samples[key].append(took)
        finally:
            for c in clients.values():
                c.close()
            p_out, p_cpu = finish(proxy)
            finish(server)
    record = json.loads(p_out.strip().splitlines()[-1])
    rows = []
    for mode in MODES:
        for size, n in SIZES.items():
            d, p = samples["direct", mode, size], samples["proxy", mode, size]
            diffs = [b - a for a, b in zip(d, p, strict=True)]
            rows.append({"mode": mode, "size": size, "bytes": n,
                         "direct_median": statistics.median(d), "direct_p90": p90(d),
                         "proxy_median": statistics.median(p), "proxy_p90": p90(p),
                         "ratio": statistics.median(p) / statistics.median(d),
                         "added_median": statistics.median(diffs),
                         "added_p90": p90(diffs)})
    t = record["tunnels"][f"{API}:443"]
    relayed = (t["bytes_up"] + t["bytes_down"]) / 2**20
    return {"rounds": rounds, "warmup": warmup, "rows": rows, "record": record,
            "proxy_cpu_s": p_cpu, "relayed_mib": relayed,
            "expected_tunnels": 1 + (warmup + rounds) * len(SIZES),
            "cores": os.cpu_count()}


# ----------------------------------------------------------------------------- report
def _ms(v: float) -> str:
    return f"{v * 1000:.2f}"


def markdown(res: dict[str, Any]) -> str:
    rec, t = res["record"], res["record"]["tunnels"][f"{API}:443"]
    out = ["### Egress proxy", "",
           "HTTPS POSTs echoed by a loopback TLS server (`http.server`, a trustme test CA), "
           "from an httpx client, either direct or through `agentprov_core.live.egress` in a "
           "process of its own (a CONNECT tunnel to `openrouter.ai:443`, dialled on "
           "loopback by the proxy's resolver). "
           f"{res['rounds']} requests per series after {res['warmup']} warm-up rounds, "
           "interleaved (one of each series per round, the order reversed every other "
           "round). *Keep-alive*: one connection (one tunnel) for the series; *new "
           "connection*: a TCP connection, a CONNECT and a TLS handshake per request. "
           "Bodies go up and come back: 1 MiB is 2 MiB on the wire. \"Added\" is the median "
           "(and p90) of the per-round differences, proxy minus direct.", "",
           "| connection | body | direct median ms | direct p90 ms | proxy median ms | "
           "proxy p90 ms | proxy ÷ direct | added ms, median | added ms, p90 |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in res["rows"]:
        out.append(f"| {r['mode']} | {r['size']} | {_ms(r['direct_median'])} | "
                   f"{_ms(r['direct_p90'])} | {_ms(r['proxy_median'])} | "
                   f"{_ms(r['proxy_p90'])} | {r['ratio']:.2f} | {_ms(r['added_median'])} | "
                   f"{_ms(r['added_p90'])} |")
    out.append("")
    for r in res["rows"]:
        if r["bytes"] >= 1 << 20:
            mib = 2 * r["bytes"] / 2**20
            out.append(f"- Throughput, 1 MiB each way, {r['mode']}: direct "
                       f"{mib / r['direct_median']:.0f} MiB/s, through the proxy "
                       f"{mib / r['proxy_median']:.0f} MiB/s (medians).")
    cpu = res["proxy_cpu_s"]
    if cpu is not None:
        out.append(f"- The proxy process relayed {res['relayed_mib']:.0f} MiB in "
                   f"{t['opened']} tunnels (expected {res['expected_tunnels']}) and used "
                   f"{cpu:.2f} s of CPU in all, start-up included: "
                   f"{cpu * 1000 / max(res['relayed_mib'], 1e-9):.2f} ms per relayed MiB.")
    out.append(f"- Its record: {len(rec['refusals'])} refusals, {t['failed']} failed "
               f"tunnels, {rec['internal_errors']} internal errors, peak "
               f"{rec['connections_peak']} connections.")
    out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--json", action="store_true", help="print the raw results as JSON")
    ap.add_argument("--out", type=Path, help="also write the markdown report here")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        if args.child[0] == "server":
            child_server(args.child[1])
        else:
            child_proxy(int(args.child[1]))
        return
    res = run(args.rounds, args.warmup)
    text = markdown(res)
    print(json.dumps(res, indent=1) if args.json else text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
