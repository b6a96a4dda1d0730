"""Python port of the acp-kernel context kernel (see README.md in this folder).

Entry points: ``process_turn`` (the per-turn pipeline), ``apply_compression`` /
``compress_tool_call`` (the model's compress call), ``render_for_model`` (a host's view),
``flatten`` / ``to_chat`` (OpenAI chat format) and ``CompressionState`` (persisted state).
"""

from doctrine.kernel.chat import content_hash_id, flatten, to_chat
from doctrine.kernel.compress import CompressRange, CompressResult, apply_compression
from doctrine.kernel.compress_args import ParsedCompress, compress_tool_call, parse_compress_args
from doctrine.kernel.config import (
    CompressConfig,
    KernelConfig,
    NudgeConfig,
    TiersConfig,
    TruncateConfig,
)
from doctrine.kernel.filters import FilterConfig, MessageFilter
from doctrine.kernel.host import HostConfig, ModelView, render_for_model
from doctrine.kernel.messages import Message
from doctrine.kernel.nudge import NudgeDecision, TierTargetBlock
from doctrine.kernel.prune import SUMMARY_HEADER, summary_text
from doctrine.kernel.recommend import ProtectedRange, Range, viable_ranges
from doctrine.kernel.refs import format_ref, parse_block_ref, parse_message_ref
from doctrine.kernel.state import BLOCKED, Block, CompressionState, NudgeStamps, StateError, Stats
from doctrine.kernel.tags import format_tokens
from doctrine.kernel.truncate import Truncation
from doctrine.kernel.turn import TurnResult, process_turn
from plumbing.tokens import (
    TokenizerCounter,
    default_count_tokens,
    estimate_fast,
    js_len,
)

__all__ = [
    "BLOCKED", "SUMMARY_HEADER", "Block", "CompressConfig", "CompressRange", "CompressResult",
    "CompressionState", "FilterConfig", "HostConfig", "KernelConfig", "Message", "MessageFilter",
    "ModelView", "NudgeConfig", "NudgeDecision", "NudgeStamps", "ParsedCompress", "ProtectedRange",
    "Range", "StateError", "Stats", "TierTargetBlock", "TiersConfig", "TokenizerCounter",
    "TruncateConfig", "Truncation", "TurnResult", "apply_compression", "compress_tool_call",
    "content_hash_id", "default_count_tokens", "estimate_fast", "flatten", "format_ref",
    "format_tokens", "js_len", "parse_block_ref", "parse_compress_args", "parse_message_ref",
    "process_turn", "render_for_model", "summary_text", "to_chat", "viable_ranges",
]
