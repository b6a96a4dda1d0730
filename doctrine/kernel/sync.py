"""Block sync and survival (spec §2.2 and §3 step 2).

Every turn the ``active`` flag of each block is recomputed from what the host sent: a block
is active iff no block consumed it and some of its messages (or its rendered summary) are
still present. Survival then counts the turns each active block has lived through.
"""

from __future__ import annotations

from doctrine.kernel.messages import Message
from doctrine.kernel.state import SUMMARY_ID_PREFIX, CompressionState


def consumed_block_ids(state: CompressionState) -> set[str]:
    """Blocks that some block folded in (permanently inactive)."""
    out: set[str] = set()
    for b in state.blocks:
        out.update(b.direct_block_ids)
    return out


def sync_blocks(messages: list[Message], state: CompressionState) -> None:
    """Recompute ``active`` for every block and drop snapshot entries of absent refs.

    Works in place on ``state`` (the pipeline passes its own copy).
    """
    present = {m.id for m in messages}
    consumed = consumed_block_ids(state)
    for b in state.blocks:
        if b.block_id in consumed:
            b.active = False
            continue
        b.active = (SUMMARY_ID_PREFIX + b.block_id) in present or not present.isdisjoint(
            b.effective_message_ids
        )
    snap = state.token_snapshot
    if snap:
        by_ref = state.by_ref
        absent = [r for r in snap if by_ref.get(r) not in present]
        if absent:
            kept = dict(snap)
            for r in absent:
                del kept[r]
            state.token_snapshot = kept


def advance_survival(state: CompressionState, promotion_threshold: int) -> None:
    """``survived_count += 1`` for active blocks; promote to ``old`` at the threshold."""
    for b in state.blocks:
        if b.active:
            b.survived_count += 1
            if b.survived_count >= promotion_threshold:
                b.generation = "old"
