"""The exact items of a summary: what a fold must copy from the context, not write from memory.

    from doctrine.exact_items import exact_items, items_in_text
    exact_items("Ran `pytest -q` (m00012): ValueError: batch of 1142 items over the limit")
    # ['pytest -q', 'ValueError: batch of 1142 items over the limit']

An exact item is a quoted span (without its quotes), a ``key=value`` pair, a path (with its
line number where it has one) or an error string, at least ``MIN_ITEM_CHARS`` long. The
doctrine tells a summary to keep such items verbatim, so one definition serves three readers:
the data stage's memorisation audit (``data_gen.memorisation``: were a split's items seen in
train?), the eval's ``values_not_in_context`` (did a reply copy its items from the context?)
and the trainer's copy term (``train.copy_tokens``: which target tokens copy an item).
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["MIN_ITEM_CHARS", "PATH", "SPAN", "context_text", "exact_items", "items_in_text"]

# A quoted span: `code`, "text", or 'text' whose quotes are not apostrophes inside words.
SPAN = re.compile(r"`[^`\n]+`|\"[^\"\n]+\"|(?<!\w)'[^'\n]+'(?!\w)")
# A path: segments joined by slashes (a leading slash or ./ allowed), or a file name with an
# extension and a line number (``cursor.py:17``).
PATH = re.compile(r"(?:\.{0,2}/)?(?:[\w.@+-]+/)+[\w.@+-]+(?::\d+)?|\b[\w-]+\.[A-Za-z]\w{0,5}:\d+\b")
_SETTING = re.compile(r"(?<![\w.-])[A-Za-z_][\w.-]*=[^\s,;`'\"()]+")
# An error string runs to the end of its clause: a line end, a semicolon, ", " or a full stop.
_ERROR = re.compile(r"\b[A-Z]\w*(?:Error|Exception|Failure)\b:[^\n`\"]*?(?=,\s|;|\.\s|\.?$)", re.M)
_TRAILING = ".,;:)"
MIN_ITEM_CHARS = 3  # a one- or two-character span (`a`, `-n`) occurs anywhere: not a value worth testing


def exact_items(summary: str) -> list[str]:
    """The exact items of ``summary`` in order, each once: quoted spans (without their quotes),
    ``key=value`` pairs, paths and error strings, at least ``MIN_ITEM_CHARS`` long."""
    found = [m.group(0)[1:-1].strip() for m in SPAN.finditer(summary)]
    found += [m.group(0).rstrip(_TRAILING) for m in _SETTING.finditer(summary)]
    found += [m.group(0).rstrip(_TRAILING) for m in PATH.finditer(summary)]
    found += [m.group(0).strip().rstrip(_TRAILING) for m in _ERROR.finditer(summary)]
    return [x for x in dict.fromkeys(found) if len(x) >= MIN_ITEM_CHARS]


def items_in_text(summary: str, text: str) -> tuple[list[str], list[str]]:
    """(items of ``summary`` that occur verbatim in ``text``, items that do not). ``text`` is
    read as it is and with JSON string escapes undone (tool-call arguments carry them; a
    summary may quote either form)."""
    plain = text.replace("\\n", "\n").replace("\\t", "\t").replace('\\"', '"')
    items = exact_items(summary)
    found = [i for i in items if i in plain or i in text]
    return found, [i for i in items if i not in found]


def context_text(messages: list[dict[str, Any]]) -> str:
    """Everything chat ``messages`` show a model, as one text to look items up in: their
    contents (text parts joined) and their calls' arguments."""
    parts = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, list):  # content parts
            content = "\n".join(str(p.get("text") or "") for p in content if isinstance(p, dict))
        parts.append(content if isinstance(content, str) else "")
        for call in m.get("tool_calls") or []:
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict):
                args = fn.get("arguments")
                parts.append(args if isinstance(args, str) else json.dumps(args or {}, ensure_ascii=False))
    return "\n".join(parts)
