"""What ``agentprov run`` was asked, and the usage refusals of step 1 (exit 2).

The option checks follow the specification's order of checks: incompatible options,
missing cell or model options, caps combinations (R-16.1). Nothing here reads a key,
contacts a server, or writes a file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentprov_core.base import paths
from agentprov_core.errors import AgentprovError
from agentprov_core.live.keys import CREDENTIALS
from agentprov_core.plan.plandoc import MAX_REPEATS

CAPS = ("max_calls", "max_cost_usd", "price_in", "price_out")
#: The longest --cell-timeout (a week: longer waits are beyond what a timer can hold here)
MAX_CELL_TIMEOUT = 7 * 86400
#: The longest --start-stagger, in seconds
MAX_STAGGER = 3600


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} digits)"


@dataclass
class RunRequest:
    source: str
    options: dict[str, Any]
    given: set[str] = field(default_factory=set)

    @property
    def scripted(self) -> bool:
        return self.options.get("llm_script") is not None

    @property
    def capped(self) -> bool:
        return any(self.options.get(c) is not None for c in ("max_calls", "max_cost_usd"))


def check_usage(req: RunRequest) -> None:
    o = req.options
    if o.get("plan_json") and not o.get("dry_run"):
        raise AgentprovError("cli.usage.plan_json_without_dry_run")
    if o.get("catalogue"):
        return
    if o.get("tune_out") and o.get("tune_jobs") is None:
        raise AgentprovError("cli.usage.option_value", option="--tune-out", value=o["tune_out"],
                             what="belongs to --tune-jobs")
    if o.get("corpus"):
        from agentprov_core.corpus.working import check_path

        check_path(o["corpus"])
    # model options: exclusive with each other and with --llm-script
    if o.get("model") and o.get("endpoint"):
        raise AgentprovError("cli.usage.exclusive", first="--model", second="--endpoint")
    if req.scripted:
        for name, flag in CREDENTIALS:
            if o.get(name):
                raise AgentprovError("cli.usage.script_credential", flag=flag)
        for name, flag in (("model", "--model"), ("endpoint", "--endpoint"),
                           ("model_id", "--model-id"), ("base_url", "--base-url"),
                           ("allow_lan_endpoint", "--allow-lan-endpoint"),
                           ("allow_custom_endpoint", "--allow-custom-endpoint")):
            if o.get(name):
                raise AgentprovError("cli.usage.exclusive", first=flag, second="--llm-script")
        from agentprov_core.live.scripted.script import load_script
        load_script(o["llm_script"])  # a malformed script: cli.usage.llm_script, exit 2
    creds = [flag for name, flag in CREDENTIALS if o.get(name)]
    if len(creds) > 1:
        raise AgentprovError("cli.usage.exclusive", first=creds[0], second=creds[1])
    if not req.scripted and not (o.get("model") or o.get("endpoint")):
        raise AgentprovError("cli.usage.model_missing")
    # caps combinations
    caps_given = [c for c in CAPS if o.get(c) is not None]
    if o.get("preflight_only") and caps_given:
        raise AgentprovError("cli.usage.preflight_caps")
    if o.get("max_cost_usd") is not None and (o.get("price_in") is None
                                               or o.get("price_out") is None):
        raise AgentprovError("cli.usage.cost_needs_prices")
    if o.get("max_cost_usd") is None and (o.get("price_in") is not None
                                           or o.get("price_out") is not None):
        raise AgentprovError("cli.usage.prices_need_cost")
    for name, flag in (("max_calls", "--max-calls"), ("max_cost_usd", "--max-cost-usd"),
                       ("price_in", "--price-in"), ("price_out", "--price-out")):
        v = o.get(name)
        if v is not None and v < 0:
            raise AgentprovError("cli.usage.option_value", option=flag, value=str(v),
                                 what="must not be negative")
    jobs = o.get("jobs")
    # on another executor --jobs is the cells in flight across its hosts: it checks them
    # against each host's own maximum when it connects
    if jobs is not None and (o.get("executor") or "local") == "local":
        from agentprov_core.backend.hostlimits import max_jobs

        maximum = max_jobs()
        if jobs < 1 or jobs > maximum:
            raise AgentprovError("cli.usage.jobs_above_host", jobs=jobs, maximum=maximum)
    for name, flag in (("max_cost_usd", "--max-cost-usd"), ("price_in", "--price-in"),
                       ("price_out", "--price-out"), ("start_stagger", "--start-stagger")):
        v = o.get(name)
        if v is not None and not math.isfinite(v):
            raise AgentprovError("cli.usage.option_value", option=flag, value=str(v),
                                 what="must be a finite number")
    for name, flag, lo, hi in (("max_attempts", "--max-attempts", 1, None),
                               ("canary", "--canary", 0, None),
                               ("cell_timeout", "--cell-timeout", 1, MAX_CELL_TIMEOUT),
                               ("repeats", "--repeats", 1, MAX_REPEATS),
                               ("limit", "--limit", 0, None),
                               ("start_stagger", "--start-stagger", 0, MAX_STAGGER)):
        v = o.get(name)
        if v is not None and v < lo:
            raise AgentprovError("cli.usage.option_value", option=flag, value=str(v),
                                 what=f"must be {lo} or more")
        if v is not None and hi is not None and v > hi:
            raise AgentprovError("cli.usage.option_value", option=flag, value=_short(str(v)),
                                 what=f"must be {hi:,} or less")
    if o.get("executor") is not None:
        from agentprov_core.backend.executor import DISTRIBUTIONS, executors

        name, known = o["executor"], executors()
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
    if o.get("ray_address") is not None and o.get("executor") != "ray":
        raise AgentprovError("cli.usage.option_value", option="--ray-address",
                             value=_short(str(o["ray_address"])),
                             what="is for --executor ray only")
    if o.get("preflight_only"):
        return
    if not o.get("corpus") or not o.get("campaign"):
        raise AgentprovError("cli.usage.needs_corpus")
    root = paths.repo_root()
    corpus = Path(o["corpus"]).absolute()
    if root is not None and (corpus == root or root in corpus.parents):
        raise AgentprovError("cli.usage.corpus_in_repository", path=o["corpus"], repo=root)

