"""label_decision: the doctrine as a labeling function over one decision point.

Rules, in the order they are tried (thresholds are ``LabelConfig`` fields):

1. an unfinished recovery (the point follows a search/decompress result): decompress the
   block the search named, or answer with the exact restored detail;
2. a shown nudge of tier 2/3 -> ``tier2``/``tier3``: one block-boundary compress
   ``bFirst..bLast`` over the nudge's target blocks, ``Source:`` headers per block;
3. a shown emergency nudge -> ``emergency``: consumed pieces, tool-heavy and large first,
   until the context would drop to ``emergency_target_share`` of the window; pieces that
   hold needed messages only if that is not enough (their needed facts kept verbatim);
4. a shown gentle nudge -> ``nudged_compress`` over the nudge's ranges minus every unit
   still needed within the horizon (ranges split around them; pieces under
   ``min_piece_tokens`` dropped; the call must reach the kernel's ``minCompressRange``), or
   ``refusal`` when nothing is left because of needed messages;
5. the current step (plus ``recovery_lookahead`` steps) uses a fact whose text is not in
   the visible context but whose message some block covers -> ``recovery``. Tool choice:
   when a covering block id (or, on the Pi host, the fact message's own ref) is visible,
   ``decompress`` it (3 times in 4, seeded; else search); otherwise ``search_context``
   with the first query (the fact text if short, else its longest distinctive words)
   whose simulated top hit lies in a covering block;
6. no nudge and consumed compressible content >= the spontaneous threshold ->
   ``spontaneous_compress``;
7. otherwise ``ordinary``: the session's own next assistant message.

A point that cannot be labelled correctly (a summary that fails the checker after repair,
a call the kernel would reject, a detail no tool can reach) raises :class:`LabelSkipped`
with a reason; the replay counts it and emits nothing for that point.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from doctrine.conform.patterns import content_words
from doctrine.kernel.compress import apply_compression
from doctrine.kernel.decompress import PI_MESSAGE_INLINE_MAX
from doctrine.kernel.refs import ref_index
from doctrine.kernel.search import build_message_docs, search_active_blocks, search_context
from plumbing.tokens import js_len

from . import actions
from . import phrasing as ph
from .config import LabelConfig
from .needed import Hindsight, facts_of, hindsight, session_index_of
from .point import DecisionPoint
from .ranges import Piece, cut_pieces, kernel_blocked_ids, on_visible_refs, total_chars, viable
from .summaries import compose_tier1
from .tiers import BlockSource, compose_tier

LABELER_ID = "doctrine-labeler"
LABELER_VERSION = "1.2.0"  # 1.2: the checker keeps the printed values prose restates, drops those read in passing, refuses altered changes and pending steps claimed done; 1.1: a step's result is what its output bears out (no filler or note as a result); repaired tier-1 labels; tier-2 headers shortened to fit
KINDS = ("nudged_compress", "refusal", "spontaneous_compress", "tier2", "tier3", "emergency", "recovery",
         "ordinary")
_PLACEHOLDER = "placeholder summary used only to ask the kernel which messages a range would fold"


class LabelSkipped(Exception):
    """No correct label exists for this point; ``reason`` is a short counter key."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


@dataclass
class Label:
    """One labelled decision: the target assistant message and why."""

    kind: str
    message: dict[str, Any]
    reason: str
    ranges: list[dict[str, Any]] = field(default_factory=list)
    conformance: dict[str, Any] | None = None
    labeler: str = LABELER_ID
    labeler_version: str = LABELER_VERSION
    doctrine_version: str = ""
    doctrine_sha256: str = ""
    action: dict[str, Any] = field(default_factory=lambda: {"type": "session"})
    facts: list[str] = field(default_factory=list)
    declined: bool = False  # the target declines a shown nudge in one line

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------------- entry point
def label_decision(point: DecisionPoint, *, doctrine: Any, horizon: int, seed: int,
                   config: LabelConfig | None = None) -> Label:
    """Label ``point`` under ``doctrine`` with hindsight over ``horizon`` later steps.

    Deterministic: the same point, doctrine, horizon, seed and config give the same label.
    Raises :class:`LabelSkipped` when no correct label can be made.
    """
    cfg = config or LabelConfig()
    rng = ph.rng_for(seed, point.session.session_id, point.step, point.action_index,
                     point.recovery.tool if point.recovery else "")
    hs = hindsight(point.session, point.step, horizon)
    shown = point.nudge_shown
    urgent = shown and point.nudge.voice == "emergency"
    tiered = shown and point.nudge.tier in (2, 3)
    lab = None
    if urgent:  # an urgent nudge comes before everything else, a recovery in progress included
        lab = _tier(point, hs, doctrine, rng, cfg) if tiered else _emergency(point, hs, doctrine, rng, cfg)
        if lab is None:
            # Urgent but nothing the kernel would accept: no lesson to teach here (declining
            # would contradict "urgent first"; folding is impossible).
            raise LabelSkipped("urgent_nothing_foldable", "urgent nudge, no range the model can fold")
    if lab is None and point.recovery is not None:
        lab = _recovery_followup(point, cfg, rng)
    elif lab is None and tiered and not urgent:
        lab = _tier(point, hs, doctrine, rng, cfg)
    elif lab is None and shown and not urgent:
        lab = _nudged(point, hs, doctrine, rng, cfg)
    if lab is None:
        why = ("nudge shown but nothing in its ranges can be folded" if shown
               else "no nudge, nothing consumed worth folding")
        lab = (_recovery_call(point, cfg, rng) or (None if shown else _spontaneous(point, hs, doctrine, rng, cfg))
               or _ordinary(point, why + "; every detail the step quotes is in view"))
    if shown and lab.action.get("type") != "compress" and lab.kind != "refusal":
        lab = _declined(point, lab, rng)
    lab.doctrine_version = str(getattr(doctrine, "version", ""))
    lab.doctrine_sha256 = str(getattr(doctrine, "sha256", ""))
    return lab


# One-line declines for a nudge the label does not act on: never silence (doctrine: decline
# in one line, continue the task). Keyed by why the nudge is not acted on.
DECLINES = ph.DECLINES


def _declined(point: DecisionPoint, lab: Label, rng: Any) -> Label:
    """``lab`` with a one-line decline of the shown nudge in front of its text; an ordinary
    turn after a nudge becomes a refusal (the same lesson as declining mid-step)."""
    why = "recovery" if lab.kind == "recovery" else ("tier" if point.nudge.tier in (2, 3) else "nothing")
    line = rng.choice(DECLINES[why])
    msg = actions.with_prefix(lab.message, line)
    kind = "refusal" if lab.kind == "ordinary" else lab.kind
    out = Label(kind, msg, f"{lab.reason}; nudge declined in one line", ranges=lab.ranges,
                conformance=lab.conformance, action=lab.action, facts=lab.facts, declined=True)
    return out


def _ordinary(point: DecisionPoint, reason: str) -> Label:
    _guard_invisible(point, point.next_message)
    return Label("ordinary", actions.session_message(point.next_message), reason)


def _guard_invisible(point: DecisionPoint, msg: dict[str, Any]) -> None:
    """Refuse to teach quoting a detail the model cannot see and no tool can bring back.

    (A detail folded into a block is a recovery; one cut by emergency truncation, say, is
    gone from view: copying the session's turn would teach recall from nowhere.)
    """
    from .needed import message_strings

    texts = [msg.get("content") or ""]
    for c in msg.get("tool_calls") or []:
        texts += message_strings((c.get("function") or {}).get("arguments") or "", True)
    body = "\n".join(texts)
    for f in point.session.facts:
        if f.message < point.visible and f.text in body and f.text not in point.visible_text:
            raise LabelSkipped("detail_invisible", f"{f.id} is quoted by the next turn but not in view")


# ---------------------------------------------------------------------- compress helpers
def _pieces(point: DecisionPoint, ranges: list[Any], hs: Hindsight, cfg: LabelConfig, *,
            allow_needed: bool = False, min_tokens: int | None = None) -> list[Piece]:
    """Compress ranges the label may emit, oldest first: a nudge range as the nudge prints
    it wherever the kernel folds it cleanly, else the range cut around what must stay and
    narrowed to boundaries the model can see (a tagged ref or one the nudge prints)."""
    whole, rest = [], []
    for r in ranges:
        p = _as_printed(point, r, hs, allow_needed)
        (whole.append(p) if p is not None else rest.append(r))
    ps = cut_pieces(rest, point.kernel_view, point.state, point.kconfig, point.count_tokens, point.units,
                    hs.needed_messages, allow_needed=allow_needed, flat=point.flat)
    ps = on_visible_refs(ps, point.kernel_view, point.visible_refs, point.units, point.state, point.count_tokens)
    floor = cfg.min_piece_tokens if min_tokens is None else min_tokens
    return sorted(viable(whole + ps, floor), key=lambda p: p.refs[0])


def _blocked(point: DecisionPoint) -> set[str]:
    k = "_label_blocked"
    if k not in point.__dict__:
        v, f, st, kc, c = point.kernel_view, point.flat, point.state, point.kconfig, point.count_tokens
        point.__dict__[k] = kernel_blocked_ids(v, st, kc, c) | kernel_blocked_ids(f, st, kc, c)
    return point.__dict__[k]


def _probe_config(point: DecisionPoint) -> Any:
    import dataclasses

    k = point.kconfig
    return dataclasses.replace(k, compress=dataclasses.replace(k.compress, min_compress_range=0))


def _as_printed(point: DecisionPoint, r: Any, hs: Hindsight, allow_needed: bool) -> Piece | None:
    """``r`` as one piece with the nudge's own boundaries, if the kernel folds it without a
    message the label must keep (the task, a needed unit, a compress call)."""
    if r.start_ref not in point.visible_refs or r.end_ref not in point.visible_refs:
        return None
    lo, hi = ref_index(r.start_ref), ref_index(r.end_ref)
    span = [m.id for m in point.kernel_view
            if ref_index(point.state.by_raw.get(m.id) or "") is not None
            and lo <= ref_index(point.state.by_raw[m.id]) <= hi]
    if set(span) & _blocked(point):  # a protected or recent message inside: cut it instead
        return None
    res = apply_compression([{"startId": r.start_ref, "endId": r.end_ref, "summary": _PLACEHOLDER}],
                            point.compress_messages, point.state, _probe_config(point),
                            count_tokens=point.count_tokens, clock_ms=lambda: 0)
    if res.errors or len(res.new_block_ids) != 1:
        return None
    block = res.state.block(res.new_block_ids[0])
    if block.direct_block_ids:
        return None  # it would re-fold a block: a tier nudge's business
    ids = list(block.direct_message_ids)
    view_ids = {m.id for m in point.kernel_view}
    first_user = next((m.id for m in point.kernel_view if m.role == "user" and not m.id.startswith("acp_")), None)
    needed = any(session_index_of(i) in hs.needed_messages for i in ids)
    if not ids or first_user in ids or any(i not in view_ids for i in ids) or (needed and not allow_needed):
        return None
    p = Piece(r.start_ref, r.end_ref, needed=needed)
    for i in ids:
        m = point.by_id[i]
        t = point.count_tokens(m.text)
        p.ids.append(i)
        p.refs.append(point.state.by_raw[i])
        p.tokens += t
        p.chars += js_len(m.text)
        if m.is_tool:
            p.tool_tokens += t
    return p


# File names a topic can be named after: source, config, build and infrastructure files of
# the common toolchains (and Makefile-like names without an extension).
_TOPIC_FILE = re.compile(
    r"[\w./-]+\.(?:py|pyi|ts|tsx|js|jsx|mjs|cjs|json|toml|yaml|yml|md|rst|cfg|ini|conf|env|txt|lock|log|go|mod|"
    r"rs|java|kt|kts|scala|gradle|rb|php|c|h|cc|cpp|hpp|cs|swift|sql|tf|tfvars|hcl|sh|xml|html|css|scss|vue|proto|"
    r"properties|service|timer)\b|(?<![\w.-])(?:[\w./-]+/)?(?:Makefile|Dockerfile|Gemfile|Rakefile|Jenkinsfile)\b")


def _topic(msgs: list[Any]) -> str:
    names: list[str] = []
    for m in msgs:
        if m.content_type == "tool-call":
            for p in _TOPIC_FILE.findall(m.text):
                base = p.rsplit("/", 1)[-1]
                if base not in names:
                    names.append(base)
    if names:
        return "work on " + ", ".join(names[:2])
    cmds: list[str] = []
    for m in msgs:
        if m.content_type == "tool-call":
            mt = re.search(r'"command":\s*"([^"]{1,200})', m.text)
            if mt:
                words = [w for w in re.split(r"[\s&|;]+", mt.group(1)) if w and not w.startswith(("-", "/", "cd"))]
                if words:
                    c = " ".join(words[:2])
                    if c not in cmds:
                        cmds.append(c)
    if cmds:
        return "ran " + ", ".join(cmds[:2])
    tools = sorted({m.tool_name for m in msgs if m.tool_name})
    return (" and ".join(tools[:2]) + " output") if tools else "earlier discussion"


def _facts_in_range(session: Any, idx: set[int], msgs: list[Any]) -> list[Any]:
    """The session's facts a range holds: those it introduces, then earlier ones one of its
    messages quotes again (an agent's note "Noting for later: torbrar v2.35.4"). The checker
    reads every exact value in the range's text, wherever the fact was first said."""
    own = facts_of(session, idx)
    text = "\n".join(" ".join(m.text.split()) for m in msgs)
    quoted = [f for f in session.facts if f not in own and f.message < min(idx, default=0)
              and " ".join(f.text.split()) and " ".join(f.text.split()) in text]
    return own + quoted


def _compress(kind: str, point: DecisionPoint, pieces: list[Piece], hs: Hindsight, doctrine: Any, rng: Any,
              cfg: LabelConfig, reason: str, leads: tuple[str, ...]) -> Label:
    pieces = sorted(pieces, key=lambda p: p.refs[0])
    needed_ids = {f.id for f in hs.needed_facts}
    ranges, confs, failed = [], [], 0
    for p in pieces:
        msgs = [point.by_id[i] for i in p.ids]
        idx = {session_index_of(i) for i in p.ids} - {None}
        facts = [(f.text, f.kind, f.id in needed_ids) for f in _facts_in_range(point.session, idx, msgs)]
        out = compose_tier1(msgs, point.state, facts, doctrine, rng, point.count_tokens, cfg,
                           max_chars=point.kconfig.compress.max_summary_length)
        if not out.passed:
            failed += 1
            continue
        ranges.append({"startId": p.start_ref, "endId": p.end_ref, "summary": out.text, "topic": _topic(msgs),
                       "chars": p.chars, "tokens": p.tokens, "needed": p.needed})
        confs.append(out.conformance())
    if not ranges:
        raise LabelSkipped("summary_failed", f"{failed} range(s) failed the checker after repair")
    if sum(r["chars"] for r in ranges) < point.kconfig.compress.min_compress_range:
        raise LabelSkipped("summary_failed", "the ranges that passed are under minCompressRange")
    topic = ranges[0]["topic"] if len(ranges) == 1 else f"{ranges[0]['topic']} and more"
    args = actions.compress_args(topic, ranges)
    res = _dry_run(point, actions.host_ranges(args))
    folded = {i for b in res.new_block_ids for i in res.state.block(b).direct_message_ids}
    meant = {i for p in pieces for i in p.ids if any(r["startId"] == p.start_ref for r in ranges)}
    if folded != meant:  # the summary must describe exactly what the kernel folds
        raise LabelSkipped("range_mismatch", f"kernel folds {len(folded)} messages, the label meant {len(meant)}")
    call_id = f"call_acp_{point.step:03d}_{point.action_index}"
    lead = rng.choice(leads).format(topic=ranges[0]["topic"], n=len(ranges))
    msg = actions.call_message(lead, call_id, "compress", args)
    conf = {"score": min(c["score"] for c in confs), "passed": True, "ranges": confs,
            "failed_ranges": failed}
    return Label(kind, msg, reason, ranges=[{k: r[k] for k in ("startId", "endId", "tokens", "needed")} | {"tier": 1}
                                            for r in ranges],
                 conformance=conf, action={"type": "compress", "call_id": call_id, "args": args})


def _dry_run(point: DecisionPoint, content: list[Any]) -> Any:
    res = apply_compression(content, point.compress_messages, point.state, point.kconfig,
                            count_tokens=point.count_tokens,
                            clock_ms=lambda: 0)
    if res.blocks_created == 0 or res.errors:
        raise LabelSkipped("kernel_rejected", "; ".join(res.errors or res.warnings))
    return res


# ---------------------------------------------------------------------- nudged / refusal
def _nudged(point: DecisionPoint, hs: Hindsight, doctrine: Any, rng: Any, cfg: LabelConfig) -> Label | None:
    ranges = point.nudge.compressible_ranges
    free = _pieces(point, ranges, hs, cfg)
    if free and total_chars(free) >= point.kconfig.compress.min_compress_range:
        return _compress("nudged_compress", point, free, hs, doctrine, rng, cfg,
                         "gentle nudge; consumed ranges (needed units left out)", ph.COMPRESS_LEADS)
    held = _pieces(point, ranges, hs, cfg, allow_needed=True)
    in_use = [p for p in held if p.needed]
    if not in_use:
        return None  # a nudge with nothing the kernel would accept: as if none were shown
    return _refusal(point, hs, in_use, rng)


def _refusal(point: DecisionPoint, hs: Hindsight, in_use: list[Piece], rng: Any) -> Label:
    idx = {session_index_of(i) for p in in_use for i in p.ids}
    facts = [f for f in hs.needed_facts if point.units and point.units[f.message] in
             {point.units[i] for i in idx if i is not None}]
    what = f"`{ph.short(facts[0].text, 60)}`" if facts else "the output I am working from"
    p = in_use[0]
    span = p.start_ref if p.start_ref == p.end_ref else f"{p.start_ref}–{p.end_ref}"
    line = rng.choice(ph.REFUSALS).format(span=span, what=what)
    _guard_invisible(point, point.next_message)
    return Label("refusal", actions.with_prefix(point.next_message, line),
                 "gentle nudge while the ranges are still needed within the horizon",
                 ranges=[{"startId": q.start_ref, "endId": q.end_ref, "tokens": q.tokens, "needed": True}
                         for q in in_use],
                 facts=[f.id for f in facts], declined=True)


# ---------------------------------------------------------------------- spontaneous
def _spontaneous(point: DecisionPoint, hs: Hindsight, doctrine: Any, rng: Any, cfg: LabelConfig) -> Label | None:
    free = _pieces(point, point.nudge.recommended_ranges, hs, cfg)
    consumed = sum(p.tokens for p in free)
    if consumed < cfg.spontaneous_threshold(point.window):
        return None
    if total_chars(free) < point.kconfig.compress.min_compress_range:
        return None
    return _compress("spontaneous_compress", point, free, hs, doctrine, rng, cfg,
                     f"no nudge; {consumed} consumed tokens at a step boundary", ph.SPONTANEOUS_LEADS)


# ---------------------------------------------------------------------- emergency
def _emergency(point: DecisionPoint, hs: Hindsight, doctrine: Any, rng: Any, cfg: LabelConfig) -> Label | None:
    # Aim at the target share of the window, but never below the fixed prompt (system and
    # tool schemas) plus a step's worth of room: in a small window the share alone can lie
    # under what no fold can free, and every range would be asked for.
    aim = max(cfg.emergency_target_share * point.window, point.fixed_tokens + cfg.min_piece_tokens)
    need_free = point.token_count - aim
    ranges = point.nudge.recommended_ranges
    order = lambda p: (-round(p.tool_share, 2), -p.tokens, p.refs[0])  # noqa: E731

    def pick(cands: list[Piece]) -> list[Piece]:
        chosen, freed = [], 0
        for p in sorted(cands, key=order):
            chosen.append(p)
            freed += p.tokens
            if freed >= need_free and total_chars(chosen) >= point.kconfig.compress.min_compress_range:
                break
        return chosen

    floor = cfg.emergency_min_piece_tokens
    free = _pieces(point, ranges, hs, cfg, min_tokens=floor)
    chosen = pick(free)
    reason = "emergency voice; consumed tool output first"
    if sum(p.tokens for p in chosen) < need_free or total_chars(chosen) < point.kconfig.compress.min_compress_range:
        wide = _pieces(point, ranges, hs, cfg, allow_needed=True, min_tokens=floor)
        if sum(p.tokens for p in wide) > sum(p.tokens for p in chosen):
            chosen = pick(wide)
            reason = "emergency voice; consumed output was not enough, needed ranges folded with their facts verbatim"
    if not chosen or total_chars(chosen) < point.kconfig.compress.min_compress_range:
        return None  # emergency voice but nothing compressible: recovery or the task goes on
    return _compress("emergency", point, chosen, hs, doctrine, rng, cfg, reason, ph.EMERGENCY_LEADS)


# ---------------------------------------------------------------------- tiers
def _tier_digest(point: DecisionPoint, hs: Hindsight, doctrine: Any, rng: Any, tier: int, first: str,
                 last: str) -> tuple[Any, list[BlockSource]] | None:
    """The digest of blocks ``first``..``last`` (and raw messages between them), or None."""
    try:
        probe = _dry_run(point, [{"startId": first, "endId": last, "summary": _PLACEHOLDER}])
    except LabelSkipped:
        return None  # the kernel would not fold this run of blocks
    if not probe.new_block_ids or probe.warnings:
        return None  # nothing folded, or a message inside it left out (recent, protected)
    new = probe.state.block(probe.new_block_ids[0])
    srcs = [point.state.block(b) for b in new.direct_block_ids]
    blocks = [BlockSource(b.block_id, b.tier, b.summary, b.topic, b.compressed_tokens, len(b.effective_message_ids))
              for b in srcs if b]
    if len(blocks) < 2:
        return None
    raw = [point.by_id[i] for i in new.direct_message_ids if i in point.by_id]
    texts = [b.summary for b in blocks] + [m.text for m in raw]
    needed = [f.text for f in hs.needed_facts if any(f.text in t for t in texts)]
    out = compose_tier(tier, blocks, raw, point.state, needed, doctrine, rng, point.count_tokens,
                       max_chars=point.kconfig.compress.max_summary_length)
    return out, blocks


def _tier(point: DecisionPoint, hs: Hindsight, doctrine: Any, rng: Any, cfg: LabelConfig) -> Label | None:
    tier = int(point.nudge.tier)
    targets = [t.block_id for t in point.nudge.tier_target_blocks]
    order = [b.block_id for b in point.state.blocks if b.block_id in targets]
    if len(order) < 2:
        return None  # a digest folds at least two blocks: decline, then recovery / ordinary
    # Every target block at once first; when that tier-2 digest is too long for the kernel
    # (a small window), the longest run of adjacent targets whose digest passes, oldest first.
    spans = [(i, j) for n in range(len(order), 1, -1) for i in range(len(order) - n + 1) for j in [i + n - 1]]
    if tier == 3:
        spans = spans[:1]  # a condense folds what the nudge lists, whole
    reasons: list[str] = []
    found: tuple[Any, list[BlockSource], str, str] | None = None
    limit = 0.95 * point.kconfig.compress.max_summary_length
    for i, j in spans:
        made = _tier_digest(point, hs, doctrine, rng, tier, order[i], order[j])
        if made is None:
            continue
        out, blocks = made
        if out.passed:
            found = (out, blocks, order[i], order[j])
            break
        reasons = reasons or out.report.reasons[:2]
        if (i, j) == spans[0] and len(out.text.strip()) <= limit:
            break  # the whole run failed on content, not on the kernel's size limit: no label
    if found is None:
        if not reasons:
            return None
        raise LabelSkipped("summary_failed", f"tier-{tier}: " + "; ".join(reasons))
    out, blocks, first, last = found
    topic = f"tier-{tier} digest of {first}..{last}"
    args = actions.compress_args(topic, [{"startId": first, "endId": last, "summary": out.text, "topic": topic}])
    _dry_run(point, actions.host_ranges(args))
    call_id = f"call_acp_{point.step:03d}_{point.action_index}"
    msg = actions.call_message(rng.choice(ph.TIER_LEADS), call_id, "compress", args)
    kind = "tier2" if tier == 2 else "tier3"
    return Label(kind, msg, f"tier-{tier} nudge over {len(blocks)} block(s)",
                 ranges=[{"startId": first, "endId": last, "tier": tier, "sources": [b.block_id for b in blocks]}],
                 conformance={"score": out.report.score, "passed": True, "ranges": [out.conformance()]},
                 action={"type": "compress", "call_id": call_id, "args": args})


# ---------------------------------------------------------------------- recovery
def _lost_facts(point: DecisionPoint, cfg: LabelConfig) -> list[tuple[Any, list[Any]]]:
    """Facts the next step(s) use that are invisible but covered by some block."""
    s = point.step
    want = []
    for st in point.session.steps[s:s + cfg.recovery_lookahead + 1]:
        for fid in st.uses:
            if fid not in want:
                want.append(fid)
    by_id = {f.id: f for f in point.session.facts}
    out = []
    for fid in want:
        f = by_id.get(fid)
        if f is None or f.message >= point.visible or f.text in point.visible_text:
            continue
        cover = [b for b in point.state.blocks
                 if any(session_index_of(x) == f.message for x in b.effective_message_ids)]
        if cover:
            out.append((f, cover))
    return out


def counter_recovery(point: DecisionPoint, cfg: LabelConfig | None = None) -> str | None:
    """Why a point whose step uses an earlier detail needs no recovery, or None.

    ``"in_view"``: every detail the step uses is in a message still shown raw;
    ``"in_summary"``: at least one sits in a folded message, but a summary in view quotes it
    (the summary's level of detail is enough). None when the step uses no earlier detail or
    one is lost from view (a recovery point). The eval asks these as counter-lessons."""
    cfg = cfg or LabelConfig()
    by_id = {f.id: f for f in point.session.facts}
    used = [by_id[fid] for st in point.session.steps[point.step:point.step + cfg.recovery_lookahead + 1]
            for fid in st.uses if fid in by_id]
    used = [f for f in used if f.message < point.visible]
    if not used or any(f.text not in point.visible_text for f in used):
        return None
    folded = {session_index_of(x) for b in point.state.blocks for x in b.effective_message_ids}
    return "in_summary" if any(f.message in folded for f in used) else "in_view"


def _fact_message(point: DecisionPoint, f: Any) -> Any:
    cands = [m for m in point.flat if session_index_of(m.id) == f.message]
    for m in cands:
        if f.text in m.text or any(f.text in x for x in _strings(m)):
            return m
    return cands[0] if cands else None


def _strings(m: Any) -> list[str]:
    from .needed import message_strings

    return message_strings(m.text, m.content_type == "tool-call")


def _queries(text: str) -> list[str]:
    out = []
    if len(text) <= 60:
        out.append(text)
    words = sorted(dict.fromkeys(content_words(text)), key=lambda w: (-len(w), w))
    for n in (3, 2, 4, 1):
        if len(words) >= n:
            q = " ".join(words[:n])
            if q not in out:
                out.append(q)
    return out


def _call_queries(point: DecisionPoint, m: Any) -> list[str]:
    """Queries from the call that produced the fact's message (its command or path).

    A summary that dropped the exact detail still names the step that showed it ("Ran
    `cat app.env`"), so a search for that step finds the block when the detail's own words
    cannot: the way to reach a detail no summary quotes."""
    if m is None or m.content_type == "tool-call" or not m.tool_call_id:
        return []
    out: list[str] = []
    for c in point.flat:
        if c.content_type == "tool-call" and c.tool_call_id == m.tool_call_id:
            for text in _call_values(_strings(c)):
                # file names first (a topic names the files a block worked on), then its words
                names = [w for w in re.findall(r"[\w.-]+", text) if "." in w.strip(".") and len(w) >= 5]
                out += [q for q in names + _queries(text) if q not in out]
    return out


def _call_values(texts: list[str]) -> list[str]:
    """The argument values of a call's strings (a JSON object's keys are no search words)."""
    import json

    out = []
    for t in texts:
        try:
            obj = json.loads(t)
        except ValueError:
            obj = None
        out += [v for v in obj.values() if isinstance(v, str)] if isinstance(obj, dict) else [t]
    return out


def search_result(point: DecisionPoint, query: str, cfg: LabelConfig) -> tuple[str, str | None]:
    """(result text, block id of the top hit) for ``query`` under the configured host."""
    from doctrine.kernel.search import render_search_result

    st = point.state
    if cfg.tools_host == "proxy":
        found = search_active_blocks(query, st, limit=5)
        return render_search_result(found, query, len(st.blocks), style="proxy"), (found[0].block_id if found else None)
    docs = build_message_docs(point.flat, st, only_folded=True, count_tokens=point.count_tokens)
    res = search_context(query, st, docs)
    top = None
    if res:
        top = res[0].ref if res[0].kind == "block" else res[0].block_id
    return render_search_result(res, query, len(st.blocks), len(docs), style="pi"), top


def _recovery_call(point: DecisionPoint, cfg: LabelConfig, rng: Any) -> Label | None:
    lost = _lost_facts(point, cfg)
    if not lost:
        return None
    f, cover = lost[0]
    cover_ids = [b.block_id for b in cover]
    visible_blocks = [b for b in cover if re.search(rf"(?<![\w]){b.block_id}(?![\w])", point.visible_text)]
    m = _fact_message(point, f)
    ref = point.state.by_raw.get(m.id) if m is not None else None
    ref_visible = (cfg.tools_host == "pi" and ref is not None and ref in point.visible_text
                   and m is not None and len(m.text) < PI_MESSAGE_INLINE_MAX)
    call_id = f"call_acp_{point.step:03d}_{point.action_index}"
    rec = {"fact_ids": [f.id], "blocks": cover_ids}
    if (ref_visible or visible_blocks) and rng.random() < 0.75:
        target = ref if ref_visible else min(visible_blocks, key=lambda b: b.tier).block_id
        return _decompress_label(point, target, rec, rng, cfg, call_id, f"step {point.step} needs {f.id}, lost from view")
    for q in _queries(f.text) + _call_queries(point, m):
        text, top = search_result(point, q, cfg)
        if top in cover_ids:
            what = f.kind.replace("_", " ").rstrip("s").removeprefix("exact ")  # "exact {what}": not "exact exact value"
            lead = rng.choice(ph.SEARCH_LEADS).format(what=what)
            msg = actions.call_message(lead, call_id, "search_context", {"query": q})
            return Label("recovery", msg, f"step {point.step} needs {f.id}; only a block holds it",
                         action={"type": "tool", "name": "search_context", "call_id": call_id,
                                 "args": {"query": q}, "recovery": rec | {"hit_block": top}},
                         facts=[f.id], ranges=[{"block": top}])
    if visible_blocks or ref_visible:
        target = ref if ref_visible else min(visible_blocks, key=lambda b: b.tier).block_id
        return _decompress_label(point, target, rec, rng, cfg, call_id, f"step {point.step} needs {f.id}")
    raise LabelSkipped("recovery_unreachable", f"{f.id}: no query finds its block and no block id is visible")


def _decompress_label(point: DecisionPoint, target: str, rec: dict[str, Any], rng: Any, cfg: LabelConfig,
                      call_id: str, reason: str) -> Label:
    args: dict[str, Any] = {"blockId": target}
    if cfg.tools_host == "pi" and target.startswith("b"):
        args["inline"] = True
    lead = rng.choice(ph.DECOMPRESS_LEADS).format(target=target)
    msg = actions.call_message(lead, call_id, "decompress", args)
    return Label("recovery", msg, reason, action={"type": "tool", "name": "decompress", "call_id": call_id,
                                                  "args": args, "recovery": rec},
                 facts=list(rec["fact_ids"]), ranges=[{"block": target}])


def _recovery_followup(point: DecisionPoint, cfg: LabelConfig, rng: Any) -> Label:
    rec = point.recovery
    facts = [f for f in point.session.facts if f.id in rec.fact_ids]
    if facts and all(f.text in rec.result_text for f in facts):
        msg = point.next_message
        missing = [f for f in facts if f.text not in (msg.get("content") or "") and
                   f.text not in " ".join((c.get("function") or {}).get("arguments", "") for c in msg.get("tool_calls") or [])]
        where = rec.hit_block or (rec.blocks[0] if rec.blocks else "block")
        out = actions.session_message(msg)
        if missing:
            line = rng.choice(ph.RESTORED_PREFIX).format(where=where, quote=missing[0].text)
            out = actions.with_prefix(msg, line)
        return Label("recovery", out, f"answer with the restored detail of {', '.join(rec.fact_ids)}",
                     facts=list(rec.fact_ids), ranges=[{"block": where}])
    if rec.tool == "search_context" and rec.hit_block:
        call_id = f"call_acp_{point.step:03d}_{point.action_index}"
        return _decompress_label(point, rec.hit_block, {"fact_ids": rec.fact_ids, "blocks": rec.blocks}, rng, cfg,
                                 call_id, "search named the block; restore it for the exact detail")
    raise LabelSkipped("restore_missing", "the restored text does not hold the fact")
