"""What a compress call folds, as text: the source a summary must be true to.

    from doctrine.label.sources import range_sources
    texts = range_sources(point, label.action["args"]["content"])   # one text per range

Each range is folded on its own by the kernel (no minimum range size) (``apply_compression`` on the point's state,
a placeholder summary), exactly as the label's call would fold it; its source is the text
of every raw message the new block holds directly (a tool call's arguments included) and
the summaries of the blocks it re-folds (a tier digest's sources).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from doctrine.kernel.compress import apply_compression

__all__ = ["range_sources"]

_PLACEHOLDER = "placeholder summary used only to ask the kernel which messages a range folds"


def range_sources(point: Any, content: list[dict[str, Any]]) -> list[str]:
    """One source text per range of ``content`` ('' where the kernel folds nothing)."""
    k = point.kconfig  # one range alone may be under the call's minimum size: no minimum here
    probe = dataclasses.replace(k, compress=dataclasses.replace(k.compress, min_compress_range=0))
    out = []
    for r in content:
        res = apply_compression([{"startId": r["startId"], "endId": r["endId"], "summary": _PLACEHOLDER}],
                                point.compress_messages, point.state, probe,
                                count_tokens=point.count_tokens, clock_ms=lambda: 0)
        if res.errors or not res.new_block_ids:
            out.append("")
            continue
        block = res.state.block(res.new_block_ids[0])
        parts = [point.by_id[i].text for i in block.direct_message_ids if i in point.by_id]
        for b in block.direct_block_ids:
            src = point.state.block(b)
            if src is not None:
                parts.append(src.summary)
        out.append("\n".join(parts))
    return out
