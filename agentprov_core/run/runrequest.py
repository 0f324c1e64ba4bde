"""What ``agentprov run`` was asked, and the usage refusals of step 1 (exit 2).

The option checks follow the specification's order of checks: incompatible options,
missing cell or model options, caps combinations (R-16.1). Nothing here reads a key,
contacts a server, or writes a file.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import msgspec

from agentprov_core.base import paths
from agentprov_core.errors import AgentprovError
from agentprov_core.live.keys import CREDENTIALS
from agentprov_core.plan.plandoc import MAX_REPEATS
from agentprov_core.run.options import RunOptions

CAPS = ("max_calls", "max_cost_usd", "price_in", "price_out")
#: The longest --cell-timeout (a week: longer waits are beyond what a timer can hold here)
MAX_CELL_TIMEOUT = 7 * 86400
#: The longest --start-stagger, in seconds
MAX_STAGGER = 3600


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} digits)"


@dataclass(frozen=True)
class RunRequest:
    """The source and its options, as the command line parsed them once; ``given``: the
    options given on the command line (a default that is not given can be overridden, by a
    preset or the sweep)."""

    source: str
    options: RunOptions
    given: frozenset[str] = frozenset()

    @classmethod
    def of(cls, source: str, options: Mapping[str, object],
           given: Iterable[str] = ()) -> RunRequest:
        """The request from the options click parsed (``agentprov run``, ``agentprov
        estimate``)."""
        return cls(source, RunOptions.from_click(options), frozenset(given))

    def replace(self, **changes: object) -> RunRequest:
        """The same request with ``changes`` to its options (a default a stage settles)."""
        return dataclasses.replace(self, options=msgspec.structs.replace(self.options,
                                                                         **changes))

    @property
    def scripted(self) -> bool:
        return self.options.llm_script is not None

    @property
    def capped(self) -> bool:
        return self.options.max_calls is not None or self.options.max_cost_usd is not None


def check_usage(req: RunRequest) -> None:
    o = req.options
    if o.plan_json and not o.dry_run:
        raise AgentprovError("cli.usage.plan_json_without_dry_run")
    if o.catalogue:
        return
    if o.tune_out and o.tune_jobs is None:
        raise AgentprovError("cli.usage.option_value", option="--tune-out", value=o.tune_out,
                             what="belongs to --tune-jobs")
    if o.corpus:
        from agentprov_core.corpus.working import check_path

        check_path(o.corpus)
    # model options: exclusive with each other and with --llm-script
    if o.model and o.endpoint:
        raise AgentprovError("cli.usage.exclusive", first="--model", second="--endpoint")
    if req.scripted:
        for name, flag in CREDENTIALS:
            if getattr(o, name):
                raise AgentprovError("cli.usage.script_credential", flag=flag)
        for name, flag in (("model", "--model"), ("endpoint", "--endpoint"),
                           ("model_id", "--model-id"), ("base_url", "--base-url"),
                           ("allow_lan_endpoint", "--allow-lan-endpoint"),
                           ("allow_custom_endpoint", "--allow-custom-endpoint")):
            if getattr(o, name):
                raise AgentprovError("cli.usage.exclusive", first=flag, second="--llm-script")
        from agentprov_core.live.scripted.script import load_script
        load_script(o.llm_script)  # a malformed script: cli.usage.llm_script, exit 2
    creds = [flag for name, flag in CREDENTIALS if getattr(o, name)]
    if len(creds) > 1:
        raise AgentprovError("cli.usage.exclusive", first=creds[0], second=creds[1])
    if not req.scripted and not (o.model or o.endpoint):
        raise AgentprovError("cli.usage.model_missing")
    # caps combinations
    caps_given = [c for c in CAPS if getattr(o, c) is not None]
    if o.preflight_only and caps_given:
        raise AgentprovError("cli.usage.preflight_caps")
    if o.max_cost_usd is not None and (o.price_in is None or o.price_out is None):
        raise AgentprovError("cli.usage.cost_needs_prices")
    if o.max_cost_usd is None and (o.price_in is not None or o.price_out is not None):
        raise AgentprovError("cli.usage.prices_need_cost")
    for name, flag in (("max_calls", "--max-calls"), ("max_cost_usd", "--max-cost-usd"),
                       ("price_in", "--price-in"), ("price_out", "--price-out")):
        v = getattr(o, name)
        if v is not None and v < 0:
            raise AgentprovError("cli.usage.option_value", option=flag, value=str(v),
                                 what="must not be negative")
    jobs = o.jobs
    # on another executor --jobs is the cells in flight across its hosts: it checks them
    # against each host's own maximum when it connects
    if jobs is not None and (o.executor or "local") == "local":
        from agentprov_core.backend.hostlimits import max_jobs

        maximum = max_jobs()
        if jobs < 1 or jobs > maximum:
            raise AgentprovError("cli.usage.jobs_above_host", jobs=jobs, maximum=maximum)
    for name, flag in (("max_cost_usd", "--max-cost-usd"), ("price_in", "--price-in"),
                       ("price_out", "--price-out"), ("start_stagger", "--start-stagger")):
        v = getattr(o, name)
        if v is not None and not math.isfinite(v):
            raise AgentprovError("cli.usage.option_value", option=flag, value=str(v),
                                 what="must be a finite number")
    for name, flag, lo, hi in (("max_attempts", "--max-attempts", 1, None),
                               ("canary", "--canary", 0, None),
                               ("cell_timeout", "--cell-timeout", 1, MAX_CELL_TIMEOUT),
                               ("repeats", "--repeats", 1, MAX_REPEATS),
                               ("limit", "--limit", 0, None),
                               ("start_stagger", "--start-stagger", 0, MAX_STAGGER)):
        v = getattr(o, name)
        if v is not None and v < lo:
            raise AgentprovError("cli.usage.option_value", option=flag, value=str(v),
                                 what=f"must be {lo} or more")
        if v is not None and hi is not None and v > hi:
            raise AgentprovError("cli.usage.option_value", option=flag, value=_short(str(v)),
                                 what=f"must be {hi:,} or less")
    if o.executor is not None:
        from agentprov_core.backend.executor import DISTRIBUTIONS, executors

        name, known = o.executor, executors()
        if name not in known and name in DISTRIBUTIONS:
            raise AgentprovError("cli.usage.option_value", option="--executor", value=name,
                                 what=f"is the executor of the distribution "
                                      f"{DISTRIBUTIONS[name]}, which is not installed: "
                                      f"pip install 'agentprov[{name}]' (installed: "
                                      + ", ".join(known) + ")")
        if name not in known:
            raise AgentprovError("cli.usage.option_value", option="--executor",
                                 value=name if len(name) <= 40 else name[:40] + "…",
                                 what="names no installed executor (installed: "
                                      + ", ".join(known) + ")")
    if o.ray_address is not None and o.executor != "ray":
        raise AgentprovError("cli.usage.option_value", option="--ray-address",
                             value=_short(str(o.ray_address)),
                             what="is for --executor ray only")
    if o.preflight_only:
        return
    if not o.corpus or not o.campaign:
        raise AgentprovError("cli.usage.needs_corpus")
    root = paths.repo_root()
    corpus = Path(o.corpus).absolute()
    if root is not None and (corpus == root or root in corpus.parents):
        raise AgentprovError("cli.usage.corpus_in_repository", path=o.corpus, repo=root)

