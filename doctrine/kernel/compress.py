"""Apply the model's compress call (spec §5.5 and the result texts of §6.1).

``apply_compression`` never raises for bad input: every problem becomes an error or a
warning string in the result, and a failed call returns the state unchanged.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import repeat

from doctrine.kernel.config import KernelConfig
from doctrine.kernel.messages import Message
from doctrine.kernel.nudge import reset_after_compress
from doctrine.kernel.protection import COMPRESS_TOOL, protected_ids_with_pairing
from doctrine.kernel.recommend import soft_zone
from doctrine.kernel.refs import lookup_ref, parse_block_ref, parse_message_ref
from doctrine.kernel.state import SUMMARY_ID_PREFIX, Block, CompressionState
from doctrine.kernel.tokens import CountTokens, js_len, memo_counter

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
    kind: str  # "ok" | "consumed" | "unknown" | "invalid"
    start: int = -1
    end: int = -1
    boundary: str = "message"  # "message" | "block"
    reason: str = ""
    warnings: list[str] = field(default_factory=list)


class _RangeFailure(Exception):
    pass


class _View:
    """Index helpers over the messages the host passed."""

    def __init__(self, messages: list[Message], state: CompressionState):
        self.messages = messages
        self.index_of: dict[str, int] = {}
        for i, m in enumerate(messages):
            self.index_of.setdefault(m.id, i)
        self.state = state
        self._anchors: dict[str, int | None] = {}

    def anchor(self, b: Block) -> int | None:
        """A block's visible anchor: its summary message, else its earliest raw id."""
        if b.block_id in self._anchors:  # depends on the messages only, which do not change
            return self._anchors[b.block_id]
        i = self.index_of.get(SUMMARY_ID_PREFIX + b.block_id)
        if i is None:
            n = len(self.messages)
            i = min(map(self.index_of.get, b.effective_message_ids, repeat(n)), default=n)
            i = None if i == n else i
        self._anchors[b.block_id] = i
        return i

    def nested(self, start: int, end: int) -> list[Block]:
        out = []
        for b in self.state.blocks:
            if b.active:
                a = self.anchor(b)
                if a is not None and start <= a <= end:
                    out.append(b)
        return out

    def span_ids(self, start: int, end: int) -> list[str]:
        return [m.id for m in self.messages[start:end + 1] if not m.id.startswith(SUMMARY_ID_PREFIX)]


def _active_ancestor(state: CompressionState, block_id: str) -> Block | None:
    parent: dict[str, Block] = {}
    for b in state.blocks:
        for child in b.direct_block_ids:
            parent[child] = b
    seen = set()
    cur = parent.get(block_id)
    while cur is not None and cur.block_id not in seen:
        if cur.active:
            return cur
        seen.add(cur.block_id)
        cur = parent.get(cur.block_id)
    return None


def _resolve_one(ref: str, view: _View) -> tuple[str, int, str, str]:
    """(kind, index, boundary, note) for one boundary ref."""
    state = view.state
    if not isinstance(ref, str) or not ref.strip():
        return "invalid", -1, "message", f"empty ref {ref!r}"
    if parse_message_ref(ref) is not None:
        raw = lookup_ref(ref, state)
        if raw is None:
            return "unknown", -1, "message", f"{ref.strip()} was never assigned"
        i = view.index_of.get(raw)
        if i is not None:
            return "ok", i, "message", ""
        for b in state.blocks:
            if b.active and raw in b.effective_message_ids:
                a = view.anchor(b)
                if a is not None:
                    return "ok", a, "message", (f"{ref.strip()} is already inside {b.block_id}; "
                                                f"used {b.block_id} as the boundary")
        return "consumed", -1, "message", f"{ref.strip()} is no longer in context"
    bid = parse_block_ref(ref)
    if bid is None:
        return "invalid", -1, "message", f"cannot parse ref {ref.strip()!r} (expected mNNNNN or bN)"
    b = state.block(bid)
    if b is None:
        return "unknown", -1, "block", f"block {bid} does not exist"
    if b.active:
        a = view.anchor(b)
        if a is None:
            return "unknown", -1, "block", f"block {bid} is not visible in context"
        return "ok", a, "block", ""
    anc = _active_ancestor(state, bid)
    if anc is not None:
        a = view.anchor(anc)
        if a is not None:
            return "ok", a, "block", f"{bid} was folded into {anc.block_id}; used {anc.block_id}"
    return "consumed", -1, "block", f"block {bid} was already compressed into another block"


def _resolve(r: CompressRange, view: _View) -> _Resolved:
    ks, si, bs, ns = _resolve_one(r.start_ref, view)
    ke, ei, be, ne = _resolve_one(r.end_ref, view)
    boundary = "block" if "block" in (bs, be) else "message"
    notes = [n for n in (ns, ne) if n]
    for kind in ("invalid", "unknown", "consumed"):
        if kind in (ks, ke):
            return _Resolved(kind, boundary=boundary, reason="; ".join(notes))
    if si > ei:
        si, ei = ei, si
    return _Resolved("ok", si, ei, boundary, warnings=notes)


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


def _is_assistant_step(m: Message) -> bool:
    return m.role == "assistant" and m.content_type in ("text", "tool-call")


def _widen(start: int, end: int, messages: list[Message]) -> tuple[int, int]:
    """Pull reasoning runs and tool-call/result partners into the range (§5.5)."""
    n = len(messages)
    for _ in range(WIDEN_PASSES):
        s0, e0 = start, end
        # Reasoning at the end belongs with the step that follows it.
        if messages[end].content_type == "reasoning":
            j = end
            while j + 1 < n and messages[j + 1].content_type == "reasoning":
                j += 1
            if j + 1 < n and _is_assistant_step(messages[j + 1]):
                end = j + 1
        # A step at the start brings the reasoning run right before it.
        if _is_assistant_step(messages[start]):
            i = start
            while i - 1 >= 0 and messages[i - 1].content_type == "reasoning":
                i -= 1
            start = i
        ids = {m.tool_call_id for m in messages[start:end + 1]
               if m.is_tool and m.tool_call_id and m.tool_name != COMPRESS_TOOL}
        if ids:
            absorbed = False
            for j in range(end + 1, min(n, end + 1 + PAIR_SCAN)):
                if messages[j].tool_call_id in ids:
                    end, absorbed = j, True
                elif absorbed:
                    break
            absorbed = False
            for j in range(start - 1, max(-1, start - 1 - PAIR_SCAN), -1):
                if messages[j].tool_call_id in ids:
                    start, absorbed = j, True
                elif absorbed:
                    break
        if (start, end) == (s0, e0):
            break
    return start, end


def _ordered_union(*lists: list[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for ids in lists:
        for x in ids:
            if x not in seen:
                seen.add(x)
                out.append(x)
    return out


def _apply_single(r: CompressRange, res: _Resolved, view: _View, state: CompressionState,
                  config: KernelConfig, ctx: dict, count: CountTokens) -> Block:
    label = _label(r)
    start, end = res.start, res.end
    if res.boundary == "message":
        start, end = _widen(start, end, view.messages)
    nested = view.nested(start, end)
    if res.boundary == "block" and nested:
        target = min(b.tier for b in nested)
        out_tier = min(3, target + 1)
    elif res.boundary == "block":
        target, out_tier = 1, 2
    else:
        target, out_tier = 1, 1
    consumed = [b for b in nested if b.tier == target]

    effective = _ordered_union(view.span_ids(start, end),
                               *[b.effective_message_ids for b in consumed])
    covered_at_start: set[str] = ctx["covered"]
    direct = [x for x in effective if x not in covered_at_start]
    hard: set[str] = ctx["hard"]
    effective = [x for x in effective if x not in hard]
    direct = [x for x in direct if x not in hard]
    zone: set[str] = ctx["zone"]
    in_zone = [x for x in effective if x in zone]
    if in_zone:
        effective = [x for x in effective if x not in zone]
        direct = [x for x in direct if x not in zone]
        if not direct and not consumed:
            # One message per problem: the error replaces the zone warning.
            raise _RangeFailure(f"range {label}: entirely in the recent protected zone; "
                                f"compress older messages")
        refs = [state.by_raw.get(x, x) for x in in_zone]
        ctx["warnings"].append(f"range {label}: {', '.join(refs)} in the recent protected zone "
                               f"left uncompressed")
    if res.boundary == "message" and not direct and consumed:
        ids = sorted((b.block_id for b in consumed), key=lambda s: int(s[1:]))
        raise _RangeFailure(f"range {label}: only already-compressed content; to fold blocks "
                            f"use block boundaries ({ids[0]}..{ids[-1]})")
    body = r.summary.strip() if isinstance(r.summary, str) else ""
    if not body:
        raise _RangeFailure(f"range {label}: summary is empty")
    n_chars = js_len(body)
    if n_chars < config.compress.min_summary_length:
        raise _RangeFailure(f"range {label}: summary too short ({n_chars} chars, min "
                            f"{config.compress.min_summary_length})")
    max_chars = r.summary_max_chars
    if isinstance(max_chars, bool) or not isinstance(max_chars, (int, float)):
        max_chars = config.compress.max_summary_length
    if max_chars > 0 and n_chars > max_chars:
        raise _RangeFailure(f"range {label}: summary too long ({n_chars} chars, max {max_chars})")
    if not direct and not consumed:
        raise _RangeFailure(f"range {label}: nothing left to compress in this range")

    tokens = sum(count(view.messages[view.index_of[x]].text) for x in direct if x in view.index_of)
    tokens += sum(count(b.summary) for b in consumed)
    block = Block(
        block_id=f"b{state.next_block_id}",
        run_id=ctx["run_id"],
        tier=out_tier,
        summary=r.summary,
        direct_message_ids=direct,
        effective_message_ids=effective,
        direct_block_ids=[b.block_id for b in consumed],
        compressed_tokens=tokens,
        created_at=ctx["now_ms"],
        topic=r.topic,
        compress_call_id=r.compress_call_id or ctx["call_id"],
        start_ref=r.start_ref,
        end_ref=r.end_ref,
    )
    state.next_block_id += 1
    for b in consumed:
        b.active = False
    state.blocks.append(block)
    return block


def _gate_error(ranges: list[CompressRange], resolved: list[_Resolved], state: CompressionState,
                total: int, n_ranges: int, minimum: int) -> str:
    if resolved and all(x.kind in ("unknown", "invalid") for x in resolved):
        return ("no range could be resolved (unknown refs); run acp_status to see the current "
                "refs and reissue the call")
    if any(x.kind == "consumed" for x in resolved):
        act = [b.block_id for b in state.blocks if b.active]
        span = f"{act[0]}..{act[-1]}" if act else "none active"
        return (f"some ranges were already compressed (active blocks {span}); use block refs "
                f"to fold summaries, or pick uncompressed messages")
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
    work.next_run_id += 1
    view = _View(messages, work)
    covered = work.covered_ids()
    ctx = {
        "covered": covered,
        "zone": soft_zone(messages, work, config, count, covered),
        "hard": protected_ids_with_pairing(messages, config),
        "run_id": run_id,
        "call_id": compress_call_id,
        "now_ms": now_ms,
        "warnings": [],
    }
    errors: list[str] = []
    warnings: list[str] = ctx["warnings"]
    if not ranges:
        return _finish(state.copy(), [], ["No ranges provided."], [], 0)

    resolved = [_resolve(r, view) for r in ranges]
    # Overlap: the earliest range wins, later ones that start inside it are skipped.
    skipped: set[int] = set()
    max_end = -1
    for i in sorted((i for i, x in enumerate(resolved) if x.kind == "ok"), key=lambda i: resolved[i].start):
        if resolved[i].start <= max_end:
            skipped.add(i)
        else:
            max_end = resolved[i].end
    live = [i for i, x in enumerate(resolved) if x.kind == "ok" and i not in skipped]

    minimum = config.compress.min_compress_range
    if minimum > 0 and not any(resolved[i].boundary == "block" for i in live):
        total = sum(js_len(messages[j].text) for i in live
                    for j in range(resolved[i].start, resolved[i].end + 1)
                    if not messages[j].id.startswith(SUMMARY_ID_PREFIX))
        if total < minimum:
            err = _gate_error(ranges, resolved, state, total, len(live), minimum)
            return _finish(state.copy(), [], [err], [], 0)

    created: list[Block] = []
    for i, (r, res) in enumerate(zip(ranges, resolved, strict=True)):
        label = _label(r)
        if i in skipped:
            warnings.append(f"range {label}: overlaps an earlier range; skipped")
            continue
        if res.kind == "consumed":
            warnings.append(f"range {label}: already compressed ({res.reason})")
            continue
        if res.kind in ("unknown", "invalid"):
            errors.append(f"range {label}: {res.reason}")
            continue
        for w in res.warnings:
            warnings.append(f"range {label}: {w}")
        try:
            created.append(_apply_single(r, res, view, work, config, ctx, count))
        except _RangeFailure as e:
            errors.append(str(e))
        except Exception as e:  # defensive: one broken range must not sink the others
            errors.append(f"range {label}: internal error: {type(e).__name__}: {e}")

    if not created:
        # Nothing applied: hand back the state as it came (no run id spent).
        return _finish(state.copy(), [], errors, warnings, 0)
    tokens = sum(b.compressed_tokens for b in created)
    work.stats.compression_count += len(created)
    work.stats.tokens_compressed += tokens
    reset_after_compress(work)
    return _finish(work, created, errors, warnings, tokens)


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
