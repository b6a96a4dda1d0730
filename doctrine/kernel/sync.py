"""Block sync and survival (spec §2.2 and §3 step 2).

Every turn the ``active`` flag of each block is recomputed from what the host sent: a block
is active iff no block consumed it and some of its messages (or its rendered summary) are
still present. Survival then counts the turns each active block has lived through.
"""

from __future__ import annotations

from collections.abc import Collection

from doctrine.kernel.messages import Message
from doctrine.kernel.state import SUMMARY_ID_PREFIX, CompressionState


def consumed_block_ids(state: CompressionState) -> set[str]:
    """Blocks that some block folded in (permanently inactive)."""
    out: set[str] = set()
    for b in state.blocks:
        out.update(b.direct_block_ids)
    return out


def sync_blocks(messages: list[Message], state: CompressionState,
                present: Collection[str] | None = None) -> None:
    """Recompute ``active`` for every block and drop snapshot entries of absent refs.

    Works in place on ``state`` (the pipeline passes its own copy). ``present``: the ids of
    ``messages`` when the caller already has them (a set, or a dict keyed by id).
    """
    if present is None:
        present = {m.id for m in messages}
    # The snapshot is pruned to the refs of present messages, and only when its size differs
    # from theirs (acp-kernel's rule: "BLOCKED" counts as one live ref when present).
    snap = state.token_snapshot
    if snap:
        by_raw = state.by_raw
        live = set(map(by_raw.get, present))
        live.discard(None)
        if len(snap) != len(live):
            absent = snap.keys() - live
            if absent:
                state.token_snapshot = {r: n for r, n in snap.items() if r not in absent}
    consumed = consumed_block_ids(state)
    present_keys = present.keys() if isinstance(present, dict) else present
    for b in state.blocks:
        if b.block_id in consumed:
            b.active = False
            continue
        b.active = (SUMMARY_ID_PREFIX + b.block_id) in present or not present_keys.isdisjoint(
            b.effective_message_ids
        )


def advance_survival(state: CompressionState, promotion_threshold: int) -> None:
    """``survived_count += 1`` for active blocks; promote to ``old`` at the threshold."""
    for b in state.blocks:
        if b.active:
            b.survived_count += 1
            if b.survived_count >= promotion_threshold:
                b.generation = "old"
