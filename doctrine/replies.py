"""How a reader judges an assistant reply: its form, and whether it is a decline the doctrine allows.

:func:`reply_form` is what the evaluation scores a reply by (``eval.workloads.held_out.workload``);
the teacher source (``data_gen.sources.teacher``) keeps a reply only in a form this module
accepts, so a teacher label is held to the same reading as a model's answer:

- a **decline** is plain text (no tool call, no imitation of ref tags, tool output or a
  compress call) in **one line** (the doctrine: "decline in one line, continue the task"),
  given where a **gentle** nudge was shown: an emergency nudge is a requirement, and with no
  nudge a plain reply is no decline at all;
- the one-line **lead** before a call follows the same text rules.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["MARKUP", "MAX_DECLINE_CHARS", "decline_problem", "lead_problem", "reply_form"]

# Text that imitates kernel or tool markup instead of making a call: a reader cannot act on it.
MARKUP = re.compile(r"<acp\b|</acp>|<tool_response|</tool_response>|<tool_call\b|</tool_call>|"
                    r"\bcompress\s*\(\s*\{|\"startId\"\s*:")

# A decline longer than this is no longer "one line" a reader takes in at a glance (the
# labeler's own decline lines are 70-160 characters).
MAX_DECLINE_CHARS = 300


def reply_form(message: dict[str, Any], nudge_present: bool) -> str:
    """What a reader sees an assistant message do: ``compress``, ``recover`` (search or
    decompress), ``act`` (a call to a task tool), ``decline`` (plain text under a nudge),
    ``final`` (plain text with no nudge) or ``malformed`` (text imitating ref tags, tool
    output or a compress call written as prose)."""
    names = [(c.get("function") or {}).get("name") for c in message.get("tool_calls") or []]
    if "compress" in names:
        return "compress"
    if "search_context" in names or "decompress" in names:
        return "recover"
    if names:
        return "act"
    if MARKUP.search(message.get("content") or ""):
        return "malformed"
    return "decline" if nudge_present else "final"


def lead_problem(text: str) -> str | None:
    """Why ``text`` cannot stand as a one-line lead or decline (a reason word), or None."""
    text = text.strip()
    if "\n" in text:
        return "not_one_line"
    if len(text) > MAX_DECLINE_CHARS:
        return "too_long"
    if MARKUP.search(text):
        return "markup_in_text"
    if any(ord(c) < 32 and c != "\t" for c in text):
        return "control_characters"
    return None


def decline_problem(text: str, *, nudge_shown: bool, voice: str | None) -> str | None:
    """Why ``text`` is not a decline the doctrine allows at this point, or None: it must be
    non-empty plain text in one line, under a gentle nudge."""
    if not text.strip():
        return "empty_reply"
    if not nudge_shown:
        return "decline_without_nudge"
    if voice != "gentle":
        return "decline_under_emergency"
    return lead_problem(text)
