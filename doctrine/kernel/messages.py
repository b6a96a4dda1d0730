"""The kernel's flat message model (spec §1.1).

One message per text, reasoning block, tool call and tool result. A tool call's text is its
JSON arguments; a call and its result are linked by ``tool_call_id``. Host-specific fields
ride along untouched in ``extra``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ROLES = ("user", "assistant", "system", "tool")
CONTENT_TYPES = ("text", "tool-call", "tool-result", "reasoning")
TOOL_TYPES = ("tool-call", "tool-result")


@dataclass
class Message:
    id: str
    role: str
    content_type: str = "text"
    text: str = ""
    tool_name: str | None = None
    tool_call_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def is_tool(self) -> bool:
        return self.content_type in TOOL_TYPES

    def with_text(self, text: str) -> Message:
        """A copy with new text (the original is left alone)."""
        return Message(self.id, self.role, self.content_type, text, self.tool_name,
                       self.tool_call_id, dict(self.extra) if self.extra else {})

    def to_dict(self) -> dict[str, Any]:
        """snake_case dict; None fields and an empty ``extra`` are omitted."""
        d: dict[str, Any] = {"id": self.id, "role": self.role, "content_type": self.content_type,
                             "text": self.text}
        if self.tool_name is not None:
            d["tool_name"] = self.tool_name
        if self.tool_call_id is not None:
            d["tool_call_id"] = self.tool_call_id
        if self.extra:
            d["extra"] = dict(self.extra)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Message:
        """Accepts snake_case or acp-kernel's camelCase keys; other keys go to ``extra``.

        Raises ValueError on a missing id/role or a value of the wrong type.
        """
        if not isinstance(d, dict):
            raise ValueError(f"message must be an object, got {type(d).__name__}")
        known = {"id", "role", "content_type", "contentType", "text", "tool_name", "toolName",
                 "tool_call_id", "toolCallId", "extra"}
        mid = d.get("id")
        role = d.get("role")
        if not isinstance(mid, str) or not mid:
            raise ValueError("message needs a non-empty string 'id'")
        if role not in ROLES:
            raise ValueError(f"message {mid}: role must be one of {ROLES}, got {role!r}")
        ctype = d.get("content_type", d.get("contentType", "text"))
        if ctype not in CONTENT_TYPES:
            raise ValueError(f"message {mid}: content_type must be one of {CONTENT_TYPES}, got {ctype!r}")
        text = d.get("text", "")
        if text is None:
            text = ""
        if not isinstance(text, str):
            raise ValueError(f"message {mid}: text must be a string")
        tool_name = d.get("tool_name", d.get("toolName"))
        tool_call_id = d.get("tool_call_id", d.get("toolCallId"))
        for name, v in (("tool_name", tool_name), ("tool_call_id", tool_call_id)):
            if v is not None and not isinstance(v, str):
                raise ValueError(f"message {mid}: {name} must be a string")
        extra = dict(d.get("extra") or {})
        extra.update({k: v for k, v in d.items() if k not in known})
        return cls(mid, role, ctype, text, tool_name, tool_call_id, extra)
