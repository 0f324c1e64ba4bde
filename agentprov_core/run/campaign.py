"""T0's campaign: run the due units of a plan in the worker and keep what happened.

Every unit (cell × repeat) that is not yet settled and has attempts left is started, up to
``--jobs`` at once. Each attempt gets a session id and a staging directory in the working
corpus; the worker runs the cell there and writes the capture/0.1 log and the native log.
T0 then checks the capture's hash chain, runs the redaction scan, stores both logs in the
raw store and appends the attempt to the ledger. Right after, it maps the attempt (AER, SEM,
PROV, validation; :mod:`agentprov_core.evidence.live_mapping`), failed attempts too: a
failed execution is kept, never discarded. Mapping never stops the campaign; an attempt whose
mapping raised counts as "failed" in the summary and the error is kept in the manifest.

A real model adds, around the same loop (:class:`Live`): the endpoint's key in
the worker's environment under its variable's name (never in argv, never written); for a
non-loopback endpoint the egress proxy (allowlist: exactly the endpoint's host:port),
reached through ``HTTPS_PROXY`` or, under an enforced containment, through the proxy's Unix
socket routed into the sandbox; the worker under the resolved containment; the preflight
probe before the first cell (:mod:`agentprov_core.live.preflight`); the caps
(:mod:`agentprov_core.live.caps`): a cell starts only if its worst case fits; and the canary
(:mod:`agentprov_core.live.canary`). The manifest records ``producer.sandbox``,
``live.endpoint_class``, ``live.caps``, ``live.egress``, ``live.quality``, ``live.canary``
and ``live.preflight``.

Stops: a config stop (a cell's setup refused the configuration), a canary stop, a cap stop
(``cap_reached``, ``cap_bound_exceeded``), a drain (``--control-file``), ``--limit``, and an
interrupt (SIGINT, SIGTERM, SIGHUP: in-flight sessions are sealed ``aborted`` and ledgered,
exit 130; a second signal exits at once).

Test-only overrides, honoured only when set (and recorded as ``live.test_overrides``):
``AGENTPROV_TEST_EGRESS_RESOLVE=HOST:PORT=IP:PORT[,...]`` makes the egress proxy dial IP:PORT
for an allowed HOST:PORT (the allowlist still matches the name asked for), and
``AGENTPROV_TEST_CA_FILE=PEM`` makes the worker trust that CA (``SSL_CERT_FILE``), so that a
loopback TLS stand-in can play a registered API host. ``AGENTPROV_TEST_KILL_T0=ledger:N``
makes T0 kill itself (SIGKILL) right after this invocation's Nth ledger line, before that
attempt's execution is written: the fault that a re-run's first step finishes
(:func:`finish_unmapped`). ``AGENTPROV_TEST_NATIVE_LOG=remove|truncate`` asks the worker to
remove the benchmark's native log, or cut it to its first half, once the cell has run and
before its end is judged (the session then ends ``incomplete``; the capture header
declares ``test_fault@1``). ``AGENTPROV_TEST_HOSTILE=KIND[:TARGET]`` asks the first cell
this invocation launches to stage hostile input once it has ended (a symlink, a hard link, a
FIFO, a socket or a sparse file of several GB in its staging, or a native log path outside
it; TARGET a host file; ``agentprov_backend.cells.HOSTILE_FAULTS``), which T0 refuses
(``map.staging_refused``; the capture header declares ``test_fault@1``). Never set them for
a real run.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import agentprov_capture
import click
import msgspec

from agentprov_core import __version__
from agentprov_core.backend import environments
from agentprov_core.base import redaction, timing
from agentprov_core.corpus import selfdigest, staged
from agentprov_core.corpus.ledger import Attempt
from agentprov_core.corpus.working import (
    MANIFEST_FORMAT,
    WorkingCorpus,
    now,
    partial_dir,
    unit_id,
    unit_key,
)
from agentprov_core.errors import AgentprovError
from agentprov_core.evidence import capture_chain
from agentprov_core.live import endpoints as epmod

CONFIG_STOP = ("agentprov run: a cell's setup refused this configuration, so no further cell "
               "was started (every one would fail the same way); fix the option the refusal "
               "names and re-run the same command")
TEST_RESOLVE = "AGENTPROV_TEST_EGRESS_RESOLVE"
TEST_CA = "AGENTPROV_TEST_CA_FILE"
TEST_KILL = "AGENTPROV_TEST_KILL_T0"
TEST_NATIVE_LOG = "AGENTPROV_TEST_NATIVE_LOG"
TEST_HOSTILE = "AGENTPROV_TEST_HOSTILE"
#: the worker's cells.HOSTILE_FAULTS (T0 never imports the worker library)
HOSTILE_FAULTS = ("capture_symlink_host", "capture_symlink_ledger", "native_symlink_host",
                  "native_dotdot", "native_absolute", "native_nul", "native_long_name",
                  "fifo", "socket", "hardlink", "huge_sparse", "symlink_other_session")
#: stops that leave the corpus partial (R-21.31) and exit 1
EARLY_STOPS = ("config", "worker", "canary", "cap_reached", "cap_bound_exceeded")


@dataclass
class Unit:
    cell: Any
    repeat: int
    key: str  # the unit's name (the ledger's ``unit``)
    attempt: int
    digest: str = ""  # with ``key``, the unit's identity (the ledger's ``unit_digest``)


@dataclass
class Flight:
    unit: Unit
    session_id: str
    staging: Path
    started_at: str
    future: Future
    quality: dict[str, Any] = field(default_factory=dict)
    records: list[dict[str, Any]] | None = None
    charge: Any = None


@dataclass
class Tally:
    attempts: int = 0
    sealed: int = 0
    failed: int = 0
    conclusive: int = 0
    inconclusive: int = 0
    quarantined: int = 0
    inconsistent: int = 0  # complete, but the live-versus-native check disagreed
    derived: int = 0  # executions written
    map_failed: int = 0  # attempts whose mapping raised
    issues: Counter = field(default_factory=Counter)  # register codes of this invocation
    map_failures: list[dict[str, str]] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    quality: dict[str, Any] = field(default_factory=dict)
    canary: list[Any] = field(default_factory=list)  # canary findings (stop or notice)
    cap: str | None = None  # why a cap stopped the campaign


class Interrupted(Exception):
    pass


class Progress:
    """A live line on a terminal (cells done and in flight, failures, calls); silent when
    stderr is not a terminal."""

    def __init__(self, total: int) -> None:
        self.bar = None
        if sys.stderr.isatty() and total:
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn
            from rich.progress import Progress as RichProgress

            self.bar = RichProgress(TextColumn("cells"), BarColumn(), MofNCompleteColumn(),
                                    TextColumn("{task.description}"), transient=True)
            self.task = self.bar.add_task("", total=total)
            self.bar.start()

    def update(self, done: int, in_flight: int, failed: int, calls: int) -> None:
        if self.bar is not None:
            self.bar.update(self.task, completed=done,
                            description=f"{in_flight} in flight, {failed} failed, {calls} call(s)")

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def unit_ids(plan) -> Callable[[Attempt], str | None]:
    """The unit of ``plan`` that a ledger entry answers for (its :func:`unit_id`), or
    ``None`` when it answers for none of them (docs/decisions.md, "Unit identity").

    An entry answers for the unit of its own unit key and unit digest. An entry written
    before units had a digest answers only for a unit of this very plan digest (which holds
    everything its cell runs but the display name) whose attack does not address the model
    by name; otherwise it is another plan's attempt, kept and counted by nothing here."""
    cells = {c.key: c for c in plan.cells}

    def uid(e: Attempt) -> str | None:
        if isinstance(e.unit_digest, str):
            return unit_id(e.unit, e.unit_digest)
        c = cells.get(e.cell_key)
        if c is None or e.plan_sha256 != plan.plan_sha256 or c.attack in plan.named_attacks:
            return None
        return unit_id(e.unit, plan.unit_digest(c))

    return uid


def plan_progress(plan, wc: WorkingCorpus, entries: list[Attempt] | None = None):
    """``(settled, counts, mine, uid)``: the unit ids of ``plan`` that are settled, the
    attempts per unit id, the entries that answer for its units, and :func:`unit_ids`."""
    uid = unit_ids(plan)
    mine = [e for e in (wc.attempts() if entries is None else entries) if uid(e) is not None]
    return wc.settled(mine, key=uid), wc.attempts_per_unit(mine, key=uid), mine, uid


def _plan_units(plan):
    """``(repeat, cell, unit key, unit digest)`` of every unit, in plan order."""
    for r in range(plan.repeats):
        for cell in plan.cells:
            yield r, cell, unit_key(cell.key, plan.defence, r), plan.unit_digest(cell)


def _units(p, settled: set[str], counts) -> tuple[list[Unit], int]:
    """The due units (not settled, attempts left) in plan order, and how many were settled
    (``settled`` and ``counts`` by unit id)."""
    plan = p.plan
    due, done_before = [], 0
    for r, cell, key, digest in _plan_units(plan):
        uid = unit_id(key, digest)
        if uid in settled:
            done_before += 1
            continue
        if counts[uid] >= plan.max_attempts:
            continue  # exhausted: no attempt left
        due.append(Unit(cell, r, key, counts[uid] + 1, digest))
    return due, done_before


def read_progress(p) -> None:
    """Set the plan's settled units and attempts already used from its corpus, if any
    (attempts are counted across invocations; only entries that answer for the plan's own
    units count)."""
    wc = WorkingCorpus.peek(p.request.options["corpus"])
    if wc is None:
        return
    plan = p.plan
    settled, counts, _, _ = plan_progress(plan, wc)
    plan.settled, plan.attempts_used, plan.settled_cells = 0, 0, {}
    for _, c, key, digest in _plan_units(plan):
        uid = unit_id(key, digest)
        if uid in settled:
            plan.settled += 1
            plan.settled_cells[c.key] = plan.settled_cells.get(c.key, 0) + 1
        else:
            plan.attempts_used += min(counts[uid], plan.max_attempts)


def check_corpus(p) -> None:
    """Mixed configuration, mixed plan and mixed transport refusals (exit 4), before
    anything starts. A plan whose content digest (what its cells run, apart from which
    cells) the corpus does not hold would run cells the corpus already holds another way:
    refused like another configuration, unless ``--allow-mixed-config``."""
    from agentprov_core.plan.plans import content_differences

    o = p.request.options
    wc = WorkingCorpus.peek(o["corpus"])
    if wc is None:
        return
    m = wc.manifest()
    want = "scripted" if p.request.scripted else "real"
    have = "scripted" if m.get("test_only") else "real"
    if have != want:
        raise AgentprovError("cli.refused.mixed_transport", corpus=wc.root, have=have, want=want)
    if o.get("allow_mixed_config"):
        return
    digests = set(m.get("config_digests", []))
    if digests and p.plan.config_digest not in digests:
        raise AgentprovError("cli.refused.mixed_config", corpus=wc.root,
                             have=", ".join(sorted(d[:16] for d in digests)),
                             want=p.plan.config_digest[:16])
    contents = m.get("plan_contents") or {}
    if contents and p.plan.content_digest not in contents:
        # name what differs from the recorded content closest to this plan's
        diffs = min((content_differences(c, p.plan.content) for c in contents.values()),
                    key=len)
        raise AgentprovError("cli.refused.mixed_plan", corpus=wc.root,
                             what="; ".join(diffs) or "another content digest")


def check_supported(p) -> None:
    """What this build cannot run (exit 5, before consent and before any worker starts):
    another element than the native one, scripted or not (this build's worker runs
    AgentDojo's stock element only, so a campaign recorded as ``gateway_compat`` would
    record an element that never ran; a dry run still plans it); and against a real model,
    an Inspect source. (A defence's own endpoint, ``--defence-endpoint``, is refused
    earlier, with the defence: :mod:`agentprov_core.registries.defences`.)

    An Anthropic-style endpoint runs AgentDojo's own AnthropicLLM over an ``AsyncAnthropic``
    client on the recording transport (the event-stream replies read by caps, canary,
    preflight and the mapper). The environment locks anthropic below 1.0: AgentDojo 0.1.35's
    element passes ``temperature`` to ``messages.stream``, which anthropic 1.0.0 and later
    no longer take."""
    o = p.request.options
    name = p.source.meta.name
    if (o.get("llm_element") or "native") != "native":
        raise AgentprovError("run.unsupported.llm_element", source=name,
                             element=o["llm_element"],
                             reason="This build's worker runs AgentDojo's stock element "
                                    "(native) only: a campaign with another element would "
                                    "record an element that never ran (a dry run plans it).")
    why = None
    if not p.request.scripted and p.source.meta.kind != "suites":
        what, why = f"of {name}", ("an Inspect task runs through Inspect's own model, which this "
                                   "build does not drive.")
    if why is not None:
        raise AgentprovError("run.unsupported.campaign", source=name, what=what, why=why)


def test_overrides() -> tuple[dict[str, tuple[str, int]] | None, str | None, list[str]]:
    """The test-only resolver and CA file (see the module docstring), and what to record."""
    resolver: dict[str, tuple[str, int]] | None = None
    notes: list[str] = []
    raw = os.environ.get(TEST_RESOLVE)
    if raw:
        resolver = {}
        for item in raw.split(","):
            name, _, target = item.strip().partition("=")
            host, _, _port = name.rpartition(":")
            ip, _, tport = target.rpartition(":")
            if not host or not ip or not tport.isdigit():
                raise AgentprovError("cli.usage.option_value", option=TEST_RESOLVE, value=item,
                                     what="HOST:PORT=IP:PORT (a test-only override)")
            resolver[host.lower()] = (ip, int(tport))
        notes.append(f"{TEST_RESOLVE}: {', '.join(sorted(resolver))} resolved to loopback "
                     "(a test stand-in)")
    ca = os.environ.get(TEST_CA) or None
    if ca:
        notes.append(f"{TEST_CA}: the worker trusted a test CA")
    return resolver, ca, notes


def native_log_fault() -> str | None:
    """``AGENTPROV_TEST_NATIVE_LOG`` (test-only; see the module docstring), checked."""
    raw = os.environ.get(TEST_NATIVE_LOG)
    if not raw:
        return None
    if raw not in ("remove", "truncate"):
        raise AgentprovError("cli.usage.option_value", option=TEST_NATIVE_LOG, value=raw,
                             what="remove or truncate (a test-only fault)")
    return raw


def hostile_fault() -> dict[str, str] | None:
    """``AGENTPROV_TEST_HOSTILE`` (test-only; see the module docstring), checked."""
    raw = os.environ.get(TEST_HOSTILE)
    if not raw:
        return None
    kind, _, target = raw.partition(":")
    if kind not in HOSTILE_FAULTS:
        raise AgentprovError("cli.usage.option_value", option=TEST_HOSTILE, value=raw,
                             what=" | ".join(HOSTILE_FAULTS) + ", then :TARGET "
                                  "(a test-only fault)")
    return {"hostile": kind, "target": target}


class Live:
    """The endpoint side of one invocation: the scripted endpoint, or a real endpoint's key,
    egress proxy and containment; and the worker started with them."""

    def __init__(self, p) -> None:
        self.p = p
        self.scripted = p.request.scripted
        self.endpoint = None
        self.proxy = None
        self.secret = None
        self.overrides: list[str] = []
        self._tmp: Path | None = None
        self.params: dict[str, Any] = {}
        if not self.scripted:
            from agentprov_core.run import prepare as planning

            self.params = planning.model_params(p.request, p.source, p.endpoint)

    @property
    def wire(self) -> str:
        return self.p.resolved.wire if self.p.resolved is not None else "openai"

    def secrets(self) -> dict[str, str]:
        """The values the redaction scan looks for (the key, by its variable's name)."""
        return {self.secret.name: self.secret.reveal()} if self.secret is not None else {}

    def start(self, staging_root: Path):
        from agentprov_core.backend.workerclient import Worker

        p = self.p
        o = p.request.options
        env_dir = environments.environment_dir(p.plan.environment_id)
        staging_root.mkdir(parents=True, exist_ok=True)
        if self.scripted:
            from agentprov_core.live.scripted.script import load_script
            from agentprov_core.live.scripted.server import ScriptedEndpoint

            self.endpoint = ScriptedEndpoint(load_script(Path(o["llm_script"])))
            self.endpoint.start()
            return Worker(p.plan.environment_id, env_dir, staging_root, network=True,
                          extra_env=self.warm_env())
        import tempfile
        from urllib.parse import urlsplit

        from agentprov_core.backend import containment as cm
        from agentprov_core.live import egress, keys

        r = p.resolved
        env: dict[str, str] = self.warm_env()
        if r.key_variable:
            self.secret = keys.read_key(r.key_variable, o)
            env[r.key_variable] = self.secret.reveal()  # the one secret the worker gets
        recorded = msgspec.convert(p.containment, cm.Recorded) if p.containment else None
        resolver, ca, self.overrides = test_overrides()
        loopback: tuple[int, ...] = ()
        routes: tuple[tuple[int, str], ...] = ()
        eplan = egress.plan([r.base_url])
        if eplan is not None:
            self._tmp = Path(tempfile.mkdtemp(prefix="agentprov-e-"))  # a short socket path
            sock = self._tmp / "egress.sock"
            self.proxy = eplan.proxy(unix_path=sock, resolver=resolver).start()
            if cm.enforced(recorded):
                inside = self.proxy.address[1]
                routes = ((inside, str(sock)),)
                env |= self.proxy.proxy_env(f"http://127.0.0.1:{inside}")
            else:
                env |= self.proxy.proxy_env()
        else:  # a loopback endpoint is reached directly
            u = urlsplit(r.base_url)
            loopback = (u.port or (443 if u.scheme == "https" else 80),)
        if ca:  # into the staging root an earlier worker could write: a fresh file, never
            #     through what it left there (a link is removed, not followed)
            pem = staging_root / "agentprov-test-ca.pem"
            pem.unlink(missing_ok=True)
            fd = os.open(pem, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "wb") as f:
                f.write(Path(ca).read_bytes())
            env["SSL_CERT_FILE"] = str(pem)
        return Worker(p.plan.environment_id, env_dir, staging_root, network=True,
                      extra_env=env, containment=recorded,
                      allowed=cm.Allowed(loopback_ports=loopback, unix_sockets=routes))

    def warm_env(self) -> dict[str, str]:
        """What makes the campaign's worker start its forkserver at once, and what the
        forkserver's warm-up reads: the benchmark version and the plan's suites (every cell
        of a suite reads the same files; agentprov_backend.preload.warm_cells)."""
        plan = self.p.plan
        return {"AGENTPROV_WORKER_WARM": json.dumps(
            {"benchmark_version": plan.benchmark_version,
             "suites": sorted({c.suite for c in plan.cells if c.suite})})}

    def agent(self, session_id: str) -> dict[str, Any]:
        o = self.p.request.options
        if self.scripted:
            return {"scripted": True, "base_url": self.endpoint.base_url(session_id),
                    "model_id": "scripted", "pipeline_name": "scripted", "key_env": None,
                    "display_name": o.get("model_display_name")}
        r = self.p.resolved
        ident = getattr(self.p, "local_identity", None)
        model_id = o.get("model_id") or getattr(ident, "model_id", None)
        # AgentDojo's own pipeline name for a local server is "local" ("Local model"); for
        # an API the model id, with "/" as "_" as AgentDojo's logger writes it (so the
        # native log's pipeline_name and path agree with the capture; a stock MODEL_NAMES
        # key still matches as a substring)
        pipeline = "local" if r.endpoint_class == "local" else str(model_id).replace("/", "_")
        return {"scripted": False, "base_url": r.base_url, "model_id": model_id,
                "pipeline_name": pipeline, "key_env": r.key_variable,
                "display_name": o.get("model_display_name"), "endpoint_kind": r.kind,
                "wire": r.wire,
                "element": "AnthropicLLM" if r.wire == "anthropic" else "OpenAILLM",
                "params": {k: v for k, v in self.params.items() if k != "temperature_policy"}}

    def stop(self) -> None:
        if self.endpoint is not None:
            self.endpoint.stop()
        if self.proxy is not None:
            self.proxy.stop()
        if self._tmp is not None:
            import shutil

            shutil.rmtree(self._tmp, ignore_errors=True)

    def egress_record(self) -> dict[str, Any] | None:
        return self.proxy.record() if self.proxy is not None else None


def prewarm(p) -> None:
    """What the campaign worker's containment will need, started in the background before
    the check worker runs (T0 waits for that worker's hello meanwhile)."""
    if p.request.scripted or not p.containment:
        return
    from agentprov_core.backend import containment as cm

    cm.prewarm(msgspec.convert(p.containment, cm.Recorded),
               environments.environment_dir(p.plan.environment_id))


PREFLIGHT_LEDGER = "preflight/ledger.jsonl"


def _records(data: bytes) -> list[dict[str, Any]]:
    out = []
    for line in data.splitlines():
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):  # a log the worker wrote: read up to the damage
            break
        if not isinstance(rec, dict):
            break
        out.append(rec)
    return out


def account_of(p, wc: WorkingCorpus | None, live: Live | None = None):
    """The corpus's spend so far (every attempt of every configuration, and the probe
    calls), with the bound in force and this invocation's caps."""
    from agentprov_core.live import caps

    params = live.params if live is not None else {}
    acc = caps.Account(caps.Caps.from_options(p.request.options),
                       bound=caps.Bound.for_params(params, p.plan.defence))
    if wc is None:
        return acc
    for e in wc.attempts():
        if e.capture_sha256 and wc.store.has(e.capture_sha256):
            acc.charge(caps.charge_records(_records(wc.store.path(e.capture_sha256).read_bytes())))
        else:
            acc.charge(caps.missing_log(e.defence))
    ledger = wc.root / PREFLIGHT_LEDGER
    if ledger.is_file():
        from agentprov_core.corpus.store import RawStore

        store = RawStore(wc.root / "preflight")
        for line in ledger.read_text(encoding="utf-8").splitlines():
            try:
                entry = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if not isinstance(entry, dict):
                continue
            sha = entry.get("capture_sha256")
            if sha and store.has(sha):
                acc.charge(caps.charge_records(_records(store.path(sha).read_bytes())),
                           probe=True)
            else:
                acc.charge(caps.Charge(bound_calls=1), probe=True)
    return acc


def _probe_call(p, live: Live, worker, staging_root: Path, wc: WorkingCorpus | None,
                acc, invocation: str):
    """The ``call`` of :class:`agentprov_core.live.preflight.Probe`: one probe call in its own
    session, charged to the caps and (in a campaign) kept under ``preflight/``."""
    from agentprov_core.live import caps

    def call(n: int, code: str, text: str) -> tuple[list[dict[str, Any]], str | None]:
        why = acc.fits(0, new_cells=0, new_calls=1) if acc.caps.active else None
        if why is not None:
            raise _CapStop("cap_reached", f"the preflight probe's call {n} does not fit: {why}")
        session_id = f"pf-{uuid.uuid4().hex[:16]}"
        staging = staging_root / session_id
        staging.mkdir(parents=True)
        req = {"session_id": session_id, "staging": os.path.abspath(staging),
               "source": p.source.meta.name, "benchmark_version": p.plan.benchmark_version,
               "defence": "none",
               "cell": {"suite": None, "user_task_id": None, "attack": None,
                        "injection_task_id": None, "cell_key": "preflight", "kind": "preflight"},
               "unit": None, "attempt": n, "agent": live.agent(session_id),
               "backend": p.identity, "plan_sha256": p.plan.plan_sha256,
               "config_digest": p.plan.config_digest, "timeout_s": 300,
               "preflight": {"call": n, "instruction": text, "user": _preflight().USER}}
        try:
            result = worker.result(worker.submit("run-cell", **req), timeout=330)
        except AgentprovError as exc:
            result = {"status": "aborted", "error": exc.message}
            capture_chain.seal(staging / "capture.jsonl", "aborted", exc.message,
                               "session.worker_failed")
        raw_result = result  # the worker's: hostile input, taken as a cell's result is
        result, refused = staged.returned(result)
        got = staged.read(staging)  # read once, through descriptors: scanned and stored
        files = got.files
        if refused or got.refused:
            raise AgentprovError("cli.environment.preflight", endpoint=p.resolved.name,
                                 url=epmod.shown(p.resolved.base_url),
                                 why="T0 refused what the probe's worker staged or returned "
                                     "(map.staging_refused: "
                                     + "; ".join((refused + got.refused)[:3])
                                     + f"); its staging directory {staging} was kept")
        data = files.get("capture.jsonl", b"")
        records = _records(data)
        charge = caps.charge_records(records) if records else caps.missing_log()
        acc.charge(charge, probe=True)
        if redaction.scan_files(files, live.secrets()) or redaction.scan_value(
                "the worker's result", raw_result, live.secrets()):
            raise AgentprovError("cli.environment.preflight", endpoint=p.resolved.name,
                                 url=epmod.shown(p.resolved.base_url),
                                 why="a staged file of the probe held a secret; its staging "
                                     f"directory {staging} was kept")
        if wc is not None:
            from agentprov_core.corpus.store import RawStore

            sha = RawStore(wc.root / "preflight").put_bytes(data) if data else None
            chain = (agentprov_capture.check(data, require_end=False)
                     if "capture.jsonl" in files else None)
            entry = {"at": now(), "invocation": invocation, "session_id": session_id,
                     "call": n, "status": result.get("status"),
                     "capture_sha256": sha,
                     "capture_head_sha256": chain.head_sha256 if chain else None,
                     "billed_calls": charge.billed, "plan_sha256": p.plan.plan_sha256,
                     "config_digest": p.plan.config_digest}
            (wc.root / PREFLIGHT_LEDGER).parent.mkdir(exist_ok=True)
            with open(wc.root / PREFLIGHT_LEDGER, "a", encoding="utf-8") as f:
                f.write(selfdigest.json_line(entry))
                f.flush()
                os.fsync(f.fileno())
        if not p.request.options.get("keep_staging"):
            import shutil

            shutil.rmtree(staging, ignore_errors=True)
        return records, result.get("error")

    return call


def _preflight():
    from agentprov_core.live import preflight

    return preflight


class _CapStop(Exception):
    def __init__(self, stop: str, why: str) -> None:
        super().__init__(why)
        self.stop, self.why = stop, why


def run_preflight(p, live: Live, worker, staging_root: Path, wc: WorkingCorpus | None, acc,
                  invocation: str) -> dict[str, Any]:
    """Run the probe (R-18); returns what ``live.preflight`` records. Raises
    ``cli.refused.preflight`` (4), ``cli.environment.preflight`` (3) or a cap stop."""
    from agentprov_core.live import canary

    pf = _preflight()
    s = canary.Settings.from_run(p.request.options, live.params, live.wire)
    probe = pf.Probe(p.resolved.name, epmod.shown(p.resolved.base_url), s)
    try:
        verdict = probe.run(_probe_call(p, live, worker, staging_root, wc, acc, invocation))
    except AgentprovError:
        click.echo(f"preflight: {len(probe.calls)} call(s): "
                   + "; ".join(f"{c['verdict']} ({c['why']})" for c in probe.calls), err=True)
        raise
    click.echo(f"preflight: confirmed after {len(probe.calls)} call(s): the roles reach the "
               "model (A9), tool calls come back structured (A4), the configured parameters "
               "are transmitted (A3)" + "".join(f"; {n}" for n in verdict.notes), err=True)
    return probe.record(verdict) | {"at": now()}


def _preflight_only(p, consent: dict[str, Any] | None) -> int:
    """``--preflight-only`` (R-18.8): the probe alone, in a temporary staging directory;
    nothing is kept and no corpus is written."""
    import tempfile

    live = Live(p)
    acc = account_of(p, None, live)
    worker = None
    with tempfile.TemporaryDirectory(prefix="agentprov-pf-") as tmp:
        try:
            worker = live.start(Path(tmp) / "staging")
            run_preflight(p, live, worker, Path(tmp) / "staging", None, acc,
                          uuid.uuid4().hex[:12])
        finally:
            if worker is not None:
                worker.close()
            live.stop()
    click.echo(f"agentprov run: preflight only: {acc.probe.billed} billed probe call(s); no "
               "cell was run and nothing was written")
    return 0


def _manifest(p, wc: WorkingCorpus, old: dict[str, Any] | None) -> dict[str, Any]:
    from agentprov_core.plugins import manager

    plan = p.plan
    meta = p.source.meta
    m = dict(old or {})
    marker = environments.read_marker(meta, plan.environment_id)
    m.update({
        "format": MANIFEST_FORMAT, "corpus_id": plan.corpus_id, "source": meta.name,
        "profile": meta.live_profile, "registry_parts": "live",
        "backend": plan.backend, "working": True, "test_only": p.request.scripted,
        "synthetic": p.request.scripted, "updated_at": now(),
        "backend_identity": {"environment_id": plan.environment_id,
                             "identity_sha256": marker.identity_sha256,
                             "lock_sha256": marker.lock_sha256,
                             "pinned_commit": marker.pinned_commit,
                             "distributions": marker.distributions},
        "producer": {"agentprov": __version__,
                     "sandbox": None if p.request.scripted else p.containment,
                     "python": sys.version.split()[0]},
        "plugins": sorted(({"name": r.name, "distribution": r.distribution,
                            "version": r.version, "status": r.status}
                           for r in manager().records), key=lambda r: r["name"]),
        "source_meta": msgspec.to_builtins(meta),
    })
    m.setdefault("created_at", now())
    m["plans"] = sorted(set(m.get("plans", [])) | {plan.plan_sha256})
    m["config_digests"] = sorted(set(m.get("config_digests", [])) | {plan.config_digest})
    # what the corpus's cells were run with, by content digest (docs/decisions.md, "Unit
    # identity"): a plan with another one is refused unless --allow-mixed-config
    m["plan_contents"] = {**(m.get("plan_contents") or {}),
                          plan.content_digest: plan.content}
    live = dict(m.get("live") or {})
    live.update({"endpoint_class": p.endpoint_class,  # local|api, decided before consent
                 "transport": "scripted" if p.request.scripted else "endpoint",
                 "llm_element": p.request.options.get("llm_element") or "native"})
    live.setdefault("caps", None)
    live.setdefault("egress", None)
    ident = getattr(p, "local_identity", None)
    if ident is not None:  # step 4's identity record, under the digest the configuration
        # digest holds; the first observation of a digest is kept
        live.setdefault("local_models", {}).setdefault(ident.digest, ident.to_json())
    m["live"] = live
    return m


#: The corpus's filesystem refused a write: a full disk or quota, a read-only or failing device.
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO})


def run(p, consent: dict[str, Any] | None = None) -> int:
    try:
        if p.request.options.get("preflight_only"):
            return _preflight_only(p, consent)
        return _run(p, consent)
    except OSError as exc:
        if exc.errno not in DISK_ERRNOS:
            raise
        where = f" ({exc.filename})" if exc.filename else ""
        raise AgentprovError(
            "cli.environment.corpus", corpus=partial_dir(p.request.options["corpus"]),
            what=f"a write failed: {exc.strerror}{where}; the attempts already in its ledger "
                 "are kept: free space and re-run the same command to resume") from None


# ------------------------------------------------------------- finish unmapped attempts
def finish_unmapped(p, wc: WorkingCorpus, entries: list[Attempt]) -> Tally:
    """Map every ledgered attempt that has a stored capture log and no execution in the
    index, in ledger order, before any new work: the attempts of a T0 killed between an
    attempt's ledger line and its index line (or whose mapping raised). An attempt that an
    index line names is never mapped again, and files a cut-short mapping left are kept
    only where their bytes are the ones it writes now (an execution is written once).
    Returns the tally of these mappings (derived, failed, their issues)."""
    from agentprov_core.evidence import live_mapping
    from agentprov_core.evidence.executions import Executions

    t = Tally()
    mapped = Executions(wc.root).mapped()
    todo = []
    for e in entries:
        if e.session_id not in mapped and live_mapping.mappable(wc.store, e):
            mapped.add(e.session_id)  # one execution per session
            todo.append(e)
    if not todo:
        return t
    for e in todo:
        _map(p, wc, e, t, finish=True)
    click.echo(f"agentprov run: {len(todo)} attempt(s) in the ledger had no execution (an "
               f"earlier run ended before mapping them): {t.derived} mapped now, "
               f"{t.map_failed} failed", err=True)
    for f in t.map_failures:
        click.echo(f"notice: mapping failed: {f['session_id']} ({f['unit']}): {f['error']}",
                   err=True)
    if t.map_failures:
        manifest = wc.manifest()
        manifest.setdefault("mapping_failures", []).extend(t.map_failures)
        wc.write_manifest(manifest)
    return t


def _run(p, consent: dict[str, Any] | None = None) -> int:
    o = p.request.options
    started = time.monotonic()
    t_open = time.time()
    check_corpus(p)
    wc = WorkingCorpus(partial_dir(o["corpus"]))
    wc.lock()
    live_ctx = Live(p)
    wc.secrets = live_ctx.secrets  # the manifest is scanned for the key too
    try:
        old = wc.manifest() if (wc.root / "manifest.json").is_file() else None
        manifest = _manifest(p, wc, old)
        manifest["partial"] = bool(old and old.get("partial"))
        if consent is not None:
            manifest["live"].setdefault("consent", []).append(consent | {"at": now()})
        acc = account_of(p, wc, live_ctx)
        manifest["live"]["caps"] = acc.record()
        faults = set()
        if kill_override() is not None:
            faults.add(f"{TEST_KILL}: T0 killed itself after a ledger line (a test fault)")
        if (native := native_log_fault()) is not None:
            faults.add(f"{TEST_NATIVE_LOG}: the worker was asked to {native} "
                       "the native log of every cell (a test fault)")
        if (hostile := hostile_fault()) is not None:
            faults.add(f"{TEST_HOSTILE}: the worker was asked to stage hostile input "
                       f"({hostile['hostile']}) in the first cell of an invocation "
                       "(a test fault)")
        if faults:
            manifest["live"]["test_overrides"] = sorted(
                set(manifest["live"].get("test_overrides", [])) | faults)
        wc.write_manifest(manifest)
        entries = wc.attempts()
        finished = finish_unmapped(p, wc, entries)
        # only entries of this plan's units count (another plan's stay apart)
        settled, counts, mine, uid = plan_progress(p.plan, wc, entries)
        if o.get("retry_inconsistent"):
            settled -= _inconsistent_units(wc, mine, uid)
        due, done_before = _units(p, settled, counts)
        jobs = o.get("jobs") or 1
        click.echo(f"agentprov run {p.source.meta.name}: units={len(due)} plan={p.plan.units} "
                   f"unit(s) workers={jobs}")
        run_state: dict[str, Any] = {}
        timing.emit("campaign.open", t_open)
        try:
            tally, stop = _campaign(p, wc, due, jobs, len(entries), live_ctx, acc, run_state)
        except AgentprovError:  # the preflight refused: keep what it recorded, then report
            _record_live(wc, live_ctx, acc, run_state)
            raise
        tally.derived += finished.derived  # executions this invocation wrote
        tally.map_failed += finished.map_failed
        tally.issues.update(finished.issues)
        t_finish = time.time()
        if stop == "interrupt":
            exit_code = 130
        elif stop in EARLY_STOPS or tally.failed or tally.quarantined or \
                tally.inconclusive or tally.inconsistent or tally.map_failed:
            exit_code = 1
        else:  # complete, a drain or --limit with every attempt conclusive (decisions 3, 4)
            exit_code = 0
        _record_live(wc, live_ctx, acc, run_state)
        manifest = wc.manifest()
        from agentprov_core.live import quality

        live = manifest.setdefault("live", {})
        total = live.get("quality") or {}
        quality.merge(total, tally.quality)
        live["quality"] = total
        manifest["partial"] = bool(manifest.get("partial")) or stop in (
            "limit", "interrupt", *EARLY_STOPS)
        manifest["updated_at"] = now()
        manifest.setdefault("stops", []).append({"at": now(), "stop": stop or "complete",
                                                 "exit": exit_code})
        if tally.map_failures:
            manifest.setdefault("mapping_failures", []).extend(tally.map_failures)
        wc.write_manifest(manifest)
    finally:
        wc.unlock()
    _summary(p, wc, tally, stop, exit_code, started, done_before, len(due),
             acc.record() if acc_line_wanted(p) else None)
    timing.emit("campaign.finish", t_finish)
    return exit_code


def acc_line_wanted(p) -> bool:
    o = p.request.options
    return not p.request.scripted or o.get("max_calls") is not None or \
        o.get("max_cost_usd") is not None


def _record_live(wc: WorkingCorpus, live_ctx: Live, acc, run_state: dict[str, Any]) -> None:
    """Write what this invocation observed into ``live``: the caps (``live.caps``), the
    egress proxy's record (``live.egress``, per invocation; the last one at the top), the
    preflight, the canary and the test-only overrides."""
    manifest = wc.manifest()
    live = manifest.setdefault("live", {})
    live["caps"] = acc.record()
    egress = live_ctx.egress_record()
    if egress is not None:
        live["egress"] = egress
        live.setdefault("egress_invocations", []).append(egress)
    if run_state.get("preflight") is not None:
        live.setdefault("preflight", []).append(run_state["preflight"])
    if run_state.get("canary") is not None:
        live["canary"] = run_state["canary"]
    if live_ctx.overrides:
        live["test_overrides"] = sorted(set(live.get("test_overrides", [])) |
                                        set(live_ctx.overrides))
    wc.write_manifest(manifest)


def _campaign(p, wc: WorkingCorpus, due: list[Unit], jobs: int, seq0: int,
              live: Live | None = None, acc=None, run_state: dict[str, Any] | None = None):
    from agentprov_core.live import canary as canarymod

    o = p.request.options
    live = live or Live(p)
    acc = acc if acc is not None else account_of(p, wc, live)
    run_state = run_state if run_state is not None else {}
    tally = Tally()
    stop: str | None = None
    invocation = uuid.uuid4().hex[:12]
    state = {"signals": 0}

    state["critical"] = False
    state["pending"] = False

    def on_signal(signum, _frame):
        state["signals"] += 1
        if state["signals"] > 1:
            click.echo("agentprov run: second signal: exiting now; in-flight sessions stay in "
                       "staging, unledgered", err=True)
            os._exit(130)
        if state["critical"]:  # never between a launch and its tracking, nor a finished
            #                    cell and its ledger entry: the loop raises right after
            state["pending"] = True
            return
        raise Interrupted

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM,
                                                         signal.SIGHUP)}
    worker = None
    flights: dict[Future, Flight] = {}
    seq = [seq0]
    progress: Progress | None = None
    plan_units = [unit_key(c.key, p.plan.defence, r) for r in range(p.plan.repeats)
                  for c in p.plan.cells]
    canary = canarymod.Canary(o.get("canary"), plan_units,
                              canarymod.Settings.from_run(o, live.params, live.wire))
    local_identity = getattr(p, "local_identity", None)
    mappings = _Mappings(p, wc, tally)
    # T0's threads that wait on sockets (the bridge's relays, the worker's reader) must not
    # wait the default 5 ms for the GIL while a mapping runs
    switch = sys.getswitchinterval()
    sys.setswitchinterval(min(switch, 0.0005))
    try:
        with timing.span("live.start"):
            worker = live.start(wc.root / "staging")
        limit = o.get("limit")
        queue = list(due)
        if queue and not live.scripted:  # the preflight probe, before the first cell
            why = acc.fits(0) if acc.caps.active else None
            if why is not None:
                raise _CapStop("cap_reached", f"the next cell does not fit: {why}")
            with timing.span("preflight"):
                run_state["preflight"] = run_preflight(p, live, worker, wc.root / "staging",
                                                       wc, acc, invocation)
        progress = Progress(len(due))
        started_units = 0
        stagger = o.get("start_stagger") or 0.0
        while queue or flights:
            while (queue and len(flights) < jobs and stop is None
                   and (limit is None or started_units < limit)):
                if _drain_requested(o):
                    stop = "drain"
                    break
                if acc.caps.active:  # spend + in flight + the new cell's worst case
                    why = acc.fits(len(flights))
                    if why is not None:
                        stop, tally.cap = "cap_reached", f"the next cell does not fit: {why}"
                        break
                local_note = None
                if local_identity is not None:  # A14, before each cell
                    from agentprov_core.live.local import identity as local_ident

                    with timing.span("a14"):
                        same, changed, seen = local_ident.reobserve(
                            local_identity, p.resolved, getattr(p, "local_options", None))
                    if not same:  # no cell runs against another model than the plan's
                        tally.canary.append(canary.local_model_changed(queue[0].key, changed))
                        stop = "canary"
                        break
                    local_note = local_ident.session_note(local_identity, seen)
                unit = queue.pop(0)
                state["critical"] = True  # a launched cell is always tracked
                try:
                    with timing.span("launch"):
                        fl = _launch(p, wc, worker, live, unit, local_note,
                                     first=not started_units)
                    flights[fl.future] = fl
                except AgentprovError as exc:  # the worker died: stop, re-run resumes
                    stop = "worker"
                    tally.refusals.append(exc.message)
                    break
                finally:
                    state["critical"] = False
                if state["pending"]:
                    raise Interrupted
                started_units += 1
                if stagger and queue:
                    time.sleep(stagger)
            if not flights:
                if queue and stop is None and limit is not None and started_units >= limit:
                    stop = "limit"
                break
            mappings.start()  # the last cell's mapping, now that the next one is launched
            with timing.span("wait"):
                done, _ = wait(list(flights), timeout=0.25, return_when=FIRST_COMPLETED)
            state["critical"] = bool(done)
            for fut in done:
                fl = flights[fut]
                result = _result(worker, fl)
                with timing.span("ingest", session=fl.session_id):
                    entry = _ingest(p, wc, fl, result, invocation, seq, live,
                                    drop=mappings.drop_later)
                mappings.submit(entry, fl)  # counted once mapped (harvest)
                del flights[fut]  # ledgered: an interrupt from here on leaves it alone
                if entry.setup_refusal and stop is None:
                    stop = "config"
                    tally.refusals.append(f"{fl.unit.cell.key}: {entry.setup_refusal['message']}")
                if fl.charge is not None:
                    from agentprov_core.live import caps as capsmod

                    over = capsmod.exceeds_cell(fl.charge, acc.bound)
                    acc.charge(fl.charge)
                    if over is not None and stop in (None, "drain", "limit"):
                        stop, tally.cap = "cap_bound_exceeded", f"{fl.unit.key}: {over}"
                found = canary.observe(fl.unit.key, entry.status, fl.records)
                if found:
                    tally.canary += found
                    if stop is None and (queue or flights) and worker.proc.poll() is None:
                        stop = "canary"
                fl.records = None
            state["critical"] = False
            mappings.harvest()
            if state["pending"]:
                raise Interrupted
            if stop is None and worker.proc.poll() is not None:  # it died, even on the last cell
                stop = "worker"
                tally.refusals.append(f"the worker of {p.plan.environment_id} exited (code "
                                      f"{worker.proc.returncode}) with a cell in flight")
            progress.update(tally.attempts, len(flights), tally.failed,
                            sum(q["calls"] for q in tally.quality.values()))
            if stop is None and _drain_requested(o):
                stop = "drain"
    except _CapStop as exc:
        stop, tally.cap = exc.stop, exc.why
    except Interrupted:
        stop = "interrupt"
        if worker is not None:
            worker.kill()
        for fl in flights.values():
            capture_chain.seal(fl.staging / "capture.jsonl", "aborted",
                               "interrupted: the parent received a signal", "session.interrupted")
            entry = _ingest(p, wc, fl, {"status": "aborted", "reason": "interrupted"},
                            invocation, seq, live)
            if fl.charge is not None:
                acc.charge(fl.charge)
            mappings.submit(entry, fl)
        flights.clear()
    finally:
        if progress is not None:
            progress.stop()
        if not state["signals"]:  # after an interrupt on_signal stays: another signal, even
            for s, h in previous.items():  # while the summary is written, exits 130 at once
                signal.signal(s, h)
        t_close = time.time()
        if worker is not None:
            if flights:  # the worker died, or T0 failed (a full disk), with cells in flight
                worker.kill()
            for fl in flights.values():
                with contextlib.suppress(OSError):  # unsealed in staging if it cannot be written
                    capture_chain.seal(fl.staging / "capture.jsonl", "aborted",
                                       "the worker ended with the cell in flight",
                                       "session.worker_died")
            worker.close()
        live.stop()
        t_drain = time.time()
        state["critical"] = True  # a signal now waits for the last mappings
        mappings.close()
        state["critical"] = False
        timing.emit("mappings.drain", t_drain)
        sys.setswitchinterval(switch)
        run_state["canary"] = canary.record()
        timing.emit("campaign.close", t_close)
    return tally, stop


def _drain_requested(o) -> bool:
    path = o.get("control_file")
    if not path:
        return False
    from agentprov_core.base import inputfile

    try:  # a regular file of a few bytes: a FIFO or a device would stall the campaign
        return inputfile.read_bytes(path, limit=4096).strip() == b"drain"
    except inputfile.Unreadable:
        return False


def _launch(p, wc: WorkingCorpus, worker, live: Live, unit: Unit,
            local_model: dict[str, Any] | None = None, first: bool = False) -> Flight:
    o = p.request.options
    session_id = f"s-{uuid.uuid4().hex[:16]}"
    staging = wc.staging(session_id)
    cell = unit.cell
    agent = live.agent(session_id)
    req = {
        "session_id": session_id, "staging": os.path.abspath(staging),
        "source": p.source.meta.name,
        "benchmark_version": p.plan.benchmark_version, "defence": p.plan.defence,
        "cell": {"suite": cell.suite, "user_task_id": cell.user_task_id, "attack": cell.attack,
                 "injection_task_id": cell.injection_task_id, "kind": cell.kind,
                 "cell_key": cell.key},
        "unit": unit.key, "attempt": unit.attempt, "agent": agent,
        "backend": p.identity, "plan_sha256": p.plan.plan_sha256,
        "config_digest": p.plan.config_digest, "timeout_s": o.get("cell_timeout") or 1800,
    }
    if local_model is not None:  # A14's observation before this cell: the session notes it
        req["local_model"] = local_model
    fault = native_log_fault()
    if fault is not None:
        req["test_fault"] = fault
    hostile = hostile_fault() if first else None
    if hostile is not None:
        req["test_fault"] = hostile
    try:
        future = worker.submit("run-cell", **req)
    except AgentprovError:
        wc.drop_staging(session_id)  # nothing started in it
        raise
    timing.emit("submit", time.time(), session=session_id)
    return Flight(unit, session_id, staging, now(), future)


def _result(worker, fl: Flight) -> dict[str, Any]:
    try:
        return worker.result(fl.future, timeout=0)
    except AgentprovError as exc:
        capture_chain.seal(fl.staging / "capture.jsonl", "aborted", exc.message,
                           "session.worker_failed")
        return {"status": "aborted", "reason": exc.message}


def _ingest(p, wc: WorkingCorpus, fl: Flight, result: dict[str, Any], invocation: str,
            seq: list[int], live: Live | None = None, drop=None) -> Attempt:
    """Ledger a finished attempt (chain check, redaction scan, raw store, ledger entry),
    then remove its staging directory (``drop(session_id)``, by default at once)."""
    o = p.request.options
    secrets = live.secrets() if live is not None else {}
    raw_result = result
    # what the worker returned and staged is hostile input: a field of the wrong type, a
    # returned path outside staging, a staged link, FIFO, device or oversized file is
    # refused (never read) and the session is errored (map.staging_refused)
    result, refused = staged.returned(result)
    with timing.span("ingest.read"):
        got = staged.read(fl.staging, native=result.get("native_log"))
    files = got.files  # read once: checked, scanned and stored
    refused = [redaction.redact_text(r, secrets.values()) for r in refused + got.refused]
    data = files.get(staged.CAPTURE)
    with timing.span("ingest.chain"):
        chain = (agentprov_capture.check(data, require_end=False) if data is not None
                 else agentprov_capture.Chain(0, None, ["the capture log is missing" if not any(
                     r.startswith(staged.CAPTURE + ":") for r in refused)
                     else "the capture log was refused"], None, None, []))
    status = result.get("status", "errored")
    reason = result.get("reason") or result.get("error")
    end = chain.end
    if not chain.ok:
        damage = "capture log damaged: " + "; ".join(chain.problems[:2])
        status, reason = "errored", f"{reason}; {damage}" if reason else damage
    elif end is None:
        status, reason = "aborted", "the capture log has no end record"
    elif end.get("status") != status:
        status = end.get("status")
    if refused:
        why = "map.staging_refused: " + "; ".join(refused[:3]) + (
            f"; and {len(refused) - 3} more" if len(refused) > 3 else "")
        status, reason = "errored", f"{why}; {reason}" if reason else why
    from agentprov_core.live import caps, quality

    wire = live.wire if live is not None else "openai"
    fl.quality = quality.from_records(chain.records, wire)
    fl.records = chain.records
    fl.charge = caps.charge_records(chain.records) if chain.records \
        else caps.missing_log(p.plan.defence)
    with timing.span("ingest.scan"):
        # what the worker returned goes into the ledger: scanned like what it staged
        findings = redaction.scan_files(files, secrets) + redaction.scan_value(
            "the worker's result", raw_result, secrets)
    base = dict(seq=seq[0], invocation=invocation, unit=fl.unit.key, cell_key=fl.unit.cell.key,
                defence=p.plan.defence, repeat=fl.unit.repeat, attempt=fl.unit.attempt,
                session_id=fl.session_id, started_at=fl.started_at, ended_at=now(),
                plan_sha256=p.plan.plan_sha256, config_digest=p.plan.config_digest,
                unit_digest=fl.unit.digest)
    seq[0] += 1
    if findings:
        # nothing of it is stored: a whole cell
        fl.charge, fl.records = caps.missing_log(p.plan.defence), None
        wc.quarantine(fl.session_id, fl.unit.key, findings)
        entry = Attempt(**base, status="quarantined", conclusive=False,
                        reason="capture.quarantined: " + "; ".join(findings[:3]),
                        **({"staging_refused": refused} if refused else {}))
        _ledger_append(wc, entry)
        return entry
    t = time.time()
    cap_sha = wc.store.put_bytes(data) if data is not None else None
    native_sha = native_path = None
    native = result.get("native_log")
    if native in files:  # a file read from staging, under the name the worker returned
        native_sha, native_path = wc.store.put_bytes(files[native]), native
    timing.emit("ingest.store", t)
    books = accounting(chain.records)
    if status == "complete" and books != "consistent" and books != "unverifiable":
        reason = f"{reason}; {books}" if reason else books
    entry = Attempt(**base, status=status,
                    conclusive=status == "complete" and books in ("consistent", "unverifiable"),
                    capture_sha256=cap_sha, capture_head_sha256=chain.head_sha256,
                    capture_records=len(chain.records), native_sha256=native_sha,
                    native_path=native_path,
                    utility=None if refused else result.get("utility"),
                    security=None if refused else result.get("security"),
                    setup_refusal=result.get("setup_refusal"), reason=reason,
                    calls=result.get("calls"),
                    **({"staging_refused": refused} if refused else {}))
    with timing.span("ingest.ledger"):
        _ledger_append(wc, entry)
    if not o.get("keep_staging"):
        with timing.span("ingest.drop"):
            (drop or wc.drop_staging)(fl.session_id)
    return entry


def accounting(records: list[dict[str, Any]]) -> str:
    """A session's accounting (R-21.29): the worker's own count of its model calls (the end
    record's ``calls``) against the model calls its capture records. ``consistent`` or
    ``unverifiable`` (no count) lets a complete session be conclusive; otherwise the text
    says what differs, and the attempt is inconsistent: counted so, never settling its unit
    (it is attempted again)."""
    end = records[-1] if records and records[-1].get("kind") == "end" else None
    calls = end.get("calls") if end is not None else None
    if not isinstance(calls, int) or isinstance(calls, bool):
        return "unverifiable"
    starts = sum(1 for r in records if r.get("kind") == "model_call_start")
    if calls == starts:
        return "consistent"
    return (f"accounting: the worker counted {calls} model call(s), the capture records "
            f"{starts}")


def _ledger_append(wc: WorkingCorpus, entry: Attempt) -> None:
    wc.ledger.append(entry)
    _test_kill("ledger")


_KILL_COUNTS: Counter = Counter()


def kill_override() -> tuple[str, int] | None:
    """``AGENTPROV_TEST_KILL_T0=POINT:N`` (test-only; see the module docstring), checked."""
    raw = os.environ.get(TEST_KILL)
    if not raw:
        return None
    point, _, n = raw.partition(":")
    if point != "ledger" or not n.isdigit() or int(n) < 1:
        raise AgentprovError("cli.usage.option_value", option=TEST_KILL, value=raw,
                             what="ledger:N with N >= 1 (a test-only fault)")
    return point, int(n)


def _test_kill(point: str) -> None:
    kill = kill_override()
    if kill is None or kill[0] != point:
        return
    _KILL_COUNTS[point] += 1
    if _KILL_COUNTS[point] == kill[1]:
        os.kill(os.getpid(), signal.SIGKILL)


def _inconsistent_units(wc: WorkingCorpus, entries: list[Attempt], uid) -> set[str]:
    """Units (by unit id) none of whose conclusive attempts agreed with the native log
    (``--retry-inconsistent`` re-attempts them)."""
    from agentprov_core.evidence.executions import Executions

    verdicts = {x.ledger_seq: x.live_vs_native for x in Executions(wc.root).entries()}
    by_unit: dict[str, list[str]] = {}
    for e in entries:
        if e.conclusive:
            by_unit.setdefault(uid(e), []).append(verdicts.get(e.seq, "unchecked"))
    return {u for u, v in by_unit.items() if v and all(x == "disagree" for x in v)}


def _map_attempt(p, wc: WorkingCorpus, entry: Attempt, finish: bool = False):
    """The mapping of one ledgered attempt (its execution written; None when it is not
    mapped); raises what the mapping raised. ``finish``: an attempt an earlier run left
    unmapped, whose cut-short files are kept where they hold the bytes it writes now."""
    from agentprov_core.evidence import live_mapping

    with timing.span("map", session=entry.session_id):
        return live_mapping.map_attempt(
            wc.root, entry, wc.manifest(), mapped_at=now(), finish=finish,
            skip_prov=bool(p.request.options.get("skip_prov_conformance")))


def _mapped(t: Tally, entry: Attempt, mapped, exc: BaseException | None = None):
    """Count a mapping in the tally: the execution derived, or (``exc``) the mapping failed,
    its error kept; returns the mapping (None when there is none)."""
    if exc is not None:
        t.map_failed += 1
        t.map_failures.append({"session_id": entry.session_id, "unit": entry.unit,
                               "ledger_seq": str(entry.seq),
                               "error": f"{type(exc).__name__}: {exc}"[:500], "at": now()})
        return None
    if mapped is not None:
        t.derived += 1
        t.issues.update(mapped.entry.issues)
    return mapped


def _map(p, wc: WorkingCorpus, entry: Attempt, t: Tally, finish: bool = False):
    """Map a ledgered attempt into its execution (None when it is not mapped, or when the
    mapping raised: then it is counted failed and the error kept, never raised)."""
    try:
        mapped = _map_attempt(p, wc, entry, finish)
    except Exception as exc:  # noqa: BLE001 - a mapping bug must not lose the campaign
        return _mapped(t, entry, None, exc)
    return _mapped(t, entry, mapped)


def _warm_mapping() -> None:
    """What the first mapping would import and build (the capture mapper, AER, SEM, PROV,
    validation), done while the worker's forkserver imports the benchmark."""
    from agentprov_core.evidence import derive, live_mapping  # noqa: F401
    from agentprov_core.mapping import mapper_for

    mapper_for(live_mapping.CAPTURE_FORMAT)


class _Mappings:
    """Map the ledgered attempts in one background thread, in ledger order, while the next
    cell runs: an attempt's ledger entry is written (and fsynced) before the next cell
    starts, its mapping (and the removal of its staging directory) need not be; both are
    handed to the thread once the next cell is launched (:meth:`start`). The tally is only
    updated on T0's main thread, in ledger order (:meth:`harvest`). A mapping cut short by a kill leaves a ledgered attempt
    without its execution, which a re-run of the same command maps."""

    def __init__(self, p, wc: WorkingCorpus, tally: Tally) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.p, self.wc, self.tally = p, wc, tally
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentprov-map")
        self._pending: list[tuple[Future, Attempt, Flight | None]] = []
        self._queued: list[tuple[Any, tuple]] = []
        self._pool.submit(_warm_mapping)

    def drop_later(self, session_id: str) -> None:
        """Remove a ledgered attempt's staging directory in the background thread too."""
        self._queued.append((self.wc.drop_staging, (session_id,)))

    def submit(self, entry: Attempt, fl: Flight | None) -> None:
        fut: Future = Future()
        self._queued.append((self._run_into, (fut, entry)))
        self._pending.append((fut, entry, fl))

    def _run_into(self, fut: Future, entry: Attempt) -> None:
        try:
            fut.set_result(_map_attempt(self.p, self.wc, entry))
        except BaseException as exc:  # noqa: BLE001 - counted by harvest
            fut.set_exception(exc)

    def start(self) -> None:
        """Hand what was queued to the thread. The loop calls it once the next cell is
        launched, so that A14 and the launch do not share T0 with a mapping."""
        for fn, args in self._queued:
            self._pool.submit(fn, *args)
        self._queued.clear()

    def harvest(self, block: bool = False) -> None:
        """Count the finished mappings (all of them, waiting, with ``block``)."""
        while self._pending and (block or self._pending[0][0].done()):
            fut, entry, fl = self._pending.pop(0)
            exc = fut.exception()
            _count(self.tally, entry, fl,
                   _mapped(self.tally, entry, None if exc else fut.result(), exc))

    def close(self) -> None:
        try:
            self.start()
            self.harvest(block=True)
        finally:
            self._pool.shutdown(wait=True)


def _count(t: Tally, e: Attempt, fl: Flight | None = None, mapped=None) -> None:
    from agentprov_core.live import quality

    if fl is not None:
        quality.merge(t.quality, fl.quality)
    t.attempts += 1
    if e.staging_refused and (mapped is None or "map.staging_refused" not in mapped.entry.issues):
        t.issues["map.staging_refused"] += 1  # an attempt whose capture log was not stored
    if e.status == "quarantined":
        t.quarantined += 1
        t.issues["capture.quarantined"] += 1
    elif e.status == "complete":
        t.sealed += 1
        if not e.conclusive or (mapped is not None
                                and mapped.entry.live_vs_native == "disagree"):
            t.inconsistent += 1  # its accounting, or its two views, disagree
        else:
            t.conclusive += 1
    else:
        t.failed += 1
        t.inconclusive += 1


def _summary(p, wc, t: Tally, stop, code: int, started: float, done_before: int,
             due: int, caps: dict[str, Any] | None = None) -> None:
    e = lambda s: click.echo(s, err=True)  # noqa: E731
    e(f"run: finished in {time.monotonic() - started:.1f}s (exit {code})")
    e(f"  units    {t.attempts} of {p.plan.units}: sealed {t.sealed}, failed {t.failed}"
      + (f", quarantined {t.quarantined}" if t.quarantined else ""))
    if t.issues:
        e("  issues   " + ", ".join(f"{c} x{n}" for c, n in sorted(t.issues.items())))
    notices = list(t.refusals)
    if stop == "config":
        e(CONFIG_STOP)
        notices = [f"setup refusal: {r}" for r in t.refusals]
    elif stop == "worker":
        e("agentprov run: the worker ended; the sessions in flight were sealed aborted; "
          "re-run the same command to resume")
    elif stop == "interrupt":
        e("agentprov run: interrupted: in-flight sessions were sealed aborted and ledgered; "
          "re-run the same command to resume")
    elif stop == "drain":
        e("agentprov run: drained: the cells in flight finished; re-run to resume")
    elif stop == "limit":
        e("agentprov run: --limit reached; re-run to resume (the corpus is partial)")
    elif stop == "canary":
        from agentprov_core.live.canary import STOP_LINE

        e(f"agentprov run: {STOP_LINE}")
    elif stop in ("cap_reached", "cap_bound_exceeded"):
        e(f"agentprov run: {stop}: {t.cap}; no further cell was started "
          + ("(raise the cap and re-run the same command to resume)" if stop == "cap_reached"
             else "(a cell billed more than its bound: check the endpoint, then re-run)"))
    from agentprov_core.live import quality

    for line in quality.lines(t.quality):
        e(line)
    if caps:
        usd = caps.get("spend_upper_bound_usd")
        e(f"  caps     {caps['billed_calls']} billed call(s) in the corpus ({caps['probe_calls']} "
          f"probe)" + (f" of --max-calls {caps['max_calls']}" if caps.get("max_calls") is not None
                       else "")
          + (f"; spend upper bound ${usd:.4f} of --max-cost-usd {caps['max_cost_usd']:g}"
             if usd is not None else ""))
    for f in t.canary:
        e(f"{'canary' if stop == 'canary' else 'notice: canary'}: {f.line()}")
    e(f"  corpus   {wc.root} (working; {len(wc.attempts())} attempt(s) in the ledger)")
    if stop in ("config", "worker"):
        for n in notices:
            e(f"notice: {n}")
    for f in t.map_failures:
        e(f"notice: mapping failed: {f['session_id']} ({f['unit']}): {f['error']}")
    click.echo(f"agentprov run: {t.attempts} attempt(s); {t.conclusive} conclusive, "
               f"{t.inconsistent} inconsistent, {t.inconclusive} inconclusive; "
               f"{t.derived} derived, {t.map_failed} failed; "
               f"{done_before} of {p.plan.units} unit(s) done before")
