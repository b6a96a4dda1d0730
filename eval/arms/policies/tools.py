"""The recovery tools the policy arms give the model, and what counts as a recovery.

A tool is ``tool(state, env, args) -> ToolRun``: ``text`` is the tool result shown to the
model, ``ok`` whether it returned what was asked for (a known handle, node or message; a
search with hits), ``refetch`` whether it opened a target this state had opened before.
``eval.arms.apply_reply`` runs them like the kernel's ``search_context`` / ``decompress``;
the exchange joins the arm's history as a tool call and its result.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["ToolRun", "function_schema", "note_opened", "tool_call", "tool_counts"]


@dataclass
class ToolRun:
    text: str
    ok: bool = False
    refetch: bool = False


def function_schema(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": properties, "required": required}}}


def note_opened(state: Any, target: str) -> bool:
    """Record that ``target`` was opened in ``state``; True when it had been opened before."""
    opened = state.policy.setdefault("opened", set())
    again = target in opened
    opened.add(target)
    return again


def tool_call(name: str, args: dict[str, Any], n: int) -> dict[str, Any]:
    return {"id": f"rc{n}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def tool_counts(calls: list[dict[str, Any]]) -> dict[str, int]:
    """Case metrics from call records: recovery tool calls run (``recovery_calls``), those
    that returned what they asked for (``recoveries``), and those that re-opened a target
    already opened in the same state (``recovery_refetches``)."""
    return {"recovery_calls": sum(len(c.get("recovery") or []) for c in calls),
            "recoveries": sum(int(c.get("recovered") or 0) for c in calls),
            "recovery_refetches": sum(int(c.get("refetched") or 0) for c in calls)}
