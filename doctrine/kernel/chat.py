"""OpenAI chat format <-> the kernel's flat messages (spec §1.1).

``flatten`` splits an assistant message into reasoning, text and one message per tool call;
a ``tool`` message becomes a tool-result. Ids come from a message's ``id`` field when given
(a split assistant message gets ``<id>#<toolCallId>`` for its calls and ``<id>#reasoning``
for its reasoning, as billion-context-pi does), else from the proxy's content hash
(``h_`` + 16 hex of sha256 over ``role|contentType|toolCallId|toolName|text``, with ``_N`` on
the Nth duplicate). ``to_chat`` regroups them.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from doctrine.kernel.messages import Message

_CHAT_KEYS = {"role", "content", "tool_calls", "tool_call_id", "name", "id", "reasoning_content"}


def content_hash_id(role: str, content_type: str, tool_call_id: str | None, tool_name: str | None,
                    text: str) -> str:
    ident = "|".join([role, content_type, tool_call_id or "", tool_name or "", text])
    return "h_" + hashlib.sha256(ident.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def content_text(content: Any) -> str:
    """Chat content as plain text: a string as it is, None as "", a list of parts as its text
    parts joined with nothing (the parts of one message are one text; images and other
    non-text parts carry no text). Anything else is ``str(content)``; a reader that must
    reject it checks the type first (``doctrine.conform.messages``)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for p in content:
            if isinstance(p, str):
                parts.append(p)
            elif isinstance(p, dict) and isinstance(p.get("text"), str):
                parts.append(p["text"])
        return "".join(parts)
    return str(content)


def flatten(chat_messages: list[dict[str, Any]]) -> list[Message]:
    """OpenAI chat messages -> flat kernel messages (inputs are not modified)."""
    out: list[Message] = []
    seen: dict[str, int] = {}
    call_names: dict[str, str] = {}

    def add(given: str | None, role: str, ctype: str, text: str, tool_name: str | None = None,
            tool_call_id: str | None = None, extra: dict[str, Any] | None = None) -> None:
        if given:
            mid = given
        else:
            base = content_hash_id(role, ctype, tool_call_id, tool_name, text)
            n = seen.get(base, 0)
            seen[base] = n + 1
            mid = base if n == 0 else f"{base}_{n}"
        out.append(Message(mid, role, ctype, text, tool_name, tool_call_id, dict(extra or {})))

    for cm in chat_messages:
        if not isinstance(cm, dict):
            raise ValueError(f"chat message must be an object, got {type(cm).__name__}")
        role = cm.get("role")
        if role not in ("system", "user", "assistant", "tool", "developer"):
            raise ValueError(f"unknown chat role {role!r}")
        if role == "developer":
            role = "system"
        given = cm.get("id") if isinstance(cm.get("id"), str) else None
        extra = {k: v for k, v in cm.items() if k not in _CHAT_KEYS}
        text = content_text(cm.get("content"))
        if role == "tool":
            tcid = cm.get("tool_call_id")
            name = cm.get("name") or call_names.get(tcid or "")
            add(given, "tool", "tool-result", text, name, tcid, extra)
            continue
        if role != "assistant":
            add(given, role, "text", text, extra=extra)
            continue
        calls = cm.get("tool_calls") or []
        reasoning = cm.get("reasoning_content")
        pieces = 0
        if isinstance(reasoning, str) and reasoning:
            add(f"{given}#reasoning" if given else None, "assistant", "reasoning", reasoning,
                extra=extra)
            pieces += 1
        if text or not calls:
            add(given if given and pieces == 0 else (f"{given}#text" if given else None),
                "assistant", "text", text, extra=extra if pieces == 0 else None)
            pieces += 1
        for tc in calls:
            fn = tc.get("function") or {}
            tcid = tc.get("id")
            name = fn.get("name")
            args = fn.get("arguments", "")
            if not isinstance(args, str):
                args = json.dumps(args, ensure_ascii=False)
            if tcid and name:
                call_names[tcid] = name
            mid = (given if pieces == 0 else f"{given}#{tcid}") if given else None
            add(mid, "assistant", "tool-call", args, name, tcid, extra if pieces == 0 else None)
            pieces += 1
    return out


def to_chat(flat: list[Message]) -> list[dict[str, Any]]:
    """Flat kernel messages -> OpenAI chat messages.

    Reasoning goes to the next assistant message's ``reasoning_content``; an assistant text
    and the tool calls right after it form one message with ``tool_calls``.
    """
    out: list[dict[str, Any]] = []
    pending_reasoning: list[str] = []
    open_assistant: dict[str, Any] | None = None  # the message tool calls may join

    for m in flat:
        if m.content_type == "reasoning":
            pending_reasoning.append(m.text)
            open_assistant = None
            continue
        if m.content_type == "tool-call":
            call = {"id": m.tool_call_id, "type": "function",
                    "function": {"name": m.tool_name, "arguments": m.text}}
            if open_assistant is None:
                open_assistant = {"role": "assistant", "content": None, "tool_calls": []}
                if pending_reasoning:
                    open_assistant["reasoning_content"] = "\n".join(pending_reasoning)
                    pending_reasoning = []
                out.append(open_assistant)
            open_assistant.setdefault("tool_calls", []).append(call)
            continue
        if m.content_type == "tool-result":
            out.append({"role": "tool", "tool_call_id": m.tool_call_id, "name": m.tool_name,
                        "content": m.text})
            open_assistant = None
            continue
        msg: dict[str, Any] = {"role": m.role, "content": m.text}
        msg.update(m.extra)
        if m.role == "assistant":
            if pending_reasoning:
                msg["reasoning_content"] = "\n".join(pending_reasoning)
                pending_reasoning = []
            open_assistant = msg
        else:
            open_assistant = None
        out.append(msg)
    return out
