"""Python port of the acp-kernel context kernel (see README.md in this folder)."""

from doctrine.kernel.messages import Message
from doctrine.kernel.state import BLOCKED, Block, CompressionState, NudgeStamps, StateError, Stats
from doctrine.kernel.tokens import TokenizerCounter, default_count_tokens, estimate_fast, js_len

__all__ = [
    "BLOCKED",
    "Block",
    "CompressionState",
    "Message",
    "NudgeStamps",
    "StateError",
    "Stats",
    "TokenizerCounter",
    "default_count_tokens",
    "estimate_fast",
    "js_len",
]
