"""One renderer, two prompt modes: system prompt, nudges and tool schemas from a doctrine.

A mode only chooses which section texts fill the same skeleton: ``doctrine`` uses the
section texts, ``distilled`` uses each section's distilled variant where one exists (the
four load-bearing rule sections, usually empty, and the one-line tool descriptions).
Empty sections vanish with their separators. That is what makes an exported distilled
prompt set, rendered in doctrine mode, byte-identical to distilled mode.

Nudge layout follows behaviour spec §4.5 (gentle, emergency, tier 2/3), with one
deliberate omission: no text ever states how full the context is (doctrine mechanic ii).
:func:`fill_disclosures` is the check the tests (and other packages) run on any text.

The views are plain dataclasses with no kernel import; the kernel converts its decision.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal

from doctrine.render.tools import TOOL_NAMES, TOOL_SECTIONS, tool_schemas
from doctrine.spec import Doctrine, DoctrineError

__all__ = [
    "BREAKDOWN_KEYS",
    "EXAMPLE_VIEWS",
    "MODES",
    "NUDGE_STYLES",
    "PARTS",
    "BlockView",
    "NudgeView",
    "RangeView",
    "fill_disclosures",
    "format_tokens",
    "format_ranges",
    "render_nudge",
    "render_part",
    "render_system_prompt",
    "tool_schemas",
]

MODES = ("doctrine", "distilled")
NUDGE_STYLES = ("list", "list_only", "none")
PARTS = ("system", "nudge-gentle", "nudge-emergency", "nudge-tier2", "nudge-tier3", "tools")
BREAKDOWN_KEYS = ("system", "tool", "summaries", "code", "text")
# System-prompt skeleton: surface framing first, then the four load-bearing rule sections.
SYSTEM_SECTIONS = ("intro", "tags", "summaries", "@tools", "philosophy", "how-to-compress", "tier2", "tier3")


@dataclass(frozen=True)
class RangeView:
    """One candidate (or protected) message range as the nudge lists it."""

    start: str
    end: str
    count: int
    tokens: int
    chars: int = 0
    tool_pct: int = 0
    text_pct: int = 100
    protected: bool = False
    tools: tuple[str, ...] = ()


@dataclass(frozen=True)
class BlockView:
    """One lower-tier block targeted by a tier-2/3 nudge."""

    id: str
    tier: int
    count: int
    original_tokens: int
    summary_tokens: int
    topic: str = ""


@dataclass(frozen=True)
class NudgeView:
    """What a nudge shows: tier, voice, ranges, composition, growth and tier targets."""

    tier: int
    voice: str  # "gentle" | "emergency"
    ranges: list[RangeView]
    breakdown: dict[str, int]
    growth: int = 0
    target_blocks: list[BlockView] = field(default_factory=list)


# ---------------------------------------------------------------------------- formatting


def format_tokens(n: int) -> str:
    """Token count as the kernel's tags show it: 950, 1.2K, 12K."""
    n = int(n)
    if n < 1000:
        return str(n)
    # JavaScript's toFixed / Math.round semantics (exact binary value, ties away from zero),
    # so the figures match what the kernel prints: 1250 -> 1.3K, 10500 -> 11K.
    exact = Decimal(n / 1000)
    if n < 10000:
        return f"{exact.quantize(Decimal('0.1'), rounding=ROUND_HALF_UP)}K"
    return f"{exact.quantize(Decimal('1'), rounding=ROUND_HALF_UP)}K"


def _ref_number(ref: str) -> int | None:
    m = re.fullmatch(r"[mM]0*(\d{1,5})", ref.strip())
    return int(m.group(1)) if m else None


def _span(start: str, end: str) -> str:
    return start if start == end else f"{start}–{end}"


def _msgs(n: int) -> str:
    return f"{n} msg" if n == 1 else f"{n} msgs"


def _group_line(group: list[RangeView]) -> str:
    count = sum(r.count for r in group)
    tokens = sum(r.tokens for r in group)
    prot = [r for r in group if r.protected]
    comp = [r for r in group if not r.protected]
    head = f"  {_span(group[0].start, group[-1].end)}  {_msgs(count)}  {format_tokens(tokens)}"
    tools = sorted({t for r in prot for t in r.tools})
    tool_label = ", ".join(tools) if tools else "tools"
    if prot and not comp:
        return f"{head}  [PROTECTED: {tool_label} — not compressible]"
    if prot and comp:
        c_tok, p_tok = sum(r.tokens for r in comp), sum(r.tokens for r in prot)
        return f"{head}  [{format_tokens(c_tok)} compressible | {format_tokens(p_tok)} protected: {tool_label}]"
    total = sum(r.tokens for r in comp)
    if total > 0:
        tool = round(sum(r.tool_pct * r.tokens for r in comp) / total)
        text = round(sum(r.text_pct * r.tokens for r in comp) / total)
    else:
        tool = round(sum(r.tool_pct for r in comp) / len(comp))
        text = round(sum(r.text_pct for r in comp) / len(comp))
    return f"{head}  [tool {tool}% | text {text}%]"


def format_ranges(ranges: list[RangeView]) -> str:
    """The recommendation list: ranges sorted oldest first, touching neighbours coalesced.

    Ranges whose refs are not ``mNNNNN`` keep their given order after the numbered ones
    and are never merged (there is no adjacency to judge).
    """
    if not ranges:
        return "[No specific ranges detected — run acp_status to see the context, or carry on with the task.]"
    numbered = [r for r in ranges if _ref_number(r.start) is not None and _ref_number(r.end) is not None]
    other = [r for r in ranges if r not in numbered]
    numbered.sort(key=lambda r: (_ref_number(r.start), _ref_number(r.end)))
    groups: list[list[RangeView]] = []
    for r in numbered:
        if groups and _ref_number(r.start) <= _ref_number(groups[-1][-1].end) + 1:
            groups[-1].append(r)
        else:
            groups.append([r])
    groups.extend([r] for r in other)
    lines = [f"Compressible ranges ({len(groups)}, oldest first):"]
    lines.extend(_group_line(g) for g in groups)
    return "\n".join(lines)


def format_breakdown(breakdown: dict[str, int], growth: int = 0) -> str:
    """``Context breakdown: 1.2K system | 8.4K tool | …`` (non-zero parts) plus the growth line."""
    parts = [f"{format_tokens(breakdown[k])} {k}" for k in BREAKDOWN_KEYS if int(breakdown.get(k, 0) or 0) > 0]
    lines = [f"Context breakdown: {' | '.join(parts)}"] if parts else []
    if growth > 0:
        lines.append(f"+{format_tokens(growth)} since last nudge")
    return "\n".join(lines)


def format_blocks(blocks: list[BlockView]) -> str:
    """Target block list of a tier nudge: ``b3  12 msgs  8.2K→640  "topic"``."""
    lines = [f"Target blocks ({len(blocks)}):"]
    for b in blocks:
        topic = f'  "{b.topic}"' if b.topic else ""
        lines.append(
            f"  {b.id}  {_msgs(b.count)}  {format_tokens(b.original_tokens)}→{format_tokens(b.summary_tokens)}{topic}"
        )
    return "\n".join(lines)


# ---------------------------------------------------------------------------- the fill-ratio guard

# Composition of a candidate range is allowed; any other percentage is treated as a ratio.
_ALLOWED = re.compile(r"\[tool \d{1,3}% \| text \d{1,3}%\]")
_FORBIDDEN = [
    re.compile(r"\d\s*%"),
    re.compile(r"\b\d+(?:\.\d+)?\s*(?:percent|per cent)\b", re.I),
    re.compile(r"\b(?:tokens?|K)\s+(?:left|remaining|free|available|to spare)\b", re.I),
    re.compile(r"\b(?:left|remaining|free|headroom) (?:in|of) (?:the|your) (?:context|window)\b", re.I),
    re.compile(r"\b(?:context|window)\s+(?:usage|utili[sz]ation|fill|pressure)\b", re.I),
    re.compile(r"\b(?:usage|fill|utili[sz]ation)\s*(?:ratio|rate|level|:|=)", re.I),
    re.compile(r"\b(?:context|window)\b[^.\n]{0,20}\b(?:full|filled|nearly|almost)\b", re.I),
    re.compile(r"\b(?:half|nearly|almost|mostly|quarter|over|partly)\s+full\b", re.I),
    re.compile(r"\d[\d.,]*K?\s*(?:/|of|out of)\s*\d[\d.,]*K?\s*(?:tokens|tok)\b", re.I),
    re.compile(r"\d[\d.,]*K\s*/\s*\d[\d.,]*K\b"),
    re.compile(r"\b(?:context|window) (?:size|limit|length|capacity)\b", re.I),
    re.compile(r"\blimit (?:reached|near|exceeded|approaching)\b", re.I),
]


def fill_disclosures(text: str) -> list[str]:
    """Every phrase in ``text`` that could tell the model how full its context is (empty = clean)."""
    cleaned = _ALLOWED.sub("", text)
    hits: list[str] = []
    for pat in _FORBIDDEN:
        hits.extend(m.group(0) for m in pat.finditer(cleaned))
    return hits


# ---------------------------------------------------------------------------- rendering


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise DoctrineError(f"unknown prompt mode {mode!r}; expected one of {list(MODES)}")


def _text(doctrine: Doctrine, name: str, mode: str) -> str:
    """A section's text in ``mode``; a section the version does not define renders as nothing."""
    return doctrine.text(name, mode) if name in doctrine.sections else ""


def _join(parts: list[str]) -> str:
    """Blank-line join that drops empty parts, so an emptied section leaves no trace."""
    return "\n\n".join(p for p in parts if p)


def _tools_section(doctrine: Doctrine, mode: str) -> str:
    lines = []
    for name in TOOL_NAMES:
        desc = _text(doctrine, TOOL_SECTIONS[name], mode)
        lines.append(f"- {name}: {desc}" if desc else f"- {name}")
    header = _text(doctrine, "tools", mode)
    return "\n".join(([header] if header else []) + lines)


def render_system_prompt(doctrine: Doctrine, mode: str = "doctrine", base_prompt: str = "") -> str:
    """The system prompt: the host's ``base_prompt`` (if any), a ``---`` rule, then the skeleton."""
    _check_mode(mode)
    parts = [_tools_section(doctrine, mode) if s == "@tools" else _text(doctrine, s, mode) for s in SYSTEM_SECTIONS]
    body = _join(parts)
    return f"{base_prompt.rstrip()}\n\n---\n\n{body}" if base_prompt.strip() else body


def _example_call(start: str, end: str, summary: str) -> str:
    return "Example: compress(" + json.dumps(
        {"topic": "…", "content": [{"startId": start, "endId": end, "summary": summary}]}, ensure_ascii=False
    ) + ")"


def _check_view(view: NudgeView) -> None:
    if view.tier not in (1, 2, 3):
        raise DoctrineError(f"nudge tier must be 1, 2 or 3, got {view.tier!r}")
    if view.voice not in ("gentle", "emergency"):
        raise DoctrineError(f"nudge voice must be 'gentle' or 'emergency', got {view.voice!r}")
    unknown = sorted(set(view.breakdown) - set(BREAKDOWN_KEYS))
    if unknown:
        raise DoctrineError(f"nudge breakdown has unknown keys {unknown}; expected {list(BREAKDOWN_KEYS)}")


def render_nudge(view: NudgeView, doctrine: Doctrine, mode: str = "doctrine", nudge_style: str = "list",
                 example_ids: str = "first") -> str | None:
    """The nudge text for ``view`` (a trailing user message), or None when ``nudge_style`` is "none".

    Doctrine mode restates the rules (philosophy, summary craft, tier rules); distilled mode
    fills the same skeleton with the distilled texts, leaving the list and its sizes.
    ``nudge_style`` "list" is the reference host's nudge (the tier-2/3 and emergency nudges
    carry an example call), "list_only" the same nudge without the example call (a host for a
    distilled model: the example's placeholder summary, and for an emergency its first listed
    range, which may be the task itself, are what a small trained model copies as its answer),
    "none" no nudge at all. ``example_ids`` "placeholder" writes the emergency example's range
    as ``<ID>`` (what the billion-context proxy's nudge shows, ``proxy_chat`` host) instead of
    the first listed range.
    """
    _check_mode(mode)
    if example_ids not in ("first", "placeholder"):
        raise DoctrineError(f"example_ids must be 'first' or 'placeholder', got {example_ids!r}")
    if nudge_style not in NUDGE_STYLES:
        raise DoctrineError(f"unknown nudge style {nudge_style!r}; expected one of {list(NUDGE_STYLES)}")
    _check_view(view)
    if nudge_style == "none":
        return None
    t = lambda name: _text(doctrine, name, mode)  # noqa: E731
    header = t("nudge-emergency") if view.voice == "emergency" else t("nudge-gentle")
    examples = nudge_style == "list"
    breakdown = format_breakdown(view.breakdown, view.growth)
    if view.tier in (2, 3):
        label = "DISTILLATION" if view.tier == 2 else "CONDENSATION"
        trigger = f"[{'EMERGENCY ' if view.voice == 'emergency' else ''}TIER {view.tier} {label} TRIGGER]"
        blocks = view.target_blocks
        example = _example_call(blocks[0].id, blocks[-1].id, "Source: …") if blocks and examples else ""
        parts = [header, t("philosophy"), breakdown, trigger, t("nudge-tier"), format_blocks(blocks), example,
                 t("how-to-compress"), t("tier2" if view.tier == 2 else "tier3")]
    elif view.voice == "emergency":
        first = next((r for r in view.ranges if not r.protected), None)
        if example_ids == "placeholder" and first:
            first = RangeView("<ID>", "<ID>", 0, 0)
        example = _example_call(first.start, first.end, "- goal: …") if first and examples else ""
        parts = [header, t("philosophy"), breakdown, t("how-to-compress"), example,
                 t("nudge-emergency-order"), format_ranges(view.ranges)]
    else:
        parts = [header, t("philosophy"), breakdown, t("how-to-compress"),
                 format_ranges(view.ranges), t("nudge-batch-tip")]
    return _join(parts)


# ---------------------------------------------------------------------------- examples and parts

_EXAMPLE_RANGES = [
    RangeView("m00004", "m00019", 16, 14200, 56800, tool_pct=88, text_pct=12),
    RangeView("m00020", "m00023", 4, 3100, 12400, protected=True, tools=("compress",)),
    RangeView("m00031", "m00058", 28, 21800, 87200, tool_pct=74, text_pct=26),
    RangeView("m00061", "m00077", 17, 9600, 38400, tool_pct=35, text_pct=65),
]
_EXAMPLE_BREAKDOWN = {"system": 1900, "tool": 41200, "summaries": 2600, "code": 5400, "text": 8300}
_EXAMPLE_BLOCKS = [
    BlockView("b1", 1, 22, 18400, 610, "repo survey"),
    BlockView("b2", 1, 35, 26900, 840, "ttl bug hunt"),
    BlockView("b3", 1, 19, 12100, 450, "cache refactor"),
    BlockView("b4", 1, 27, 20500, 720, "test fixes"),
]
_EXAMPLE_T2 = [
    BlockView("b5", 2, 76, 57400, 1900, "cache subsystem"),
    BlockView("b9", 2, 64, 49800, 1650, "migration steps 1-3"),
]
EXAMPLE_VIEWS: dict[str, NudgeView] = {
    "nudge-gentle": NudgeView(1, "gentle", _EXAMPLE_RANGES, _EXAMPLE_BREAKDOWN, growth=27400),
    "nudge-emergency": NudgeView(1, "emergency", _EXAMPLE_RANGES, _EXAMPLE_BREAKDOWN, growth=4100),
    "nudge-tier2": NudgeView(2, "gentle", [], _EXAMPLE_BREAKDOWN, growth=31000, target_blocks=_EXAMPLE_BLOCKS),
    "nudge-tier3": NudgeView(3, "gentle", [], _EXAMPLE_BREAKDOWN, growth=30500, target_blocks=_EXAMPLE_T2),
}


def render_part(doctrine: Doctrine, mode: str, part: str, base_prompt: str = "", nudge_style: str = "list",
                host: str = "proxy") -> str:
    """Render one CLI part: the system prompt, an example nudge, or the tool schemas as JSON.

    A nudge suppressed by ``nudge_style="none"`` renders as the empty string.
    """
    if part == "system":
        return render_system_prompt(doctrine, mode, base_prompt)
    if part == "tools":
        return json.dumps(tool_schemas(doctrine, mode, host), indent=2, ensure_ascii=False)
    if part in EXAMPLE_VIEWS:
        return render_nudge(EXAMPLE_VIEWS[part], doctrine, mode, nudge_style) or ""
    raise DoctrineError(f"unknown part {part!r}; expected one of {list(PARTS)}")
