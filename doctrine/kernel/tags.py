"""Ref tag rendering (spec §1.3).

Each tagged message gets ``<acp tokens="T" type="Y">mNNNNN</acp>\\n`` in front of its text.
The token figure is frozen in ``state.token_snapshot`` the first time a ref is rendered, so
a message's tag never changes and the prompt prefix stays cacheable.
"""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal

from doctrine.kernel.messages import Message
from doctrine.kernel.state import BLOCKED, CompressionState
from plumbing.tokens import CountTokens, default_count_tokens, js_round

STRATEGIES = ("all", "text-only", "none")
_TAG_AT_START = re.compile(r'<acp tokens="[^"]*" type="[^"]*">(m\d{5})</acp>\n?')


def to_fixed(x: float, digits: int) -> str:
    """JavaScript ``Number.prototype.toFixed`` for non-negative x: exact binary value,
    ties to the larger neighbour."""
    q = Decimal(1).scaleb(-digits)
    return str(Decimal(x).quantize(q, rounding=ROUND_HALF_UP))


def format_tokens(t: int | float) -> str:
    """``999`` -> ``999``; ``1000`` -> ``1.0K``; ``9999`` -> ``10.0K``; ``10500`` -> ``11K``."""
    if t < 1000:
        return str(int(t)) if float(t).is_integer() else str(t)
    if t < 10000:
        return to_fixed(t / 1000, 1) + "K"
    return f"{js_round(t / 1000)}K"


def tag_type(msg: Message) -> str:
    if msg.is_tool:
        return msg.tool_name or "tool"
    return msg.content_type


def make_tag(tokens: int, type_: str, ref: str) -> str:
    return f'<acp tokens="{format_tokens(tokens)}" type="{type_}">{ref}</acp>'


def strip_own_tag(text: str, ref: str) -> str:
    """Remove a leading tag carrying ``ref`` (tags of other refs are left in place)."""
    m = _TAG_AT_START.match(text)
    if m and m.group(1) == ref:
        return text[m.end():]
    return text


def wants_tag(msg: Message, strategy: str) -> bool:
    if strategy == "all":
        return True
    if strategy == "text-only":
        return msg.content_type == "text"
    return False


def render_tags(messages: list[Message], state: CompressionState, strategy: str = "all",
                count_tokens: CountTokens = default_count_tokens) -> list[Message]:
    """Prepend ref tags per ``strategy``; new snapshot entries go into ``state`` (a copy)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown tag strategy {strategy!r}; expected one of {STRATEGIES}")
    if strategy == "none":
        return list(messages)
    snap = state.token_snapshot
    copied = False  # the snapshot may be shared with the input state: copy before the first write
    out: list[Message] = []
    for m in messages:
        ref = state.by_raw.get(m.id)
        if ref is None or ref == BLOCKED or not wants_tag(m, strategy):
            out.append(m)
            continue
        body = strip_own_tag(m.text, ref)
        tokens = snap.get(ref)
        if tokens is None:
            tokens = count_tokens(body)
            if not copied:
                state.token_snapshot = snap = dict(snap)
                copied = True
            snap[ref] = tokens
        out.append(m.with_text(make_tag(tokens, tag_type(m), ref) + "\n" + body))
    return out
