"""What the caps count (R-17): billed calls and the spend upper bound of a live corpus.

``--max-calls N`` and ``--max-cost-usd USD`` (priced from ``--price-in`` and ``--price-out``,
USD per million tokens) cap the whole corpus: every invocation's cells, probe calls and
resumed attempts. T0 starts a cell only if

    spend so far + the worst case of every cell in flight + the worst case of the new cell

fits both caps (R-17.5); otherwise the campaign stops with ``cap_reached`` (exit 1; a higher
cap resumes). A cell that bills more than its own worst case stops it with
``cap_bound_exceeded`` (R-17.10).

**Billed.** A wire attempt that got an HTTP response from the provider (a ``wire_response``
record, whatever its status, or a ``wire_error`` of stage ``receive``, which had a status
line) is one billed call; an attempt that failed before the wire (``wire_error`` of stage
``send``: a refused connection, a TLS failure) is not billed (R-21.15). Its tokens are taken
from the recorded response body's ``usage``; all input-side tokens (OpenAI
``prompt_tokens``; Anthropic ``input_tokens`` + ``cache_read_input_tokens`` +
``cache_creation_input_tokens``) are priced at ``--price-in`` (R-17.8). A billed reply
without usage is charged at the per-call bound (R-17.2); an attempt the parent ended (its
end record is ``sealed_by: parent``, or it has no end) one extra call at the bound (R-17.3);
an attempt whose log is missing (quarantined, or never stored) a whole cell (R-17.4).

**The bounds.** The per-call bound is 32,000 input tokens (or the largest input seen in a
billed call of the corpus) and the transmitted ``max_tokens`` or 4,096 output tokens (or
the largest output seen) (R-17.7). The worst case of an AgentDojo-family cell is 48 billed
calls, 3 x (1 + 15) (R-17.6): at ``--price-in 0.15 --price-out 0.60`` about $0.0073 per
call and $0.348 per cell (R-17.9). Charges at the bound are priced with the bound in force
when the spend is computed, so a bound that grows raises them too (a ceiling, never a bill).

The cell's worst case follows the defence (:func:`cell_calls`): ``tool_filter`` makes one
call of its own at the start of each pass, so its cell is 3 x (2 + 15) = 51 calls; the
other built-in defences make none. A missing log is charged the worst case of its own
attempt's defence.

An Inspect plan's cells have the D-740 bound instead of the 48-call constant (R-25.27):
n x E x ((M - 1) x (1 + a) + j) x (1 + K) billed calls for n samples, E epochs and message
limit M, with the task's a, j and K declared by its source
(:class:`agentprov_core.source.InspectCellBound`); every cell of the plan is reserved at
the bound of its largest. AgentHarm at ``--message-limit 10``: 42 calls a sample, about
$0.305 at the prices above (R-25.30, R-25.31). The run's bound is made by
:func:`agentprov_core.run.live.bound_of`, which asks the plan's source.

Everything here is arithmetic over capture records; nothing reads a key or the network.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentprov_core.live.sse import reply_body

CELL_CALLS = 48  # 3 passes x (1 call + a tool loop of at most 15)
PASSES, LOOP_CALLS = 3, 16  # the user task's passes, and a pass's agent calls (1 + 15)
#: the model calls a defence makes of its own in each pass
DEFENCE_CALLS_PER_PASS = {"tool_filter": 1}


def cell_calls(defence: str | None = "none") -> int:
    """The worst case of one AgentDojo-family cell under ``defence``, in billed calls:
    3 passes x (the defence's own calls + 1 + 15); 48 undefended, 51 with tool_filter."""
    return PASSES * (DEFENCE_CALLS_PER_PASS.get(defence or "none", 0) + LOOP_CALLS)
IN_BOUND = 32_000
OUT_BOUND = 4_096
PROBE_CALLS = 3
CAPS_FORMAT = "agentprov-caps/0.1"


@dataclass(frozen=True)
class Caps:
    """The caps of a run (each None when not given) and the prices, USD per million tokens."""

    max_calls: int | None = None
    max_cost_usd: float | None = None
    price_in: float | None = None
    price_out: float | None = None

    @property
    def active(self) -> bool:
        return self.max_calls is not None or self.max_cost_usd is not None


def usage_tokens(body: Any) -> tuple[int, int] | None:
    """(input-side tokens, output tokens) of a response body's ``usage``, or None when it
    has none (or none that parses). An Anthropic event stream (the body AgentDojo's
    streaming ``AnthropicLLM`` gets) is read as the message it assembles into."""
    body = reply_body(body)
    if not isinstance(body, dict) or not isinstance(body.get("usage"), dict):
        return None
    u = body["usage"]

    def n(key: str) -> int:
        v = u.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else 0

    if "prompt_tokens" in u or "completion_tokens" in u:  # OpenAI-style
        return n("prompt_tokens"), n("completion_tokens")
    if "input_tokens" in u or "output_tokens" in u:  # Anthropic-style
        return (n("input_tokens") + n("cache_read_input_tokens")
                + n("cache_creation_input_tokens")), n("output_tokens")
    return None


@dataclass
class Charge:
    """What one attempt (a cell's session or a probe call's) billed."""

    calls: int = 0             # billed calls with usage
    in_tokens: int = 0
    out_tokens: int = 0
    bound_calls: int = 0       # billed calls charged at the per-call bound
    whole_cells: int = 0       # missing logs, each charged a whole cell
    largest_in: int = 0
    largest_out: int = 0
    whole_cell_calls: int = 0  # the missing logs' worst cases, in calls

    @property
    def billed(self) -> int:
        """Billed calls, whole cells counted at their worst case."""
        return self.calls + self.bound_calls + self.whole_cell_calls

    def add(self, other: Charge) -> None:
        self.calls += other.calls
        self.in_tokens += other.in_tokens
        self.out_tokens += other.out_tokens
        self.bound_calls += other.bound_calls
        self.whole_cells += other.whole_cells
        self.whole_cell_calls += other.whole_cell_calls
        self.largest_in = max(self.largest_in, other.largest_in)
        self.largest_out = max(self.largest_out, other.largest_out)

    def as_json(self) -> dict[str, int]:
        return {"billed_calls": self.billed, "calls_with_usage": self.calls,
                "calls_at_bound": self.bound_calls, "whole_cells": self.whole_cells,
                "input_tokens": self.in_tokens, "output_tokens": self.out_tokens}


def charge_records(records: list[dict[str, Any]]) -> Charge:
    """The charge of one capture log's records (R-17.1 … R-17.3)."""
    c = Charge()
    ended_by_parent = True  # no end record at all: left unsealed, as if the parent ended it
    for r in records:
        kind = r.get("kind")
        if kind == "wire_response":
            tokens = usage_tokens(r.get("body"))
            if tokens is None:
                c.bound_calls += 1
            else:
                c.calls += 1
                c.in_tokens += tokens[0]
                c.out_tokens += tokens[1]
                c.largest_in = max(c.largest_in, tokens[0])
                c.largest_out = max(c.largest_out, tokens[1])
        elif kind == "wire_error" and r.get("stage") == "receive":
            c.bound_calls += 1  # a status line came back: billed, with no usage
        elif kind == "end":
            ended_by_parent = r.get("sealed_by") == "parent"
    if ended_by_parent:
        c.bound_calls += 1
    return c


def missing_log(defence: str | None = "none") -> Charge:
    """A whole cell, at the worst case of an AgentDojo-family cell under ``defence``."""
    return Charge(whole_cells=1, whole_cell_calls=cell_calls(defence))


def out_bound(params: dict[str, Any] | None) -> int:
    """The per-call output bound: the transmitted ``max_tokens``, else 4,096 (R-17.7)."""
    mt = (params or {}).get("max_tokens")
    return mt if isinstance(mt, int) and not isinstance(mt, bool) and mt > 0 else OUT_BOUND


@dataclass
class Bound:
    """The per-call bound in tokens, and the cell's worst case in calls."""

    in_tokens: int = IN_BOUND
    out_tokens: int = OUT_BOUND
    #: None: the plan's source declares no worst case of a cell (an Inspect source without
    #: a cell bound, whose runs take no caps): no cell is checked against it
    cell_calls: int | None = CELL_CALLS
    #: how the cell's worst case was computed, when a rule other than the AgentDojo
    #: constant gave it (the D-740 figures of an Inspect plan), recorded with it
    rule: dict[str, Any] | None = None

    @classmethod
    def for_params(cls, params: dict[str, Any] | None, defence: str | None = "none") -> Bound:
        """The bound of a run with these model parameters (``max_tokens``) and defence."""
        return cls(out_tokens=out_bound(params), cell_calls=cell_calls(defence))

    def grow(self, charge: Charge) -> None:
        """The largest seen raises the bound (R-17.7)."""
        self.in_tokens = max(self.in_tokens, charge.largest_in)
        self.out_tokens = max(self.out_tokens, charge.largest_out)

    def call_usd(self, caps: Caps) -> float:
        return (self.in_tokens * (caps.price_in or 0) + self.out_tokens * (caps.price_out or 0)) / 1e6

    def cell_usd(self, caps: Caps) -> float:
        return (self.cell_calls or 0) * self.call_usd(caps)

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"input_tokens_per_call": self.in_tokens,
                               "output_tokens_per_call": self.out_tokens,
                               "calls_per_cell": self.cell_calls}
        if self.rule is not None:
            out["cell_rule"] = self.rule
        return out


def spend_usd(charge: Charge, bound: Bound, caps: Caps) -> float:
    """The spend upper bound of ``charge``: usage at the prices, the rest at the bound."""
    known = (charge.in_tokens * (caps.price_in or 0) + charge.out_tokens * (caps.price_out or 0)) / 1e6
    at_bound = (charge.bound_calls + charge.whole_cell_calls) * bound.call_usd(caps)
    return known + at_bound


def exceeds_cell(charge: Charge, bound: Bound) -> str | None:
    """Why one cell's charge is more than its worst case (``cap_bound_exceeded``), or None
    (also when the plan has no declared worst case)."""
    if bound.cell_calls is None:
        return None
    if charge.billed > bound.cell_calls:
        return f"it billed {charge.billed} call(s), more than the cell bound of {bound.cell_calls}"
    if charge.in_tokens > bound.cell_calls * bound.in_tokens:
        return (f"it billed {charge.in_tokens} input token(s), more than the cell bound of "
                f"{bound.cell_calls} x {bound.in_tokens}")
    if charge.out_tokens > bound.cell_calls * bound.out_tokens:
        return (f"it billed {charge.out_tokens} output token(s), more than the cell bound of "
                f"{bound.cell_calls} x {bound.out_tokens}")
    return None


@dataclass
class Account:
    """The corpus's spend so far, the bound in force, and the caps (``live.caps``)."""

    caps: Caps
    bound: Bound = field(default_factory=Bound)
    spent: Charge = field(default_factory=Charge)
    probe: Charge = field(default_factory=Charge)  # of which, preflight probe calls

    def charge(self, c: Charge, *, probe: bool = False) -> None:
        self.spent.add(c)
        if probe:
            self.probe.add(c)
        self.bound.grow(c)

    @property
    def spend_usd(self) -> float:
        return spend_usd(self.spent, self.bound, self.caps)

    def fits(self, in_flight: int, new_cells: int = 1, new_calls: int = 0) -> str | None:
        """None when the spend so far plus ``in_flight`` + ``new_cells`` worst cases plus
        ``new_calls`` calls at the bound fit both caps; else why not (``cap_reached``)."""
        cells = in_flight + new_cells
        calls = self.spent.billed + cells * (self.bound.cell_calls or 0) + new_calls
        caps = self.caps
        if caps.max_calls is not None and calls > caps.max_calls:
            return (f"--max-calls {caps.max_calls}: {self.spent.billed} billed call(s) so far"
                    + (f" + {in_flight} cell(s) in flight" if in_flight else "")
                    + (f" + {new_cells} x {self.bound.cell_calls} for the next cell"
                       if new_cells else "")
                    + (f" + {new_calls} probe call(s)" if new_calls else "")
                    + f" = {calls}")
        if caps.max_cost_usd is not None:
            usd = (self.spend_usd + cells * self.bound.cell_usd(caps)
                   + new_calls * self.bound.call_usd(caps))
            if usd > caps.max_cost_usd + 1e-12:
                return (f"--max-cost-usd {caps.max_cost_usd:g}: a spend upper bound of "
                        f"${self.spend_usd:.4f} so far, with the worst case of "
                        f"{cells} cell(s) at ${self.bound.cell_usd(caps):.4f} each"
                        + (f" and {new_calls} probe call(s)" if new_calls else "")
                        + f" is ${usd:.4f}")
        return None

    def record(self) -> dict[str, Any]:
        """``live.caps`` (R-2.19): the caps, the prices, the bound used, billed calls and the
        spend upper bound (a ceiling, not a bill)."""
        c = self.caps
        return {"format": CAPS_FORMAT, "max_calls": c.max_calls, "max_cost_usd": c.max_cost_usd,
                "price_in": c.price_in, "price_out": c.price_out,
                "prices_unit": "USD per million tokens", "bound": self.bound.as_json(),
                "cell_bound_usd": round(self.bound.cell_usd(c), 6) if c.max_cost_usd is not None
                else None,
                "billed_calls": self.spent.billed, "probe_calls": self.probe.billed,
                "charged": self.spent.as_json(),
                "spend_upper_bound_usd": round(self.spend_usd, 6)
                if c.max_cost_usd is not None else None}
