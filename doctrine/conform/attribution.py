"""Quotes given to the wrong message: a summary line that cites one message (``(m00018)``)
and quotes text (a command, an error line, a value) that message does not hold.

A reader restores the cited message to see the quoted text; if it is not there, the line
points them at the wrong place. Only lines that cite exactly one message and no block are judged, and
only against what that message holds: its own text, the call it answers (a tool result's
command) or the results it got (a call's output). A cited message outside the source (a
tier-2 digest cites the messages its blocks folded) is judged against the source lines
that cite the same message.
"""

from __future__ import annotations

import re
from typing import Any

from .patterns import CODE_SPAN as _CODE_SPAN

__all__ = ["json_unescaped", "misattributed_quotes"]

_CITE = re.compile(r"(?<![\w])m(\d{5})(?![\w\d])")
_BLOCK = re.compile(r"(?<![\w])b\d+(?![\w\d])")
# Tool-call arguments are JSON text: their escapes are not what the command said.
_ESCAPES = (("\\n", "\n"), ("\\t", "\t"), ('\\"', '"'), ("\\\\", "\\"))


def json_unescaped(text: str) -> str:
    """``text`` with the JSON string escapes of tool-call arguments undone."""
    for a, b in _ESCAPES:
        text = text.replace(a, b)
    return text


def _plain(text: str) -> str:
    return " ".join(json_unescaped(text).split())


def _holdings(msgs: list[Any]) -> dict[str, str]:
    """Per cited ref: the text a reader finds when they restore that message."""
    calls = {m.tool_call_id: m for m in msgs if m.kind == "tool-call" and m.tool_call_id}
    results: dict[str, list[Any]] = {}
    for m in msgs:
        if m.kind == "tool-result" and m.tool_call_id:
            results.setdefault(m.tool_call_id, []).append(m)
    held: dict[str, list[str]] = {}
    for m in msgs:
        if not m.ref:
            continue
        parts = held.setdefault(m.ref, [])
        parts.append(m.text)
        if m.kind == "tool-result" and m.tool_call_id in calls:
            parts.append(calls[m.tool_call_id].text)
        if m.kind == "tool-call" and m.tool_call_id in results:
            parts += [r.text for r in results[m.tool_call_id]]
    return {ref: _plain("\n".join(parts)) for ref, parts in held.items()}


def misattributed_quotes(summary: str, msgs: list[Any]) -> list[str]:
    """``"`quote` (m00018)"`` for each backticked quote on a line citing one message that the
    message does not hold (see the module docstring)."""
    held = _holdings(msgs)
    out: list[str] = []
    for line in summary.splitlines():
        refs = {f"m{n}" for n in _CITE.findall(line)}
        if len(refs) != 1 or _BLOCK.search(line):  # a line naming a block too quotes it, not the message
            continue
        ref = refs.pop()
        where = held.get(ref)
        if where is None:  # cited through the source's own lines (tier-2 sources are blocks)
            lines = [x for m in msgs for x in m.text.splitlines() if re.search(rf"(?<![\w]){ref}(?![\w\d])", x)]
            if not lines:
                continue
            where = _plain("\n".join(lines))
        for span in _CODE_SPAN.finditer(line):
            quote = _plain(span.group(0).strip("`")).rstrip(".")
            # Backticks are markdown in a summary: a compiler's "borrow `x`" quoted as "borrow x"
            # is the same text (matching ignores them on both sides too, patterns.norm).
            if len(quote) < 3 or quote in where or quote in where.replace("`", ""):
                continue
            item = f"`{quote}` ({ref})"
            if item not in out:
                out.append(item)
    return out
