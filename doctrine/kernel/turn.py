"""``process_turn``: the per-turn pipeline (spec §3).

Stage order: assign-refs, sync-blocks (+ survival), prune, filter, hide-compress-calls,
recommend, nudge decision and stamping, emergency-truncate, render-refs. Inputs are never
mutated: the state is copied once and every changed message is a new object.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctrine.kernel.config import KernelConfig
from doctrine.kernel.filters import apply_filters
from doctrine.kernel.hide import hide_compress_calls
from doctrine.kernel.messages import Message
from doctrine.kernel.nudge import NudgeDecision, decide_nudge, stamp
from doctrine.kernel.prune import first_index, prune
from doctrine.kernel.recommend import recommend
from doctrine.kernel.refs import assign_refs
from doctrine.kernel.state import CompressionState
from doctrine.kernel.sync import advance_survival, sync_blocks
from doctrine.kernel.tags import STRATEGIES
from doctrine.kernel.tags import render_tags as _render_tags
from doctrine.kernel.truncate import Truncation, emergency_truncate
from plumbing.tokens import CountTokens, memo_counter


@dataclass
class TurnResult:
    messages: list[Message]
    state: CompressionState
    nudge: NudgeDecision
    truncated: list[Truncation]
    config_warnings: list[str]


def process_turn(messages: list[Message], state: CompressionState, config: KernelConfig,
                 token_count: int, *, render_tags: str = "all",
                 count_tokens: CountTokens | None = None) -> TurnResult:
    """Run one turn of the kernel over the host's flat messages.

    ``token_count`` is the host's estimate of the context size (the decision's input);
    ``render_tags`` is one of ``all``, ``text-only``, ``none``.
    """
    if render_tags not in STRATEGIES:
        raise ValueError(f"render_tags must be one of {STRATEGIES}, got {render_tags!r}")
    count = memo_counter(count_tokens)
    warnings = config.validate()
    st = state.copy(share_lists=True)  # the returned state's blocks share id lists with the input's
    # First index of each id of the input, built once for sync (presence) and prune (anchors).
    index_of = first_index(messages)

    assign_refs(messages, st, config, index_of=index_of)    # 1
    sync_blocks(messages, st, present=index_of)             # 2
    advance_survival(st, config.promotion_threshold)
    covered = st.covered_ids()  # fixed for the rest of the turn (sync set the active flags)
    view = prune(messages, st, index_of=index_of, covered=covered)  # 3
    view = apply_filters(view, config.message_filters, config.filters)  # 4
    view = hide_compress_calls(view, st)                    # 5
    rec = recommend(view, st, config, count, covered=covered)  # 6
    decision = decide_nudge(view, rec.recommended_ranges, rec.protected_ranges, st, config,
                            token_count, count)             # 7
    stamp(st, token_count, decision.breakdown["nudgeGrowthTokens"], decision.should_inject,
          decision.tier)
    view, truncated = emergency_truncate(view, config, token_count, count)  # 8
    if render_tags != "none":                               # 9
        view = _render_tags(view, st, render_tags, count)
    return TurnResult(view, st, decision, truncated, warnings)
