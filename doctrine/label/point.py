"""DecisionPoint: everything the labeler may read at one model call of a replayed session."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from doctrine.kernel.config import KernelConfig
from doctrine.kernel.host import HostConfig, ModelView
from doctrine.kernel.messages import Message
from doctrine.kernel.state import CompressionState
from plumbing.tokens import CountTokens, default_count_tokens

from .needed import message_strings


@dataclass
class RecoveryState:
    """An unfinished recovery: the facts being restored and the last tool result."""

    fact_ids: list[str]
    tool: str  # "search_context" | "decompress"
    result_text: str
    blocks: list[str] = field(default_factory=list)  # ids of the blocks that cover the facts
    hit_block: str | None = None  # the block the search pointed at


@dataclass
class DecisionPoint:
    """One decision point of a session replayed through the kernel.

    ``visible``: session messages ``[0, visible)`` are in the history (the next one,
    ``session.messages[visible]``, is the session's own next assistant turn). ``flat`` is
    the kernel input (the whole flat history, inserted actions included); ``view`` the
    host-shaped output of ``render_for_model`` (tags, nudge); ``kernel_view`` the same
    pruned view without tags (sizes and ranges are read from it).
    """

    session: Any
    step: int
    visible: int
    flat: list[Message]
    state_before: CompressionState
    view: ModelView
    kernel_view: list[Message]
    token_count: int
    window: int
    kconfig: KernelConfig
    host: HostConfig = field(default_factory=HostConfig)
    count_tokens: CountTokens = default_count_tokens
    action_index: int = 0
    recovery: RecoveryState | None = None
    units: list[int] = field(default_factory=list)
    profile: Any = None  # doctrine.kernel.profile.ServingProfile the point was rendered under
    sent_tokens: int = 0  # the request as sent (system + tools + view + nudge)
    fixed_tokens: int = 0  # the system prompt and tool schemas alone (no fold can free them)
    # The chat messages as the host sends them, system first (``render_request``): a training
    # row shows exactly these. None for points built without a request.
    request_messages: list[dict[str, Any]] | None = None
    # The kernel's input where the host adds to the history (proxy_chat: the client's system
    # message first, earlier folds gone); None where it is ``flat``.
    kernel_flat: list[Message] | None = None

    @property
    def nudge(self):
        return self.view.decision

    @property
    def nudge_shown(self) -> bool:
        return bool(self.view.nudge_shown)

    @property
    def state(self) -> CompressionState:
        """The kernel state after this turn (refs assigned): what compress calls apply to."""
        return self.view.state

    @property
    def compress_messages(self) -> list[Message]:
        """What the host hands a compress call: its own messages (proxy) or the view (Pi)."""
        if self.profile is not None and self.profile.variant.compress_on == "view":
            return self.view.messages
        return self.flat

    @property
    def next_message(self) -> dict[str, Any]:
        return self.session.messages[self.visible]

    @cached_property
    def visible_text(self) -> str:
        """All the text the model sees (tool-call arguments decoded), one string."""
        parts: list[str] = []
        for m in self.view.messages:
            parts.extend(message_strings(m.text, m.content_type == "tool-call"))
        return "\n".join(parts)

    @cached_property
    def visible_refs(self) -> set[str]:
        """Refs the model can name as range boundaries (tags in view, refs in the nudge)."""
        from .ranges import view_refs

        return view_refs(self.view)

    @cached_property
    def by_id(self) -> dict[str, Message]:
        out: dict[str, Message] = {}
        for m in self.flat:
            out.setdefault(m.id, m)
        return out


def build_point(session: Any, step: int, visible: int, history: list[dict[str, Any]], state: CompressionState,
                frame: Any, *, action_index: int = 0, recovery: RecoveryState | None = None,
                units: list[int] | None = None, token_count: int | None = None) -> DecisionPoint:
    """Run the kernel over ``history`` (chat dicts with raw ids) the way the host would.

    ``frame``: ``doctrine.render.request.request_frame(profile, doctrine, ...)``. The request is
    rendered by ``doctrine.render.request.render_request`` (the one renderer training and eval
    share); an untagged pass gives the sizes the labeler reads. ``token_count``: the fill the
    host read, where the host counts it (``proxy_chat``: the previous call's prompt tokens).
    """
    from doctrine.kernel.chat import flatten
    from doctrine.kernel.turn import process_turn
    from doctrine.render.request import render_request

    from .needed import tool_units

    profile = frame.profile
    flat = flatten(history)
    req = render_request(frame, flat, state, token_count=token_count)
    kview = process_turn(flat, state, profile.kernel, req.token_count, render_tags="none",
                         count_tokens=profile.count_tokens).messages
    return DecisionPoint(session=session, step=step, visible=visible, flat=flat, state_before=state, view=req.view,
                         kernel_view=kview, token_count=req.token_count, window=profile.window,
                         kconfig=profile.kernel, host=profile.host_config, count_tokens=profile.count_tokens,
                         action_index=action_index, recovery=recovery,
                         units=units if units is not None else tool_units(session.messages),
                         profile=profile, sent_tokens=req.sent_tokens, fixed_tokens=frame.fixed_tokens,
                         request_messages=req.messages, kernel_flat=req.kernel_flat)
