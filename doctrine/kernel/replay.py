"""Replay a scripted session through the kernel (``python -m doctrine.kernel replay``).

Script format (JSON lines):

* line 1, the config: ``{"model_context_limit": N, ...}``; any other key overrides a default
  by its reference name (``growthFloor``, ``minCompressRange``, ``{"nudge": {...}}``, ...);
* ``{"op": "turn", "messages": [{"id", "role", "content_type", "text", "tool_name"?,
  "tool_call_id"?}, ...], "token_count": N}``: the full flat history at this turn;
* ``{"op": "compress", "call_id": "...", "ranges": [{"startRef", "endRef", "summary",
  "topic"?}]}``: the model's call, applied to the state after the previous turn and to that
  turn's input messages.

One JSON line is printed per op (see ``turn_record`` and ``compress_record``). Blank lines
and lines starting with ``#`` or ``//`` are skipped.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TextIO

from doctrine.kernel.compress import CompressResult, apply_compression
from doctrine.kernel.compress_args import parse_compress_args
from doctrine.kernel.config import KernelConfig
from doctrine.kernel.messages import Message
from doctrine.kernel.pipeline import TurnResult, process_turn
from doctrine.kernel.state import CompressionState


class ScriptError(ValueError):
    def __init__(self, line_no: int, reason: str):
        self.line_no = line_no
        super().__init__(f"line {line_no}: {reason}")


def config_from_line(d: Any) -> KernelConfig:
    if not isinstance(d, dict):
        raise ValueError("the first line must be a config object")
    d = dict(d)
    limit = d.pop("model_context_limit", d.pop("modelContextLimit", None))
    if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
        raise ValueError("config needs a positive integer model_context_limit")
    return KernelConfig.for_limit(limit, **d)


def turn_record(r: TurnResult) -> dict[str, Any]:
    d = r.nudge
    return {
        "inject": d.should_inject,
        "tier": d.tier if d.should_inject else None,
        "ranges": [{"start": x.start_ref, "end": x.end_ref, "count": x.count, "tokens": x.tokens,
                    "chars": x.chars, "tool_pct": x.tool_pct, "text_pct": x.text_pct}
                   for x in d.compressible_ranges],
        "protected": [{"start": p.start_ref, "end": p.end_ref, "count": p.count, "tokens": p.tokens}
                      for p in d.protected_ranges],
        "messages": [{"id": m.id, "role": m.role, "content_type": m.content_type, "text": m.text}
                     for m in r.messages],
    }


def compress_record(r: CompressResult) -> dict[str, Any]:
    return {
        "blocks_created": r.blocks_created,
        "tokens_compressed": r.tokens_compressed,
        "errors": len(r.errors),
        "warnings": len(r.warnings),
        "blocks": [{"id": b.block_id, "tier": b.tier, "active": b.active,
                    "effective": list(b.effective_message_ids)} for b in r.state.blocks],
    }


@dataclass
class Replayer:
    """Holds the session between ops; ``step`` takes one parsed op line."""

    config: KernelConfig
    state: CompressionState = field(default_factory=CompressionState.initial)
    last_messages: list[Message] = field(default_factory=list)
    last_compress: CompressResult | None = None

    def step(self, op: Any) -> dict[str, Any]:
        if not isinstance(op, dict):
            raise ValueError("an op line must be an object")
        kind = op.get("op")
        if kind == "turn":
            msgs = op.get("messages")
            tc = op.get("token_count")
            if not isinstance(msgs, list):
                raise ValueError("turn needs a 'messages' list")
            if isinstance(tc, bool) or not isinstance(tc, int):
                raise ValueError("turn needs an integer 'token_count'")
            messages = [Message.from_dict(m) for m in msgs]
            result = process_turn(messages, self.state, self.config, tc, render_tags="all")
            self.state = result.state
            self.last_messages = messages
            return turn_record(result)
        if kind == "compress":
            ranges = op.get("ranges")
            if not isinstance(ranges, list):
                raise ValueError("compress needs a 'ranges' list")
            call_id = op.get("call_id")
            if call_id is not None and not isinstance(call_id, str):
                raise ValueError("call_id must be a string")
            parsed = parse_compress_args({"content": ranges})
            if parsed.errors:
                res = CompressResult(self.state.copy(), 0, 0, errors=parsed.errors)
            else:
                res = apply_compression(parsed.ranges, self.last_messages, self.state, self.config,
                                        compress_call_id=call_id)
            self.state = res.state
            self.last_compress = res
            return compress_record(res)
        raise ValueError(f"unknown op {kind!r} (expected 'turn' or 'compress')")


def replay_lines(lines: Iterable[str], out: TextIO) -> None:
    """Replay script lines, writing one JSON line per op; raises ScriptError on a bad line."""
    replayer: Replayer | None = None
    for no, line in enumerate(lines, start=1):
        s = line.strip()
        if not s or s.startswith("#") or s.startswith("//"):
            continue
        try:
            d = json.loads(s)
        except json.JSONDecodeError as e:
            raise ScriptError(no, f"invalid JSON: {e.msg} (column {e.colno})") from None
        try:
            if replayer is None:
                replayer = Replayer(config_from_line(d))
                continue
            rec = replayer.step(d)
        except ValueError as e:
            raise ScriptError(no, str(e)) from None
        out.write(json.dumps(rec, ensure_ascii=False) + "\n")
        out.flush()
    if replayer is None:
        raise ScriptError(0, "empty script: the first line must be a config object")


def replay_file(path: str, out: TextIO = sys.stdout) -> int:
    """CLI body: 0 on success, 2 on a malformed line (reported on stderr)."""
    try:
        with open(path, encoding="utf-8") as f:
            replay_lines(f, out)
    except ScriptError as e:
        print(f"{path}: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"{path}: cannot read script: {e}", file=sys.stderr)
        return 2
    return 0
