"""Normalise source messages for the conformance checker.

The checker accepts either message shape used in this project:

* OpenAI chat dicts (``role``, ``content`` as a string or a list of text parts,
  ``tool_calls[{id, type, function{name, arguments}}]``, ``tool_call_id``, ``name``);
* flat kernel messages (``id``, ``role``, ``content_type``/``contentType``, ``text``,
  ``tool_name``/``toolName``, ``tool_call_id``/``toolCallId``).

Both become a list of :class:`SourceMessage`, one per text, tool call or tool result (an
assistant chat message with two tool calls gives three entries, like the kernel's flat
model). acp ref tags (``<acp tokens=".." type="..">mNNNNN</acp>``) are removed from the
text, because they are rendering, not content, and the ref they carry is recorded on the
message instead.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from doctrine.kernel.chat import content_text

__all__ = [
    "ACP_TAG_RE",
    "REF_RE",
    "MessageFormatError",
    "SourceMessage",
    "normalise_messages",
    "normalise_ref",
    "strip_acp_tags",
]

# The kernel renders tags exactly like this; be lenient about attribute order and spacing.
ACP_TAG_RE = re.compile(r"<acp\b[^>]*>\s*(m\d{1,5})\s*</acp>\n?", re.IGNORECASE)
# A message ref as a model would write it (kernel parsing accepts m5, M00005, m0005).
REF_RE = re.compile(r"(?<![A-Za-z0-9_])[mM]0*(\d{1,5})(?![A-Za-z0-9_])")
_EXACT_REF_RE = re.compile(r"^m\d{5}$")
_BLOCK_ID_RE = re.compile(r"^(?:acp_summary_)?(b\d{1,9})$")

_KINDS = {"text", "tool-call", "tool-result", "reasoning"}


class MessageFormatError(ValueError):
    """A source message that cannot be read; ``index`` is its position in the input list."""

    def __init__(self, message: str, index: int | None = None):
        super().__init__(message)
        self.index = index


@dataclass
class SourceMessage:
    """One normalised source message.

    ``ref`` is the kernel ref (``m00012``) when the message has one, from its id, a ``ref``
    field or an embedded acp tag. ``block_id`` is set for messages that are compression
    blocks (ids ``bN`` or ``acp_summary_bN``), the sources of a tier-2/3 summary.
    ``arguments`` holds the parsed JSON arguments of a tool call (empty if unparseable).
    """

    index: int
    role: str
    kind: str
    text: str
    id: str | None = None
    ref: str | None = None
    tool_name: str | None = None
    tool_call_id: str | None = None
    block_id: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """The best id to cite for this message: its ref, else its raw id, else ``#index``."""
        return self.ref or self.id or f"#{self.index}"


def normalise_ref(text: str) -> str | None:
    """``m5`` / ``M00005`` / ``m0005`` -> ``m00005``; None if ``text`` is not a ref."""
    m = REF_RE.fullmatch(text.strip())
    if not m:
        return None
    return f"m{int(m.group(1)):05d}"


def strip_acp_tags(text: str) -> tuple[str, list[str]]:
    """Remove acp ref tags; return the clean text and the refs the tags carried."""
    refs = [f"m{int(r[1:]):05d}" for r in ACP_TAG_RE.findall(text)]
    return ACP_TAG_RE.sub("", text), refs


def _content_text(content: Any, where: str) -> str:
    """The kernel's reading of chat content (``doctrine.kernel.chat.content_text``), for
    content of a type chat messages have; anything else is a format error naming where."""
    if content is not None and not isinstance(content, (str, list)):
        raise MessageFormatError(f"{where}: content must be a string or a list of parts", int(where.split()[-1]))
    return content_text(content)


def _parse_arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}
    return {}


def _ident(msg: dict[str, Any], text_refs: list[str]) -> tuple[str | None, str | None, str | None]:
    raw_id = msg.get("id")
    raw_id = str(raw_id) if raw_id is not None else None
    ref = None
    for cand in (msg.get("ref"), raw_id):
        if isinstance(cand, str) and _EXACT_REF_RE.match(cand.strip().lower()):
            ref = cand.strip().lower()
            break
    if ref is None and text_refs:
        ref = text_refs[0]
    block = None
    for cand in (msg.get("block_id"), msg.get("blockId"), raw_id):
        if isinstance(cand, str):
            m = _BLOCK_ID_RE.match(cand.strip())
            if m:
                block = m.group(1)
                break
    return raw_id, ref, block


def _is_flat(msg: dict[str, Any]) -> bool:
    return "content_type" in msg or "contentType" in msg or ("text" in msg and "content" not in msg)


def normalise_messages(messages: Any) -> list[SourceMessage]:
    """Turn chat or flat messages into :class:`SourceMessage` entries, in order.

    Raises :class:`MessageFormatError` naming the message index for input that is not a
    list of dicts with a string ``role``.
    """
    if not isinstance(messages, (list, tuple)):
        raise MessageFormatError("source messages must be a list of message objects")
    out: list[SourceMessage] = []
    call_names: dict[str, str] = {}

    def add(**kw: Any) -> None:
        out.append(SourceMessage(index=len(out), **kw))

    for i, msg in enumerate(messages):
        where = f"message {i}"
        if not isinstance(msg, dict):
            raise MessageFormatError(f"{where}: expected an object, got {type(msg).__name__}", i)
        role = msg.get("role")
        if not isinstance(role, str) or not role:
            raise MessageFormatError(f"{where}: missing or non-string 'role'", i)
        if _is_flat(msg):
            kind = msg.get("content_type", msg.get("contentType", "text"))
            if kind not in _KINDS:
                raise MessageFormatError(f"{where}: unknown content_type {kind!r}", i)
            text, refs = strip_acp_tags(_content_text(msg.get("text"), where))
            raw_id, ref, block = _ident(msg, refs)
            tool_name = msg.get("tool_name", msg.get("toolName"))
            call_id = msg.get("tool_call_id", msg.get("toolCallId"))
            if kind == "tool-call" and call_id and tool_name:
                call_names[str(call_id)] = str(tool_name)
            if kind == "tool-result" and not tool_name and call_id:
                tool_name = call_names.get(str(call_id))
            add(role=role, kind=kind, text=text, id=raw_id, ref=ref,
                tool_name=str(tool_name) if tool_name else None,
                tool_call_id=str(call_id) if call_id else None, block_id=block,
                arguments=_parse_arguments(text) if kind == "tool-call" else {})
            continue
        # OpenAI chat format.
        text, refs = strip_acp_tags(_content_text(msg.get("content"), where))
        raw_id, ref, block = _ident(msg, refs)
        if role == "tool":
            call_id = msg.get("tool_call_id")
            name = msg.get("name") or (call_names.get(str(call_id)) if call_id else None)
            add(role="tool", kind="tool-result", text=text, id=raw_id, ref=ref,
                tool_name=str(name) if name else None,
                tool_call_id=str(call_id) if call_id else None)
            continue
        reasoning = msg.get("reasoning_content") or msg.get("reasoning")
        if isinstance(reasoning, str) and reasoning.strip():
            add(role=role, kind="reasoning", text=reasoning, id=raw_id, ref=ref)
        if text.strip() or not msg.get("tool_calls"):
            add(role=role, kind="text", text=text, id=raw_id, ref=ref, block_id=block)
        calls = msg.get("tool_calls") or []
        if not isinstance(calls, list):
            raise MessageFormatError(f"{where}: tool_calls must be a list", i)
        for j, call in enumerate(calls):
            if not isinstance(call, dict):
                raise MessageFormatError(f"{where}: tool_calls[{j}] must be an object", i)
            fn = call.get("function") or {}
            if not isinstance(fn, dict):
                raise MessageFormatError(f"{where}: tool_calls[{j}].function must be an object", i)
            name = fn.get("name")
            raw_args = fn.get("arguments", "")
            args_text = raw_args if isinstance(raw_args, str) else json.dumps(raw_args)
            call_id = call.get("id")
            if call_id and name:
                call_names[str(call_id)] = str(name)
            add(role=role, kind="tool-call", text=args_text,
                id=f"{raw_id}#{call_id}" if raw_id and call_id else raw_id, ref=ref,
                tool_name=str(name) if name else None,
                tool_call_id=str(call_id) if call_id else None,
                arguments=_parse_arguments(raw_args))
    return out
