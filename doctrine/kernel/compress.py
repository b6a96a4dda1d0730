"""Apply the model's compress call (spec §5.5 and the result texts of §6.1).

``apply_compression`` never raises for bad input: every problem becomes an error or a
warning string in the result. It follows acp-kernel v0.0.41's ``applyCompression`` step for
step (the differential suite in ``tests/doctrine/kernel/test_acp_parity.py`` checks it): a
call whose size gate fails returns the state as it came; any other call spends a run id,
even when no block was made.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from doctrine.kernel.config import KernelConfig
from doctrine.kernel.messages import Message
from doctrine.kernel.nudge import reset_after_compress
from doctrine.kernel.protection import COMPRESS_TOOL, is_message_protected
from doctrine.kernel.prune import first_index, is_rendered_summary
from doctrine.kernel.recommend import protected_zone_refs
from doctrine.kernel.refs import format_ref, parse_boundary
from doctrine.kernel.state import SUMMARY_ID_PREFIX, Block, CompressionState
from plumbing.tokens import CountTokens, js_len, js_trim, memo_counter

PAIR_SCAN = 20  # how far tool-pair widening looks on each side
WIDEN_PASSES = 2


@dataclass
class CompressRange:
    """One entry of a compress call."""

    start_ref: str
    end_ref: str
    summary: str
    topic: str | None = None
    compress_call_id: str | None = None
    summary_max_chars: int | None = None


@dataclass
class CompressResult:
    state: CompressionState
    blocks_created: int
    tokens_compressed: int
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    text: str = ""
    new_block_ids: list[str] = field(default_factory=list)


@dataclass
class _Resolved:
    """One range's boundaries resolved against the view (the reference's resolveBoundaries)."""

    kind: str  # "ok" | "consumed" | "unknown" | "invalid"
    start: int = -1
    end: int = -1
    boundary: str = "message"  # "message" | "block"
    reason: str = ""
    message_ids: list[str] = field(default_factory=list)
    nested: list[str] = field(default_factory=list)  # active blocks visible inside, state order
    snapped: list[str] = field(default_factory=list)


class _RangeFailure(Exception):
    pass


class _View:
    """Index helpers over the messages the host passed (a later duplicate id wins, as in a
    JS Map built by iteration)."""

    def __init__(self, messages: list[Message]):
        self.messages = messages
        self.index_of: dict[str, int] = {m.id: i for i, m in enumerate(messages)}
        self._first = first_index(messages)
        self._earliest: dict[str, int | None] = {}  # block id -> earliest raw index (lists never change)
        self._protected_calls: set[str] | None = None

    def first(self, mid: str) -> Message | None:
        """The first message with this id (``Array.find``)."""
        i = self._first.get(mid)
        return None if i is None else self.messages[i]

    def protected_calls(self, config: KernelConfig) -> set[str]:
        """Call ids of protected tool messages (computed once per compress call)."""
        if self._protected_calls is None:
            self._protected_calls = {m.tool_call_id for m in self.messages
                                     if m.tool_call_id and is_message_protected(m, config)}
        return self._protected_calls

    def earliest_of(self, b: Block) -> int | None:
        if b.block_id not in self._earliest:
            self._earliest[b.block_id] = self.earliest(b.effective_message_ids)
        return self._earliest[b.block_id]

    def earliest(self, ids: list[str]) -> int | None:
        best = None
        for x in ids:
            i = self.index_of.get(x)
            if i is not None and (best is None or i < best):
                best = i
        return best

    def anchor(self, b: Block) -> int | None:
        """A block's visible anchor: its summary message, else its earliest raw message."""
        i = self.index_of.get(SUMMARY_ID_PREFIX + b.block_id)
        return i if i is not None else self.earliest_of(b)

    def visible_in(self, b: Block, start: int, end: int) -> bool:
        """Any visible form of the block (summary or earliest raw) lies in [start, end]."""
        i = self.index_of.get(SUMMARY_ID_PREFIX + b.block_id)
        if i is not None and start <= i <= end:
            return True
        j = self.earliest_of(b)
        return j is not None and start <= j <= end


def _inherited(state: CompressionState, b: Block) -> set[str]:
    """What a block took over by consuming other blocks (its children's coverage)."""
    out: set[str] = set()
    for cid in b.direct_block_ids:
        child = state.block(cid)
        if child is not None:
            out.update(child.effective_message_ids)
    return out


def _owner_anchor(state: CompressionState, ids: list[str], view: _View) -> tuple[int, str] | None:
    """The earliest visible anchor of an active block that inherited one of ``ids``.

    Only inherited content snaps: a message the block compressed directly is reported as
    already compressed instead, so a retry names the block rather than duplicating it."""
    if not ids:
        return None
    owned = set(ids)
    best = None
    for b in state.blocks:
        if not b.active or not (owned & _inherited(state, b)):
            continue
        a = view.anchor(b)
        if a is not None and (best is None or a < best[0]):
            best = (a, b.block_id)
    return best


class _Unresolved(Exception):
    def __init__(self, kind: str, reason: str):
        super().__init__(reason)
        self.kind = kind


def _anchor_of(ref: str, view: _View, state: CompressionState, side: str) -> tuple[int, str | None]:
    """Index of one boundary and, when it was snapped to an owning block, a note."""
    kind, num = parse_boundary(ref)
    if kind == "message":
        raw = state.by_ref.get(ref.strip().lower()) or state.by_ref.get(format_ref(num))
        if not raw:
            raise _Unresolved("unknown", f"{side} {js_trim(ref)} was never assigned in this session")
        i = view.index_of.get(raw)
        if i is not None:
            return i, None
        owner = _owner_anchor(state, [raw], view)
        if owner is not None:
            return owner[0], f"{side} {js_trim(ref)} is already inside {owner[1]}; used {owner[1]} as the boundary"
        raise _Unresolved("consumed", f"{side} {js_trim(ref)} is no longer in context")
    bid = f"b{num}"
    b = state.block(bid)
    if b is None:
        raise _Unresolved("unknown", f"{side} block {bid} does not exist")
    if b.active:
        a = view.anchor(b)
        if a is not None:
            return a, None
    owner = _owner_anchor(state, b.effective_message_ids, view)
    if owner is not None:
        return owner[0], f"{side} {bid} was folded into {owner[1]}; used {owner[1]} as the boundary"
    if not b.active:
        raise _Unresolved("consumed", f"{side} block {bid} was already folded into another block")
    raise _Unresolved("consumed", f"{side} block {bid} is active but is not visible in context")


def _resolve(r: CompressRange, view: _View, state: CompressionState) -> _Resolved:
    start_p = parse_boundary(r.start_ref)
    end_p = parse_boundary(r.end_ref)
    if start_p[0] is None or end_p[0] is None:
        return _Resolved("invalid", reason=f"cannot parse ref(s) {str(r.start_ref).strip()!r}, "
                                           f"{str(r.end_ref).strip()!r} (expected mNNNNN or bN)")
    try:
        si, sn = _anchor_of(r.start_ref, view, state, "start")
        ei, en = _anchor_of(r.end_ref, view, state, "end")
    except _Unresolved as e:
        return _Resolved(e.kind, reason=str(e))
    if si > ei:
        si, ei = ei, si
    msgs = view.messages
    ids = [msgs[i].id for i in range(si, ei + 1) if not is_rendered_summary(msgs[i])]
    nested = [b.block_id for b in state.blocks if b.active and view.visible_in(b, si, ei)]
    boundary = "block" if "block" in (start_p[0], end_p[0]) else "message"
    return _Resolved("ok", si, ei, boundary, message_ids=ids, nested=nested,
                     snapped=[x for x in (sn, en) if x])


def _is_assistant_step(m: Message) -> bool:
    return m.role == "assistant" and m.content_type in ("text", "tool-call")


def _reasoning_pairs(start: int, end: int, msgs: list[Message]) -> tuple[int, int]:
    """Keep a reasoning run together with the assistant step that follows it."""
    n = len(msgs)
    new_start, new_end = start, end
    for i in range(start, min(end, n - 1) + 1):
        m = msgs[i]
        if m.content_type == "reasoning":
            j = i
            while j + 1 < n and msgs[j + 1].content_type == "reasoning":
                j += 1
            if j + 1 < n and _is_assistant_step(msgs[j + 1]) and j + 1 > new_end:
                new_end = j + 1
        if _is_assistant_step(m):
            k = i - 1
            while k >= 0 and msgs[k].content_type == "reasoning":
                k -= 1
            if k + 1 < i and k + 1 < new_start:
                new_start = k + 1
    return new_start, new_end


def _tool_pairs(start: int, end: int, msgs: list[Message]) -> tuple[int, int]:
    """Pull the other half of a tool call / result pair into the range (compress excepted)."""
    ids = {m.tool_call_id for m in msgs[start:end + 1] if m.tool_call_id and m.tool_name != COMPRESS_TOOL}
    if not ids:
        return start, end
    n = len(msgs)
    new_end = end
    for j in range(end + 1, min(n, end + 1 + PAIR_SCAN)):
        if msgs[j].tool_call_id and msgs[j].tool_call_id in ids:
            new_end = j
        elif new_end > end:
            break
    new_start = start
    for j in range(start - 1, max(-1, start - 1 - PAIR_SCAN), -1):
        if msgs[j].tool_call_id and msgs[j].tool_call_id in ids:
            new_start = j
        elif new_start < start:
            break
    return new_start, new_end


def _widen(start: int, end: int, msgs: list[Message]) -> tuple[int, int]:
    """Reasoning and tool-pair widening to a fixpoint (at most two passes)."""
    for _ in range(WIDEN_PASSES):
        s, e = _reasoning_pairs(start, end, msgs)
        s, e = _tool_pairs(s, e, msgs)
        changed = (s, e) != (start, end)
        start, end = s, e
        if not changed:
            break
    return start, end


def _drop_hard_protected(direct: list[str], view: _View, config: KernelConfig) -> list[str]:
    """``direct`` without protected tool messages and the results of protected calls."""
    calls = set(view.protected_calls(config))
    removed: set[str] = set()
    for x in direct:
        m = view.first(x)
        if m is not None and is_message_protected(m, config):
            removed.add(x)
            if m.tool_call_id:
                calls.add(m.tool_call_id)
    for x in direct:
        m = view.first(x)
        if (x not in removed and m is not None and m.content_type == "tool-result"
                and m.tool_call_id and m.tool_call_id in calls):
            removed.add(x)
    return [x for x in direct if x not in removed]


def _apply_single(r: CompressRange, view: _View, state: CompressionState, config: KernelConfig,
                  ctx: dict, count: CountTokens) -> tuple[Block, list[str]]:
    label = _label(r)
    warnings: list[str] = []
    res = _resolve(r, view, state)  # again: earlier ranges of this call changed the state
    if res.kind != "ok":
        raise _RangeFailure(f"range {label}: {res.reason}")
    msgs = view.messages
    range_ids = res.message_ids
    nested = list(res.nested)
    if res.boundary == "message":
        s, e = _widen(res.start, res.end, msgs)
        if (s, e) != (res.start, res.end):
            range_ids = [m.id for m in msgs[s:e + 1] if not m.id.startswith(SUMMARY_ID_PREFIX)]
            if len(range_ids) > len(res.message_ids):
                s2 = view.index_of.get(range_ids[0], res.start) if range_ids else res.start
                e2 = view.index_of.get(range_ids[-1], res.end) if range_ids else res.end
                seen = set(nested)
                for b in state.blocks:
                    if b.active and b.block_id not in seen and view.visible_in(b, s2, e2):
                        seen.add(b.block_id)
                        nested.append(b.block_id)
    is_block = res.boundary == "block"
    target = 1
    if is_block and nested:
        target = min((b.tier for b in map(state.block, nested) if b is not None), default=3)
    out_tier = min(3, target + 1) if is_block else 1
    consumed = [b for b in map(state.block, nested) if b is not None and b.active and b.tier == target]

    effective = _ordered_union(range_ids, *[b.effective_message_ids for b in consumed])
    direct = [x for x in effective if x not in ctx["covered"]]
    kept = _drop_hard_protected(direct, view, config)
    if len(kept) < len(direct):
        dropped = set(direct) - set(kept)
        effective = [x for x in effective if x not in dropped]
    zone: set[str] = ctx["zone"]
    hit = [x for x in kept if state.by_raw.get(x) in zone]
    if hit:
        hit_set = set(hit)
        kept = [x for x in kept if x not in hit_set]
        effective = [x for x in effective if x not in hit_set]
        refs = [state.by_raw[x] for x in hit]
        if not kept and not consumed:
            raise _RangeFailure(f"range {label}: entirely in the recent protected zone "
                                f"({', '.join(refs)}); compress older messages")
        warnings.append(f"range {label}: {', '.join(refs)} in the recent protected zone left uncompressed")
    if not is_block and not kept and consumed:
        ids = [b.block_id for b in consumed]
        raise _RangeFailure(f"range {label}: only already-compressed content; to fold blocks "
                            f"use block boundaries ({ids[0]}..{ids[-1]})")
    body = js_trim(r.summary) if isinstance(r.summary, str) else ""
    if not body:
        raise _RangeFailure(f"range {label}: summary is empty")
    n_chars = js_len(body)
    min_chars = config.compress.min_summary_length
    if min_chars > 0 and n_chars < min_chars:
        raise _RangeFailure(f"range {label}: summary too short ({n_chars} chars, min {min_chars})")
    max_chars = r.summary_max_chars
    if max_chars is None or isinstance(max_chars, bool) or not isinstance(max_chars, (int, float)):
        max_chars = config.compress.max_summary_length
    if max_chars > 0 and n_chars > max_chars:
        raise _RangeFailure(f"range {label}: summary too long ({n_chars} chars, max {max_chars})")
    if not kept and not consumed:
        raise _RangeFailure(f"range {label}: nothing left to compress in this range")

    tokens = sum(count(m.text if m is not None else "") for m in map(view.first, kept))
    tokens += sum(count(b.summary) for b in consumed)
    block = Block(
        block_id=f"b{state.next_block_id}",
        run_id=ctx["run_id"],
        tier=out_tier,
        summary=r.summary,
        direct_message_ids=kept,
        effective_message_ids=effective,
        direct_block_ids=[b.block_id for b in consumed],
        compressed_tokens=tokens,
        created_at=ctx["now_ms"],
        topic=r.topic,
        compress_call_id=r.compress_call_id or ctx["call_id"],
        start_ref=r.start_ref,
        end_ref=r.end_ref,
    )
    state.next_block_id = max(1, state.next_block_id) + 1
    state.blocks.append(block)
    for b in consumed:
        b.active = False
    return block, warnings


def _ordered_union(*lists: list[str]) -> list[str]:
    return list(dict.fromkeys(x for ids in lists for x in ids))


def _gate_error(resolved: list[_Resolved], state: CompressionState, total: int, n_ranges: int,
                minimum: int) -> str:
    n_ok = sum(1 for x in resolved if x.kind == "ok")
    n_unknown = sum(1 for x in resolved if x.kind == "unknown")
    consumed = [x for x in resolved if x.kind == "consumed"]
    if n_ok == 0 and not consumed and n_unknown:
        return (f"none of the {len(resolved)} requested range(s) resolved: their refs are not in "
                f"this session (refs change after each compress); run acp_status and reissue the call")
    if consumed:
        act = sorted((b.block_id for b in state.blocks if b.active), key=lambda s: int(s[1:]))
        span = f"{act[0]}..{act[-1]}" if act else "none active"
        return (f"some ranges were already compressed (active blocks {span}); what is left is "
                f"{total} chars, under the minimum {minimum}: use block refs to fold summaries, "
                f"or pick uncompressed messages")
    return (f"total compressible content too small ({total} chars across {n_ranges} range(s), "
            f"min {minimum})")


def apply_compression(ranges: list[CompressRange | dict], messages: list[Message], state: CompressionState,
                      config: KernelConfig, *, compress_call_id: str | None = None,
                      count_tokens: CountTokens | None = None,
                      clock_ms: Callable[[], int] | None = None) -> CompressResult:
    """Apply the model's ranges to ``state`` (not mutated) over the host's ``messages``."""
    ranges = [_as_range(r) for r in ranges]
    count = memo_counter(count_tokens)
    now_ms = clock_ms() if clock_ms else int(time.time() * 1000)
    work = state.copy()
    run_id = f"r{work.next_run_id}"
    work.next_run_id = max(1, work.next_run_id) + 1
    view = _View(messages)
    ctx = {
        "covered": work.covered_ids(),
        "zone": protected_zone_refs(messages, state, config, count),
        "run_id": run_id,
        "call_id": compress_call_id,
        "now_ms": now_ms,
    }
    errors: list[str] = []
    warnings: list[str] = []
    resolved = [_resolve(r, view, work) for r in ranges]
    unresolved_errors = [f"range {_label(r)}: {x.reason}" for r, x in zip(ranges, resolved, strict=True)
                         if x.kind in ("unknown", "invalid")]

    # Overlap: in start order the earliest range wins; a later one starting inside it is skipped.
    skipped: set[int] = set()
    max_end = -1
    for i in sorted((i for i, x in enumerate(resolved) if x.kind == "ok"), key=lambda i: resolved[i].start):
        if resolved[i].start <= max_end:
            skipped.add(i)
            warnings.append(f"range {_label(ranges[i])}: overlaps an earlier range; skipped")
            continue
        max_end = max(max_end, resolved[i].end)

    minimum = config.compress.min_compress_range
    if minimum > 0 and ranges:
        live = [x for i, x in enumerate(resolved) if x.kind == "ok" and i not in skipped]
        if not any(x.boundary == "block" for x in live):
            total = 0
            for x in live:
                for mid in x.message_ids:
                    m = view.first(mid)
                    total += js_len(m.text) if m is not None else 0
            if total < minimum:
                err = _gate_error(resolved, work, total, len(live), minimum)
                return _finish(state.copy(), [], [err, *unresolved_errors], [], 0)

    created: list[Block] = []
    for i, (r, res) in enumerate(zip(ranges, resolved, strict=True)):
        label = _label(r)
        if i in skipped:
            continue
        if res.kind == "consumed":
            warnings.append(f"range {label}: already compressed ({res.reason})")
            continue
        if res.kind in ("unknown", "invalid"):
            errors.append(f"range {label}: {res.reason}")
            continue
        warnings.extend(f"range {label}: {w}" for w in res.snapped)
        try:
            block, notes = _apply_single(r, view, work, config, ctx, count)
            created.append(block)
            warnings.extend(notes)
        except _RangeFailure as e:
            errors.append(str(e))
        except Exception as e:  # defensive: one broken range must not sink the others
            errors.append(f"range {label}: internal error: {type(e).__name__}: {e}")

    tokens = sum(b.compressed_tokens for b in created)
    work.stats.compression_count += len(created)
    work.stats.tokens_compressed += tokens
    if created:
        reset_after_compress(work)
    return _finish(work, created, errors, warnings, tokens)


def _as_range(r: CompressRange | dict) -> CompressRange:
    """Accept plain dicts (``startRef``/``startId``, ...); bad values fail later as errors."""
    if isinstance(r, CompressRange):
        return r
    if not isinstance(r, dict):
        return CompressRange("", "", "")
    mid = r.get("messageId")
    return CompressRange(r.get("startRef", r.get("startId", mid)), r.get("endRef", r.get("endId", mid)),
                         r.get("summary") if isinstance(r.get("summary"), str) else "",
                         r.get("topic") if isinstance(r.get("topic"), str) else None,
                         r.get("compressCallId"), r.get("summaryMaxChars"))


def _label(r: CompressRange) -> str:
    return f"{str(r.start_ref).strip()}..{str(r.end_ref).strip()}"


def _finish(state: CompressionState, created: list[Block], errors: list[str], warnings: list[str],
            tokens: int) -> CompressResult:
    return CompressResult(state=state, blocks_created=len(created), tokens_compressed=tokens,
                          errors=errors, warnings=warnings,
                          text=result_text(created, tokens, errors, warnings),
                          new_block_ids=[b.block_id for b in created])


def result_text(created: list[Block], tokens: int, errors: list[str], warnings: list[str]) -> str:
    """The tool result the model reads (the proxy's wording, §6.1)."""
    if not created:
        return "[Compression FAILED: " + "; ".join(errors or warnings or ["nothing compressed"]) + "]"
    spans = ", ".join(f"{str(b.start_ref).strip()}–{str(b.end_ref).strip()}" for b in created)
    text = f"[Compressed {spans} → {len(created)} block(s), ~{tokens} tokens saved."
    notes = list(warnings) + [f"error: {e}" for e in errors]
    if notes:
        text += " " + "; ".join(notes)
    return text + "]"
