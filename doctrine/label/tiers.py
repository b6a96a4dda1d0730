"""Tier-2 distillation and tier-3 condensation of blocks into one higher-tier summary.

One ``Source: bN (XK→YK tok, Zx). [topic]`` header per source block (a topic several blocks
share gets an ordinal so the headers never read as a repeated status line), then 3-5
distilled bullets per source (tier 2, 50-150 tokens each) or 1-3 index facts
``[artifact] — outcome in at most 8 words`` (tier 3, 30-60 tokens each), sizes read from
``doctrine.limits``. Sources are merged first (:func:`merge_sources`): a line a later source
repeats is kept once, a setting a later source changed is marked SUPERSEDED (tier 2) or
dropped (tier 3) with one line saying what replaced it, and bare figures from the sources'
``Source:`` headers (``8x``, ``2.4K``) are never carried as facts. Bullets are picked round-robin across importance categories (decisions
and constraints, errors, paths, code, the rest) so a source keeps a decision and an error
rather than five paths; a series of same-shaped lines keeps one. Once the sources reach
1000 tokens the checker also wants a 2x fold, so the least important bullets are dropped
until the text fits. The result is checked, repaired once with the missed KEEP items, and
details the next steps need are added verbatim where the size target allows.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any

from doctrine.conform import check_summary
from doctrine.conform.patterns import norm
from doctrine.kernel.messages import Message
from doctrine.kernel.tags import format_tokens
from plumbing.tokens import CountTokens

from . import phrasing as ph
from .summaries import SummaryOutcome, discloses, source_dicts


@dataclass
class BlockSource:
    block_id: str
    tier: int
    summary: str
    topic: str | None
    compressed_tokens: int
    messages: int = 0  # raw messages the block covers


ORDINALS = ("", "second part", "third part", "fourth part", "fifth part", "sixth part", "seventh part",
            "eighth part", "ninth part", "tenth part")


def source_headers(blocks: list[BlockSource], count: CountTokens) -> list[str]:
    """One header per block; a topic shared by several blocks gets an ordinal, so the
    headers never read as one status line repeated (a DROP violation)."""
    seen: dict[str, int] = {}
    out = []
    for b in blocks:
        topic = b.topic or "untitled"
        n = seen.get(topic, 0)
        seen[topic] = n + 1
        if n:
            topic = f"{topic}, {ORDINALS[n]}" if n < len(ORDINALS) else f"{topic}, part {b.block_id}"
        out.append(source_header(b, count, topic))
    return out


def source_header(b: BlockSource, count: CountTokens, topic: str | None = None) -> str:
    s_tok = max(1, count(b.summary))
    ratio = max(1, round(b.compressed_tokens / s_tok)) if b.compressed_tokens else 1
    topic = topic or b.topic or "untitled"
    return f"Source: {b.block_id} ({format_tokens(b.compressed_tokens)}→{format_tokens(s_tok)} tok, {ratio}x). [{topic}]"


_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+(.*\S)\s*$")
_DECISION = re.compile(r"\b(?:because|since|so that|instead of|rather than|decided|chose)\b", re.I)
_ERROR = re.compile(r"Error\b|Exception\b|FAILED|\bfailed\b|::test|error TS\d+")
_PATH_LINE = re.compile(r"[\w./-]+\.\w{1,5}:\d+")
_INTENT = re.compile(r"\b(?:must|do not|don't|never|always|only|keep|constraint|goal)\b", re.I)


def source_bullets(summary: str) -> list[tuple[int, str]]:
    """(category, text) of a block summary's content lines, most important category first.

    Categories: 0 goal/constraints and decisions with a reason, 1 errors and failing tests,
    2 paths with lines, 3 code, 4 anything else. DROP notes (``mNNNNN: ...``), ref lines
    and ``Source:`` headers are process and are left out.
    """
    lines = summary.split("\n")
    bullets = [m.group(1) for m in (_BULLET.match(ln) for ln in lines) if m]
    if not bullets:
        bullets = [ln.strip() for ln in lines if len(ln.strip()) >= 12]
    out = []
    for b in bullets:
        t = b.strip()
        if (re.match(r"^m\d{5}\b", t) or t.lower().startswith("source:") or discloses(t, summary)
                or len(t) < 6):
            continue
        out.append((category(t), t))
    return out


def category(t: str) -> int:
    """Importance of a distilled line (0 = most): see :func:`source_bullets`."""
    if _DECISION.search(t) or _INTENT.search(t) or t.rstrip().endswith("?"):
        return 0
    if _ERROR.search(t):
        return 1
    if _PATH_LINE.search(t):
        return 2
    if t.lstrip("-*• ").startswith("`"):
        return 3
    return 4


def _round_robin(cands: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Candidates interleaved across categories (most important first), so a distilled
    source keeps a decision and an error, not five paths."""
    by: dict[int, list[tuple[int, str]]] = {}
    for c in sorted(cands, key=lambda c: c[0]):
        by.setdefault(c[0], []).append(c)
    out = []
    while any(by.values()):
        for cat in sorted(by):
            if by[cat]:
                out.append(by[cat].pop(0))
    return out


def _words(text: str, n: int) -> str:
    w = text.split()
    return " ".join(w[:n])


def _outcome(text: str, n: int = 8) -> str:
    """The outcome part of a distilled line in at most ``n`` words: what follows its process
    prefix ("Ran `cmd` (m00006): ..."), cut at a clause end when one comes early enough. A
    backtick span is never left open."""
    body = text
    m = re.search(r"\(m\d{5}\):\s+", text[:160])  # "Ran `cmd` (m00006): <outcome>"
    if m and len(text[m.end():].split()) >= 3 and text[m.end():].count("`") % 2 == 0:
        body = re.sub(r"^(?:what it showed|the result was|it printed|it found):?\s+", "", text[m.end():])
        body = re.sub(r"^the line now reads\s+", "now ", body)
    clause = re.split(r"[;,]\s|\.\s", body, maxsplit=1)[0]
    if len(clause.split()) >= 3:
        body = clause
    out = _words(body, n).rstrip(".,;:")
    if out.count("`") % 2:
        out = out.rsplit("`", 1)[0].rstrip() or out.replace("`", "")
    return out


_PADS = (
    "{topic}: the original {n} message(s) stay restorable from {bid}.",
    "Restore {bid} for the full detail of {topic}.",
    "Where this came from: {bid}, {topic}, {n} message(s) folded at tier 1.",
    "Scope of {bid}: {topic}.",
)


_HEADER_TOPIC = re.compile(r"^(Source: b\d+ \([^)]*\)\.) \[(.*)\]$")


def _squeeze(parts: list[list[str]], n_sources: int) -> bool:
    """One step toward the kernel's char limit once the token fit is at its floor: a header's
    ``[topic]`` keeps only its first name (``[work on a.py, b.env]`` -> ``[a.py]``;
    headers stay distinct, or three would read as one status line repeated); then, in a digest of
    two sources, the topics go. The pad lines stay: they hold a thin source at the checker's
    token floor. False when nothing is left to take."""
    for i in range(n_sources):
        m = _HEADER_TOPIC.match(parts[i][0])
        if m:
            topic = m.group(2)
            short = re.sub(r"^(?:work on|ran)\s+", "", topic).split(",")[0].strip()
            if short and short != topic:
                parts[i][0] = f"{m.group(1)} [{short}]"
                return True
    if n_sources < 3:  # two bare headers are no repeated line (the checker counts three or more)
        for i in range(n_sources):
            m = _HEADER_TOPIC.match(parts[i][0])
            if m:
                parts[i][0] = m.group(1)
                return True
    return False


def _clipped_from(bullet_text: str, line: str) -> bool:
    """Whether ``bullet_text`` is ``line`` cut short by :func:`phrasing.clip` (``...`` or a
    clause end), so the whole line can take its place."""
    head = bullet_text[:-3] if bullet_text.endswith("...") else bullet_text.rstrip(".")
    flat = " ".join(line.split())
    return len(head) >= 40 and len(head) < len(flat) and flat.startswith(head.rstrip())


def _skeleton(line: str) -> str:
    return re.sub(r"\d+", "#", norm(line))


def _tier2_part(b: BlockSource, cands: list[tuple[int, str]], bullet: str, lo: int, aim: int, count: CountTokens,
                index: int, seen: set[str], header: str) -> list[str]:
    lines = [header]
    for _cat, text in _round_robin(cands):
        if len(lines) > 5 and count("\n".join(lines)) >= lo:
            break
        skel = _skeleton(text)
        if skel in seen:  # "helper_1", "helper_2"...: one of a series is enough
            continue
        line = bullet + ph.clip(text, 150)
        if line in lines:  # two lines that differ only past the clip
            continue
        cand = lines + [line]
        if count("\n".join(cand)) <= aim or count("\n".join(lines)) < lo or len(lines) < 4:
            lines = cand
            seen.add(skel)
    # A thin source still gets its share of the tier's size target: say where it lives.
    k = 0
    while count("\n".join(lines)) < lo and k < len(_PADS):
        pad = _PADS[(index + k) % len(_PADS)].format(topic=b.topic or "this work", n=b.messages or "its",
                                                       bid=b.block_id)
        lines.append(bullet + pad)
        k += 1
    return lines


def _nested_ids(summary: str) -> dict[str, str]:
    """Content line -> the nested block (``Source: bN`` header above it) it came from."""
    out, cur = {}, None
    for ln in summary.split("\n"):
        m = re.match(r"^[\s>*_`#-]*Source:\s*(b\d+)", ln)
        if m:
            cur = m.group(1)
            continue
        mb = _BULLET.match(ln)
        if cur and mb:
            out[mb.group(1).strip()] = cur
    return out


_FILE = re.compile(r"(?<![\w/.-])(?:[\w-]+/)*[\w-]+\.(?:py|ts|tsx|js|json|toml|yaml|yml|md|cfg|txt|lock|log|csv)\b")


def _artifact(line: str, nested: dict[str, str]) -> str | None:
    """What a tier-3 fact is about: the line's path (with its line), its nested block, a file."""
    m = _PATH_LINE.search(line)
    if m:
        return m.group(0)
    if line in nested:
        return nested[line]
    m = _FILE.search(line)
    return m.group(0) if m else None


def _tier3_part(b: BlockSource, cands: list[tuple[int, str]], bullet: str, aim: int, count: CountTokens,
                header: str) -> list[str]:
    lines = [header]
    nested = _nested_ids(b.summary)
    # Decisions and errors first, then what changed where (paths), then the rest.
    outcomes = ([t for c, t in cands if c in (0, 1)] + [t for c, t in cands if c == 2]
                + [t for c, t in cands if c in (3, 4)])
    ids = list(dict.fromkeys(re.findall(r"Source:\s*(b\d+)", b.summary)))
    for i, outcome in enumerate(outcomes[:3]):
        art = _artifact(outcome, nested) or (ids[i] if i < len(ids) else (b.topic or b.block_id))
        fact = f"{bullet}[{art}] — {_outcome(outcome)}"
        if fact in lines:  # two outcomes that read the same in a few words
            continue
        if i >= 1 and count("\n".join(lines + [fact])) > aim:
            break
        lines.append(fact)
    if len(lines) == 1:
        lines.append(f"{bullet}[{ids[0] if ids else (b.topic or b.block_id)}] — details in {b.block_id}")
    return lines


# ---------------------------------------------------------------------- merging sources
_FIGURE = re.compile(r"^[\s(~≈]*\d+(?:[.,_]\d+)?\s*(?:[Kk]|x|×|%|tok(?:ens)?)?[\s).]*$")
# A setting whose value later work may change: a pin (``httpx==0.28.1``) or a snake_case /
# dotted / UPPER_SNAKE key given a number (``pool_size=8``, ``CACHE_TTL_MS = 15_000``);
# ids in log lines (``req=55d7``) and code (``resp=client.get``) are not settings.
_SETTING = re.compile(r"(?<![\w.-])([A-Za-z][\w.-]*?)(==|\s*=\s*|:\s+)`?(\d[\w.:/+-]*)")
_LOG_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d")


def _settings(text: str) -> list[tuple[str, str, str]]:
    """(key, operator, value) of the settings a line states; none from a log line (its
    figures are observations, not settings)."""
    if _LOG_TIME.search(text):
        return []
    out = []
    for k, op, v in _SETTING.findall(text):
        op = op.strip() if op.strip() else op
        if op != "==" and not re.search(r"[_.]", k.strip(".")):
            continue  # ``x=1`` in code, ``req=55d7`` in a log: not a named setting
        out.append((k, op if op == "==" else "=", v.rstrip(".,;:")))
    return out


_MARKED = re.compile(r"\b(?:OBSOLETE|SUPERSEDED)\b")


@dataclass
class Merged:
    """Per source: the lines worth keeping (category, text); notes on what was replaced."""

    bullets: list[list[tuple[int, str]]]
    notes: dict[int, list[str]]
    superseded: set[str]  # settings ("KEY=old") that later sources replaced


def _bare_figure(text: str) -> bool:
    """A line that is only a size or ratio (``8x``, ``2.4K``, ``495``): header arithmetic,
    never a fact to carry."""
    return bool(_FIGURE.match(text.strip().strip("`*-• ")))


def merge_sources(blocks: list[BlockSource], tier: int) -> Merged:
    """The sources' lines as one digest would keep them.

    * a line a later source repeats is kept once, in the later source (merged);
    * a setting (``KEY=value``, ``pkg==version``) a later source gives another value is
      superseded: tier 2 keeps the line marked ``SUPERSEDED`` with what replaced it, tier 3
      drops it; either way one note in the later source's part says what changed;
    * lines already marked OBSOLETE/SUPERSEDED are dropped at tier 3 (with a note);
    * bare figures (header sizes and ratios) are never kept.
    """
    per = [[(c, t) for c, t in source_bullets(b.summary) if not _bare_figure(t)] for b in blocks]
    # Merge repeats: the latest mention wins.
    later: dict[str, int] = {}
    for i, lines in enumerate(per):
        for _c, t in lines:
            later[norm(t).lower().rstrip(".")] = i
    per = [[(c, t) for c, t in lines if later[norm(t).lower().rstrip(".")] == i] for i, lines in enumerate(per)]
    # Settings and their values per source, in order.
    values: dict[str, list[tuple[int, str, str]]] = {}
    for i, lines in enumerate(per):
        for _c, t in lines:
            for k, op, v in _settings(t):
                values.setdefault(k, []).append((i, op, v))
    notes: dict[int, list[str]] = {}
    superseded: set[str] = set()
    out: list[list[tuple[int, str]]] = []
    for i, lines in enumerate(per):
        kept = []
        dropped_marked = 0
        for c, t in lines:
            if tier == 3 and _MARKED.search(t):
                dropped_marked += 1
                continue
            newer = None
            for k, op, v in _settings(t):
                after = [(j, o, w) for j, o, w in values.get(k, []) if j > i and w != v]
                if after:
                    j, o, w = after[-1]
                    newer = (k, op, v, j, o, w)
                    break
            if newer is None:
                kept.append((c, t))
                continue
            k, op, v, j, o, w = newer
            superseded.add(f"{k}{op}{v}")
            old, new = f"`{k}{op}{v}`", f"`{k}{o}{w}`"
            if tier == 2:
                kept.append((0, f"SUPERSEDED by {blocks[j].block_id} ({new}): {t}"))
            note = (f"{old} from {blocks[i].block_id} is superseded by {new}: dropped as obsolete." if tier == 3
                    else f"{new} replaces {old} of {blocks[i].block_id}; the old value is obsolete.")
            if note not in notes.get(j, []):
                notes.setdefault(j, []).append(note)
        if dropped_marked:
            notes.setdefault(i, []).append(
                f"{dropped_marked} item(s) of {blocks[i].block_id} marked obsolete or superseded are dropped.")
        out.append(kept)
    return Merged(out, notes, superseded)


def _line_holding(item: str, blocks: list[BlockSource], merged: Merged) -> str | None:
    """A kept source line that holds ``item`` verbatim (shortened around it), else the item
    itself when it is a fact in its own right; None for a header figure or a superseded value."""
    if _bare_figure(item) or any(item in s or s in item for s in merged.superseded):
        return None
    for lines in reversed(merged.bullets):
        for _c, t in lines:
            if item in t:
                if len(t) <= 180:
                    return t
                # The clause that holds it ("`x = 1` at src/a.py:12"), not a bare anchor.
                clause = next(c for c in re.split(r";\s+", t) if item in c)
                m = re.search(r"\(m\d{5}\)[:;,]?\s+(?:it found\s+)?", clause[:160])
                if m and item in clause[m.end():]:
                    clause = clause[m.end():]
                return clause if len(clause) <= 180 and len(clause.split()) >= 3 else item
    # Only in a ``Source:`` header (sizes, ratios): not a fact of the work.
    for b in blocks:
        for ln in b.summary.split("\n"):
            if item in ln and not ln.strip().lower().lstrip("-*• ").startswith("source:"):
                return item
    return None


def _fit(parts: list[list[str]], total_max: int, lo_per: int, n_sources: int, count: CountTokens,
         keep: set[str]) -> None:
    """Drop the least important bullets (never headers or ``keep`` lines) until the text
    fits ``total_max`` tokens; a source part keeps at least ``lo_per`` tokens."""
    while count("\n".join("\n".join(p) for p in parts)) > total_max:
        cands = []
        for i, p in enumerate(parts):
            size = count("\n".join(p))
            for j in range(1, len(p)):
                line = p[j]
                if line in keep:
                    continue
                if i < n_sources and (len(p) <= 2 or size - count(line) < lo_per + 1):
                    continue
                cands.append((category(line), count(line), i, j))
        if not cands:
            return
        _c, _t, i, j = max(cands)
        parts[i].pop(j)


def compose_tier(tier: int, blocks: list[BlockSource], raw: list[Message], state: Any,
                 needed_facts: list[str], doctrine: Any, rng: random.Random, count: CountTokens,
                 max_chars: int | None = None) -> SummaryOutcome:
    """A tier-2 (distil) or tier-3 (condense) summary of ``blocks`` (+ ``raw`` messages between them).

    ``max_chars``: the serving profile's ``compress.max_summary_length``; the digest's size
    target stays at half of it (chars / 8 tokens), as the tier-1 budget does."""
    target = doctrine.limits["tier_targets"][str(tier)]
    lo_per, hi_per = int(target["min_tokens_per_source"]), int(target["max_tokens_per_source"])
    k = max(1, len(blocks))
    hi_total = k * hi_per
    aim_per = (lo_per + hi_per) // 2 if tier == 2 else int(0.75 * hi_per)
    bullet = ph.BULLET
    parts: list[list[str]] = []
    headers = source_headers(blocks, count)
    source_tokens = sum(count(b.summary) for b in blocks) + sum(count(m.text) for m in raw)
    # The checker also wants a 2x fold once the sources reach 1000 tokens: share that out.
    total_max = hi_total if source_tokens < 1000 else min(hi_total, int(source_tokens / 2.1))
    if max_chars is not None:
        total_max = min(total_max, max(k * lo_per + 1, int(max_chars) // 8))
    per = max(lo_per + 3, min(aim_per, int(total_max / (k + 0.5))))
    seen: set[str] = set()  # bullet shapes already used, across sources
    merged = merge_sources(blocks, tier)
    for i, b in enumerate(blocks):
        if tier == 2:
            parts.append(_tier2_part(b, merged.bullets[i], bullet, lo_per + 3, per, count, i, seen, headers[i]))
        else:
            parts.append(_tier3_part(b, merged.bullets[i], bullet, min(aim_per, per), count, headers[i]))
        # What later work replaced is said where the replacement lives (tier 2 marks the
        # old line, tier 3 drops it and leaves this one line).
        parts[-1] += [bullet + note for note in merged.notes.get(i, [])]
    if raw:
        refs = [state.by_raw.get(m.id, m.id) for m in raw]
        parts.append([f"Also folded: {refs[0]}–{refs[-1]} ({len(raw)} msgs between the source blocks)"])
    _fit(parts, total_max, lo_per, len(blocks), count, set())
    text = "\n".join("\n".join(p) for p in parts)
    src = [{"id": b.block_id, "role": "assistant", "content_type": "text", "text": b.summary} for b in blocks]
    src += source_dicts(raw, state)
    src_text = "\n".join(d["text"] for d in src)

    def check(t: str) -> Any:
        return check_summary(src, t, tier=tier, doctrine=doctrine, count_tokens=count)

    def fits(t: str) -> bool:  # the kernel refuses a summary over its limit, whatever its tokens
        return max_chars is None or len(t.strip()) <= int(0.95 * int(max_chars))

    while not fits(text) and total_max > k * lo_per + 1:
        total_max = max(k * lo_per + 1, int(total_max * 0.85))
        _fit(parts, total_max, lo_per, len(blocks), count, set())
        text = "\n".join("\n".join(p) for p in parts)
    while not fits(text) and _squeeze(parts, len(blocks)):
        text = "\n".join("\n".join(p) for p in parts)
    rep = check(text)
    repaired = False
    if not rep.passed:
        # Repair: add missed items while the size target allows.
        repaired = True
        add = [m for name, cr in rep.classes.items() if name != "message_refs" for m in cr.missed]
        keep: set[str] = set()
        for miss in add:
            if discloses(miss, src_text) or any(norm(miss) in norm(x) for p in parts for x in p):
                continue
            line = miss if any(miss in m.text for m in raw) else _line_holding(miss, blocks, merged)
            if line == miss and _PATH_LINE.fullmatch(" ".join(miss.split())):
                # A bare location says nothing: the raw line that holds it, if there is one.
                line = next((ln.strip() for m in raw for ln in m.text.splitlines()
                             if miss in ln and ln.strip() != miss), None)
            if line is None:  # only a header figure (8x, 2.4K) or a superseded value holds it
                continue
            # A bullet that is this line clipped (its tail, with the item, cut off) becomes the
            # whole line in place: appending it would say the step twice.
            at = next(((i, j) for i, p in enumerate(parts) for j, x in enumerate(p) if j and x.startswith(bullet)
                       and _clipped_from(x[len(bullet):], line)), None)
            if at is not None:
                parts[at[0]][at[1]] = bullet + line
            else:
                parts[-1].append(bullet + line)
            keep.add(bullet + line)
        _fit(parts, total_max, lo_per, len(blocks), count, keep)
        text = "\n".join("\n".join(p) for p in parts)
        # The added lines may push the digest over the kernel's char limit: shrink the rest again.
        while not fits(text) and total_max > k * lo_per + 1:
            total_max = max(k * lo_per + 1, int(total_max * 0.85))
            _fit(parts, total_max, lo_per, len(blocks), count, keep)
            text = "\n".join("\n".join(p) for p in parts)
        while not fits(text) and _squeeze(parts, len(blocks)):
            text = "\n".join("\n".join(p) for p in parts)
        rep = check(text)
    if rep.passed:
        # Details the next steps still need stay verbatim when the tier's size allows it;
        # one that does not fit is left to a later restore (the block keeps its sources).
        added: set[str] = set()
        for fact in needed_facts:
            flat = " ".join(fact.split())
            if _PATH_LINE.fullmatch(flat):  # a bare location says nothing: the line that holds it
                held = _line_holding(flat, blocks, merged)
                if held is None or held == flat:
                    continue
                flat = held
            line = bullet + flat
            if norm(fact) in norm(text):
                continue
            # A line added for an earlier fact that this one holds whole (the bare error string,
            # then the failing step's line quoting it at its location) would say it twice.
            lines = [x for x in text.split("\n") if not (x in added and norm(x[len(bullet):]) in norm(flat))]
            cand = "\n".join(lines + [line])
            rc = check(cand)
            if rc.passed and fits(cand):
                text, rep = cand, rc
                added.add(line)
    missed = [m for cr in rep.classes.values() for m in cr.missed]
    # A digest the kernel would refuse is no label (it says why, as a failed check would).
    ok = bool(rep.passed) and fits(text)
    if rep.passed and not ok:
        rep.reasons.append(f"digest has {len(text.strip())} chars, over 95% of the kernel's {max_chars}")
    return SummaryOutcome(text, ok, rep, repaired=repaired, tier=tier, missed=missed)

