"""Host variants: what the model actually sees (spec §1.3, §2.3, §4.5).

The kernel's output is not yet the request a host sends. Hosts differ in three ways, each a
field of ``HostConfig``:

* ``summaries``: ``"compress-call"`` (both reference hosts) drops the kernel's
  ``acp_summary_*`` messages, so summaries reach the model only through the retained compress
  call; ``"kernel-message"`` keeps them inline as system messages.
* ``tags``: the tag strategy (the proxy uses ``"text-only"`` so tool JSON stays clean).
* ``nudge``: ``"trailing-user"`` appends the nudge as a user message on this request only;
  ``"none"`` never shows one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

from doctrine.kernel.config import KernelConfig
from doctrine.kernel.messages import Message
from doctrine.kernel.nudge import NudgeDecision
from doctrine.kernel.state import SUMMARY_ID_PREFIX, CompressionState
from doctrine.kernel.tags import STRATEGIES
from doctrine.kernel.truncate import Truncation
from doctrine.kernel.turn import process_turn
from plumbing.tokens import CountTokens

NUDGE_MESSAGE_ID = "acp_nudge"  # reserved prefix; never persisted, never given a ref


@dataclass(frozen=True)
class HostConfig:
    summaries: str = "compress-call"  # "compress-call" | "kernel-message"
    tags: str = "text-only"  # "text-only" | "all" | "none"
    nudge: str = "trailing-user"  # "trailing-user" | "none"

    def __post_init__(self) -> None:
        if self.summaries not in ("compress-call", "kernel-message"):
            raise ValueError(f"summaries must be 'compress-call' or 'kernel-message', got {self.summaries!r}")
        if self.tags not in STRATEGIES:
            raise ValueError(f"tags must be one of {STRATEGIES}, got {self.tags!r}")
        if self.nudge not in ("trailing-user", "none"):
            raise ValueError(f"nudge must be 'trailing-user' or 'none', got {self.nudge!r}")

    def to_dict(self) -> dict[str, str]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, str]) -> HostConfig:
        unknown = set(d) - {"summaries", "tags", "nudge"}
        if unknown:
            raise ValueError(f"unknown host config keys: {sorted(unknown)}")
        return cls(**d)


PROXY_HOST = HostConfig()


@dataclass
class ModelView:
    messages: list[Message]
    state: CompressionState
    decision: NudgeDecision
    truncated: list[Truncation]
    nudge_shown: bool


def render_for_model(messages: list[Message], state: CompressionState, kconfig: KernelConfig,
                     token_count: int, host: HostConfig = PROXY_HOST,
                     nudge_text: Callable[[NudgeDecision], str] | None = None, *,
                     count_tokens: CountTokens | None = None) -> ModelView:
    """Run the kernel turn and shape its output the way ``host`` sends it."""
    turn = process_turn(messages, state, kconfig, token_count, render_tags=host.tags,
                        count_tokens=count_tokens)
    out = turn.messages
    if host.summaries == "compress-call":
        out = [m for m in out if not m.id.startswith(SUMMARY_ID_PREFIX)]
    shown = False
    if host.nudge == "trailing-user" and turn.nudge.should_inject and nudge_text is not None:
        text = nudge_text(turn.nudge)
        if text:
            out = out + [Message(id=NUDGE_MESSAGE_ID, role="user", content_type="text", text=text)]
            shown = True
    return ModelView(out, turn.state, turn.nudge, turn.truncated, shown)
