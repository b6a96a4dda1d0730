"""Soft protection, compressible ranges and recommended ranges (spec §5.2-5.4).

All functions read the pruned view. A message's number is its ref index (``m00012`` -> 12);
ranges are contiguous runs of numbers, so gaps (covered, protected or zone messages) split
compressible groups.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from doctrine.kernel.config import KernelConfig
from doctrine.kernel.messages import Message
from doctrine.kernel.protection import protected_ids_with_pairing
from doctrine.kernel.prune import is_summary_message
from doctrine.kernel.refs import ref_index
from doctrine.kernel.state import BLOCKED, CompressionState
from plumbing.tokens import CountTokens, default_count_tokens, js_len, js_round

NEVER_PRESERVE_TOOLS = frozenset({"decompress", "search_context", "read", "bash"})
VIABLE_RANGE_MIN_TOKENS = 200


@dataclass
class Range:
    """A compressible (or recommended) range of refs."""

    start_ref: str
    end_ref: str
    count: int
    tokens: int
    chars: int
    tool_pct: int
    text_pct: int
    dangerous: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class ProtectedRange:
    start_ref: str
    end_ref: str
    count: int
    tokens: int
    tools: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Recommendation:
    context_ranges: list[Range]
    recommended_ranges: list[Range]
    protected_ranges: list[ProtectedRange]
    nothing_to_compress: bool


def _ref(m: Message, state: CompressionState) -> str | None:
    r = state.by_raw.get(m.id)
    return None if r is None or r == BLOCKED else r


def _zone_members(view: list[Message], state: CompressionState, config: KernelConfig,
                  count_tokens: CountTokens, covered: set[str]) -> list[tuple[str, str]]:
    """(raw id, ref) of the soft-protected recent zone (the reference's computeProtectedRefs)."""
    def pruned(m: Message) -> bool:
        return is_summary_message(m) or m.id in covered

    cands = [(m, r) for m in view
             if not pruned(m) and not (m.is_tool and m.tool_name in NEVER_PRESERVE_TOOLS)
             and (r := _ref(m, state)) is not None]
    zone: dict[str, str] = {}
    n_keep = config.preserve_recent_messages
    if n_keep > 0:
        zone.update((m.id, r) for m, r in cands[-n_keep:])
    if config.preserve_recent_tokens > 0:
        acc = 0
        for m, r in reversed(cands):
            if acc >= config.preserve_recent_tokens:
                break
            zone[m.id] = r
            acc += count_tokens(m.text)
    if n_keep > 0:
        for m in reversed(view):
            if m.role != "user" or pruned(m):
                continue
            r = _ref(m, state)
            if r is not None:
                zone[m.id] = r
            break
    return list(zone.items())


def soft_zone(view: list[Message], state: CompressionState, config: KernelConfig,
              count_tokens: CountTokens = default_count_tokens,
              covered: set[str] | None = None) -> set[str]:
    """Raw ids of the recent zone that must stay verbatim (spec §5.2)."""
    covered = state.covered_ids() if covered is None else covered
    return {raw for raw, _ in _zone_members(view, state, config, count_tokens, covered)}


def protected_zone_refs(view: list[Message], state: CompressionState, config: KernelConfig,
                        count_tokens: CountTokens = default_count_tokens) -> set[str]:
    """Refs of the recent zone: what apply-compress leaves out of a range (spec §5.5)."""
    return {r for _, r in _zone_members(view, state, config, count_tokens, state.covered_ids())}


def recommend(view: list[Message], state: CompressionState, config: KernelConfig,
              count_tokens: CountTokens = default_count_tokens,
              zone: set[str] | None = None, covered: set[str] | None = None) -> Recommendation:
    """Compressible groups (§5.3), their merge into recommended ranges (§5.4) and the
    hard-protected ranges (§5.1). ``covered``: ``state.covered_ids()`` if the caller has it."""
    if covered is None:
        covered = state.covered_ids()
    if zone is None:
        zone = soft_zone(view, state, config, count_tokens, covered)
    hard = protected_ids_with_pairing(view, config)

    groups: list[Range] = []
    protected: list[ProtectedRange] = []
    prev_n = -2
    prev_p = -2
    for m in view:
        if is_summary_message(m) or m.id in covered:
            continue
        ref = _ref(m, state)
        n = ref_index(ref) if ref else None
        if n is None:
            continue
        tokens = count_tokens(m.text)
        if m.id in hard:
            if protected and n == prev_p + 1:
                p = protected[-1]
                p.end_ref, p.count, p.tokens = ref, p.count + 1, p.tokens + tokens
                if m.tool_name and m.tool_name not in p.tools:
                    p.tools.append(m.tool_name)
            else:
                protected.append(ProtectedRange(ref, ref, 1, tokens,
                                                [m.tool_name] if m.tool_name else []))
            prev_p = n
            continue
        if m.id in zone:
            continue
        is_tool = m.is_tool
        if not groups or n != prev_n + 1 or (m.role == "user" and groups[-1].count >= 3):
            pct = 100 if is_tool else 0
            groups.append(Range(ref, ref, 1, tokens, js_len(m.text), pct, 100 - pct))
        else:
            g = groups[-1]
            g.count += 1
            g.end_ref = ref
            g.tokens += tokens
            g.chars += js_len(m.text)
            if is_tool:
                g.tool_pct = js_round((g.tool_pct * (g.count - 1) + 100) / g.count)
            else:
                g.tool_pct = js_round(g.tool_pct * (g.count - 1) / g.count)
            g.text_pct = 100 - g.tool_pct
        prev_n = n
    groups = [g for g in groups if g.tokens > 0]
    recommended = merge_to_threshold(groups, config.compress.min_compress_range)
    return Recommendation(groups, recommended, protected, not recommended)


def merge_to_threshold(groups: list[Range], min_chars: int) -> list[Range]:
    """Batch neighbouring groups until each batch holds ``min_chars`` raw chars (§5.4)."""
    if min_chars <= 0:
        return [Range(**g.to_dict()) for g in groups]
    out: list[Range] = []
    batch: list[Range] = []

    def flush() -> None:
        count = sum(g.count for g in batch)
        tool = js_round(sum(g.tool_pct * g.count for g in batch) / count) if count else 0
        out.append(Range(batch[0].start_ref, batch[-1].end_ref, count,
                         sum(g.tokens for g in batch), sum(g.chars for g in batch),
                         tool, 100 - tool, any(g.dangerous for g in batch)))

    acc = 0
    for g in groups:
        batch.append(g)
        acc += g.chars
        if acc >= min_chars:
            flush()
            batch = []
            acc = 0
    if batch:
        flush()
    return out


def viable_ranges(ranges: list[Range]) -> list[Range]:
    """Ranges worth showing the model (tokens >= 200, ``src/viable.ts``)."""
    return [r for r in ranges if r.tokens >= VIABLE_RANGE_MIN_TOKENS]

