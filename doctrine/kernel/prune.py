"""Prune: replace covered messages with block summaries (spec §2.3).

Covered messages are removed (the first user message always stays), each active block's
summary is emitted as a system message ``acp_summary_<blockId>`` at its anchor, then three
orphan strips tidy tool pairs and reasoning runs.
"""

from __future__ import annotations

from functools import lru_cache
from itertools import repeat

from doctrine.kernel.messages import Message
from doctrine.kernel.protection import COMPRESS_TOOL
from doctrine.kernel.state import SUMMARY_ID_PREFIX, Block, CompressionState

SUMMARY_HEADER = "[Compressed conversation section]"


def summary_text(block: Block) -> str:
    """The rendered body of a block's summary message."""
    return _summary_text(block.topic, block.summary)


def _summary_text(topic: str | None, summary: str) -> str:
    text = SUMMARY_HEADER
    if topic:
        text += " — " + topic
    body = summary.strip()
    if body:
        text += "\n" + body
    return text


def is_rendered_summary(msg: Message) -> bool:
    """A block summary as prune renders it (the id prefix alone is not enough)."""
    return msg.id.startswith(SUMMARY_ID_PREFIX) and msg.role == "system" and msg.content_type == "text"


def is_summary_message(msg: Message) -> bool:
    return msg.text.startswith(SUMMARY_HEADER)


def summary_message(block: Block) -> Message:
    return _summary_message(block.block_id, block.topic, block.summary)


@lru_cache(maxsize=1 << 14)  # every turn re-emits every active block's summary
def _summary_message(block_id: str, topic: str | None, summary: str) -> Message:
    # The kernel never mutates a message it emits (stages build new ones), so one object
    # can stand in every turn's view.
    return Message(id=SUMMARY_ID_PREFIX + block_id, role="system", content_type="text",
                   text=_summary_text(topic, summary))


def first_user_index(messages: list[Message]) -> int | None:
    for i, m in enumerate(messages):
        if m.role == "user":
            return i
    return None


def first_index(messages: list[Message]) -> dict[str, int]:
    """Index of the first message with each id."""
    n = len(messages)
    # Assign from the back so earlier indices overwrite later ones.
    return dict(zip(reversed([m.id for m in messages]), range(n - 1, -1, -1), strict=True))


def prune(messages: list[Message], state: CompressionState,
          index_of: dict[str, int] | None = None, covered: set[str] | None = None) -> list[Message]:
    """The pruned view; the input list and messages are left untouched.

    ``index_of`` (``first_index(messages)``) and ``covered`` (``state.covered_ids()``):
    when the caller already has them."""
    active = [b for b in state.blocks if b.active]
    if covered is None:
        covered = state.covered_ids()
    if not active or not covered:
        return list(messages)

    first_user = first_user_index(messages)
    n = len(messages)
    if index_of is None:
        index_of = first_index(messages)
    emitted = {SUMMARY_ID_PREFIX + b.block_id for b in active}

    # Anchor of each block: an existing summary message, else its earliest raw id, else 0.
    anchors: dict[int, list[Block]] = {}
    get = index_of.get
    for b in active:
        i = get(SUMMARY_ID_PREFIX + b.block_id)
        if i is None or messages[i].role != "system" or messages[i].content_type != "text":
            i = min(map(get, b.effective_message_ids, repeat(n)), default=n)
            if i == n:
                i = 0
        anchors.setdefault(i, []).append(b)

    drop = covered | emitted  # covered messages and stale copies of re-emitted summaries
    if first_user is not None:
        drop.discard(messages[first_user].id)  # the first user message always stays
    # One pass: the kept positions, with each anchor's summaries just before its position.
    kept = [i for i, m in enumerate(messages) if m.id not in drop]
    out: list[Message] = []
    k = 0
    for i in sorted(anchors):
        while k < len(kept) and kept[k] < i:
            out.append(messages[kept[k]])
            k += 1
        out.extend(summary_message(b) for b in anchors[i])
    out.extend(messages[j] for j in kept[k:])
    return strip_orphans(out)


def strip_orphans(messages: list[Message]) -> list[Message]:
    """The three orphan strips, in order (spec §2.3)."""
    result_ids = {m.tool_call_id for m in messages if m.content_type == "tool-result"}
    step1 = [
        m for m in messages
        if not (m.content_type == "tool-call" and m.tool_name != COMPRESS_TOOL
                and m.tool_call_id not in result_ids)
    ]
    call_ids = {m.tool_call_id for m in step1 if m.content_type == "tool-call"}
    step2 = [m for m in step1 if not (m.content_type == "tool-result" and m.tool_call_id not in call_ids)]
    out: list[Message] = []
    run: list[Message] = []
    for m in step2:
        if m.content_type == "reasoning":
            run.append(m)
            continue
        if run:
            if m.role == "assistant" and m.content_type in ("text", "tool-call"):
                out.extend(run)
            run = []
        out.append(m)
    return out  # a trailing reasoning run has no follower and is dropped
