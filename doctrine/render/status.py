"""The ``acp_status`` report (spec §6.2, kernel ``buildStatusReport``): the kernel's state as
the text the model reads, so it sits with the other renderers and lists ranges with the
nudge's own formatter (``prompts.format_ranges``).

Views:

* overview (no scope): CONTEXT BREAKDOWN of the visible content (tool, text and summary
  tokens with their shares, top tools), COMPRESSED BLOCKS with one line per active block,
  and, when a nudge decision is given, its ``Nudge: ACTIVE|idle`` line and the viable
  ranges;
* ``scope="compressed"``: every active block with age, generation and nested blocks;
* ``scope="uncompressed"``: visible messages merged into ref ranges (``view="ranges"``) or
  listed one by one (``view="messages"``, optionally for one ``tool``).

Project rule: no text meant for the model states how full the context window is. The
shares printed here are shares of the *visible content* (their sum is 100), never of the
window. The Pi host adds an ``Estimate: <tokens> (<P>%)`` line with the window share to the
overview; it is left out on purpose.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from doctrine.kernel.messages import Message
from doctrine.kernel.search import to_fixed
from doctrine.kernel.state import BLOCKED, Block, CompressionState
from doctrine.render.prompts import RangeView, format_ranges  # the nudge's own range formatter
from plumbing.tokens import default_count_tokens

SCOPES = (None, "compressed", "uncompressed")
VIEWS = ("ranges", "messages")
SORTS = ("size", "time", "tool", "age")
VIABLE_MIN_TOKENS = 200  # ranges smaller than this are not worth showing (src/viable.ts)


@dataclass
class VisibleMessage:
    ref: str
    tokens: int
    tool: str  # tool name, or "text"
    index: int


def format_tokens(n: int) -> str:
    """The report's token format: 0, 950, 1.2K (one decimal from 1000 up)."""
    if not isinstance(n, (int, float)) or not math.isfinite(n) or n <= 0:
        return "0"
    return f"{to_fixed(n / 1000, 1)}K" if n >= 1000 else str(int(n))


def _pct(n: int, total: int) -> int:
    # Math.round: halves go up.
    return 0 if n <= 0 or total <= 0 else math.floor(n / total * 100 + 0.5)


def _ref_num(ref: str) -> int:
    m = re.search(r"\d+", ref)
    return int(m.group(0)) if m else 0


def _block_num(block_id: str) -> int:
    m = re.fullmatch(r"b(\d+)", block_id)
    return int(m.group(1)) if m else 0


def collect_visible(messages: Sequence[Message], state: CompressionState,
                    count: Callable[[str], int]) -> tuple[list[VisibleMessage], int]:
    """Visible messages (not covered by an active block, with a ref, non-empty) and the
    summary tokens of the active blocks."""
    covered = state.covered_ids()
    summary_tokens = sum(count(b.summary) for b in state.blocks if b.active)
    # A tool result carries no tool name of its own: take it from its call.
    call_names = {m.tool_call_id: m.tool_name for m in messages
                  if m.content_type == "tool-call" and m.tool_call_id and m.tool_name}
    visible = []
    for i, m in enumerate(messages):
        if m.id in covered:
            continue
        ref = state.by_raw.get(m.id)
        if not ref or ref == BLOCKED:
            continue
        tokens = count(m.text or "")
        if m.is_tool:
            tool = m.tool_name or call_names.get(m.tool_call_id or "") or "tool"
        else:
            tool = "text"
        if tokens > 0:
            visible.append(VisibleMessage(ref, tokens, tool, i))
    return visible, summary_tokens


def _tier_usage(blocks: Sequence[Block], count: Callable[[str], int]) -> str | None:
    per_tier: dict[int, int] = {}
    for b in blocks:
        per_tier[b.tier] = per_tier.get(b.tier, 0) + count(b.summary)
    if len(per_tier) <= 1:
        return None
    return " | ".join(f"T{t}: {format_tokens(per_tier[t])}" for t in (1, 2, 3) if per_tier.get(t))


def _by_size(blocks: Sequence[Block]) -> list[Block]:
    # compressedTokens already counts the whole input of the compress that made the
    # block (consumed summaries included), so it is the block's "original" size.
    return sorted(blocks, key=lambda b: (-b.compressed_tokens, -b.created_at))


def build_status_report(state: CompressionState, messages: Sequence[Message], *,
                        scope: str | None = None, view: str = "ranges", tool: str | None = None,
                        sort: str = "size", limit: int = 30, nudge: Any = None,
                        count_tokens: Callable[[str], int] | None = None,
                        shares: bool = True) -> str:
    """The ``acp_status`` tool result for ``state`` over the visible ``messages``.

    ``nudge``: a decision with ``should_inject``, ``reason``, ``compressible_ranges`` and
    optionally ``protected_ranges`` (objects or dicts, snake or camel case); shown in the
    overview only. ``shares=False`` leaves out the composition percentages.
    """
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {SCOPES}, got {scope!r}")
    if view not in VIEWS:
        raise ValueError(f"view must be one of {VIEWS}, got {view!r}")
    if sort not in SORTS:
        raise ValueError(f"sort must be one of {SORTS}, got {sort!r}")
    count = count_tokens or default_count_tokens
    limit = max(1, int(limit))
    active = sorted(state.active_blocks(), key=lambda b: _block_num(b.block_id))
    if scope == "compressed":
        return _compressed(active, sort, limit, count)
    visible, summary_tokens = collect_visible(messages, state, count)
    if scope == "uncompressed":
        if view == "messages":
            return _messages(visible, tool, sort, limit, shares)
        return _ranges(visible, limit)
    text = _overview(visible, summary_tokens, active, limit, count, shares)
    if nudge is not None:
        text += "\n" + _nudge_lines(nudge)
    return text


def _overview(visible: list[VisibleMessage], summary_tokens: int, blocks: list[Block],
              limit: int, count: Callable[[str], int], shares: bool) -> str:
    by_tool: dict[str, int] = {}
    for m in visible:
        by_tool[m.tool] = by_tool.get(m.tool, 0) + m.tokens
    tool_total = sum(n for t, n in by_tool.items() if t != "text")
    text_total = by_tool.get("text", 0)
    total = tool_total + text_total + summary_tokens  # all visible content

    def part(n: int, label: str) -> str:
        return f"{format_tokens(n)} {label} ({_pct(n, total)}%)" if shares else \
            f"{format_tokens(n)} {label}"

    lines = ["CONTEXT BREAKDOWN",
             "  " + " | ".join([part(tool_total, "tool"), part(text_total, "text"),
                                part(summary_tokens, "summaries")])]
    # "text" is not a tool: the kernel lists it among the top tools, we do not.
    top = sorted(((t, n) for t, n in by_tool.items() if t != "text"), key=lambda x: -x[1])[:3]
    if top:
        lines.append("  Top tools: " + ", ".join(
            f"{t} ({_pct(n, total)}%)" if shares else f"{t} ({format_tokens(n)})" for t, n in top))
    lines.append("")
    if not blocks:
        lines += ["COMPRESSED BLOCKS", "  No compressed blocks."]
    else:
        s_total = sum(count(b.summary) for b in blocks)
        o_total = sum(b.compressed_tokens for b in blocks)
        lines.append(f"COMPRESSED BLOCKS — {len(blocks)} active ({format_tokens(s_total)} summary, "
                     f"{format_tokens(o_total)} original)")
        usage = _tier_usage(blocks, count)
        if usage:
            lines.append(f"  Tier usage: {usage}")
        lines.append("")
        for b in _by_size(blocks)[:limit]:
            lines.append(f"  {b.block_id} (T{b.tier})  {format_tokens(b.compressed_tokens)}→"
                         f"{format_tokens(count(b.summary))}  {len(b.effective_message_ids)} msgs  "
                         f'"{b.topic or "(no topic)"}"')
    return "\n".join(lines)


def _compressed(blocks: list[Block], sort: str, limit: int, count: Callable[[str], int]) -> str:
    if sort == "time":
        ordered = sorted(blocks, key=lambda b: b.created_at)
    elif sort == "age":
        ordered = sorted(blocks, key=lambda b: -b.survived_count)
    else:
        ordered = _by_size(blocks)
    s_total = sum(count(b.summary) for b in ordered)
    o_total = sum(b.compressed_tokens for b in ordered)
    lines = [f"COMPRESSED — {len(ordered)} blocks | {format_tokens(o_total)} original → "
             f"{format_tokens(s_total)} summary"]
    usage = _tier_usage(ordered, count)
    if usage:
        lines.append(f"Tier usage: {usage}")
    lines.append("")
    shown = ordered[:limit]
    for b in shown:
        nested = f" nested=[{','.join(b.direct_block_ids)}]" if b.direct_block_ids else ""
        lines.append(f"  {b.block_id} (T{b.tier})  {format_tokens(b.compressed_tokens)}→"
                     f"{format_tokens(count(b.summary))}  {len(b.effective_message_ids)} msgs  "
                     f"age={b.survived_count} {b.generation}{nested}")
        lines.append(f'    "{b.topic or "(no topic)"}"')
    if len(ordered) > len(shown):
        lines += ["", f"{len(shown)} of {len(ordered)} shown."]
    return "\n".join(lines)


def _ranges(visible: list[VisibleMessage], limit: int) -> str:
    total = sum(m.tokens for m in visible)
    lines = [f"UNCOMPRESSED — {format_tokens(total)} | {len(visible)} visible messages", ""]
    if not visible:
        lines.append("  (no uncompressed messages)")
        return "\n".join(lines)
    merged: list[dict[str, Any]] = []
    for m in visible:
        n = _ref_num(m.ref)
        last = merged[-1] if merged else None
        if last is not None and n == last["start"] + last["count"]:
            last["end_ref"] = m.ref
            last["count"] += 1
            last["tokens"] += m.tokens
            last["tools"][m.tool] = last["tools"].get(m.tool, 0) + m.tokens
        else:
            merged.append({"start_ref": m.ref, "end_ref": m.ref, "start": n, "count": 1,
                           "tokens": m.tokens, "tools": {m.tool: m.tokens}})
    for r in merged[:limit]:
        span = r["start_ref"] if r["count"] == 1 else f"{r['start_ref']}–{r['end_ref']}"
        per = f" ({math.floor(r['tokens'] / r['count'] + 0.5)}/msg)" if r["count"] > 1 else ""
        dominant = max(r["tools"].items(), key=lambda x: x[1])[0]  # first wins a tie
        lines.append(f"  {span}  ({r['count']} msgs, {format_tokens(r['tokens'])}{per}) {dominant}")
    if len(merged) > limit:
        lines.append(f"  ... and {len(merged) - limit} more ranges")
    return "\n".join(lines)


def _messages(visible: list[VisibleMessage], tool: str | None, sort: str, limit: int,
              shares: bool) -> str:
    rows = [m for m in visible if tool is None or m.tool == tool]
    if sort == "time":
        rows.sort(key=lambda m: m.index)
    elif sort == "tool":
        rows.sort(key=lambda m: (m.tool, -m.tokens))
    else:
        rows.sort(key=lambda m: -m.tokens)
    tokens = sum(m.tokens for m in rows)
    if tool:
        share = f" | {_pct(tokens, sum(m.tokens for m in visible))}% of visible" if shares else ""
        header = f"UNCOMPRESSED — {tool}: {format_tokens(tokens)} | {len(rows)} msgs{share}"
    else:
        header = f"UNCOMPRESSED — {format_tokens(tokens)} | {len(rows)} msgs"
    lines = [header, f"Sorted by {sort}", ""]
    shown = rows[:limit]
    lines += [f"  {m.ref} ({format_tokens(m.tokens)}) {m.tool}" for m in shown]
    if len(rows) > len(shown):
        lines += ["", f"{len(shown)} of {len(rows)} shown."]
    return "\n".join(lines)


# ---------------------------------------------------------------------- nudge part
def _get(obj: Any, *names: str, default: Any = None) -> Any:
    for n in names:
        if isinstance(obj, dict):
            if n in obj:
                return obj[n]
        elif hasattr(obj, n):
            return getattr(obj, n)
    return default


# Numbers that would tell the model how full its window is; a nudge reason should not
# carry any, but one from another producer might.
_FILL_BITS = re.compile(r"\s*\(?\b(?:usage|fill|contextUsage)\s*[=:]\s*[\d.]+%?\)?|\s*\(?\d+(?:\.\d+)?\s*%\)?",
                        re.I)


def _range_views(nudge: Any) -> list[RangeView]:
    views = []
    for r in _get(nudge, "compressible_ranges", "compressibleRanges", default=[]) or []:
        tokens = int(_get(r, "tokens", default=0) or 0)
        if tokens < VIABLE_MIN_TOKENS:
            continue
        views.append(RangeView(
            start=str(_get(r, "start_ref", "startRef", "start")),
            end=str(_get(r, "end_ref", "endRef", "end")), count=int(_get(r, "count", default=0)),
            tokens=tokens, chars=int(_get(r, "chars", default=0) or 0),
            tool_pct=int(_get(r, "tool_pct", "toolPct", default=0) or 0),
            text_pct=int(_get(r, "text_pct", "textPct", default=100) or 0)))
    for r in _get(nudge, "protected_ranges", "protectedRanges", default=[]) or []:
        views.append(RangeView(
            start=str(_get(r, "start_ref", "startRef", "start")),
            end=str(_get(r, "end_ref", "endRef", "end")), count=int(_get(r, "count", default=0)),
            tokens=int(_get(r, "tokens", default=0) or 0), protected=True,
            tools=tuple(_get(r, "tools", default=()) or ())))
    return views


def _nudge_lines(nudge: Any) -> str:
    inject = bool(_get(nudge, "should_inject", "shouldInject", default=False))
    reason = _FILL_BITS.sub("", str(_get(nudge, "reason", default="") or "")).strip()
    lines = ["", f"Nudge: {'ACTIVE' if inject else 'idle'} — {reason}"]
    views = _range_views(nudge)
    if views:
        lines += ["", format_ranges(views)]
    return "\n".join(lines)
