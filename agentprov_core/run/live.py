"""What a model adds around the campaign loop: the endpoint side of one invocation, and
the spend it is charged against.

A real model adds (:class:`Live`): the endpoint's key in the worker's environment under its
variable's name (never in argv, never written); for a non-loopback endpoint the egress proxy
(allowlist: exactly the endpoint's host:port), reached through ``HTTPS_PROXY`` or, under an
enforced containment, through the proxy's Unix socket routed into the sandbox; and the
worker under the resolved containment. The scripted transport is a real HTTP server on
loopback (:mod:`agentprov_core.live.scripted.server`). The caps
(:mod:`agentprov_core.live.caps`) are charged with every attempt of the corpus and every
preflight probe call (:func:`account_of`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from agentprov_core.backend import environments
from agentprov_core.corpus.working import WorkingCorpus
from agentprov_core.live.scripted.script import AGENT, SCRIPTED_MODEL
from agentprov_core.run import testfaults

if TYPE_CHECKING:
    from agentprov_core.backend.executor import Executor, Launch
    from agentprov_core.live.canary import Settings
    from agentprov_core.live.caps import Account, Bound, Charge
    from agentprov_core.run.prepare import Prepared

#: the ledger of the preflight probe's sessions in a corpus (their capture logs are stored
#: under ``preflight/`` too)
PREFLIGHT_LEDGER = "preflight/ledger.jsonl"


class Live:
    """The endpoint side of one invocation: the scripted endpoint, or a real endpoint's key,
    egress proxy and containment; and the executor that runs the cells, started with them."""

    def __init__(self, prepared: Prepared) -> None:
        self.prepared = prepared
        self.scripted = prepared.request.scripted
        self.endpoint = None
        self.proxy = None
        self.secret = None
        self.overrides: list[str] = []
        self._tmp: Path | None = None
        self.params: dict[str, Any] = dict(prepared.params)

    @property
    def wire(self) -> str:
        resolved = self.prepared.resolved
        return resolved.wire if resolved is not None else "openai"

    def secrets(self) -> dict[str, str]:
        """The values the redaction scan looks for (the key, by its variable's name)."""
        return {self.secret.name: self.secret.reveal()} if self.secret is not None else {}

    def start(self, staging_root: Path) -> Executor:
        """Start the endpoint side (the scripted endpoint, or the key, egress proxy and
        containment) and, with it, the executor ``--executor`` names (``local``: the
        worker on this machine)."""
        from agentprov_core.backend import executor

        name = self.prepared.request.options.executor or executor.DEFAULT
        return executor.start(name, self._launch(staging_root))

    def _launch(self, staging_root: Path) -> Launch:
        from agentprov_core.backend.executor import Launch

        p = self.prepared
        o = p.request.options
        env_dir = environments.environment_dir(p.plan.environment_id)
        staging_root.mkdir(parents=True, exist_ok=True)
        if self.scripted:
            from agentprov_core.live.scripted.script import load_script
            from agentprov_core.live.scripted.server import ScriptedEndpoint

            self.endpoint = ScriptedEndpoint(load_script(Path(o.llm_script)),
                                             models=script_models(p))
            self.endpoint.start()
            return Launch(p.plan.environment_id, env_dir, staging_root,
                          extra_env=self.warm_env(), options=o.by_name())
        import tempfile
        from urllib.parse import urlsplit

        from agentprov_core.backend import containment as cm
        from agentprov_core.live import egressplan, keys

        r = p.resolved
        env: dict[str, str] = self.warm_env()
        if r.key_variable:
            self.secret = keys.read_key(r.key_variable, o.keys)
            env[r.key_variable] = self.secret.reveal()  # the one secret the worker gets
        recorded = msgspec.convert(p.containment, cm.Recorded) if p.containment else None
        resolver, ca, self.overrides = testfaults.test_overrides()
        loopback: tuple[int, ...] = ()
        routes: tuple[tuple[int, str], ...] = ()
        eplan = egressplan.plan([r.base_url])
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
        return Launch(p.plan.environment_id, env_dir, staging_root, extra_env=env,
                      containment=recorded,
                      allowed=cm.Allowed(loopback_ports=loopback, unix_sockets=routes),
                      key_variable=r.key_variable, options=o.by_name())

    def warm_env(self) -> dict[str, str]:
        """What makes the campaign's worker start its forkserver at once, and what the
        forkserver's warm-up reads: the benchmark version and the plan's suites (every cell
        of a suite reads the same files), for the source's worker package to warm
        (``agentprov_backend.forkserver``)."""
        plan = self.prepared.plan
        return {"AGENTPROV_WORKER_WARM": json.dumps(
            {"source": self.prepared.source.meta.name,
             "benchmark_version": plan.benchmark_version,
             "suites": sorted({c.suite for c in plan.cells if c.suite})})}

    def agent(self, session_id: str) -> dict[str, Any]:
        """The ``agent`` of a session's worker request: the endpoint and model it calls."""
        o = self.prepared.request.options
        # the LLM element the worker builds: AgentDojo's stock one (native), or the
        # OpenAI-compatible gateway element (gateway_compat, D-829)
        llm_element = o.element
        if self.scripted:
            return {"scripted": True, "base_url": self.endpoint.base_url(session_id),
                    "model_id": SCRIPTED_MODEL, "pipeline_name": "scripted", "key_env": None,
                    "display_name": o.model_display_name, "llm_element": llm_element}
        r = self.prepared.resolved
        ident = self.prepared.local_identity
        model_id = o.model_id or getattr(ident, "model_id", None)
        # AgentDojo's own pipeline name for a local server is "local" ("Local model"); for
        # an API the model id, with "/" as "_" as AgentDojo's logger writes it (so the
        # native log's pipeline_name and path agree with the capture; a stock MODEL_NAMES
        # key still matches as a substring)
        pipeline = "local" if r.endpoint_class == "local" else str(model_id).replace("/", "_")
        # an Inspect task calls the model through Inspect's provider and fixes its sampling
        # parameters: a cell transmits none of the agent's (D-742)
        inspect = self.prepared.source.meta.kind == "inspect"
        return {"scripted": False, "base_url": r.base_url, "model_id": model_id,
                "pipeline_name": pipeline, "key_env": r.key_variable,
                "display_name": o.model_display_name, "endpoint_kind": r.kind,
                "wire": r.wire,
                "llm_element": llm_element,
                "element": "inspect_ai/openai-api" if inspect
                else "AnthropicLLM" if r.wire == "anthropic"
                else "GatewayCompatLLM" if llm_element == "gateway_compat" else "OpenAILLM",
                "params": {} if inspect else {k: v for k, v in self.params.items()
                                              if k != "temperature_policy"}}

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


def check_executor(prepared: Prepared) -> None:
    """The check of the executor ``--executor`` names, before the working corpus is opened
    (a cluster's executor connects and checks its hosts: exit 3, nothing written)."""
    from agentprov_core.backend import containment as cm
    from agentprov_core.backend import executor
    from agentprov_core.live import egressplan
    from agentprov_core.live.proxyhttp import host_port

    o = prepared.request.options
    r = prepared.resolved
    real = not prepared.request.scripted and r is not None
    recorded = msgspec.convert(prepared.containment, cm.Recorded) \
        if prepared.containment and not prepared.request.scripted else None
    eplan = egressplan.plan([r.base_url]) if real else None
    egress = () if eplan is None else tuple(host_port(*p) for p in (
        *eplan.allowed, *((eplan.forward,) if eplan.forward else ())))
    executor.check(o.executor or executor.DEFAULT, executor.Target(
        prepared.plan.environment_id, containment=recorded,
        key_variable=r.key_variable if real else None, options=o.by_name(), egress=egress))


def script_models(prepared: Prepared) -> dict[str, str]:
    """Each role's model in a scripted run, by which a script by role tells the calls
    apart: the agent's (``scripted``) and each judge's ``--judge ROLE=MODEL``."""
    insp = prepared.doc.inspect
    return {AGENT: SCRIPTED_MODEL} | (dict(insp.judges) if insp is not None else {})


def prewarm(prepared: Prepared) -> None:
    """What the campaign worker's containment will need, started in the background before
    the check worker runs (T0 waits for that worker's hello meanwhile)."""
    if prepared.request.scripted or not prepared.containment:
        return
    from agentprov_core.backend import containment as cm

    cm.prewarm(msgspec.convert(prepared.containment, cm.Recorded),
               environments.environment_dir(prepared.plan.environment_id))



def capture_records(data: bytes) -> list[dict[str, Any]]:
    """The records of a capture log, read up to the first line that is not a JSON object."""
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


def bound_of(prepared: Prepared, params: dict[str, Any] | None = None) -> Bound:
    """The bound of the prepared plan: the per-call bound of these model parameters, and
    the worst case of a cell as its source gives it (48 calls for an AgentDojo-family cell,
    51 with tool_filter; the D-740 bound for an Inspect plan's)."""
    from agentprov_core.live import caps
    from agentprov_core.source import InspectSource

    src, doc, cells = prepared.source, prepared.doc, prepared.cells
    rule = src.cell_rule(doc, cells) if isinstance(src, InspectSource) else None
    return caps.Bound(out_tokens=caps.out_bound(params),
                      cell_calls=cell_calls_of(prepared, prepared.plan.defence), rule=rule)


def cell_calls_of(prepared: Prepared, defence: str | None) -> int | None:
    """The worst case of a cell of the prepared plan under ``defence``: an Inspect
    source's D-740 bound (None when it declares none), else the AgentDojo-family cell's."""
    from agentprov_core.live import caps
    from agentprov_core.source import InspectSource

    src = prepared.source
    if isinstance(src, InspectSource):
        return src.cell_calls(prepared.doc, prepared.cells)
    return caps.cell_calls(defence)


def missing_log(prepared: Prepared, defence: str | None) -> Charge:
    """A missing log of an attempt under ``defence``: a whole cell at its worst case."""
    from agentprov_core.live import caps

    return caps.Charge(whole_cells=1, whole_cell_calls=cell_calls_of(prepared, defence) or 0)


def account_of(prepared: Prepared, wc: WorkingCorpus | None,
               live: Live | None = None) -> Account:
    """The corpus's spend so far (every attempt of every configuration, and the probe
    calls), with the bound in force and this invocation's caps."""
    from agentprov_core.live import caps

    params = live.params if live is not None else {}
    acc = caps.Account(prepared.request.options.caps,
                       bound=bound_of(prepared, params))
    if wc is None:
        return acc
    for e in wc.attempts():
        if e.capture_sha256 and wc.store.has(e.capture_sha256):
            data = wc.store.path(e.capture_sha256).read_bytes()
            acc.charge(caps.charge_records(capture_records(data)))
        else:
            acc.charge(missing_log(prepared, e.defence))
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
                acc.charge(caps.charge_records(capture_records(store.path(sha).read_bytes())),
                           probe=True)
            else:
                acc.charge(caps.Charge(bound_calls=1), probe=True)
    return acc


def canary_settings(prepared: Prepared, params: dict[str, Any], wire: str) -> Settings:
    """What the canary compares a cell's requests against: these model parameters on this
    wire, and the run's options that accept a difference."""
    from agentprov_core.live.canary import Settings

    o = prepared.request.options
    return Settings.from_run(params, wire, temperature_policy=o.temperature_policy,
                             accepted_served=o.accept_served_model,
                             allow_text_tool_calls=o.allow_text_tool_calls)
