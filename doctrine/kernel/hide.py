"""Hide compress calls whose work is gone (spec §3 step 5).

A compress call stays visible while one of its blocks is active: it is the anchor that
carries the summaries to the model. Of the calls that made no block at all (failed
attempts), the newest two stay so the model can see what went wrong. The rest, and their
results, are hidden. A kept call whose blocks were partly consumed is rewritten to list only
the live ranges.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from doctrine.kernel.messages import Message
from doctrine.kernel.protection import COMPRESS_TOOL, is_compress_call
from doctrine.kernel.state import Block, CompressionState

KEEP_ORPHANS = 2


def _entry_key(entry: Any) -> str | None:
    if not isinstance(entry, dict):
        return None
    start = entry.get("startId", entry.get("startRef"))
    end = entry.get("endId", entry.get("endRef"))
    if start is None and end is None and "messageId" in entry:
        start = end = entry["messageId"]
    if start is None or end is None:
        return None
    return f"{start}::{end}"


def _filter_call_text(text: str, live: list[Block]) -> str | None:
    """The call's JSON with dead entries removed, or None to leave the text as it is."""
    return _filter_cached(text, frozenset(f"{b.start_ref}::{b.end_ref}" for b in live))


@lru_cache(maxsize=4096)  # the same retained call is re-checked every turn
def _filter_cached(text: str, keys: frozenset[str]) -> str | None:
    try:
        args = json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return None
    if not isinstance(args, dict):
        return None
    content = args.get("content")
    if isinstance(content, str):
        try:
            content = json.loads(content)
        except json.JSONDecodeError:
            return None
    if not isinstance(content, list) or not content:
        return None
    kept = [e for e in content if _entry_key(e) in keys]
    if not kept or len(kept) == len(content):
        return None
    return json.dumps({**args, "content": kept}, ensure_ascii=False, separators=(",", ":"))


def hide_compress_calls(messages: list[Message], state: CompressionState) -> list[Message]:
    """The view with stale compress calls and their results removed."""
    calls = [m for m in messages if is_compress_call(m)]
    if not calls:
        return list(messages)
    by_call: dict[str, list[Block]] = {}
    for b in state.blocks:
        if b.compress_call_id:
            by_call.setdefault(b.compress_call_id, []).append(b)

    keep: set[str] = set()
    orphans: list[str] = []
    for m in calls:
        cid = m.tool_call_id
        if not cid:
            continue
        blocks = by_call.get(cid)
        if blocks is None:
            orphans.append(cid)
        elif any(b.active for b in blocks):
            keep.add(cid)
    keep.update(orphans[-KEEP_ORPHANS:])

    call_ids = {c.tool_call_id for c in calls if c.tool_call_id}
    out: list[Message] = []
    for m in messages:
        is_call = is_compress_call(m)
        is_result = m.content_type == "tool-result" and (
            m.tool_name == COMPRESS_TOOL or m.tool_call_id in call_ids
        )
        if not (is_call or is_result):
            out.append(m)
            continue
        if m.tool_call_id not in keep:
            continue
        if is_call:
            live = [b for b in by_call.get(m.tool_call_id, []) if b.active
                    and b.start_ref is not None and b.end_ref is not None]
            if live:
                new_text = _filter_call_text(m.text, live)
                if new_text is not None:
                    m = m.with_text(new_text)
        out.append(m)
    return out
