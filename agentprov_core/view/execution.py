"""One execution as its page shows it: the document the site stores in ``x/<n>.js`` and the
page's script renders (docs/view.md lists its fields).

It is read from the execution's stored files (its AER, PROV graph, index line) and, for a
live execution, from its capture log in the raw store: the messages each model call sent
(the first wire attempt's request, only those not sent before) are in the capture, not the
AER. The injections are the AER's ``agentdojo.injections`` note (an import) or the native
log's ``injections`` (a live AgentDojo session): the texts the page marks wherever they
show. Nothing here trusts the corpus: a file that does not read is said to, never raised.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from agentprov_core.audit import validity
from agentprov_core.base import inputfile

#: the largest capture or native log read for the page (a larger one is linked, not read)
MAX_LOG = 64 << 20
#: the AER's header fields a page shows as they are
HEADER_KEYS = ("mode", "source", "started_at", "ended_at", "plan_sha256", "config_digest",
               "instrumentation", "request_modifying")


#: an execution id the site reads files for (as the results table's reader accepts one)
SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
_RAW = re.compile(r"raw/sha256/([0-9a-f]{2})/\1[0-9a-f]{62}")


def raw_path(root: Path, ev: Any) -> Path | None:
    """The stored file an AER's evidence entry names, when its ``path`` is a raw store path
    (``raw/sha256/ab/ab…``) whose digest is the entry's ``sha256``: an AER is read as
    untrusted, and its paths never lead the site to read anything else."""
    if not isinstance(ev, dict):
        return None
    rel, sha = ev.get("path"), ev.get("sha256")
    if not isinstance(rel, str) or not _RAW.fullmatch(rel) or not rel.endswith(f"/{sha}"):
        return None
    path = root / rel
    return None if path.is_symlink() else path


def _read_json(path: Path, limit: int = MAX_LOG) -> tuple[Any, str | None]:
    try:
        data = inputfile.read_bytes(path, limit, follow=False)
    except inputfile.Missing:
        return None, "missing"
    except inputfile.Unreadable as exc:
        return None, f"not read for the page: it {exc}"
    try:
        return json.loads(data), None
    except (ValueError, RecursionError) as exc:
        return None, f"does not read as JSON ({type(exc).__name__})"


def capture_messages(path: Path) -> tuple[dict[str, list[Any]], str | None]:
    """The messages each model call of a capture log sent that its previous call had not:
    ``{call_id: [message, …]}`` from each call's first wire request (OpenAI ``messages``,
    Anthropic ``system`` and ``messages``)."""
    out: dict[str, list[Any]] = {}
    try:
        lines = inputfile.read_bytes(path, MAX_LOG, follow=False).splitlines()
    except inputfile.Missing:
        return out, "missing"
    except inputfile.Unreadable as exc:
        return out, f"not read for the page: it {exc}"
    sent: dict[str | None, int] = {}
    for line in lines:
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if not isinstance(rec, dict) or rec.get("kind") != "wire_request" \
                or rec.get("attempt_index") not in (0, None):
            continue
        body = rec.get("body")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            continue
        msgs = list(body["messages"])
        if isinstance(body.get("system"), str | list):
            msgs.insert(0, {"role": "system", "content": body["system"]})
        # a defence's calls send their own conversation: counted apart from the agent's
        key = rec.get("actor") if isinstance(rec.get("actor"), str) else None
        before = sent.get(key, 0)
        new = msgs[before:] if len(msgs) >= before else msgs
        sent[key] = len(msgs)
        out[str(rec.get("call_id"))] = new
    return out, None


def _obj(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one: an AER is read without trusting
    its shape (the tools that check it are ``validate`` and ``verify``)."""
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _content_text(content: Any) -> str:
    """A message's text: a string, or the ``text`` of its parts (OpenAI and Anthropic
    content lists)."""
    if isinstance(content, list):
        return "\n".join(p["text"] if isinstance(p, dict) and isinstance(p.get("text"), str)
                         else " ".join(_strings(p)) for p in content)
    return " ".join(_strings(content))


def prov_graph(doc: Any) -> dict[str, list[list[str]]]:
    """A PROV-JSON document's nodes (``[id, kind, type]``) and edges (``[relation, from,
    to]``), as the page lists them."""
    nodes: list[list[str]] = []
    edges: list[list[str]] = []
    if not isinstance(doc, dict):
        return {"nodes": nodes, "edges": edges}
    for kind in ("entity", "activity", "agent"):
        for nid, attrs in sorted(_obj(doc.get(kind)).items()):
            t = attrs.get("prov:type") if isinstance(attrs, dict) else None
            if isinstance(t, dict):
                t = t.get("$")
            if isinstance(t, list):
                t = ", ".join(str(x.get("$", x)) if isinstance(x, dict) else str(x) for x in t)
            nodes.append([str(nid), kind, str(t or "")])
    known = {n[0] for n in nodes}
    for rel, items in sorted(doc.items()):
        if rel in ("entity", "activity", "agent", "prefix") or not isinstance(items, dict):
            continue
        for attrs in items.values():
            if not isinstance(attrs, dict):
                continue
            ends = [str(v) for k, v in attrs.items() if k.startswith("prov:")
                    and isinstance(v, str) and v in known]
            if len(ends) >= 2:
                edges.append([rel, ends[0], ends[1]])
    return {"nodes": nodes, "edges": edges}


def _injections(aer: dict[str, Any], root: Path) -> dict[str, str]:
    for r in map(_obj, _list(aer.get("records"))):
        if r.get("kind") == "note" and r.get("code") == "agentdojo.injections":
            inj = _obj(r.get("data")).get("injections")
            if isinstance(inj, dict):
                return {str(k): str(v) for k, v in inj.items() if isinstance(v, str) and v}
    for ev in _list(_obj(aer.get("header")).get("evidence")):
        path = raw_path(root, ev)
        if path is not None and ev.get("role") == "native_log":
            native, _ = _read_json(path)
            if isinstance(native, dict) and isinstance(native.get("injections"), dict):
                return {str(k): str(v) for k, v in native["injections"].items()
                        if isinstance(v, str) and v}
    return {}


def _payload(header: dict[str, Any], root: Path) -> str | None:
    """A13: whether an attacked execution's injection reached a model request its capture
    recorded (``reached``, ``not_reached``, ``not_determined``); None for a benign one."""
    if _obj(header.get("task")).get("injection_task_id") in (None, "", "not recorded"):
        return None
    return validity.payload_state(root, _list(header.get("evidence")))


def _user_task(aer: dict[str, Any], root: Path) -> str | None:
    for r in map(_obj, _list(aer.get("records"))):
        if r.get("kind") == "note" and r.get("code") == "agentdojo.user_message":
            return str(_obj(r.get("data")).get("text", ""))
    for ev in _list(_obj(aer.get("header")).get("evidence")):
        path = raw_path(root, ev)
        if path is not None and ev.get("role") == "native_log":
            native, _ = _read_json(path)
            for m in _list(_obj(native).get("messages")):
                if isinstance(m, dict) and m.get("role") == "user":
                    return _content_text(m.get("content"))
    return None


def steps(aer: dict[str, Any], sent: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """The AER's records as the page's steps: each with ``kind``, ``aux`` (a defence's or a
    judge's record: an auxiliary call, an intervention) and, for a model call, ``sent``
    (the messages it sent that its previous call had not)."""
    out = []
    for r in _list(aer.get("records")):
        if not isinstance(r, dict):
            continue
        s = dict(r)
        s["aux"] = isinstance(r.get("actor"), str)
        if r.get("kind") == "model_call":
            s["sent"] = sent.get(str(r.get("call_id")), [])
            s["sent_label"] = sent_label(len(s["sent"]), r.get("messages_sent"))
        out.append(s)
    return out


def sent_label(new: int, total: Any) -> str:
    """The caption of a model call's messages: how many it sent that its previous call had
    not, of how many in all when the mapper recorded that (``messages_sent``, a count)."""
    counted = isinstance(total, int) and not isinstance(total, bool)
    if not new:
        return f"messages sent: {total}" if counted else \
            "messages sent: not recorded by the mapper"
    return f"sent ({new} new message(s) of {total})" if counted else \
        f"sent ({new} new message(s); the number sent in all is not recorded by the mapper)"


def document(root: Path, eid: str, aer_bytes: bytes | None, error: str | None
             ) -> dict[str, Any]:
    """The page's document of execution ``eid`` of the corpus at ``root`` (unscrubbed: the
    site scrubs everything it writes)."""
    if not SAFE_ID.fullmatch(eid):
        return {"id": eid, "error": "the index names an execution id that is not a plain "
                "name: its files are not read", "steps": [], "injections": {}, "header": {},
                "outcome": {}}
    if aer_bytes is None:
        return {"id": eid, "error": error or "the AER is missing", "steps": [],
                "injections": {}, "header": {}, "outcome": {}}
    try:
        aer = json.loads(aer_bytes)
        if not isinstance(aer, dict):
            raise ValueError("not an object")
    except (ValueError, RecursionError) as exc:
        return {"id": eid, "error": f"the AER does not read as JSON ({exc})", "steps": [],
                "injections": {}, "header": {}, "outcome": {}}
    header = _obj(aer.get("header"))
    sent: dict[str, list[Any]] = {}
    notes: list[str] = []
    for ev in _list(header.get("evidence")):
        path = raw_path(root, ev)
        if path is not None and ev.get("role") == "capture":
            sent, why = capture_messages(path)
            if why:
                notes.append(f"capture log {ev.get('path')}: {why}")
    prov, why = _read_json(root / "executions" / eid / "prov.json")  # eid: a plain name
    return {
        "id": eid, "error": error,
        "header": {**{k: header.get(k) for k in HEADER_KEYS},
                   "task": _obj(header.get("task")), "agent": _obj(header.get("agent")),
                   "producer": _obj(header.get("producer")),
                   "backend": _obj(header.get("backend")),
                   "actors": [a for a in _list(header.get("actors")) if isinstance(a, dict)],
                   "evidence": [e for e in _list(header.get("evidence"))
                                if isinstance(e, dict)]},
        "outcome": _obj(aer.get("outcome")),
        "user_task": _user_task(aer, root),
        "injections": _injections(aer, root),
        "payload": _payload(header, root),
        "steps": steps(aer, sent),
        "prov": prov_graph(prov),
        "notes": notes + ([f"prov.json: {why}"] if why and why != "missing" else []),
    }
