"""The text form of tool calls that training teaches and inference parses.

One module owns both directions so that what the model is trained to write is exactly
what the eval backends read back:

    <tool_call>
    {"name": "compress", "arguments": {"topic": "...", "content": [...]}}
    </tool_call>

(the Hermes / Qwen convention, which the project's chat template renders and the native
templates of the GPU recipes' models use too). Several calls are separated by a newline;
free text may come before the first call.

Parsing is lenient where models are sloppy (an unterminated last block, ``parameters``
for ``arguments``, arguments given as a JSON string, a trailing comma-free garbage tail)
and strict where it matters: a block that is not a JSON object with a string ``name``
is reported as an error, never guessed.

``parse_assistant_text(text, strict=True)`` reads a reply the way vLLM's ``hermes`` tool
parser does (non-streaming, the ``--tool-call-parser hermes`` of a served adapter): every
``<tool_call>`` block (the last may be unterminated) must be exactly one JSON object with
``name`` and ``arguments``; if any block fails, the reply has no call at all and its whole
text is content. No ``parameters`` alias, no JSON-string arguments decoded, no trailing text
inside a block. Streaming, vLLM passes such broken arguments on and the billion-context proxy
parses them as ``{}`` (tools/proxy_record/FINDINGS.md, point 8): either way no usable call.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["PARSERS", "ParsedReply", "format_assistant_text", "format_tool_call", "parse_assistant_text",
           "normalise_tool_calls"]

PARSERS = ("lenient", "hermes_strict")  # eval recipes' ``tool_parser``

OPEN, CLOSE = "<tool_call>", "</tool_call>"
_BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.S)
_HERMES_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*)", re.S)  # vLLM's, as it is


def _arguments_dict(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return arguments  # left as given; the template writes strings verbatim
    return {} if arguments is None else arguments


def arguments_object(arguments: Any) -> dict[str, Any]:
    """A call's ``arguments`` (a JSON string or a dict) as a dict; ``{}`` for anything else."""
    v = _arguments_dict(arguments)
    return v if isinstance(v, dict) else {}


def format_tool_call(name: str, arguments: Any) -> str:
    """One call block. ``arguments`` may be a dict or a JSON string (OpenAI format)."""
    args = _arguments_dict(arguments)
    args_text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    return f'{OPEN}\n{{"name": {json.dumps(name, ensure_ascii=False)}, "arguments": {args_text}}}\n{CLOSE}'


def format_assistant_text(content: str | None, tool_calls: list[dict] | None) -> str:
    """The assistant reply as the chat template renders it (without the turn markers)."""
    parts = []
    for i, call in enumerate(tool_calls or []):
        fn = call.get("function", call)
        sep = "\n" if (content or i > 0) else ""
        parts.append(sep + format_tool_call(fn["name"], fn.get("arguments")))
    return (content or "") + "".join(parts)


def normalise_tool_calls(messages: list[dict]) -> list[dict]:
    """Copy of ``messages`` with tool-call arguments as dicts (templates expect objects;
    the OpenAI wire format and our parquet rows carry JSON strings)."""
    out = []
    for m in messages:
        m = {k: v for k, v in m.items() if v is not None}
        if m.get("tool_calls"):
            calls = []
            for c in m["tool_calls"]:
                fn = dict(c.get("function") or {})
                fn["arguments"] = _arguments_dict(fn.get("arguments"))
                calls.append({**{k: v for k, v in c.items() if v is not None}, "function": fn})
            m["tool_calls"] = calls
        out.append(m)
    return out


@dataclass
class ParsedReply:
    """A model's reply split into text and OpenAI-format tool calls."""

    content: str
    tool_calls: list[dict] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


def parse_assistant_text(text: str, *, id_prefix: str = "call", strict: bool = False) -> ParsedReply:
    """Parse generated text into content + tool calls (arguments as JSON strings);
    ``strict``: as vLLM's hermes parser (module docstring)."""
    text = text or ""
    if strict:
        return _parse_hermes_strict(text, id_prefix)
    first = text.find(OPEN)
    content = (text if first < 0 else text[:first]).strip()
    reply = ParsedReply(content=content)
    if first < 0:
        return reply
    for n, match in enumerate(_BLOCK.finditer(text, first)):
        raw = match.group(1).strip()
        try:
            obj, _ = json.JSONDecoder().raw_decode(raw)
        except json.JSONDecodeError as exc:
            reply.errors.append(f"tool call {n + 1}: not valid JSON ({exc.msg} at char {exc.pos})")
            continue
        except (ValueError, RecursionError) as exc:  # a number past the int-digit limit, deep nesting
            reply.errors.append(f"tool call {n + 1}: not valid JSON ({str(exc)[:80]})")
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or not obj["name"]:
            reply.errors.append(f"tool call {n + 1}: expected an object with a string 'name'")
            continue
        args = obj.get("arguments", obj.get("parameters", {}))
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except (ValueError, RecursionError):
                reply.errors.append(f"tool call {n + 1} ({obj['name']}): arguments are not valid JSON")
                continue
        if not isinstance(args, dict):
            reply.errors.append(f"tool call {n + 1} ({obj['name']}): arguments must be a JSON object")
            continue
        reply.tool_calls.append({
            "id": f"{id_prefix}_{n}",
            "type": "function",
            "function": {"name": obj["name"], "arguments": json.dumps(args, ensure_ascii=False)},
        })
    return reply


def _parse_hermes_strict(text: str, id_prefix: str) -> ParsedReply:
    first = text.find(OPEN)
    if first < 0:
        return ParsedReply(content=text)
    calls, errors = [], []
    for n, (closed, open_tail) in enumerate(_HERMES_BLOCK.findall(text)):
        raw = closed or open_tail
        try:
            obj = json.loads(raw)
        except ValueError as exc:
            errors.append(f"tool call {n + 1}: not valid JSON ({exc.msg} at char {exc.pos})")
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or "arguments" not in obj:
            errors.append(f"tool call {n + 1}: expected an object with a string 'name' and 'arguments'")
            continue
        calls.append({"id": f"{id_prefix}_{n}", "type": "function",
                      "function": {"name": obj["name"], "arguments": json.dumps(obj["arguments"], ensure_ascii=False)}})
    if errors:  # vLLM drops every call of the reply and returns its whole text as content
        return ParsedReply(content=text, errors=["hermes: no tool call parsed: " + "; ".join(errors)])
    return ParsedReply(content=text[:first].strip(), tool_calls=calls)
