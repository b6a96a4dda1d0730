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
from doctrine.kernel.protection import is_compress_call
from doctrine.kernel.state import CompressionState

KEEP_ORPHANS = 2


def _entry_key(entry: Any) -> str | None:
    """``startId::endId`` of one content entry (``messageId`` stands for both), as the
    reference keys it; a block's ``start_ref`` / ``end_ref`` are the ids the call gave."""
    if not isinstance(entry, dict):
        return None
    mid = entry.get("messageId")
    mid = mid if isinstance(mid, str) else ""
    start = entry.get("startId")
    end = entry.get("endId")
    start = start if isinstance(start, str) else mid
    end = end if isinstance(end, str) else mid
    return f"{start}::{end}"


@lru_cache(maxsize=4096)  # the same retained call is re-checked every turn
def _filter_call_text(text: str, keys: frozenset[str]) -> str | None:
    """The call's JSON with dead entries removed, or None to leave the text as it is."""
    try:
        args = json.loads(text)
    except (json.JSONDecodeError, TypeError, RecursionError):
        return None
    if not isinstance(args, dict):
        return None
    content = args.get("content")
    if not isinstance(content, list) or not content:
        return None
    kept = [e for e in content if isinstance(e, dict) and _entry_key(e) in keys]
    if not kept or len(kept) == len(content):
        return None
    return json.dumps({**args, "content": kept}, ensure_ascii=False, separators=(",", ":"))


def hide_compress_calls(messages: list[Message], state: CompressionState) -> list[Message]:
    """The view with stale compress calls and their results removed."""
    if not any(is_compress_call(m) for m in messages):
        return list(messages)
    ever: set[str] = set()  # call ids that ever made a block
    active: set[str] = set()
    live_keys: dict[str, set[str]] = {}
    legacy: set[str] = set()  # an active block without its range refs: never rewrite
    for b in state.blocks:
        cid = b.compress_call_id
        if not cid:
            continue
        ever.add(cid)
        if not b.active:
            continue
        active.add(cid)
        if b.start_ref is None or b.end_ref is None:
            legacy.add(cid)
        else:
            live_keys.setdefault(cid, set()).add(f"{b.start_ref}::{b.end_ref}")

    orphans: list[str] = []  # newest first; a call seen twice counts twice, as in the reference
    for m in reversed(messages):
        if len(orphans) >= KEEP_ORPHANS:
            break
        if is_compress_call(m) and m.tool_call_id and m.tool_call_id not in ever:
            orphans.append(m.tool_call_id)
    keep = active | set(orphans)

    hidden_calls = {m.tool_call_id for m in messages
                    if is_compress_call(m) and m.tool_call_id and m.tool_call_id not in keep}
    out: list[Message] = []
    for m in messages:
        if is_compress_call(m):
            cid = m.tool_call_id
            if not cid or cid not in keep:
                continue
            keys = live_keys.get(cid)
            if keys and cid not in legacy:
                new_text = _filter_call_text(m.text, frozenset(keys))
                if new_text is not None:
                    m = m.with_text(new_text)
        elif m.content_type == "tool-result" and m.tool_call_id and m.tool_call_id in hidden_calls:
            continue
        out.append(m)
    return out
