"""Compose tier-1 summaries as handoff notes; tiers 2 and 3 are in :mod:`doctrine.label.tiers`.

Tier 1 (a message range): :func:`doctrine.label.handoff.read_range` reads the range as the
task, its steps (what was done, what came of it), decisions with their reasons, open items
and drops, in short sentences with every exact item copied verbatim; the session's
ground-truth facts in the range are kept word for word. Sections follow the doctrine's order
(goal > decisions > what was done > findings > open items > drops > refs). The budget is
``source / summary_ratio`` tokens, capped at the doctrine's ``tier1_max_tokens`` and at the serving
profile's ``compress.max_summary_length`` (chars / 8: half the kernel's limit); when over
it, the lowest-priority lines go first (drop notes, file reads, steps without errors);
needed facts and the goal are never trimmed.

The conformance checker judges the result and nothing else: a summary that fails it is not
repaired from the checker's findings but rejected (``passed=False``), and the labeler skips
the point. Headings, bullets and step verbs are one fixed form (``phrasing.HEADINGS``);
the content comes from the range.
"""

from __future__ import annotations

import dataclasses
import random
import re
from dataclasses import dataclass, field
from typing import Any

from doctrine.conform import check_summary
from doctrine.kernel.messages import Message
from doctrine.render.prompts import fill_disclosures
from plumbing.tokens import CountTokens

from . import phrasing as ph
from .config import LabelConfig
from .handoff import Line, read_range

HANDOFF_ORDER = ("goal", "decisions", "steps", "state", "open", "dropped")


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
    """The tier-1 surface form: one per doctrine (see ``phrasing.HEADINGS``), not drawn per label."""

    headings: dict[str, str]
    heading_style: str
    bullet: str

    @classmethod
    def default(cls) -> Style:
        return cls(dict(ph.HEADINGS), ph.HEADING_STYLE, ph.BULLET)

    def heading(self, section: str) -> str:
        h = self.headings[section]
        return self.heading_style.format(h=h, H=h.upper())


# ---------------------------------------------------------------------- tier 1
def discloses(text: str, source_text: str) -> bool:
    """True if ``text`` holds a fill-ratio-like phrase that is not a quote of the source.

    A percentage the task itself printed ("rate limit at 82% of quota") is a KEEP value;
    anything else that reads like a fill ratio never goes into a label (mechanic ii).
    """
    return any(h not in source_text for h in fill_disclosures(text))


def render_lines(lines: list[Line], refs: list[str], style: Style) -> str:
    parts = []
    for sec in HANDOFF_ORDER:
        rows = sorted((ln for ln in lines if ln.section == sec), key=lambda ln: ln.order)
        if rows:
            parts.append(style.heading(sec) + "\n" + "\n".join(style.bullet + ln.text for ln in rows))
    if refs:
        span = refs[0] if refs[0] == refs[-1] else f"{refs[0]}–{refs[-1]}"
        parts.append(f"{style.heading('refs')} {span}" if not style.heading_style.startswith("#")
                     else f"{style.heading('refs')}\n{span}")
    return "\n".join(parts)


def _trim_lines(lines: list[Line], refs: list[str], style: Style, budget: int, count: CountTokens) -> list[Line]:
    """Drop the lowest-priority lines (never a must) until the render fits ``budget`` tokens."""
    out = list(lines)
    while count(render_lines(out, refs, style)) > budget:
        cands = [ln for ln in out if not ln.must]
        if not cands:
            break
        out.remove(max(cands, key=lambda ln: (ln.priority, ln.order)))
    return out


def _trim_chars(lines: list[Line], refs: list[str], style: Style, limit: int) -> list[Line]:
    """Drop the lowest-priority lines, must lines last, until the render has at most ``limit`` chars
    (the kernel refuses a longer summary, so a label over it would never be applied)."""
    out = list(lines)
    while len(render_lines(out, refs, style)) > limit and len(out) > 1:
        out.remove(max(out, key=lambda ln: (not ln.must, ln.priority, ln.order)))
    # One line still over: its trailing "; also `...`" clauses go, the first error stays.
    while out and len(render_lines(out, refs, style)) > limit:
        longest = max(out, key=lambda ln: len(ln.text))
        cut = longest.text.rfind("; also ")
        if cut < 0:
            break
        out[out.index(longest)] = dataclasses.replace(longest, text=longest.text[:cut] + ".")
    return out


def compose_tier1(messages: list[Message], state: Any, facts: list[tuple[str, str, bool]], doctrine: Any,
                  rng: random.Random, count: CountTokens, config: LabelConfig,
                  max_chars: int | None = None) -> SummaryOutcome:
    """A tier-1 summary of ``messages`` (the untagged range); ``facts``: (text, kind, needed).

    ``max_chars``: the serving profile's ``compress.max_summary_length``; the budget stays
    at half of it (chars / 8 tokens), so a small window's labels are ones its kernel accepts."""
    keep_facts = [f for f in facts if f[2] or config.keep_session_facts]
    out = _tier1(messages, state, keep_facts, doctrine, count, config, max_chars)
    if not out.passed and len(keep_facts) < len(facts):
        # Only the facts needed soon fell short of the checker's floor (a range whose one
        # path:line or value is the session's): keep the session's facts as the budget allows.
        out = _tier1(messages, state, list(facts), doctrine, count, config, max_chars)
    return out


def _tier1(messages: list[Message], state: Any, keep_facts: list[tuple[str, str, bool]], doctrine: Any,
           count: CountTokens, config: LabelConfig, max_chars: int | None) -> SummaryOutcome:
    style = Style.default()
    verbs = dict(ph.STEP_VERBS)
    source_text = "\n".join(m.text for m in messages)
    refs = {m.id: state.by_raw.get(m.id, m.id) for m in messages}
    reading = read_range(messages, refs, big_output_tokens=config.drop_note_min_tokens, count=count,
                         facts=keep_facts, verbs=verbs)
    lines = [ln for ln in reading.lines if not discloses(ln.text, source_text)]
    source_tokens = sum(count(m.text) for m in messages)
    cap = int(doctrine.limits["tier1_max_tokens"])
    if max_chars is not None:
        # The kernel counts chars: the token budget stays loose (chars / 3) and the rendered text is held
        # under the limit itself below, whatever the token counter says.
        cap = min(cap, max(config.summary_min_tokens, int(max_chars) // 3))
    # Small ranges (under the checker's ratio floor) may keep up to 70% of their size, so a
    # short exchange keeps its steps, not only its goal.
    small = min(320, int(0.7 * source_tokens))
    budget = max(config.summary_min_tokens, min(cap, max(int(source_tokens / config.summary_ratio), small)))
    src = source_dicts(messages, state)

    def attempt(candidates: list[Line]) -> tuple[str, Any]:
        kept = _trim_lines(candidates, reading.refs, style, budget, count)
        if max_chars is not None:
            kept = _trim_chars(kept, reading.refs, style, int(0.95 * int(max_chars)))
        text = _pad(render_lines(kept, reading.refs, style), doctrine)
        return text, check_summary(src, text, tier=1, doctrine=doctrine, count_tokens=count)

    text, rep = attempt(lines)
    facts, bare = list(keep_facts), []
    for _ in range(3):
        # Repair: a class is under its recall floor (a config value the budget trimmed away, a
        # test count only a restored block holds). Its missed items are kept as facts, quoted
        # from the range with where they came from, the lines that hold them become musts, and
        # the rest is trimmed again; the kernel's char limit still has the last word.
        short_items = [(" ".join(m.split()), name) for name, cr in rep.classes.items()
                       if cr.recall < cr.min_recall for m in cr.missed]
        if not short_items:  # every class over its floor, the score under the pass: all the missed items
            short_items = [(" ".join(m.split()), name) for name, cr in rep.classes.items()
                           if name != "message_refs" for m in cr.missed]
        bare += [re.sub(r"\s+", "", m) for m, _ in short_items]  # `size=3` is read from `size = 3`
        if rep.passed or not short_items:
            break
        known = {f[0] for f in facts}
        facts += [(w, name, True) for m, name in short_items if m and (w := _as_written(m, source_text)) not in known]
        reading = read_range(messages, refs, big_output_tokens=config.drop_note_min_tokens, count=count,
                             facts=facts, verbs=verbs)
        repaired = [dataclasses.replace(ln, must=True)
                    if not ln.must and any(m in re.sub(r"\s+", "", ln.text) for m in bare) else ln
                    for ln in reading.lines if not discloses(ln.text, source_text)]
        if repaired == lines:
            break
        lines = repaired
        text, rep = attempt(lines)
    missed = [] if rep.passed else [m for cr in rep.classes.values() for m in cr.missed]
    return SummaryOutcome(text, bool(rep.passed), rep, missed=missed)


_SETTING_ITEM = re.compile(r"^(?P<key>[\w.-]+)\s*(?P<sep>[:=])\s*(?P<value>\S.*)$")


def _as_written(item: str, source_text: str) -> str:
    """A missed setting as the range wrote it: the checker names ``retryLimit: 10`` where a
    JSON file printed ``"retryLimit": 10,``; the repair quotes the row itself, which the
    checker reads as the same setting (a fact is only kept where its text is in the range)."""
    if item in " ".join(source_text.split()):
        return item
    m = _SETTING_ITEM.match(item)
    if not m:
        return item
    want = re.sub(r"[\s\"']", "", item)
    for line in source_text.split("\n"):
        row = line.strip().rstrip(",")
        if m.group("key") in row and re.sub(r"[\s\"']", "", row) == want:
            return row
    return item


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
    from plumbing.tokens import default_count_tokens

    doc = doctrine if doctrine is not None else default_doctrine()
    msgs = normalise_messages(source)
    flat = [Message(id=m.key, role=m.role, content_type=m.kind, text=m.text, tool_name=m.tool_name,
                    tool_call_id=m.tool_call_id) for m in msgs]
    state = SimpleNamespace(by_raw={m.key: m.ref for m in msgs if m.ref})
    state = SimpleNamespace(by_raw={m.key: m.ref for m in msgs if m.ref})
    out = compose_tier1(flat, state, list(facts), doc, ph.rng_for(seed, "compose_summary"),
                        count_tokens or default_count_tokens, config or LabelConfig())
    if not out.passed:
        raise ValueError("no conforming summary: " + "; ".join(out.report.reasons[:3]))
    return out.text
