"""Lenient parsing of the model's ``compress`` tool arguments (spec §6.1).

Accepted: the arguments as a dict or a JSON string; ``content`` as a list, a JSON-encoded
list, or a single range object; a bare top-level range object; ``startRef``/``endRef`` (and
``messageId`` for one message) instead of ``startId``/``endId``. A top-level ``topic`` is
the default topic of every range; ``summaryMaxChars`` raises the summary limit. Problems
are returned as error strings, never raised.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from doctrine.kernel.compress import CompressRange, CompressResult, apply_compression, result_text
from doctrine.kernel.config import KernelConfig
from doctrine.kernel.messages import Message
from doctrine.kernel.state import CompressionState
from plumbing.tokens import CountTokens

_RANGE_KEYS = ("startId", "startRef", "endId", "endRef", "messageId")


@dataclass
class ParsedCompress:
    ranges: list[CompressRange] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    topic: str | None = None


def _range_from(entry: Any, i: int, topic: str | None, max_chars: int | None,
                errors: list[str]) -> CompressRange | None:
    where = f"content[{i}]"
    if not isinstance(entry, dict):
        errors.append(f"{where}: expected an object with startId, endId and summary")
        return None
    start = entry.get("startId", entry.get("startRef", entry.get("messageId")))
    end = entry.get("endId", entry.get("endRef", entry.get("messageId", start)))
    summary = entry.get("summary")
    bad = False
    for name, v in (("startId", start), ("endId", end)):
        if not isinstance(v, str) or not v.strip():
            errors.append(f"{where}: {name} is required (a ref like m00012 or b3)")
            bad = True
    if not isinstance(summary, str):
        errors.append(f"{where}: summary is required (a string)")
        bad = True
    t = entry.get("topic", topic)
    if t is not None and not isinstance(t, str):
        t = str(t)
    if bad:
        return None
    return CompressRange(start, end, summary, t or None, summary_max_chars=max_chars)


def parse_compress_args(args: Any) -> ParsedCompress:
    """Turn raw tool arguments into ranges, or error strings."""
    out = ParsedCompress()
    if isinstance(args, (str, bytes)):
        try:
            args = json.loads(args)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            out.errors.append(f"arguments are not valid JSON ({e.msg if hasattr(e, 'msg') else e})")
            return out
    if isinstance(args, list):
        args = {"content": args}
    if not isinstance(args, dict):
        out.errors.append("arguments must be an object with a content list")
        return out
    topic = args.get("topic")
    out.topic = topic if isinstance(topic, str) and topic else None
    max_chars = args.get("summaryMaxChars")
    if max_chars is not None and (isinstance(max_chars, bool) or not isinstance(max_chars, (int, float))):
        out.errors.append("summaryMaxChars must be a number")
        return out
    max_chars = None if max_chars is None else int(max_chars)
    content = args.get("content")
    if isinstance(content, str):
        try:
            content = json.loads(content)
        except json.JSONDecodeError as e:
            out.errors.append(f"content is not valid JSON ({e.msg})")
            return out
    if content is None and any(k in args for k in _RANGE_KEYS):
        content = [args]
    if isinstance(content, dict):
        content = [content]
    if content is None:
        out.errors.append("content is required: a list of {startId, endId, summary}")
        return out
    if not isinstance(content, list):
        out.errors.append("content must be a list of {startId, endId, summary}")
        return out
    if not content:
        out.errors.append("No ranges provided.")
        return out
    for i, entry in enumerate(content):
        r = _range_from(entry, i, out.topic, max_chars, out.errors)
        if r is not None:
            out.ranges.append(r)
    return out


def ranges_from_dicts(items: list[dict[str, Any]]) -> ParsedCompress:
    """Ranges given as ``{"startRef"|"startId", "endRef"|"endId", "summary", "topic"?}``."""
    return parse_compress_args({"content": items})


def compress_tool_call(args: Any, messages: list[Message], state: CompressionState,
                       config: KernelConfig, *, call_id: str | None = None,
                       count_tokens: CountTokens | None = None) -> CompressResult:
    """Parse and apply one compress tool call; argument errors fail the call as a whole."""
    parsed = parse_compress_args(args)
    if parsed.errors:
        return CompressResult(state=state.copy(), blocks_created=0, tokens_compressed=0,
                              errors=parsed.errors, text=result_text([], 0, parsed.errors, []))
    return apply_compression(parsed.ranges, messages, state, config, compress_call_id=call_id,
                             count_tokens=count_tokens)
