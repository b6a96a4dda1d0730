"""Ref assignment and parsing (spec §1.2).

A ref is ``m`` + a 5-digit index. Every turn, messages without a ref get the next free
indices above the highest one used; refs are never reused or removed. Under a protection
config, protected tool messages get the marker ``BLOCKED`` instead of a ref.
"""

from __future__ import annotations

import re

from doctrine.kernel.config import KernelConfig
from doctrine.kernel.messages import Message
from doctrine.kernel.protection import is_message_protected
from doctrine.kernel.state import BLOCKED, SUMMARY_ID_PREFIX, CompressionState
from plumbing.tokens import js_trim

MAX_REF = 99999
RESERVED_PREFIXES = (SUMMARY_ID_PREFIX, "acp_nudge")
_MSG_REF = re.compile(r"m0*([0-9]{1,5})")
_BLOCK_REF = re.compile(r"b([0-9]{1,9})")


class RefsExhausted(RuntimeError):
    """All 99999 refs are used."""


def format_ref(index: int) -> str:
    return f"m{index:05d}"


def ref_index(ref: str) -> int | None:
    """The number of a well-formed ``mNNNNN`` ref, else None."""
    if len(ref) == 6 and ref[0] == "m" and ref[1:].isdigit():
        return int(ref[1:])
    return None


def parse_message_ref(text: str) -> int | None:
    """``m5``, ``M00005`` and `` m0005 `` all give 5; anything else gives None."""
    if not isinstance(text, str):
        return None
    m = _MSG_REF.fullmatch(js_trim(text).lower())
    return int(m.group(1)) if m else None


def parse_block_ref(text: str) -> str | None:
    """``b7`` (any case, surrounding space allowed) gives ``"b7"``; else None."""
    if not isinstance(text, str):
        return None
    m = _BLOCK_REF.fullmatch(js_trim(text).lower())
    return f"b{int(m.group(1))}" if m else None


def lookup_ref(text: str, state: CompressionState) -> str | None:
    """The raw id a model-supplied message ref points at, or None if never assigned."""
    if parse_message_ref(text) is None:
        return None
    norm = js_trim(text).lower()
    raw = state.by_ref.get(norm)
    if raw is None:
        raw = state.by_ref.get(format_ref(parse_message_ref(text) or 0))
    return raw


def _highest_index(state: CompressionState) -> int:
    values = state.by_raw.values()
    if not values:
        return 0
    # Refs we write are all 6 characters wide, so the string maximum is the numeric one
    # ("BLOCKED" sorts below "m"); a state with odd spellings (which sort above "m9....")
    # takes the slow path.
    top = max(values)
    idx = ref_index(top)
    if idx is not None:
        return idx
    if top == BLOCKED:
        return 0
    return max((ref_index(r) or parse_message_ref(r) or 0) for r in values if r != BLOCKED)


def assign_refs(messages: list[Message], state: CompressionState, config: KernelConfig,
                index_of: dict[str, int] | None = None) -> None:
    """Give every new message id a ref, on ``state`` (a copy; its maps are replaced by new
    dicts before anything is added, so a map shared with another state is never changed).

    ``index_of``: the first index of each id of ``messages`` (``prune.first_index``), when
    the caller has it: new ids are then found by a set difference, in message order."""
    by_raw = state.by_raw
    # Kernel-made messages (summaries, a host's nudge) use reserved ids and never get refs,
    # even when a host passes its pruned view back in.
    if index_of is not None:
        new = index_of.keys() - by_raw.keys()
        fresh = [messages[i] for i in sorted(index_of[x] for x in new)] if new else []
    else:
        fresh = [m for m in messages if m.id not in by_raw]
    fresh = [m for m in fresh if m.id and not m.id.startswith(RESERVED_PREFIXES)]
    if not fresh:
        return
    state.by_raw = by_raw = dict(by_raw)
    state.by_ref = by_ref = dict(state.by_ref)
    cursor = _highest_index(state) + 1
    blocking = config.protection_configured
    for m in fresh:
        if m.id in by_raw:  # duplicate ids within one turn
            continue
        if blocking and is_message_protected(m, config):
            by_raw[m.id] = BLOCKED
            continue
        while cursor <= MAX_REF and format_ref(cursor) in by_ref:
            cursor += 1
        if cursor > MAX_REF:
            raise RefsExhausted("no free message refs left (m00001..m99999 all used)")
        ref = format_ref(cursor)
        by_raw[m.id] = ref
        by_ref[ref] = m.id
        cursor += 1


def ref_of(message: Message, state: CompressionState) -> str | None:
    """The message's ref, or None when it has none or is BLOCKED."""
    r = state.by_raw.get(message.id)
    return None if r is None or r == BLOCKED else r


def parse_boundary(ref: object) -> tuple[str | None, int]:
    """``("message", n)``, ``("block", n)`` or ``(None, 0)`` for one compress boundary."""
    n = parse_message_ref(ref) if isinstance(ref, str) else None
    if n is not None and 1 <= n <= 99999:
        return "message", n
    b = parse_block_ref(ref) if isinstance(ref, str) else None
    if b is not None and int(b[1:]) >= 1:
        return "block", int(b[1:])
    return None, 0

