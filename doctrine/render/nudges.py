"""The bridge between the kernel's decisions and the doctrine's renderers.

The kernel decides *whether* and *what* to nudge (``NudgeDecision``); the doctrine decides
*how it reads* (``render_nudge`` over a ``NudgeView``). ``nudge_text_for`` gives a host the
callable it passes to ``doctrine.kernel.host.render_for_model``, so the same decision
renders in ``doctrine`` or ``distilled`` mode, or through an imported prompt set.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from doctrine.kernel.nudge import NudgeDecision
from doctrine.render.prompts import BlockView, NudgeView, RangeView, render_nudge
from doctrine.spec import Doctrine

__all__ = ["nudge_text_for", "nudge_view", "proxy_nudge_text_for"]


def nudge_view(decision: NudgeDecision) -> NudgeView:
    """What a nudge shows, from the kernel's decision (no usage ratio crosses over)."""
    ranges = [RangeView(start=r.start_ref, end=r.end_ref, count=r.count, tokens=r.tokens, chars=r.chars,
                        tool_pct=r.tool_pct, text_pct=r.text_pct) for r in decision.compressible_ranges]
    ranges += [RangeView(start=p.start_ref, end=p.end_ref, count=p.count, tokens=p.tokens, protected=True,
                         tools=tuple(p.tools)) for p in decision.protected_ranges]
    blocks = [BlockView(id=b.block_id, tier=b.tier, count=b.message_count, original_tokens=b.original_tokens,
                        summary_tokens=b.summary_tokens, topic=b.topic or "") for b in decision.tier_target_blocks]
    cb = decision.context_breakdown
    breakdown = {k: int(cb.get(k, 0)) for k in ("system", "tool", "summaries", "code", "text")}
    return NudgeView(tier=decision.tier or 1, voice=decision.voice, ranges=ranges, breakdown=breakdown,
                     growth=max(0, int(decision.growth)), target_blocks=blocks)


def nudge_text_for(doctrine: Doctrine, mode: str, nudge_style: str = "list"
                   ) -> Callable[[NudgeDecision], str | None]:
    """A ``nudge_text`` callable for ``render_for_model`` in the given prompt mode."""

    def text(decision: NudgeDecision) -> str | None:
        return render_nudge(nudge_view(decision), doctrine, mode, nudge_style=nudge_style)

    return text


def proxy_nudge_text_for(doctrine: Doctrine, mode: str, nudge_style: str = "list"):
    """The ``nudge_text`` callable of ``doctrine.kernel.proxy_chat.render_proxy_flat`` (the
    ``proxy_chat`` host), in the doctrine's words, shaped as the recorded proxy's nudges are:

    * every nudge speaks in the emergency voice (acp-kernel 0.0.36 treats the pressure band as
      emergency; the recordings show only ``emergency`` and ``tier2-emergency`` kinds);
    * the ranges listed are the offered ones (fewer than 200 tokens dropped), protected ones kept;
    * a tier-1 example names ``<ID>`` placeholders, a tier-2/3 example the first target block.

    The proxy's own nudge sentences differ from ours in wording (see ``request_frame``)."""

    def text(decision: NudgeDecision, offered) -> str | None:
        view = nudge_view(decision)
        keep = {(r.start_ref, r.end_ref) for r in offered}
        ranges = [r for r in view.ranges if r.protected or (r.start, r.end) in keep]
        view = dataclasses.replace(view, voice="emergency", ranges=ranges)
        return render_nudge(view, doctrine, mode, nudge_style=nudge_style, example_ids="placeholder")

    return text
