"""An Anthropic Messages API reply recorded as a server-sent event stream, as a message.

AgentDojo's ``AnthropicLLM`` always calls ``client.messages.stream(...)``, so each recorded
reply body is the ``text/event-stream`` text (``message_start``, ``content_block_start``,
``content_block_delta``, ``content_block_stop``, ``message_delta``, ``message_stop``). The
recording transport keeps those bytes verbatim; :func:`reply_body` assembles them into the
message object the non-streaming API would have returned (what the SDK's
``get_final_message()`` gives the element), so that usage, stop reason and content are read
from the same shape either way. Any other body is returned unchanged.
"""

from __future__ import annotations

import json
from typing import Any


def _events(text: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        data = [line[5:].lstrip(" ") for line in block.split("\n") if line.startswith("data:")]
        if not data:
            continue
        try:
            value = json.loads("\n".join(data))
        except ValueError:
            continue
        if isinstance(value, dict):
            events.append(value)
    return events


def assemble(text: str) -> dict[str, Any] | None:
    """The message an Anthropic event stream carries, or None when ``text`` is not one (no
    ``message_start`` event)."""
    message: dict[str, Any] | None = None
    partial: dict[int, str] = {}
    for ev in _events(text):
        kind = ev.get("type")
        if kind == "message_start" and isinstance(ev.get("message"), dict):
            message = dict(ev["message"])
            message["content"] = list(message.get("content") or [])
            message["usage"] = dict(message.get("usage") or {})
            continue
        if message is None:
            continue
        blocks = message["content"]
        index = ev.get("index")
        if kind == "content_block_start" and isinstance(ev.get("content_block"), dict):
            block = dict(ev["content_block"])
            if isinstance(index, int) and index == len(blocks):
                blocks.append(block)
            elif isinstance(index, int) and index < len(blocks):
                blocks[index] = block
        elif kind == "content_block_delta" and isinstance(index, int) \
                and 0 <= index < len(blocks) and isinstance(ev.get("delta"), dict):
            block, delta = blocks[index], ev["delta"]
            dt = delta.get("type")
            if dt == "text_delta":
                block["text"] = block.get("text", "") + str(delta.get("text", ""))
            elif dt == "input_json_delta":
                partial[index] = partial.get(index, "") + str(delta.get("partial_json", ""))
            elif dt == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + str(delta.get("thinking", ""))
            elif dt == "signature_delta":
                block["signature"] = str(delta.get("signature", ""))
            elif dt == "citations_delta":
                block.setdefault("citations", []).append(delta.get("citation"))
        elif kind == "content_block_stop" and isinstance(index, int) and index in partial \
                and 0 <= index < len(blocks):
            raw = partial.pop(index)
            try:
                blocks[index]["input"] = json.loads(raw) if raw else {}
            except ValueError:
                blocks[index]["input"] = raw
        elif kind == "message_delta":
            delta = ev.get("delta") if isinstance(ev.get("delta"), dict) else {}
            for key in ("stop_reason", "stop_sequence"):
                if key in delta:
                    message[key] = delta[key]
            if isinstance(ev.get("usage"), dict):
                message["usage"].update({k: v for k, v in ev["usage"].items()
                                         if v is not None})
    return message


def reply_body(body: Any) -> Any:
    """``body`` as a message when it is a recorded Anthropic event stream; else unchanged."""
    if isinstance(body, str) and "message_start" in body:
        message = assemble(body)
        if message is not None:
            return message
    return body
