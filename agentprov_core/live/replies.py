"""Reading one recorded model exchange, as the canary, the quality counts and the preflight
probe all read it: a reply's text, structured tool calls and finish reason on either wire
(an Anthropic event stream read as the message it assembles into), the tools a request
offered, whether a reply's text looks like a tool call it did not make structurally (A4),
and which finish reasons are normal (A6)."""

from __future__ import annotations

import re
from typing import Any

from agentprov_core.live.sse import reply_body

NORMAL_FINISH = {"openai": {"stop", "tool_calls"},
                 "anthropic": {"end_turn", "tool_use", "stop_sequence", "stop"}}
_TEXT_CALL = re.compile(
    r"<tool_call>|</tool_call>|<function[=\s>]|<\|python_tag\|>|\[TOOL_CALLS\]|"
    r"<\|tool_call|\"tool_calls\"\s*:|\"function_call\"\s*:|```tool", re.IGNORECASE)


def tool_names(body: Any) -> list[str]:
    out = []
    for t in (body or {}).get("tools") or () if isinstance(body, dict) else ():
        if isinstance(t, dict):
            name = (t.get("function") or {}).get("name") if t.get("type") == "function" \
                else t.get("name")
            if isinstance(name, str) and name:
                out.append(name)
    return out


def text_tool_call(content: Any, names: list[str]) -> bool:
    """Whether a reply's text looks like a tool call it did not make structurally (A4)."""
    if not isinstance(content, str) or not content.strip():
        return False
    if _TEXT_CALL.search(content):
        return True
    for name in names:
        n = re.escape(name)
        if re.search(rf"\b{n}\s*\(", content) or \
                re.search(rf"\"name\"\s*:\s*\"{n}\"", content):
            return True
    return False


def reply_message(body: Any, wire: str) -> tuple[Any, bool, Any]:
    """(text content, has structured tool calls, finish reason) of a response body (an
    Anthropic event stream is read as the message it assembles into)."""
    body = reply_body(body)
    if not isinstance(body, dict):
        return None, False, None
    if wire == "anthropic":
        blocks = body.get("content") or []
        text = "".join(b.get("text", "") for b in blocks if isinstance(b, dict)
                       and b.get("type") == "text")
        calls = any(isinstance(b, dict) and b.get("type") == "tool_use" for b in blocks)
        return text or None, calls, body.get("stop_reason")
    choices = body.get("choices") or [{}]
    first = choices[0] if isinstance(choices[0], dict) else {}
    msg = first.get("message") or {}
    return msg.get("content"), bool(msg.get("tool_calls")), first.get("finish_reason")
