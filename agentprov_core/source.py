"""Benchmark sources: what ``agentprov run SOURCE`` names.

A plugin returns :class:`Source` objects from the ``agentprov_sources`` hook. Two base
classes carry the specification's rules so that a plugin states data, not logic:

* :class:`SuiteSource`: an AgentDojo-shaped benchmark (suites of user and injection tasks,
  attacks, benchmark versions), with the cell expansion of R-7.2/R-7.3 and the attack
  refusals (a refused attack exits 5; an attack's required options are usage errors).
* :class:`InspectSource`: one Inspect task per plan, cells of at most ``--cell-size``
  samples, and the D-667 limits.

Every source has frozen metadata (:class:`SourceMeta`), snapshotted into each corpus.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import msgspec

from agentprov_core import catalogue as catmod
from agentprov_core.base.digests import digest, file_sha256
from agentprov_core.catalogue import Catalogue, Split
from agentprov_core.errors import AgentprovError
from agentprov_core.plan.plandoc import InspectPlan, PlanDoc
from agentprov_core.plan.plans import Cell, expand_suites

LiveStatus = Literal["planned", "partial", "full"]
LIVE_ORDER: dict[str, int] = {"planned": 0, "partial": 1, "full": 2}


class Restricted(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A source whose live corpus is a restricted-use corpus, private (R-25.38): it stays
    under ``$AGENTPROV_HOME`` (``agentprov run`` refuses a ``--corpus`` elsewhere,
    ``cli.refused.restricted_corpus``), it is never deposited (``agentprov package``
    refuses it, ``package.refused.restricted``), and its release needs a separate decision
    of the project owner. The manifest records it as ``restricted`` (``private: true``)."""

    #: why the corpus is restricted, in one sentence (shown by the refusals)
    why: str
    #: the data's licence and its additional clause, as the dataset states them
    licence: str
    #: what the corpus's evidence holds that makes it private
    holds: str


class SourceMeta(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What a source declares about itself. The registry (``registry/parts.toml``) may
    override ``live_status`` and ``caveat``; the plugin's values are the defaults."""

    name: str
    label: str
    summary: str
    kind: Literal["suites", "inspect"]
    backend: str | None
    backend_project: str | None = None
    environment_prefix: str | None = None
    pinned_commit: str | None = None
    live_status: LiveStatus = "planned"
    caveat: str = ""
    takes_defences: bool = False
    llm_elements: tuple[str, ...] = ("native",)
    homepage: str | None = None
    #: the live profile: what a live corpus of this source may hold, versioned
    #: (e.g. ``agentdojo-live@3``); recorded in the manifest, shown by ``stats``
    live_profile: str | None = None
    #: the name of the registered mapper (from ``agentprov_mappers``) that maps this
    #: source's live evidence, e.g. ``agentdojo.capture``; ``None``: the first registered
    #: mapper that reads the evidence's format. Two sources may write the same format
    #: (``capture/0.1``) and need different mappers; a named mapper that is not registered
    #: refuses the run (``cli.environment.mapper_missing``, exit 3)
    mapper: str | None = None
    #: the format of the live evidence the mapper reads: ``capture/0.1`` (the wire log,
    #: with the benchmark's native log beside it) or ``inspect-eval`` (an Inspect ``.eval``
    #: log, with the wire log beside it, R-25.5)
    evidence_format: str = "capture/0.1"
    #: a live corpus of this source is restricted-use and private (:class:`Restricted`);
    #: ``None``: an ordinary corpus
    restricted: Restricted | None = None


@dataclass
class RunContext:
    """What a source's refusal rules may look at besides the plan."""

    scripted: bool = True
    capped: bool = False
    llm_element: str = "native"
    #: the agent endpoint's wire format (``openai`` or ``anthropic``; a scripted run's is
    #: ``openai``)
    wire: str = "openai"


class Source:
    """The base of every source. Subclasses set :attr:`meta` and implement the rest."""

    meta: ClassVar[SourceMeta]

    # ------------------------------------------------------------------ catalogue
    def catalogue(self) -> Catalogue:
        raise AgentprovError("cli.environment.no_catalogue", source=self.meta.name,
                             why="the source declares no catalogue")

    # ------------------------------------------------------------------- planning
    def check_plan(self, doc: PlanDoc, cat: Catalogue, ctx: RunContext) -> None:
        """Raise the usage refusals (exit 2) of this plan: step 1 of the checks."""

    def refusals(self, doc: PlanDoc, cat: Catalogue, ctx: RunContext) -> None:
        """Raise the backend's refusals (exit 5) of this plan: step 2 of the checks."""
        element = ctx.llm_element
        if element not in self.meta.llm_elements:
            raise AgentprovError(
                "run.unsupported.llm_element", source=self.meta.name, element=element,
                reason=f"The {self.meta.backend} backend runs the "
                       f"{' and '.join(self.meta.llm_elements)} element only.")

    def expand(self, doc: PlanDoc, cat: Catalogue, ctx: RunContext) -> list[Cell]:
        raise NotImplementedError

    def benchmark_version(self, doc: PlanDoc, cat: Catalogue) -> str | None:
        return None

    def backend_config(self, doc: PlanDoc, cat: Catalogue) -> dict[str, Any]:
        """What of the plan configures the backend rather than selecting cells."""
        return {"benchmark_version": self.benchmark_version(doc, cat)}

    def suites_of_plan(self, cells: list[Cell]) -> list[str]:
        return list(dict.fromkeys(c.suite for c in cells if c.suite))

    def cell_request(self, doc: PlanDoc, cat: Catalogue) -> dict[str, Any]:
        """What a ``run-cell`` request of this plan carries besides the cell and the agent
        (the worker's source reads it); none for a plan of suites."""
        return {}


def load_catalogue_file(source: Source, path: Path) -> Catalogue:
    """A plugin's committed catalogue (a snapshot or a declared one), or exit 3."""
    try:
        return catmod.load(path)
    except FileNotFoundError:
        raise AgentprovError("cli.environment.no_catalogue", source=source.meta.name,
                             why=f"{path} is missing") from None
    except catmod.CatalogueProblems as exc:
        more = len(exc.problems)
        raise AgentprovError("cli.environment.no_catalogue", source=source.meta.name,
                             why=f"{path} is not a catalogue ({more} problem(s): {exc})"
                             ) from None
    except msgspec.DecodeError as exc:
        raise AgentprovError("cli.environment.no_catalogue", source=source.meta.name,
                             why=f"{path} is not a catalogue ({exc})") from None


class SuiteSource(Source):
    """An AgentDojo-shaped source whose catalogue is a JSON file next to the plugin."""

    catalogue_file: ClassVar[Path]

    def catalogue(self) -> Catalogue:
        return load_catalogue_file(self, self.catalogue_file)

    def check_plan(self, doc: PlanDoc, cat: Catalogue, ctx: RunContext) -> None:
        if doc.inspect is not None:
            raise AgentprovError("cli.usage.option_for_other_kind", option="[inspect]",
                                 source=self.meta.name,
                                 why="it plans suites and tasks, not an Inspect task")
        # An attack that needs options (AutoDojo's cache replay) applies to the whole plan.
        needing = [a for a in (cat.attack(n) for n in doc.attacks) if a is not None and a.needs]
        for attack in needing:
            if any(_plan_value(doc, opt) is None for opt in attack.needs):
                if attack.name == "autodojo":
                    raise AgentprovError("cli.usage.autodojo_pair")
                raise AgentprovError("cli.usage.option_value", option="--attack",
                                     value=attack.name, what="needs " + " and ".join(attack.needs))
            others = [n for n in doc.attacks if n != attack.name]
            if others:
                raise AgentprovError("cli.usage.autodojo_mixed", others=", ".join(others))
        if not needing:
            for opt in ("--autodojo-cache", "--autodojo-variant"):
                if _plan_value(doc, opt) is not None:
                    raise AgentprovError("cli.usage.autodojo_options_without_attack", flag=opt)
        if doc.autodojo_variant is not None and doc.autodojo_variant < 0:
            raise AgentprovError("cli.usage.option_value", option="--autodojo-variant",
                                 value=str(doc.autodojo_variant), what="must be an integer >= 0")
        if doc.autodojo_cache is not None:  # its shape and injection tasks (exit 2)
            from agentprov_core.plan import cachefile

            cachefile.load(doc.autodojo_cache, cachefile.known_injection_tasks(cat, doc.suites))
        if doc.repeats < 1:
            raise AgentprovError("cli.usage.option_value", option="--repeats",
                                 value=str(doc.repeats), what="must be 1 or more")

    def refusals(self, doc: PlanDoc, cat: Catalogue, ctx: RunContext) -> None:
        super().refusals(doc, cat, ctx)
        for name in doc.attacks:
            attack = cat.attack(name)
            if attack is not None and attack.refused:
                raise AgentprovError("run.unsupported.attack_refused", source=self.meta.name,
                                     attack=name, backend=self.meta.backend,
                                     reason=attack.refused_reason or "refused by the backend")

    def expand(self, doc: PlanDoc, cat: Catalogue, ctx: RunContext) -> list[Cell]:
        return expand_suites(doc, cat, self.meta.name)

    def benchmark_version(self, doc: PlanDoc, cat: Catalogue) -> str | None:
        return doc.benchmark_version or cat.default_benchmark_version

    def backend_config(self, doc: PlanDoc, cat: Catalogue) -> dict[str, Any]:
        cfg = super().backend_config(doc, cat)
        if doc.autodojo_cache is not None:
            cfg["autodojo"] = {"cache_sha256": file_sha256(doc.autodojo_cache),
                               "variant": doc.autodojo_variant}
        return cfg


def _plan_value(doc: PlanDoc, option: str) -> Any:
    return getattr(doc, option.lstrip("-").replace("-", "_"), None)


# ---------------------------------------------------------------------------- Inspect
INSPECT_LIMITS = {"message_limit": (1, 500), "token_limit": (1, 10_000_000),
                  "time_limit": (1, 86_400)}


class InspectCellBound(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The task's own figures in the D-740 cell bound, declared by the source: they follow
    from its scorers and from the harness's retries, and hold for the task files recorded
    in the environment's identity. With n samples per cell, E epochs and message limit M,

        billed calls per cell  <=  n x E x ((M - 1) x (1 + a) + j) x (1 + K)

    (agent calls are at most M - 1: Inspect refuses a generation at the message limit)."""

    #: ``a``: judge calls per agent call (AgentHarm: 1, the refusal judge reads each
    #: assistant message)
    judge_calls_per_agent_call: int
    #: ``j``: judge calls per sample besides those (AgentHarm: 3, at most three
    #: semantic-judge calls per grading function, none in a loop)
    judge_calls_per_sample: int
    #: ``K``: retries per model call, as the harness fixes Inspect's (AgentHarm: 1)
    retries_per_call: int

    def per_sample(self, epochs: int, message_limit: int) -> int:
        """The billed calls of one sample: E x ((M - 1) x (1 + a) + j) x (1 + K)."""
        return (epochs * ((message_limit - 1) * (1 + self.judge_calls_per_agent_call)
                          + self.judge_calls_per_sample) * (1 + self.retries_per_call))

    def calls(self, samples: int, epochs: int, message_limit: int) -> int:
        """The bound of a cell of ``samples`` samples."""
        return samples * self.per_sample(epochs, message_limit)


class InspectSource(Source):
    """One Inspect task per plan; cells of at most ``cell_size`` samples (R-25)."""

    catalogue_file: ClassVar[Path]
    #: the task's figures in the D-740 cell bound; ``None``: the source declares none, so
    #: no cell has a known worst case and a run under caps is refused (exit 5)
    cell_bound: ClassVar[InspectCellBound | None] = None
    #: the wire formats of the agent's endpoint the harness drives (the agent and its
    #: judges, through Inspect's OpenAI-style provider); another is refused at step 2
    wires: ClassVar[tuple[str, ...]] = ("openai",)

    def catalogue(self) -> Catalogue:
        return load_catalogue_file(self, self.catalogue_file)

    def check_plan(self, doc: PlanDoc, cat: Catalogue, ctx: RunContext) -> None:
        if doc.attacks or doc.suites or doc.defence != "none":
            opt = "--attack" if doc.attacks else "--suite" if doc.suites else "--defence"
            raise AgentprovError("cli.usage.option_for_other_kind", option=opt,
                                 source=self.meta.name,
                                 why="it runs an Inspect task (--task, --samples)")
        insp = doc.inspect or InspectPlan()

        def refuse(detail: str) -> AgentprovError:
            return AgentprovError("cli.usage.backend_plan", detail=detail)

        if insp.task is None:
            raise refuse("[inspect].task: missing (--task NAME; tasks: "
                         + ", ".join(t.name for t in cat.tasks) + ")")
        task = cat.task(insp.task)
        if task is None:
            raise refuse(f"[inspect].task: {insp.task!r} is not a catalogue task; tasks: "
                         + ", ".join(t.name for t in cat.tasks))
        if insp.samples is None:
            raise refuse("[inspect].samples: missing (--samples limit:N or ID,ID…)")
        missing = [k for k in INSPECT_LIMITS if k not in insp.limits]
        if missing:
            raise refuse(f"[inspect].limits: missing key(s) {', '.join(missing)}")
        for k, v in insp.limits.items():
            if k not in INSPECT_LIMITS:
                raise refuse(f"[inspect].limits: unknown key {k!r}")
            lo, hi = INSPECT_LIMITS[k]
            if not lo <= v <= hi:
                raise refuse(f"[inspect].limits.{k}: {v} is outside {lo} to {hi:,}")
        roles = task.judge_roles
        absent = [r for r in roles if r not in insp.judges]
        if absent:
            raise refuse(f"[inspect].judges: missing role(s) {', '.join(absent)} "
                         "(--judge ROLE=MODEL for every role)")
        extra = [r for r in insp.judges if r not in roles]
        if extra:
            raise refuse(f"[inspect].judges: unknown role(s) {', '.join(extra)}; roles: "
                         + ", ".join(roles))
        if not 1 <= insp.epochs <= 10:
            raise refuse(f"[inspect].epochs: {insp.epochs} is outside 1 to 10")
        if not 1 <= insp.max_connections <= 64:
            raise refuse(f"[inspect].max_connections: {insp.max_connections} is outside 1 to 64")
        if insp.cell_size is not None and not 1 <= insp.cell_size <= 500:
            raise refuse(f"[inspect].cell_size: {insp.cell_size} is outside 1 to 500")
        params = {p.name: p for p in task.parameters}
        for k, v in insp.params.items():
            p = params.get(k)
            if p is None:
                raise refuse(f"[inspect].params: {k!r} is not a parameter of {task.name}; "
                             "parameters: " + ", ".join(params))
            if p.choices is not None and str(v) not in p.choices:
                raise refuse(f"[inspect].params.{k}: {v!r} is not one of "
                             + ", ".join(p.choices))
            if p.type == "int" and (not isinstance(v, int) or isinstance(v, bool)):
                raise refuse(f"[inspect].params.{k}: must be an integer")
            if p.type == "bool" and not isinstance(v, bool):
                raise refuse(f"[inspect].params.{k}: must be true or false")
            if p.type == "int" and ((p.minimum is not None and v < p.minimum)
                                    or (p.maximum is not None and v > p.maximum)):
                raise refuse(f"[inspect].params.{k}: {v} is outside {p.minimum} to {p.maximum}")
        split = insp.split or str(insp.params.get("split", task.default_split))
        splits = {s.name: s for s in task.splits}
        if split not in splits:
            raise refuse(f"[inspect].split: {split!r} is not a split; splits: "
                         + ", ".join(splits))
        self._samples(insp, splits[split], refuse)

    @staticmethod
    def _samples(insp: InspectPlan, split: Split, refuse) -> list[Any]:
        spec = (insp.samples or "").strip()
        size = split.samples
        if spec.startswith("limit:"):
            n = spec[len("limit:"):]
            if not n.isdigit() or not 1 <= int(n) <= size:
                raise refuse(f"[inspect].samples: {spec!r}: N must be 1 to {size} (the split's size)")
            return [{"index": i} for i in range(int(n))]
        ids = [s.strip() for s in spec.split(",") if s.strip()]
        if not ids:
            raise refuse("[inspect].samples: give limit:N or ID,ID…")
        if split.sample_ids is not None:
            known = set(split.sample_ids)
            unknown = [i for i in dict.fromkeys(ids) if i not in known]
            if unknown:
                shown = ", ".join(repr(i[:40]) for i in unknown[:5])
                more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
                raise refuse(f"[inspect].samples: {shown}{more} not in the {split.name} split "
                             f"of the catalogue ({size} samples; --samples limit:N or ids "
                             "of the split)")
        return [{"id": i} for i in dict.fromkeys(ids)]

    def expand(self, doc: PlanDoc, cat: Catalogue, ctx: RunContext) -> list[Cell]:
        insp = doc.inspect or InspectPlan()
        task = cat.task(insp.task or "")
        assert task is not None
        split = insp.split or str(insp.params.get("split", task.default_split))
        samples = self._samples(insp, {s.name: s for s in task.splits}[split],
                                lambda d: AgentprovError("cli.usage.backend_plan", detail=d))
        cell_size = insp.cell_size or (1 if ctx.capped else 25)
        cells = []
        for start in range(0, len(samples), cell_size):
            chunk = tuple(samples[start:start + cell_size])
            key = digest({"task": task.name, "split": split, "samples": list(chunk),
                          "epochs": insp.epochs, "params": insp.params})[:16]
            cells.append(Cell(kind="samples", samples=chunk, key=key))
        return cells

    def refusals(self, doc: PlanDoc, cat: Catalogue, ctx: RunContext) -> None:
        """Step 2 (exit 5): an endpoint of another wire format than the harness drives (an
        Anthropic-format endpoint: refused before consent, R-25.25), and caps on a source
        that declares no cell bound."""
        super().refusals(doc, cat, ctx)
        if not ctx.scripted and ctx.wire not in self.wires:
            raise AgentprovError("run.unsupported.endpoint_wire", source=self.meta.name,
                                 wire=ctx.wire, backend=self.meta.backend,
                                 wires=" or ".join(self.wires))
        if ctx.capped and self.cell_bound is None:
            raise AgentprovError("run.unsupported.cell_bound", source=self.meta.name)

    def check_judges(self, doc: PlanDoc, agent_model: str) -> None:
        """Step 3, under caps (R-25.24): every judge uses the agent's model, since the cell
        bound prices every call at the agent's prices; else ``cli.refused.api_caps``
        (exit 4), naming each judge that differs."""
        insp = doc.inspect or InspectPlan()
        other = {r: m for r, m in insp.judges.items() if m != agent_model}
        if other:
            raise AgentprovError(
                "cli.refused.api_caps",
                why=f"under caps every judge uses the agent's model, {agent_model}; "
                    + ", ".join(f"{r} is {m}" for r, m in other.items()),
                missing=" ".join(f"--judge {r}={agent_model}" for r in other))

    def cell_calls(self, doc: PlanDoc, cells: list[Cell]) -> int | None:
        """The D-740 bound of the plan's largest cell (every cell is reserved at it), or
        None when the source declares no :attr:`cell_bound`."""
        insp = doc.inspect or InspectPlan()
        if self.cell_bound is None:
            return None
        n = max((len(c.samples) for c in cells), default=1)
        return self.cell_bound.calls(n, insp.epochs, insp.limits["message_limit"])

    def cell_rule(self, doc: PlanDoc, cells: list[Cell]) -> dict[str, Any] | None:
        """The D-740 figures of :meth:`cell_calls`: n (the largest cell's samples), E, M,
        the source's a, j and K, and the calls of one sample."""
        insp = doc.inspect or InspectPlan()
        b = self.cell_bound
        if b is None:
            return {"rule": "D-740", "declared": False}
        m = insp.limits["message_limit"]
        return {"rule": "D-740", "samples": max((len(c.samples) for c in cells), default=1),
                "epochs": insp.epochs, "message_limit": m,
                "judge_calls_per_agent_call": b.judge_calls_per_agent_call,
                "judge_calls_per_sample": b.judge_calls_per_sample,
                "retries_per_call": b.retries_per_call,
                "calls_per_sample": b.per_sample(insp.epochs, m)}

    def backend_config(self, doc: PlanDoc, cat: Catalogue) -> dict[str, Any]:
        insp = doc.inspect or InspectPlan()
        return {"inspect": {"task": insp.task, "epochs": insp.epochs,
                            "limits": insp.limits, "judges": insp.judges,
                            "params": insp.params, "max_connections": insp.max_connections}}

    def cell_request(self, doc: PlanDoc, cat: Catalogue) -> dict[str, Any]:
        """The ``inspect`` block of every cell's request: the task, its split (``None``: the
        task's default, as the worker's code reads it), epochs, limits, judges, parameters
        and ``max_connections``. The agent's sampling parameters are not in it: the task
        fixes them (D-742)."""
        insp = doc.inspect or InspectPlan()
        split = insp.split or insp.params.get("split")
        return {"inspect": self.backend_config(doc, cat)["inspect"]
                | {"split": str(split) if split is not None else None}}
