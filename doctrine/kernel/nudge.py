"""The nudge decision and its state stamps (spec §4.2-4.4).

A nudge asks the model to compress. Outside the pressure band it is gated twice: the context
must have grown by ``floor`` tokens since the last nudge (or the baseline), and there must be
enough to compress (``G`` tokens of tier-1 ranges, or ``1.5 G`` of tier-1/tier-2 summaries,
shown at most once per ``floor`` tokens of growth per tier). In the pressure band (usage at or
above 75 %), the largest pending tier is nudged every turn.

The usage ratio is kept for logs only (``usage_for_logs`` and ``breakdown``); nothing meant for
the model may show it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from doctrine.kernel.config import KernelConfig
from doctrine.kernel.messages import Message
from doctrine.kernel.prune import is_summary_message
from doctrine.kernel.recommend import ProtectedRange, Range
from doctrine.kernel.state import CompressionState
from plumbing.tokens import CountTokens, default_count_tokens, estimate_fast, js_round


@dataclass
class TierTargetBlock:
    block_id: str
    tier: int
    message_count: int
    original_tokens: int
    summary_tokens: int  # ≈ chars / 4, as the reference's tier nudge list shows
    topic: str | None


@dataclass
class GateNumbers:
    """The derived quantities of §4.2."""

    token_count: int
    usage: float
    growth_tokens: int  # G (nudgeGrowthTokens)
    floor: float  # effective growth floor
    reference: int
    growth: int
    tier2_threshold: int
    pending: dict[int, int]
    over_limit: bool
    emergency: bool


@dataclass
class NudgeDecision:
    should_inject: bool
    reason: str
    tier: int | None
    voice: str  # "gentle" | "emergency"
    # The recommended (merged) ranges, all of them, as acp-kernel's decision lists them; the
    # viable filter (tokens >= 200) belongs to the surfaces that apply it (status, panel).
    compressible_ranges: list[Range]
    protected_ranges: list[ProtectedRange]
    tier_target_blocks: list[TierTargetBlock]
    breakdown: dict[str, Any]
    context_breakdown: dict[str, int]
    growth: int
    # Fill ratio tokenCount / limit. For logs only: never render it for the model.
    usage_for_logs: float = 0.0

    @property
    def recommended_ranges(self) -> list[Range]:
        return self.compressible_ranges


def gate_numbers(token_count: int, state: CompressionState, config: KernelConfig,
                 pending: dict[int, int]) -> GateNumbers:
    """Growth threshold, floor, reference and bands, from the state before stamping."""
    n = config.nudge
    limit = config.model_context_limit
    usage = token_count / limit if limit > 0 else 0.0
    g = min(max(js_round(limit * n.growth_ratio), n.growth_floor), n.growth_cap)
    floor = max(n.min_growth_floor, n.min_growth_ratio * g)
    stamps = state.nudge
    if stamps.last_nudge_shown_tokens > 0:
        ref = stamps.last_nudge_shown_tokens
    elif stamps.last_per_message_nudge_tokens > 0:
        ref = stamps.last_per_message_nudge_tokens
    else:
        ref = token_count
    return GateNumbers(
        token_count=token_count,
        usage=usage,
        growth_tokens=g,
        floor=floor,
        reference=ref,
        growth=token_count - ref,
        tier2_threshold=js_round(g * n.tier2_growth_multiplier),
        pending=pending,
        over_limit=usage >= n.max_context_limit_pct,
        emergency=usage >= n.emergency_threshold_pct,
    )


def pending_amounts(recommended: list[Range], state: CompressionState, config: KernelConfig,
                    count_tokens: CountTokens) -> dict[int, int]:
    """T1, T2 and T3 of §4.2."""
    min_chars = config.compress.min_compress_range
    t1 = sum(r.tokens for r in recommended if (r.chars if r.chars is not None else r.tokens * 4) >= min_chars)
    t2 = sum(count_tokens(b.summary) for b in state.blocks if b.active and b.tier == 1)
    t3 = sum(count_tokens(b.summary) for b in state.blocks if b.active and b.tier == 2)
    return {1: t1, 2: t2, 3: t3}


def context_breakdown(view: list[Message], token_count: int, growth: int,
                      count_tokens: CountTokens) -> dict[str, int]:
    """Token sums of the view by kind (summaries, tool, system, code, text)."""
    out = {"system": 0, "tool": 0, "summaries": 0, "code": 0, "text": 0}
    for m in view:
        t = count_tokens(m.text)
        if is_summary_message(m):
            out["summaries"] += t
        elif m.is_tool:
            out["tool"] += t
        elif m.role == "system":
            out["system"] += t
        elif "```" in m.text:
            out["code"] += t
        else:
            out["text"] += t
    out["total"] = token_count
    out["growth"] = growth
    return out


def tier_targets(state: CompressionState, tier: int | None) -> list[TierTargetBlock]:
    """The active blocks a tier-``tier`` nudge asks to fold (tier - 1 blocks)."""
    if tier not in (2, 3):
        return []
    return [
        TierTargetBlock(b.block_id, b.tier, len(b.effective_message_ids), b.compressed_tokens,
                        estimate_fast(b.summary), b.topic)
        for b in state.blocks if b.active and b.tier == tier - 1
    ]


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def decide(gn: GateNumbers, state: CompressionState, config: KernelConfig) -> tuple[bool, int | None, str]:
    """(inject, tier, reason) per §4.3."""
    p = gn.pending
    tiers_on = config.tiers.enabled
    if gn.over_limit or gn.emergency:
        label = "EMERGENCY" if gn.emergency else "OVER-LIMIT"
        cands = [1, 2, 3] if tiers_on else [1]
        best = cands[0]
        for t in cands[1:]:
            if p[t] > p[best]:  # strictly greater: ties go to the lower tier
                best = t
        if p[best] > 0:
            return True, best, f"{label}: T{best} pending {p[best]}"
        return False, None, f"{label}: nothing pending to compress"

    blocked: list[str] = []
    ready: list[str] = []
    if gn.growth < gn.floor:
        blocked.append(f"growth {gn.growth} < floor {_fmt(gn.floor)}")
    else:
        ready.append(f"growth {gn.growth} >= floor {_fmt(gn.floor)}")
        if p[1] >= gn.growth_tokens:
            return True, 1, f"T1 pending {p[1]} >= threshold {gn.growth_tokens}"
        if tiers_on and p[2] >= gn.tier2_threshold and p[2] > p[1]:
            last = state.nudge.last_shown_by_tier.get(2, 0)
            if last == 0 or gn.token_count - last >= gn.floor:
                return True, 2, f"T2 pending {p[2]} >= threshold {gn.tier2_threshold}"
            return False, None, (f"T2 pending {p[2]} ready but tier-2 cadence not met "
                                 f"(last shown at {last})")
        if tiers_on and p[3] >= gn.tier2_threshold and p[3] > p[2] and p[3] > p[1]:
            last = state.nudge.last_shown_by_tier.get(3, 0)
            if last == 0 or gn.token_count - last >= gn.floor:
                return True, 3, f"T3 pending {p[3]} >= threshold {gn.tier2_threshold}"
            return False, None, (f"T3 pending {p[3]} ready but tier-3 cadence not met "
                                 f"(last shown at {last})")
    best = max(p.values())
    if best < gn.growth_tokens:
        blocked.append(f"max compressible {best} < threshold {gn.growth_tokens}")
    else:
        ready.append(f"max compressible {best} >= threshold {gn.growth_tokens}")
    reason = "; ".join(blocked) if blocked else "no tier qualifies"
    if ready:
        reason += " | ready: " + ", ".join(ready)
    if blocked:
        reason += " | blocked: " + ", ".join(b.split(" ")[0] for b in blocked)
    return False, None, reason


def stamp(state: CompressionState, token_count: int, g: int, inject: bool, tier: int | None) -> None:
    """Update the nudge stamps after a decision (§4.4), in place on the pipeline's copy."""
    n = state.nudge
    if n.last_per_message_nudge_tokens > 0 and token_count < n.last_per_message_nudge_tokens - g:
        n.last_per_message_nudge_tokens = token_count
        n.last_nudge_shown_tokens = 0
        n.last_shown_by_tier = {}
    if n.last_per_message_nudge_tokens == 0:
        n.last_per_message_nudge_tokens = token_count
    if inject and tier is not None:
        n.last_nudge_shown_tokens = token_count
        n.last_shown_by_tier[tier] = token_count
        if n.ever_injected is not None:
            n.ever_injected = True


def reset_after_compress(state: CompressionState) -> None:
    """A successful compress restarts the growth clock (§4.4)."""
    state.nudge.last_per_message_nudge_tokens = 0
    state.nudge.last_nudge_shown_tokens = 0
    state.nudge.last_shown_by_tier = {}


def decide_nudge(view: list[Message], recommended: list[Range], protected: list[ProtectedRange],
                 state: CompressionState, config: KernelConfig, token_count: int,
                 count_tokens: CountTokens = default_count_tokens) -> NudgeDecision:
    """The full decision for this turn (does not stamp the state)."""
    pending = pending_amounts(recommended, state, config, count_tokens)
    gn = gate_numbers(token_count, state, config, pending)
    inject, tier, reason = decide(gn, state, config)
    has_pending = state.nudge.last_nudge_shown_tokens > 0
    g = gn.growth_tokens
    breakdown = {
        "usage": gn.usage,
        "growth": gn.growth,
        "growthReference": gn.reference,
        "effectiveThreshold": g / 2 if has_pending else g,
        "nudgeGrowthTokens": g,
        "growthFloor": gn.floor,
        "hasPendingNudge": int(has_pending),
        "overLimit": int(gn.over_limit),
        "emergencyOverride": int(gn.emergency),
        "pendingT1": pending[1],
        "pendingT2": pending[2],
        "pendingT3": pending[3],
    }
    return NudgeDecision(
        should_inject=inject,
        reason=reason,
        tier=tier if inject else None,
        voice="emergency" if (gn.over_limit or gn.emergency) else "gentle",
        compressible_ranges=list(recommended),
        protected_ranges=protected,
        tier_target_blocks=tier_targets(state, tier if inject else None),
        breakdown=breakdown,
        context_breakdown=context_breakdown(view, token_count, gn.growth, count_tokens),
        growth=gn.growth,
        usage_for_logs=gn.usage,
    )
