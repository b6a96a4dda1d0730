"""Hard (tool) protection, spec §5.1.

A tool call or result is protected when its tool is ``compress``, matches a pattern of
``protected_tools`` (exact, or prefix when the pattern ends in ``*``), or the
``is_tool_protected`` callback says so. "With pairing" also protects results whose call is
protected.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from doctrine.kernel.messages import Message

if TYPE_CHECKING:
    from doctrine.kernel.config import KernelConfig

COMPRESS_TOOL = "compress"


def tool_matches(tool_name: str, patterns: tuple[str, ...]) -> bool:
    for p in patterns:
        if p.endswith("*"):
            if tool_name.startswith(p[:-1]):
                return True
        elif tool_name == p:
            return True
    return False


def is_message_protected(msg: Message, config: KernelConfig) -> bool:
    """True only for tool calls/results that carry a protected ``tool_name``."""
    if not msg.is_tool or not msg.tool_name:
        return False
    if msg.tool_name == COMPRESS_TOOL:
        return True
    if tool_matches(msg.tool_name, config.protected_tools):
        return True
    cb = config.is_tool_protected
    if cb is not None:
        try:
            return bool(cb(msg.tool_name, msg.text))
        except Exception:  # a host callback must not break a turn
            return False
    return False


def protected_ids_with_pairing(messages: list[Message], config: KernelConfig) -> set[str]:
    """Ids of protected messages plus results whose tool call is protected."""
    out: set[str] = set()
    protected_calls: set[str] = set()
    for m in messages:
        if is_message_protected(m, config):
            out.add(m.id)
            if m.content_type == "tool-call" and m.tool_call_id:
                protected_calls.add(m.tool_call_id)
    if protected_calls:
        for m in messages:
            if m.content_type == "tool-result" and m.tool_call_id in protected_calls:
                out.add(m.id)
    return out


def is_compress_call(msg: Message) -> bool:
    return msg.content_type == "tool-call" and msg.tool_name == COMPRESS_TOOL
