"""Per-token prices for the estimate: a dated table shipped in ``registry/prices.toml``, your
overrides, and OpenRouter's public model list when you ask for it (R-9.23 … R-9.27).

A price is USD per million input and output tokens, with the date it holds for and where it
came from. One is looked up in this order:

1. an override of ``agentprov prices set ENDPOINT MODEL`` (``$AGENTPROV_HOME/prices.json``),
   named ``your override (agentprov prices set)`` in the estimate's headline;
2. OpenRouter's model list as ``agentprov prices refresh --allow-network`` last read it
   (``$AGENTPROV_HOME/prices-openrouter.json``; never read from the network otherwise);
3. the shipped table, each price with the page it was read from and the date it was read.

A local endpoint (``local = true`` in ``endpoints.toml``) has no per-token cost: its price is
zero whatever the tables say. ``--price-in``/``--price-out`` of ``run`` are not read here:
they price the caps (R-9.28).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import msgspec

from agentprov_core.base import paths
from agentprov_core.errors import AgentprovError

FORMAT = "agentprov-prices/0.1"
OVERRIDES_FORMAT = "agentprov-price-overrides/0.1"
REFRESHED_FORMAT = "agentprov-price-list/0.1"
OVERRIDE_SOURCE = "your override (agentprov prices set)"
LOCAL_SOURCE = "a local endpoint: no per-token cost"
#: the public model list ``prices refresh`` reads (its documented shape: ``data[].id``,
#: ``data[].pricing.prompt`` / ``.completion`` as USD per token, decimal strings)
OPENROUTER_MODELS = "https://openrouter.ai/api/v1/models"
#: tests only: the base URL of a loopback stand-in of that list
TEST_URL_VARIABLE = "AGENTPROV_TEST_PRICES_URL"
#: the highest price accepted, USD per million tokens (a typo guard, far above any list)
MAX_PRICE = Decimal(100_000)
#: the largest prices file read (overrides, or the refreshed list: about 400 models)
MAX_FILE = 16 * 1024 * 1024
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_PRICE = re.compile(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+")


class Price(msgspec.Struct, frozen=True, kw_only=True):
    endpoint: str
    model: str
    input: float  # USD per million input tokens
    output: float  # USD per million output tokens
    as_of: str  # YYYY-MM-DD
    source: str  # a URL, or what set it
    origin: str = "table"  # table | override | refresh | local
    note: str = ""

    def usd(self, tokens_in: float, tokens_out: float) -> float:
        return (tokens_in * self.input + tokens_out * self.output) / 1e6

    @property
    def label(self) -> str:
        """How the headline names where the price came from."""
        if self.origin == "override":
            return OVERRIDE_SOURCE
        if self.origin == "refresh":
            return "OpenRouter's model list (agentprov prices refresh)"
        if self.origin == "local":
            return LOCAL_SOURCE
        return f"shipped table: {self.source}"

    def as_json(self) -> dict[str, Any]:
        return {"endpoint": self.endpoint, "model": self.model, "input_per_mtok": self.input,
                "output_per_mtok": self.output, "as_of": self.as_of, "source": self.source,
                "origin": self.origin}


# ------------------------------------------------------------------------- validation
def parse_price(option: str, raw: str | float) -> Decimal:
    """A price: a finite decimal from 0 to :data:`MAX_PRICE` (``cli.usage.option_value``,
    exit 2, naming the option). Text, as given on the command line, is digits with at most
    one decimal point, nothing else: no sign, exponent, underscore or space (Python would
    read ``1_0`` as 10 and ``-0`` as 0); a TOML table's number is taken as it is."""
    what = "a number of USD per million tokens, digits and a decimal point only, such as 0.15"
    if isinstance(raw, bool) or (isinstance(raw, str) and not _PRICE.fullmatch(raw)):
        raise AgentprovError("cli.usage.option_value", option=option, value=str(raw)[:40],
                             what=what)
    try:
        value = Decimal(raw if isinstance(raw, str) else str(raw))
    except InvalidOperation:
        raise AgentprovError("cli.usage.option_value", option=option, value=str(raw)[:40],
                             what=what) from None
    if not value.is_finite():
        raise AgentprovError("cli.usage.option_value", option=option, value=str(raw)[:40],
                             what="must be a finite number")
    if value < 0:
        raise AgentprovError("cli.usage.option_value", option=option, value=str(raw)[:40],
                             what="must not be negative")
    if value > MAX_PRICE:
        raise AgentprovError("cli.usage.option_value", option=option, value=str(raw)[:40],
                             what=f"must be {MAX_PRICE:,} or less (USD per million tokens)")
    return value


def today() -> dt.date:
    return dt.datetime.now(dt.UTC).date()


def parse_date(option: str, raw: str) -> str:
    """An as-of date: ``YYYY-MM-DD``, a real date, not after today (UTC)."""
    text = str(raw).strip()
    try:
        if not _DATE.fullmatch(text):
            raise ValueError
        day = dt.date.fromisoformat(text)
    except ValueError:
        raise AgentprovError("cli.usage.option_value", option=option, value=text[:40],
                             what="a date as YYYY-MM-DD") from None
    if day > today():
        raise AgentprovError("cli.usage.option_value", option=option, value=text,
                             what=f"is in the future (today is {today().isoformat()}, UTC)")
    return text


def _mtok(value: Decimal) -> float:
    return float(value)


# ------------------------------------------------------------------------- the tables
def table_file() -> Path:
    return paths.registry_dir() / "prices.toml"


def overrides_file() -> Path:
    return paths.home() / "prices.json"


def refreshed_file() -> Path:
    return paths.home() / "prices-openrouter.json"


def shipped() -> list[Price]:
    """The shipped table (``cli.usage.registry_file``, exit 2, when it is malformed)."""
    from agentprov_core.base import tomlfile

    path = table_file()
    data, text = tomlfile.read(path, "cli.usage.registry_file")
    if data.get("format") != FORMAT:
        raise AgentprovError("cli.usage.registry_file",
                             location=tomlfile.location(path, text, "format"),
                             what=f'format must be "{FORMAT}"')
    out = []
    for i, row in enumerate(data.get("price") or []):
        try:
            out.append(Price(endpoint=row["endpoint"], model=row["model"],
                             input=_mtok(parse_price("input", row["input"])),
                             output=_mtok(parse_price("output", row["output"])),
                             as_of=parse_date("as_of", row["as_of"]), source=row["source"],
                             note=row.get("note", "")))
        except (KeyError, TypeError, AgentprovError) as exc:
            raise AgentprovError("cli.usage.registry_file", location=f"{path} [[price]] {i + 1}",
                                 what=f"a price needs endpoint, model, input, output, as_of "
                                      f"and source ({exc})") from None
    return out


def _read(path: Path, fmt: str, origin: str) -> list[Price]:
    """The prices of the file ``path`` (none when it does not exist). A file that is not
    one, or holds a row that is not a price, is ``cli.usage.prices_file`` (exit 2) naming
    the file and the field: never skipped, nor silently replaced by the next ``set``."""
    from agentprov_core.base import inputfile

    def bad(field: str, what: str) -> AgentprovError:
        return AgentprovError("cli.usage.prices_file", path=path, field=field, what=what)

    try:
        data = inputfile.load_json(inputfile.read_bytes(path, MAX_FILE))
    except inputfile.Missing:
        return []
    except inputfile.Unreadable as exc:
        raise bad("(the file)", str(exc)) from None
    if not isinstance(data, dict) or data.get("format") != fmt:
        raise bad("format", f'must be "{fmt}"')
    rows = data.get("prices", [])
    if not isinstance(rows, list):
        raise bad("prices", "must be a list of prices")
    out = []
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or "origin" in row:
            raise bad(f"prices[{i}]", "must be an object of endpoint, model, input, output, "
                                      "as_of, source and an optional note")
        try:
            p = msgspec.convert(dict(row, origin=origin), Price)
        except msgspec.ValidationError as exc:
            raise bad(f"prices[{i}]", str(exc)) from None
        if not all(math.isfinite(v) and 0 <= v <= MAX_PRICE for v in (p.input, p.output)):
            raise bad(f"prices[{i}]", f"input and output must be from 0 to {MAX_PRICE:,}")
        out.append(p)
    return out


def overrides() -> list[Price]:
    return _read(overrides_file(), OVERRIDES_FORMAT, "override")


def refreshed() -> list[Price]:
    return _read(refreshed_file(), REFRESHED_FORMAT, "refresh")


def every() -> list[Price]:
    """Every price known, in lookup order (overrides, the refreshed list, the table)."""
    return overrides() + refreshed() + shipped()


def lookup(endpoint: str, model: str | None, *, local: bool = False,
           known: list[Price] | None = None) -> Price | None:
    """The price of ``model`` at ``endpoint``, or None when there is none."""
    if local:
        return Price(endpoint=endpoint, model=model or "", input=0.0, output=0.0,
                     as_of=today().isoformat(), source=LOCAL_SOURCE, origin="local")
    if model is None:
        return None
    for p in every() if known is None else known:
        if p.endpoint == endpoint and p.model == model:
            return p
    return None


def _writable(path: Path) -> None:
    """Refuse a prices file's place that holds a directory, a FIFO or a link (it would be
    replaced, or the write would fail half-way): checked before anything is fetched."""
    from agentprov_core.base import inputfile

    try:
        inputfile.check_output(path, directory=False)
    except inputfile.Unreadable as exc:
        raise AgentprovError("cli.usage.prices_file", path=path, field="(the file)",
                             what=str(exc)) from None


def _write(path: Path, doc: dict[str, Any]) -> None:
    _writable(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def set_override(endpoint: str, model: str, price_in: Decimal, price_out: Decimal,
                 as_of: str) -> Price:
    """Store (or replace) the override of ``model`` at ``endpoint``."""
    p = Price(endpoint=endpoint, model=model, input=_mtok(price_in), output=_mtok(price_out),
              as_of=as_of, source=OVERRIDE_SOURCE, origin="override")
    keep = [o for o in overrides() if (o.endpoint, o.model) != (endpoint, model)]
    rows = [{k: v for k, v in msgspec.to_builtins(o).items() if k != "origin"}
            for o in [*keep, p]]
    _write(overrides_file(), {"format": OVERRIDES_FORMAT, "prices": rows})
    return p


# ------------------------------------------------------------------------- refresh
def models_url() -> str:
    base = os.environ.get(TEST_URL_VARIABLE)
    return f"{base.rstrip('/')}/models" if base else OPENROUTER_MODELS


def parse_list(body: Any, fetched: str, url: str) -> list[Price]:
    """The prices of OpenRouter's model list: ``data[].id`` with ``pricing.prompt`` and
    ``pricing.completion`` (USD per token). Entries without both, or with a negative price
    (OpenRouter's routers, priced per request), are left out."""
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        raise ValueError('the answer has no "data" list')
    out = []
    for e in data:
        if not isinstance(e, dict) or not isinstance(e.get("id"), str):
            continue
        pricing = e.get("pricing")
        if not isinstance(pricing, dict):
            continue
        try:
            prompt = Decimal(str(pricing["prompt"]))
            completion = Decimal(str(pricing["completion"]))
        except (KeyError, InvalidOperation):
            continue
        if not (prompt.is_finite() and completion.is_finite()) or prompt < 0 or completion < 0:
            continue
        out.append(Price(endpoint="openrouter", model=e["id"],
                         input=float(prompt * 1_000_000), output=float(completion * 1_000_000),
                         as_of=fetched, source=url, origin="refresh"))
    return out


def refresh(*, transport: Any = None) -> tuple[list[Price], str]:
    """GET OpenRouter's public model list (no key: it is public) and store its prices;
    ``cli.environment.prices_fetch`` (exit 3) when it cannot be read."""
    import httpx

    _writable(refreshed_file())
    url = models_url()
    try:
        with httpx.Client(timeout=20.0, transport=transport, follow_redirects=False) as c:
            r = c.get(url, headers={"Accept": "application/json"})
        if r.status_code != 200:
            raise ValueError(f"HTTP {r.status_code}")
        got = parse_list(r.json(), today().isoformat(), url)
    except (httpx.HTTPError, ValueError, RecursionError) as exc:
        raise AgentprovError("cli.environment.prices_fetch", url=url, why=str(exc)[:200]) from None
    rows = [{k: v for k, v in msgspec.to_builtins(p).items() if k != "origin"} for p in got]
    _write(refreshed_file(), {"format": REFRESHED_FORMAT, "fetched_at": today().isoformat(),
                              "url": url, "prices": rows})
    return got, url
