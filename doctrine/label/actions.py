"""Assistant messages the labels consist of (OpenAI chat format).

* compress: one ``compress`` tool call whose arguments have exactly the shape of
  ``doctrine.render.tools.tool_schemas`` (``topic``, ``content: [{startId, endId, summary,
  topic?}]``), optionally after a one-line lead; a range carries its own ``topic`` only
  when it differs from the call's (the host gives a range without one the call's topic);
* refusal: the task's own next assistant message with a one-line decline put in front of
  its text (chosen over a text-only decline: the model keeps working in the same turn, as
  the doctrine asks, and the session's tool calls stay paired with their results);
* search_context / decompress calls (recovery);
* ordinary: the session's next assistant message, unchanged.
"""

from __future__ import annotations

import copy
import json
from typing import Any


def tool_call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False, sort_keys=False)}}


def call_message(lead: str, call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """An assistant message with one tool call (``content`` None when there is no lead)."""
    return {"role": "assistant", "content": lead or None, "tool_calls": [tool_call(call_id, name, args)]}


def compress_args(topic: str, ranges: list[dict[str, str]]) -> dict[str, Any]:
    """``{"topic", "content": [{"startId", "endId", "summary", "topic"?}]}``, oldest first; a
    range's ``topic`` is written only where it is not the call's own ``topic`` (repeating it
    teaches nothing: the host falls back to the call's topic)."""
    content = []
    for r in ranges:
        item = {"startId": r["startId"], "endId": r["endId"], "summary": r["summary"]}
        if r.get("topic") and r["topic"] != topic:
            item["topic"] = r["topic"]
        content.append(item)
    return {"topic": topic, "content": content}


def host_ranges(args: dict[str, Any]) -> list[Any]:
    """The ranges of compress ``args`` as the host hands them to the kernel (a range without
    a topic gets the call's)."""
    from doctrine.kernel.compress_args import parse_compress_args

    parsed = parse_compress_args(args)
    if parsed.errors:
        raise ValueError("; ".join(parsed.errors))
    return parsed.ranges


def session_message(msg: dict[str, Any]) -> dict[str, Any]:
    """A session's assistant message as a target: chat keys only, deep-copied."""
    out: dict[str, Any] = {"role": "assistant", "content": msg.get("content")}
    if msg.get("tool_calls"):
        out["tool_calls"] = copy.deepcopy(msg["tool_calls"])
    if msg.get("reasoning_content"):
        out["reasoning_content"] = msg["reasoning_content"]
    return out


def with_prefix(msg: dict[str, Any], line: str) -> dict[str, Any]:
    """``msg`` with ``line`` as the first paragraph of its text."""
    out = session_message(msg)
    body = out.get("content") or ""
    out["content"] = f"{line}\n\n{body}" if body.strip() else line
    return out
