"""Hindsight over a Session, and the map between kernel messages and session messages.

The replay gives every session message a stable raw id ``sNNNNN`` (its index in
``Session.messages``); ``flatten`` turns an assistant message with tool calls into
``sNNNNN``, ``sNNNNN#<callId>``..., so a flat id always maps back to its session message.
Messages the replay inserts (compress calls, recovery calls and their results) use the
prefix ``a`` and map to no session message.

"Needed" is decided per *unit*: an assistant message together with the results of its tool
calls. A needed tool result makes its call needed and the other way round: compressing
one half would drag the other along (the kernel widens ranges to keep tool pairs whole).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from doctrine.session import string_values

SESSION_PREFIX = "s"
ACTION_PREFIX = "a"


def session_msg_id(index: int) -> str:
    """The raw id of session message ``index``."""
    return f"{SESSION_PREFIX}{index:05d}"


def session_index_of(raw_id: str | None) -> int | None:
    """The session message a flat raw id came from, or None (inserted or kernel-made)."""
    if not raw_id:
        return None
    base = raw_id.split("#", 1)[0]
    if len(base) == 6 and base[0] == SESSION_PREFIX and base[1:].isdigit():
        return int(base[1:])
    return None


def unit_key(raw_id: str, units: list[int]) -> str:
    """The unit a flat message belongs to: its session unit, else its action prefix."""
    i = session_index_of(raw_id)
    if i is not None and 0 <= i < len(units):
        return session_msg_id(units[i])
    return raw_id.split("#", 1)[0]


def tool_units(messages: list[dict[str, Any]]) -> list[int]:
    """For each session message, the index of the unit head it belongs to.

    A tool result belongs to the assistant message that issued its call; everything else
    is its own head.
    """
    call_owner: dict[str, int] = {}
    out: list[int] = []
    for i, m in enumerate(messages):
        if m.get("role") == "assistant":
            for c in m.get("tool_calls") or []:
                if isinstance(c, dict) and c.get("id"):
                    call_owner[str(c["id"])] = i
        if m.get("role") == "tool":
            out.append(call_owner.get(str(m.get("tool_call_id")), i))
        else:
            out.append(i)
    return out


@dataclass
class Hindsight:
    """What the session's future says at one step: which messages and facts are in use."""

    step: int
    horizon: int
    needed_messages: set[int] = field(default_factory=set)  # session indices (unit-expanded)
    needed_facts: list[Any] = field(default_factory=list)  # Fact objects used within the horizon

    def is_needed(self, session_index: int | None) -> bool:
        return session_index is not None and session_index in self.needed_messages


def hindsight(session: Any, step: int, horizon: int) -> Hindsight:
    """Messages needed at ``step``: a fact they introduce is used in ``[step, step + horizon]``."""
    units = tool_units(session.messages)
    window = set(range(step, step + max(0, horizon) + 1))
    facts = [f for f in session.facts if window.intersection(f.used_at)]
    heads = {units[f.message] for f in facts if 0 <= f.message < len(units)}
    needed = {i for i, u in enumerate(units) if u in heads}
    return Hindsight(step, horizon, needed, facts)


def facts_of(session: Any, indices: Iterable[int]) -> list[Any]:
    """The session's facts introduced in any of ``indices`` (session order)."""
    idx = set(indices)
    return [f for f in session.facts if f.message in idx]


def message_strings(text: str, is_call: bool) -> list[str]:
    """A message's text, plus the decoded string values of a tool call's JSON arguments."""
    parts = [text]
    if not is_call:
        return parts
    try:
        parts.extend(string_values(json.loads(text)))
    except (ValueError, TypeError):
        pass
    return parts
