"""Compose tier-1/2/3 summaries that pass the conformance checker by construction.

Tier 1 (a message range): the range's KEEP items (``extract_keep_items``) and the session's
facts in the range, grouped in the doctrine's priority order (goal > decisions with their
rationale > exact artifacts > conclusions/state > open items), then one DROP note per
significant tool output and the range's refs. The budget is ``source / summary_ratio``
tokens, capped at the doctrine's ``tier1_max_tokens``; when over it, the lowest-priority
lines go first (DROP notes, state lines, then low-salience items while every class stays
above its minimum recall). Needed facts are never trimmed.

Tiers 2 and 3 are in :mod:`doctrine.label.tiers`.

Every summary is checked with ``check_summary``; a failing one is repaired once by adding
the KEEP items the report lists as missed, and is rejected (``passed=False``) if it still
fails. Phrasing (headings, bullets, note wording) comes from the seeded generator.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any

from doctrine.conform import check_summary, extract_keep_items
from doctrine.conform.patterns import norm
from doctrine.kernel.messages import Message
from doctrine.kernel.tokens import CountTokens
from doctrine.render import fill_disclosures

from . import phrasing as ph
from .config import LabelConfig
from .needed import session_index_of

SECTION_ORDER = ("goal", "decisions", "artifacts", "state", "open", "dropped", "refs")
PRIORITY = {"goal": 0, "decisions": 1, "artifacts": 2, "state": 3, "open": 3, "dropped": 4, "refs": 5}
CLASS_SECTION = {
    "user_intent": "goal", "decisions": "decisions", "paths_with_lines": "artifacts",
    "signatures": "artifacts", "error_strings": "artifacts", "exact_values": "artifacts",
    "open_questions": "open",
}
ARTIFACT_ORDER = {"paths_with_lines": 0, "signatures": 1, "error_strings": 2, "exact_values": 3}


@dataclass
class Entry:
    section: str
    text: str
    salience: float = 0.5
    cls: str | None = None  # KEEP class when the line carries a KEEP item
    must: bool = False  # a needed fact: never trimmed
    item: bool = False  # an extracted KEEP item (counts towards class recall)
    order: int = 0


@dataclass
class SummaryOutcome:
    text: str
    passed: bool
    report: Any
    repaired: bool = False
    tier: int = 1
    missed: list[str] = field(default_factory=list)

    def conformance(self) -> dict[str, Any]:
        r = self.report
        return {"tier": self.tier, "score": r.score, "passed": bool(r.passed), "repaired": self.repaired,
                "summary_tokens": r.summary_tokens, "source_tokens": r.source_tokens,
                "reasons": list(r.reasons) if not r.passed else []}


def source_dicts(messages: list[Message], state: Any) -> list[dict[str, Any]]:
    """Flat dicts the checker reads, with the kernel ref as id (so refs count as KEEP items)."""
    out = []
    for m in messages:
        ref = state.by_raw.get(m.id)
        d = {"id": ref if ref and ref.startswith("m") else m.id, "role": m.role,
             "content_type": m.content_type, "text": m.text}
        if m.tool_name:
            d["tool_name"] = m.tool_name
        if m.tool_call_id:
            d["tool_call_id"] = m.tool_call_id
        out.append(d)
    return out


# ---------------------------------------------------------------------- rendering
@dataclass(frozen=True)
class Style:
    headings: dict[str, str]
    heading_style: str
    bullet: str
    drop_note: str

    @classmethod
    def pick(cls, rng: random.Random) -> Style:
        return cls({k: rng.choice(v) for k, v in ph.HEADINGS.items()}, rng.choice(ph.HEADING_STYLES),
                   rng.choice(ph.BULLETS), rng.choice(ph.DROP_NOTES))

    def heading(self, section: str) -> str:
        h = self.headings[section]
        return self.heading_style.format(h=h, H=h.upper())


def _line(e: Entry) -> str:
    if e.cls == "signatures":
        return f"`{e.text}`"
    return e.text


def render(entries: list[Entry], style: Style) -> str:
    parts = []
    for sec in SECTION_ORDER:
        rows = [e for e in entries if e.section == sec]
        if not rows:
            continue
        if sec == "artifacts":
            rows.sort(key=lambda e: (ARTIFACT_ORDER.get(e.cls or "", 9), e.order))
        else:
            rows.sort(key=lambda e: e.order)
        if sec == "refs":
            parts.append(f"{style.heading(sec)} " + ", ".join(e.text for e in rows) if not style.heading_style.startswith("#")
                         else style.heading(sec) + "\n" + ", ".join(e.text for e in rows))
            continue
        parts.append(style.heading(sec) + "\n" + "\n".join(style.bullet + _line(e) for e in rows))
    return "\n".join(parts)


# ---------------------------------------------------------------------- tier 1
def discloses(text: str, source_text: str) -> bool:
    """True if ``text`` holds a fill-ratio-like phrase that is not a quote of the source.

    A percentage the task itself printed ("rate limit at 82% of quota") is a KEEP value;
    anything else that reads like a fill ratio never goes into a label (mechanic ii).
    """
    return any(h not in source_text for h in fill_disclosures(text))


def _dedupe_add(entries: list[Entry], new: Entry, source_text: str = "") -> None:
    if discloses(new.text, source_text):
        return
    key = norm(new.text).lower()
    for e in entries:
        k = norm(e.text).lower()
        if k == key or (len(key) >= 12 and key in k):
            e.must = e.must or new.must
            e.item = e.item or new.item
            e.cls = e.cls or new.cls
            return
        if len(k) >= 12 and k in key and e.section == new.section:
            # The new text is a longer form of an existing line: keep the longer one.
            e.text, e.must, e.item = new.text, e.must or new.must, e.item or new.item
            e.cls = e.cls or new.cls
            return
    new.order = len(entries)
    entries.append(new)


def _what(call: Message | None, result: Message) -> str:
    """A short description of a tool output for a DROP note."""
    import json

    name = result.tool_name or "tool"
    detail = ""
    if call is not None:
        try:
            args = json.loads(call.text)
        except (ValueError, TypeError):
            args = {}
        if isinstance(args, dict):
            if isinstance(args.get("command"), str) and name not in ("str_replace_editor",):
                detail = ph.short(args["command"], 60)
            elif isinstance(args.get("path"), str):
                cmd = args.get("command") if isinstance(args.get("command"), str) else ""
                detail = f"{cmd} {args['path']}".strip()
    return f"{name} output ({detail})" if detail else f"{name} output"


def tier1_entries(src: list[dict[str, Any]], messages: list[Message], state: Any, facts: list[tuple[str, str, bool]],
                  doctrine: Any, count: CountTokens, config: LabelConfig, style: Style) -> list[Entry]:
    entries: list[Entry] = []
    source_text = "\n".join(m.text for m in messages)
    items = extract_keep_items(src, doctrine=doctrine)
    for cls, section in CLASS_SECTION.items():
        for it in items.get(cls, []):
            _dedupe_add(entries, Entry(section, it.text, it.salience, cls, item=True), source_text)
    kind_cls = {"user_intent": "user_intent", "decisions": "decisions", "open_questions": "open_questions",
                "paths_with_lines": "paths_with_lines", "signatures": "signatures", "error_strings": "error_strings",
                "exact_values": "exact_values"}
    for text, kind, needed in facts:
        if not needed and not config.keep_session_facts:
            continue
        cls = kind_cls.get(kind, "exact_values")
        _dedupe_add(entries, Entry(CLASS_SECTION[cls], " ".join(text.split()), 0.6, cls, must=needed), source_text)
    # Conclusions: the first sentence of the agent's own remarks (not decisions already listed).
    n_state = 0
    for m in messages:
        if (m.role == "assistant" and m.content_type == "text" and m.text.strip() and n_state < 3
                and session_index_of(m.id) is not None):  # not the labeler's own lead lines
            first = ph.short(re.split(r"(?<=[.!?])\s", m.text.strip(), maxsplit=1)[0], 110)
            if len(first) >= 12:
                _dedupe_add(entries, Entry("state", first, 0.3), source_text)
                n_state += 1
    # One DROP note per significant tool output (notes that differ only in digits merge).
    calls = {m.tool_call_id: m for m in messages if m.content_type == "tool-call"}
    notes: dict[str, tuple[list[str], str]] = {}
    for m in messages:
        if m.content_type != "tool-result" or count(m.text) < config.drop_note_min_tokens:
            continue
        ref = state.by_raw.get(m.id, m.id)
        what = _what(calls.get(m.tool_call_id), m)
        skel = re.sub(r"\d+", "#", what)
        if skel in notes:
            notes[skel][0].append(ref)
        else:
            notes[skel] = ([ref], what)
    for refs, what in notes.values():
        span = ", ".join(refs)
        entries.append(Entry("dropped", style.drop_note.format(refs=span, what=what), 0.2, order=len(entries)))
    refs = [d["id"] for d in src if str(d["id"]).startswith("m")]
    if refs:
        span = refs[0] if refs[0] == refs[-1] else f"{refs[0]}–{refs[-1]}"
        entries.append(Entry("refs", span, 1.0, "message_refs", must=True, order=len(entries)))
    return entries


def _class_totals(entries: list[Entry]) -> dict[str, float]:
    tot: dict[str, float] = {}
    for e in entries:
        if e.item and e.cls:
            tot[e.cls] = tot.get(e.cls, 0.0) + e.salience
    return tot


def _trim(entries: list[Entry], style: Style, budget: int, count: CountTokens, need: dict[str, float]) -> list[Entry]:
    """Drop lowest-priority lines until the render fits ``budget`` tokens (musts stay)."""
    out = list(entries)
    totals = _class_totals(out)
    kept = dict(totals)
    while count(render(out, style)) > budget:
        cands = [e for e in out if not e.must]
        if not cands:
            break

        def removable(e: Entry) -> bool:
            if not (e.item and e.cls):
                return True
            t = totals.get(e.cls, 0.0)
            return t <= 0 or (kept[e.cls] - e.salience) / t >= need.get(e.cls, 0.0) + 0.15

        cands = [e for e in cands if removable(e)]
        if not cands:
            break
        victim = max(cands, key=lambda e: (PRIORITY[e.section], not e.item, -e.salience, e.order))
        out.remove(victim)
        if victim.item and victim.cls:
            kept[victim.cls] -= victim.salience
    return out


def _need(doctrine: Any, tier: int) -> dict[str, float]:
    from doctrine.conform import settings_for

    s = settings_for(doctrine)
    f = s.tier(tier)["min_recall_factor"]
    return {k: v.min_recall * f for k, v in s.classes.items()}


def compose_tier1(messages: list[Message], state: Any, facts: list[tuple[str, str, bool]], doctrine: Any,
                  rng: random.Random, count: CountTokens, config: LabelConfig) -> SummaryOutcome:
    """A tier-1 summary of ``messages`` (the untagged range); ``facts``: (text, kind, needed)."""
    style = Style.pick(rng)
    src = source_dicts(messages, state)
    entries = tier1_entries(src, messages, state, facts, doctrine, count, config, style)
    source_tokens = sum(count(m.text) for m in messages)
    cap = int(doctrine.limits["tier1_max_tokens"])
    budget = max(config.summary_min_tokens, min(cap, int(source_tokens / config.summary_ratio)))
    entries = _trim(entries, style, budget, count, _need(doctrine, 1))
    text = _pad(render(entries, style), doctrine)
    rep = check_summary(src, text, tier=1, doctrine=doctrine, count_tokens=count)
    if rep.passed:
        return SummaryOutcome(text, True, rep)
    # Repair: put back every KEEP item the checker missed, then check again.
    for name, cr in rep.classes.items():
        if name in CLASS_SECTION:
            for miss in cr.missed:  # (_dedupe_add skips anything that reads as a fill ratio)
                _dedupe_add(entries, Entry(CLASS_SECTION[name], miss, 0.9, name, must=True, item=True),
                            "\n".join(m.text for m in messages))
    text = _pad(render(entries, style), doctrine)
    rep2 = check_summary(src, text, tier=1, doctrine=doctrine, count_tokens=count)
    missed = [m for cr in rep2.classes.values() for m in cr.missed]
    return SummaryOutcome(text, bool(rep2.passed), rep2, repaired=True, missed=missed)


def _pad(text: str, doctrine: Any) -> str:
    lo = int(doctrine.limits["min_summary_chars"])
    if len(text.strip()) >= lo:
        return text
    return (text + "\nConsumed output only; nothing in it is needed for the next steps.").strip()


def compose_summary(source: list[dict[str, Any]], *, doctrine: Any = None, seed: int = 0,
                    facts: list[tuple[str, str, bool]] | tuple = (), config: LabelConfig | None = None,
                    count_tokens: CountTokens | None = None) -> str:
    """A tier-1 summary of ``source`` (chat or flat message dicts, any ids), as a labeler writes it.

    For sources outside a replay (logged blocks to relabel, say). ``facts``: extra
    ``(text, kind, needed)`` to keep verbatim. Raises ValueError when no summary that passes
    the checker can be made.
    """
    from types import SimpleNamespace

    from doctrine.conform import normalise_messages
    from doctrine.conform.settings import default_doctrine
    from doctrine.kernel.tokens import default_count_tokens

    doc = doctrine if doctrine is not None else default_doctrine()
    msgs = normalise_messages(source)
    flat = [Message(id=m.key, role=m.role, content_type=m.kind, text=m.text, tool_name=m.tool_name,
                    tool_call_id=m.tool_call_id) for m in msgs]
    state = SimpleNamespace(by_raw={m.key: m.ref for m in msgs if m.ref})
    out = compose_tier1(flat, state, list(facts), doc, ph.rng_for(seed, "compose_summary"),
                        count_tokens or default_count_tokens, config or LabelConfig())
    if not out.passed:
        raise ValueError("no conforming summary: " + "; ".join(out.report.reasons[:3]))
    return out.text
