"""What the ``bwrap`` containment costs: the worker's start, each connection through the
relay, the profile's realisation and the build-time probe.

The environment is the built AgentDojo one (``$AGENTPROV_HOME/envs/agentdojo-*``, else
``~/.agentprov/envs/agentdojo-*``), else a small venv on this interpreter's Python with the
worker library copied in (then the worker imports no benchmark: the absolute start times
are smaller, the difference is the same). Measured interleaved (forward order on even
rounds, reverse on odd) after an untimed warm-up round:

* worker start: ``Worker(...)``, ``request("hello")``, ``close()``, (a) network blocked as
  a dry run has it (``network_block_prefix``), (b) not wrapped at all (a scripted run),
  (c) under ``bwrap`` with one bridged loopback port (the endpoint). A run starts one
  worker; its cells are forked inside it, so this is paid once a run, not once a cell.
* a connection: one child process makes 200 sequential connect + one-line echo round
  trips to a loopback echo server, (d) directly on the host, (e) inside the sandbox,
  through the in-sandbox relay, the bind-mounted Unix socket and T0's bridge. Each model
  call of a cell opens at most a few connections (httpx keeps them alive).
* ``wrap_argv`` (the realisation, with its ``.env`` search of staging) and the probe.

Prints markdown and writes it to ``/tmp/bench_containment.md``.

``--cell`` measures instead what the sandbox's hardening costs a real-endpoint cell: the
real run path (``agentprov run agentdojo ... --containment bwrap``, AgentDojo's 16 benign
banking cells, ``--jobs 1``) against the stand-in OpenAI-style server at 0 ms a call
(``benchmarks/standin_server.py``, as ``bench_realpath.py`` runs it), in three arms run
interleaved in one session: (A) the profile as built (seccomp filter, ``/proc`` masks,
``--disable-userns``, every cell confined by Landlock); (B) without the seccomp filter, the
masks and ``--disable-userns`` (cells still confined); (C) as B with Landlock unavailable to
the cells (a 4-instruction filter whose only rule makes ``landlock_create_ruleset`` fail):
the sandbox as it was before the hardening; (D) as A, with the worker library inside the
sandbox a copy without what keeps one cell from another (the stdlib forkserver, no signal
scoping, no metadata filter). B, C and D come from ``benchmarks/unhardened_t0.py``, which
patches only the realised argv. Every run is checked
(16 complete, conclusive attempts of 3 calls; the server's counts).

    python benchmarks/bench_containment.py --cell [--rounds 5] [--home DIR]
"""

from __future__ import annotations

import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentprov_core.backend import containment, probe  # noqa: E402
from agentprov_core.backend.sandbox import profile  # noqa: E402
from agentprov_core.backend.sandbox.bridge import Bridge  # noqa: E402
from agentprov_core.backend.workerclient import Worker, network_block_prefix, scrubbed_env  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "12"))
TRIPS = 200


def find_env() -> tuple[Path, str]:
    for home in (os.environ.get("AGENTPROV_HOME"), str(Path.home() / ".agentprov")):
        if home:
            found = sorted((Path(home) / "envs").glob("agentdojo-*/AGENTPROV_ENV.json"))
            if found:
                return found[0].parent, "the built AgentDojo environment"
    d = Path(tempfile.mkdtemp(prefix="bench-cont-")) / "env"
    small_env(d)
    return d, "a small venv with the worker's libraries only"


def small_env(d: Path) -> Path:
    """A venv at ``d`` on this interpreter's Python with the worker's libraries copied in;
    returns its site-packages."""
    subprocess.run([str(Path(sys.base_prefix) / "bin" / "python3"), "-m", "venv",
                    "--without-pip", str(d)], check=True)
    site = next(d.glob("lib/python3*/site-packages"))
    for src in (ROOT / "backends/shared/src/agentprov_backend",
                ROOT / "packages/capture/src/agentprov_capture"):
        shutil.copytree(src, site / src.name)
    return site


class Echo:
    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0), backlog=128)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(c,), daemon=True).start()

    @staticmethod
    def _one(c: socket.socket) -> None:
        with c:
            c.sendall(c.makefile("rb").readline())


TRIP_CODE = """
import socket, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
t = time.perf_counter()
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port)); s.sendall(b"ping\\n")
    assert s.makefile("rb").readline() == b"ping\\n"; s.close()
print((time.perf_counter() - t) / n * 1e6)
"""


def main() -> int:
    if not sys.platform.startswith("linux") or not shutil.which("bwrap"):
        print("skipped: the bwrap provider needs Linux and bubblewrap")
        return 0
    env_dir, what = find_env()
    rec = containment.Recorded(kind="bwrap", declared_by="probe",
                               profile_sha256=profile.profile_sha256())
    echo = Echo()
    network_block_prefix()  # its one-off check is not part of a start
    python = str(env_dir / "bin" / "python")

    def start(kind: str) -> float:
        with tempfile.TemporaryDirectory(prefix="bench-st-") as st:
            t = time.perf_counter()
            kw = {"network": kind == "unwrapped"}
            if kind == "bwrap":
                kw |= {"containment": rec,
                       "allowed": containment.Allowed(loopback_ports=(echo.port,))}
            with Worker("bench", env_dir, Path(st), **kw) as w:
                w.request("hello")
            return time.perf_counter() - t

    def trips(kind: str) -> float:
        argv = [python, "-I", "-c", TRIP_CODE, str(echo.port), str(TRIPS)]
        with tempfile.TemporaryDirectory(prefix="bench-tr-") as st:
            stp, tmp = Path(st) / "s", Path(st) / "t"
            stp.mkdir()
            tmp.mkdir()
            env = scrubbed_env(env_dir, stp, tmp)
            if kind == "direct":
                out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
            else:
                with Bridge((echo.port,)) as b:
                    wrapped = containment.wrap_argv(rec, argv, stp, stp / "home", b.sockets,
                                                    env_dir=env_dir, tmp=tmp)
                    try:
                        out = subprocess.run(wrapped, env=env, cwd=stp, capture_output=True,
                                             text=True, check=True,
                                             pass_fds=profile.pass_fds(wrapped))
                    finally:
                        profile.close_fds(wrapped)
        return float(out.stdout.strip().splitlines()[-1])

    starts = ("blocked", "unwrapped", "bwrap")
    conns = ("direct", "relayed")
    for k in starts:
        start(k)
    for k in conns:
        trips(k)
    res: dict[str, list[float]] = {k: [] for k in (*starts, *conns)}
    for r in range(ROUNDS):
        order = starts if r % 2 == 0 else tuple(reversed(starts))
        for k in order:
            res[k].append(start(k))
        order = conns if r % 2 == 0 else tuple(reversed(conns))
        for k in order:
            res[k].append(trips(k))
    with tempfile.TemporaryDirectory() as st:
        stp = Path(st)
        t = time.perf_counter()
        n = 50
        for _ in range(n):
            profile.close_fds(containment.wrap_argv(rec, [python], stp, stp / "home", {},
                                                    env_dir=env_dir, tmp=stp))
        wrap_ms = (time.perf_counter() - t) / n * 1000
    t = time.perf_counter()
    pr = probe.run(env_dir, {"sources": ["agentdojo"]})
    probe_s = time.perf_counter() - t

    def med(k: str) -> float:
        return statistics.median(res[k])

    def iqr(k: str) -> str:
        q = statistics.quantiles(res[k], n=4)
        return f"{q[0]:.3g}–{q[2]:.3g}"

    lines = [
        "# bench_containment: what the bwrap containment costs",
        "",
        f"Environment: {what} ({env_dir.name}); bwrap: {pr.get('bwrap')}; kernel "
        f"{pr.get('kernel')}; {ROUNDS} interleaved rounds after a warm-up.",
        "",
        "| measured | median | IQR | vs baseline |",
        "|---|---|---|---|",
        f"| worker start + hello + close, network blocked (dry run) | {med('blocked') * 1000:.0f} ms "
        f"| {iqr('blocked')} s | baseline |",
        f"| worker start + hello + close, not wrapped (scripted run) | {med('unwrapped') * 1000:.0f} ms "
        f"| {iqr('unwrapped')} s | {med('unwrapped') / med('blocked'):.2f}x |",
        f"| worker start + hello + close, under bwrap, one bridged port | {med('bwrap') * 1000:.0f} ms "
        f"| {iqr('bwrap')} s | {med('bwrap') / med('blocked'):.2f}x "
        f"(+{(med('bwrap') - med('unwrapped')) * 1000:.0f} ms over not wrapped) |",
        f"| connect + echo round trip, direct on the host | {med('direct'):.0f} µs "
        f"| {iqr('direct')} µs | baseline |",
        f"| connect + echo round trip, through relay + socket + bridge | {med('relayed'):.0f} µs "
        f"| {iqr('relayed')} µs | +{med('relayed') - med('direct'):.0f} µs a connection |",
        f"| `wrap_argv` (realise the profile, search staging for .env) | {wrap_ms:.2f} ms | | |",
        f"| the build's probe ({len(pr.get('checks', []))} checks, imports the backend inside) "
        f"| {probe_s:.2f} s | | "
        f"status {pr.get('status')} |",
        "",
        "A run starts one worker and forks every cell inside it, so the start-up difference is "
        "paid once a run; per cell, the cost is the relay on each new connection to the "
        "endpoint (the SDK keeps its connections alive, so a cell opens few).",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    Path("/tmp/bench_containment.md").write_text(text, encoding="utf-8")
    return 0


SYSCALL_CODE = ("import os, time\nt = time.perf_counter()\nfor _ in range(300000): os.getppid()\n"
                "print((time.perf_counter() - t) / 300000 * 1e9)")


def syscall_cost(rounds: int = 8) -> dict[bool, float]:
    """ns a system call (``os.getppid()`` in a loop, Python's own overhead included) inside
    bwrap with and without the profile's seccomp filter, interleaved."""
    from agentprov_core.backend.sandbox import seccomp

    res: dict[bool, list[float]] = {True: [], False: []}
    for r in range(rounds):
        for use in ((True, False) if r % 2 == 0 else (False, True)):
            fd = seccomp.open_fd()
            try:
                extra = ["--seccomp", str(fd)] if use else []
                p = subprocess.run(["bwrap", "--unshare-user", "--unshare-net", "--ro-bind", "/",
                                    "/", "--proc", "/proc", "--dev", "/dev", *extra,
                                    sys.executable, "-c", SYSCALL_CODE], pass_fds=(fd,),
                                   capture_output=True, text=True, check=True)
            finally:
                os.close(fd)
            res[use].append(float(p.stdout))
    return {k: statistics.median(v) for k, v in res.items()}


# ------------------------------------------------------------------ a cell, with and without
CELL_ARMS = {"A: as built": None, "B: no filter, masks, --disable-userns": "no-filter",
             "C: B, and cells not confined (as before)": "bare",
             "D: A, but cells open to each other": "cells-open"}


def cell_main(rounds: int, home: Path | None) -> int:
    import uuid

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_realpath as rp
    from bench_backend import Skip, agentprov_argv, t0_env
    from bench_campaign import build, run_cli

    tmp = Path(tempfile.mkdtemp(prefix="agentprov-bench-cell-"))
    work = tmp / "work"
    work.mkdir()
    weights = work / "model-00001-of-00001.gguf"
    weights.write_bytes(os.urandom(1 << 20))
    try:
        if home is None:
            home = tmp / "home"
            built = build(home, str(work))
            env_dir = Path(built["env_dir"])
        else:
            env_dir = sorted(p for p in (home / "envs").iterdir()
                             if p.is_dir() and p.name.startswith("agentdojo-"))[-1]
        why = rp.bwrap_passed(env_dir)
        if why:
            raise Skip(why)
        tenv = t0_env(home)
        cpu: dict[str | None, list[float]] = {m: [] for m in CELL_ARMS.values()}

        def arm(mode: str | None) -> float:
            corpus = work / "corpora" / f"c-{uuid.uuid4().hex[:8]}"
            args = ["run", "agentdojo", "--containment", "bwrap", "--i-consent-to-local-run",
                    "--corpus", str(corpus), "--campaign", "bench", "--suite", "banking",
                    "--benign", "only", "--jobs", "1"]
            with rp.StandIn(0.0, weights, work) as s:
                full = [*args[:2], *rp.endpoint_args(s.port), *args[2:]]
                argv = agentprov_argv(*full) if mode is None else \
                    [sys.executable, str(ROOT / "benchmarks" / "unhardened_t0.py"), mode, *full]
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                wall = run_cli(argv, dict(tenv), str(work), work / f"{corpus.name}.log")
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                counts = s.close()
            # the run's whole process tree (T0, bwrap, the worker, its cell server, the
            # cells: each waited for by its parent), user and system time
            cpu[mode].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
            rp.check_counts(counts, f"agentprov run ({mode or 'as built'})", probe=1, listing=None)
            rp.corpus_entries(corpus)
            shutil.rmtree(rp._partial(corpus))
            return wall

        loads: list[tuple[str, str]] = []
        samples = rp.interleave(rounds, {k: (lambda m=m: arm(m)) for k, m in CELL_ARMS.items()},
                             loads)
    except Skip as exc:
        print(f"skipped: {exc}")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    a, b, c, d = (samples[k] for k in CELL_ARMS)
    cpu_a, cpu_d = cpu[None][-len(a):], cpu["cells-open"][-len(d):]  # the warm-up left out
    per_call = syscall_cost()

    def paired(x: list[float], y: list[float]) -> float:
        return statistics.median(p / q for p, q in zip(x, y, strict=True))

    lines = ["# bench_containment --cell: what the hardening costs a real-endpoint cell", "",
             f"AgentDojo's {rp.CELLS} benign banking cells through `agentprov run --containment "
             f"bwrap --jobs 1`, stand-in server at 0 ms a call; {rounds} interleaved rounds "
             f"after a warm-up; load average before/after each round: "
             + ", ".join(f"{x}→{y}" for x, y in loads) + ".", "",
             "| arm | median run | IQR | median a cell | vs C (paired) |",
             "|---|---|---|---|---|"]
    for k, v in samples.items():
        q = statistics.quantiles(v, n=4)
        lines.append(f"| {k} | {statistics.median(v):.2f} s | {q[0]:.2f}–{q[2]:.2f} s | "
                     f"{statistics.median(v) / rp.CELLS * 1000:.0f} ms | {paired(v, c):.3f}x |")
    lines += ["", f"A vs B (the seccomp filter, masks, --disable-userns): {paired(a, b):.3f}x; "
              f"B vs C (the cells' Landlock ruleset, less a 4-instruction filter): "
              f"{paired(b, c):.3f}x; A vs D (what keeps one cell from another: the cell "
              f"server in place of the stdlib forkserver, signal and abstract socket scoping, "
              f"the metadata filter): {paired(a, d):.3f}x in wall time; in the CPU time of "
              f"the run's whole process tree (less sensitive to other load), "
              f"{statistics.median(cpu_a):.2f} s against {statistics.median(cpu_d):.2f} s "
              f"(medians), {paired(cpu_a, cpu_d):.3f}x paired. One system call inside bwrap (`os.getppid()`, 300,000 "
              f"calls, 8 interleaved rounds): {per_call[True]:.0f} ns with the filter, "
              f"{per_call[False]:.0f} ns without. A run's time "
              "includes its fixed costs (T0's start, the environment checks, the worker's "
              "start, the preflight probe), paid once a run.", ""]
    text = "\n".join(lines)
    print(text)
    Path("/tmp/bench_containment_cell.md").write_text(text, encoding="utf-8")
    return 0


# ------------------------------------------------------- the cell-to-cell hardening, in parts
CELL_FILTER_CODE = (
    "import sys, os, time\n"
    "if sys.argv[1] == 'on':\n"
    "    sys.path.insert(0, sys.argv[2]); from agentprov_backend import cellfilter\n"
    "    assert cellfilter.load() == 'metadata calls refused'\n"
    "t = time.perf_counter()\nfor _ in range(300000): os.getppid()\n"
    "print((time.perf_counter() - t) / 300000 * 1e9)")


def parts_main(rounds: int) -> int:
    """What keeps one cell from another costs a cell, in parts, interleaved: (1) a cell's
    round trip through the worker (``run-cell`` of a cell that does nothing, the probe's
    ``planter`` with nothing to plant), the worker library as built against a copy without
    the cell-to-cell hardening (``unhardened_t0.CELLS_OPEN``: the stdlib forkserver, no
    scoping, no metadata filter), both under bwrap; (2) one system call with the cells'
    metadata filter stacked on the profile's, and without."""
    import unhardened_t0

    from agentprov_core.backend.containment import Recorded

    sys.path.insert(0, str(ROOT / "benchmarks"))
    top = Path(tempfile.mkdtemp(prefix="agentprov-bench-parts-"))
    envs = {}
    for name in ("as built", "cells open"):
        d = top / name.replace(" ", "-")
        site = small_env(d)
        if name == "cells open":
            for module, old, new in unhardened_t0.CELLS_OPEN:
                f = site / "agentprov_backend" / module
                f.write_text(f.read_text().replace(old, new, 1))
        envs[name] = d
    rec = Recorded(kind="bwrap", declared_by="probe", profile_sha256=profile.profile_sha256())
    per_cell: dict[str, list[float]] = {k: [] for k in envs}
    n = 30
    try:
        for r in range(rounds + 1):
            for name in (list(envs) if r % 2 == 0 else list(reversed(envs))):
                staging = top / f"staging-{r}-{name.replace(' ', '-')}"
                with Worker("bench", envs[name], staging, containment=rec) as w:
                    w.request("run-cell", session_id="warm", staging=str(staging / "warm"),
                              probe=True, cell={"role": "planter", "plant": []})
                    for i in range(n):
                        t = time.perf_counter()
                        res = w.request("run-cell", session_id=f"s{i}",
                                        staging=str(staging / f"s{i}"), probe=True,
                                        cell={"role": "planter", "plant": []})
                        assert res["status"] == "complete", res
                        if r:  # round 0 warms up
                            per_cell[name].append((time.perf_counter() - t) * 1000)
        calls: dict[str, list[float]] = {"on": [], "off": []}
        for r in range(8):
            for use in (("on", "off") if r % 2 == 0 else ("off", "on")):
                fd = __import__("agentprov_core.backend.sandbox.seccomp",
                                fromlist=["open_fd"]).open_fd()
                try:
                    p = subprocess.run(["bwrap", "--unshare-user", "--unshare-net", "--ro-bind",
                                        "/", "/", "--proc", "/proc", "--dev", "/dev",
                                        "--seccomp", str(fd), sys.executable, "-c",
                                        CELL_FILTER_CODE, use,
                                        str(ROOT / "backends/shared/src")],
                                       pass_fds=(fd,), capture_output=True, text=True, check=True)
                finally:
                    os.close(fd)
                calls[use].append(float(p.stdout))
    finally:
        shutil.rmtree(top, ignore_errors=True)
    a, d = per_cell["as built"], per_cell["cells open"]
    lines = ["# bench_containment --cell-parts: what keeps one cell from another costs a cell",
             "", f"{rounds} interleaved rounds after a warm-up, {n} cells a round through one "
             f"worker under bwrap; load average {load_avg()}.", "",
             "| measured | as built | cells open | difference |", "|---|---|---|---|",
             f"| a cell's round trip through the worker (fork, confine, result), median | "
             f"{statistics.median(a):.2f} ms | {statistics.median(d):.2f} ms | "
             f"{statistics.median(a) - statistics.median(d):+.2f} ms |",
             f"| the same, 10th percentile (least disturbed by other load) | "
             f"{p10(a):.2f} ms | {p10(d):.2f} ms | {p10(a) - p10(d):+.2f} ms |",
             f"| one system call (`os.getppid()`), the profile's filter {'and' } the cells' | "
             f"{statistics.median(calls['on']):.0f} ns | {statistics.median(calls['off']):.0f} ns"
             f" | {statistics.median(calls['on']) - statistics.median(calls['off']):+.0f} ns |",
             ""]
    text = "\n".join(lines)
    print(text)
    Path("/tmp/bench_containment_parts.md").write_text(text, encoding="utf-8")
    return 0


def p10(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=10)[0]


def load_avg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--cell", action="store_true")
    ap.add_argument("--cell-parts", action="store_true")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--home", type=Path)
    ns = ap.parse_args()
    if ns.cell_parts:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        raise SystemExit(parts_main(ns.rounds))
    raise SystemExit(cell_main(ns.rounds, ns.home) if ns.cell else main())
