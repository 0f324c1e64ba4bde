"""The SEM (``agentprov-sem/0.1``): what an execution means, derived from its AER alone.

``derive(aer)`` reads nothing but the AER and is deterministic: the same AER gives the same
SEM, byte for byte, on any machine and at any time (no clock, no environment, no
randomness), which is what lets ``recompute`` re-derive a stored SEM and compare bytes.

Conventions (docs/formats/sem-0.1.md):

* **Attack success** is AgentDojo's ``security`` as the benchmark reported it, for an attacked
  cell only. In AgentDojo ``security == True`` means the *injection task succeeded* (the
  attack worked), so ``attack_success`` is that value unchanged. A benign cell has no
  attack: ``attack_success`` is ``null`` (its ``security`` is AgentDojo's placeholder). An
  attacked cell whose security was not recorded (a failed session) is ``"not recorded"``.
* **Not recorded.** A count the AER cannot give is the string ``"not recorded"``, never 0:
  a token total is recorded only when every model call that got a reply recorded it.
* **Abnormal finishes** are provider-aware (A6): ``stop`` and ``tool_calls`` are normal for
  an OpenAI-style element; ``end_turn``, ``tool_use``, ``stop_sequence`` and ``stop`` for an
  Anthropic one. Only kept calls count (the final wire attempt of a call that got a reply).
* **A defence** (an AER with ``header.actors``): ``model_calls`` counts every call, the
  defence's own included (they are billed calls of the same model), and
  ``defence_model_calls`` says how many of them were the defence's; ``tool_calls`` and
  ``tool_errors`` count the tools that ran, and ``denied_tool_calls`` the calls the defence
  denied. The two fields are absent from the SEM of an AER without a defence, so its bytes
  are what they were.
* **Judges** (an Inspect task's, actors of kind ``judge``): ``model_calls`` counts them too,
  and ``judge_model_calls`` says how many of them were the judges' (D-770: judge calls are
  counted apart from the agent's); absent from the SEM of an AER without judges.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from agentprov_core.evidence.aer import AER, NOT_RECORDED, Decision, ModelCall, ToolCall

SEM_FORMAT = "agentprov-sem/0.1"

NORMAL_FINISH: dict[str, frozenset[str]] = {
    "openai": frozenset({"stop", "tool_calls"}),
    "anthropic": frozenset({"end_turn", "tool_use", "stop_sequence", "stop"}),
}

#: a SEM value that the AER may not give
Maybe = Any  # the value, or NOT_RECORDED


class Tokens(msgspec.Struct, frozen=True, kw_only=True):
    """Token totals over the execution's model calls, by kind."""

    input: Maybe = NOT_RECORDED
    output: Maybe = NOT_RECORDED
    reasoning: Maybe = NOT_RECORDED
    cached: Maybe = NOT_RECORDED  # cached input tokens (a part of ``input``)


class Sem(msgspec.Struct, frozen=True, kw_only=True):
    format: str = SEM_FORMAT
    execution_id: str
    mode: str
    source: str
    suite: Maybe
    user_task_id: Maybe
    injection_task_id: str | None
    attack: str | None
    defense_id: str
    model: Maybe  # the model id requested
    status: str  # the AER outcome status: ok | ok_with_issues | failed
    session_status: Maybe
    execution_observed: bool
    attacked: bool
    attack_success: bool | None | str  # security as reported (attacked cells); see above
    utility: Maybe
    model_calls: int
    wire_attempts: int
    retries: int
    wire_errors: int
    failed_model_calls: int
    tool_calls: int
    tool_errors: int
    tokens: Tokens
    abnormal_finishes: int
    finish_reasons: dict[str, int]
    served_models: dict[str, int]
    decisions: list[str]
    issues: list[str]  # register codes, sorted, one per code
    live_vs_native: str  # agree | disagree | unchecked
    defence_model_calls: int | UnsetType = UNSET  # of model_calls, the defence's own
    denied_tool_calls: int | UnsetType = UNSET  # tool calls the defence denied
    judge_model_calls: int | UnsetType = UNSET  # of model_calls, the judges' (D-770)


def wire_of(element: Any) -> str:
    """The wire family of an LLM element (for A6): ``anthropic`` or ``openai``."""
    return "anthropic" if isinstance(element, str) and "anthropic" in element.lower() else "openai"


def _total(calls: list[ModelCall], field: str) -> Maybe:
    replied = [c for c in calls if c.reply is not None]
    values = [getattr(c.usage, field) for c in replied]
    if any(not isinstance(v, int) or isinstance(v, bool) for v in values):
        return NOT_RECORDED
    return sum(values)


def verdict(aer: AER) -> str:
    """``agree``, ``disagree`` or ``unchecked``: the live-versus-native check's result."""
    lvn = aer.outcome.live_vs_native
    if lvn is None or not lvn.checked or lvn.agree is None:
        return "unchecked"
    return "agree" if lvn.agree else "disagree"


def derive(aer: AER) -> Sem:
    """The SEM of ``aer`` (deterministic; reads nothing else)."""
    h, task, out = aer.header, aer.header.task, aer.outcome
    calls = [r for r in aer.records if isinstance(r, ModelCall)]
    tools = [r for r in aer.records if isinstance(r, ToolCall) and r.denied is not True]
    denied = [r for r in aer.records if isinstance(r, ToolCall) and r.denied is True]
    kinds = {a.id: a.kind for a in h.actors} if h.actors is not UNSET else {}
    defended = any(k != "judge" for k in kinds.values())
    judged = "judge" in kinds.values()
    attacked = task.attack not in (None, "none")
    security = out.security
    if not attacked:
        attack_success: bool | None | str = None
    elif isinstance(security, bool):
        attack_success = security
    else:
        attack_success = NOT_RECORDED
    finishes: Counter[str] = Counter()
    served: Counter[str] = Counter()
    abnormal = 0
    for c in calls:
        if c.reply is None:
            continue
        normal = NORMAL_FINISH[wire_of(c.element if c.element != NOT_RECORDED
                                       else h.agent.element)]
        fr = c.finish_reason if isinstance(c.finish_reason, str) else NOT_RECORDED
        finishes[fr] += 1
        abnormal += fr not in normal
        if isinstance(c.served_model, str) and c.served_model != NOT_RECORDED:
            served[c.served_model] += 1
    attempts = [a for c in calls for a in c.attempts]
    return Sem(
        execution_id=h.execution_id, mode=h.mode, source=h.source, suite=task.suite,
        user_task_id=task.user_task_id, injection_task_id=task.injection_task_id,
        attack=task.attack, defense_id=task.defense_id, model=h.agent.model,
        status=out.status, session_status=out.session_status,
        execution_observed=out.execution_observed, attacked=attacked,
        attack_success=attack_success,
        utility=out.utility if isinstance(out.utility, bool) else NOT_RECORDED,
        model_calls=len(calls), wire_attempts=len(attempts),
        retries=sum(c.retries for c in calls),
        wire_errors=sum(1 for a in attempts if a.error_type is not None),
        failed_model_calls=sum(1 for c in calls if c.status == "error"),
        tool_calls=len(tools), tool_errors=sum(1 for t in tools if t.error),
        tokens=Tokens(input=_total(calls, "input_tokens"), output=_total(calls, "output_tokens"),
                      reasoning=_total(calls, "reasoning_tokens"),
                      cached=_total(calls, "cached_input_tokens")),
        abnormal_finishes=abnormal, finish_reasons=dict(sorted(finishes.items())),
        served_models=dict(sorted(served.items())),
        decisions=[r.code for r in aer.records if isinstance(r, Decision)],
        issues=sorted({i.code for i in out.issues}),
        live_vs_native=verdict(aer),
        defence_model_calls=sum(1 for c in calls if c.actor is not UNSET
                                and kinds.get(c.actor) != "judge") if defended else UNSET,
        denied_tool_calls=len(denied) if defended else UNSET,
        judge_model_calls=sum(1 for c in calls if c.actor is not UNSET
                              and kinds.get(c.actor) == "judge") if judged else UNSET,
    )
