"""Replay a scripted session through the kernel (``python -m doctrine.kernel replay``).

Script format (JSON lines):

* line 1, the config: ``{"model_context_limit": N, ...}``; any other key overrides a default
  by its reference name (``growthFloor``, ``minCompressRange``, ``{"nudge": {...}}``, ...);
* ``{"op": "turn", "messages": [{"id", "role", "content_type", "text", "tool_name"?,
  "tool_call_id"?}, ...], "token_count": N}``: the full flat history at this turn, or
  ``{"op": "turn", "append": [...], "token_count": N}``: the messages added since the last
  turn (the incremental form: a long session's script then grows linearly, not
  quadratically); ``"render_tags"`` (``all`` by default) may be set per turn;
* ``{"op": "compress", "call_id": "...", "ranges": [{"startId", "endId", "summary",
  "topic"?}], "on"?: "history" | "view"}``: the model's call, applied to the state after the
  previous turn and to that turn's input messages (``history``, the proxy's way) or to the
  tagged, pruned view the kernel returned (``view``, Pi's way).

One JSON line is printed per op (see ``turn_record`` and ``compress_record``); with
``structural=True`` (``--structural``) the records are the shape the acp-kernel differential
suite stores (``structural_turn`` / ``structural_compress``): sizes, refs, block
membership, error and warning kinds, and a hash of each rendered message. Blank lines
and lines starting with ``#`` or ``//`` are skipped. Any malformed line (bad JSON, NaN or
Infinity, nesting too deep, a wrong-typed config value or op field) is a :class:`ScriptError`
naming its line number; a file that is not UTF-8 is refused in one line.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TextIO

from doctrine.kernel.compress import CompressResult, apply_compression
from doctrine.kernel.compress_args import parse_compress_args
from doctrine.kernel.config import KernelConfig
from doctrine.kernel.messages import Message
from doctrine.kernel.state import CompressionState
from doctrine.kernel.turn import TurnResult, process_turn


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


# ------------------------------------------------------------ structural records
# The differential suite against acp-kernel compares these, not prose: each side maps its own
# error and warning texts onto one vocabulary of kinds.
_KINDS = (
    ("gate_consumed", re.compile(r"some ranges were already compressed")),
    ("too_small", re.compile(r"total compressible content too small")),
    ("none_resolved", re.compile(r"none of the \d+ requested range")),
    ("overlap", re.compile(r"overlaps an earlier range")),
    ("snapped_message", re.compile(r"is already inside b\d+; used")),
    ("snapped_block", re.compile(r"was folded into b\d+; used")),
    ("already_compressed", re.compile(r"already compressed \(")),
    ("protected_zone", re.compile(r"entirely in the recent protected zone")),
    ("protected_excluded", re.compile(r"in the recent protected zone left uncompressed")),
    ("no_new_messages", re.compile(r"only already-compressed content")),
    ("summary_empty", re.compile(r"summary is empty")),
    ("summary_short", re.compile(r"summary too short")),
    ("summary_long", re.compile(r"summary too long")),
    ("nothing_compressible", re.compile(r"nothing left to compress")),
    ("unknown_ref", re.compile(r"was never assigned|does not exist")),
    ("invalid_ref", re.compile(r"cannot parse ref|empty ref")),
    ("not_visible", re.compile(r"is not visible in context|no longer in context|already folded into")),
)


def message_kind(text: str) -> str:
    """The shared kind of one compress error or warning text."""
    for kind, pat in _KINDS:
        if pat.search(text):
            return kind
    return "other:" + text[:60]


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _state_record(s: CompressionState) -> dict[str, Any]:
    return {
        "refs": len(s.by_ref),
        "blocked": sum(1 for v in s.by_raw.values() if v == "BLOCKED"),
        "snapshot": len(s.token_snapshot),
        "stamps": [s.nudge.last_per_message_nudge_tokens, s.nudge.last_nudge_shown_tokens,
                   {str(k): v for k, v in s.nudge.last_shown_by_tier.items()}],
        "stats": [s.stats.tokens_compressed, s.stats.compression_count],
        "next_block_id": s.next_block_id,
        "next_run_id": s.next_run_id,
        "blocks": [{"id": b.block_id, "tier": b.tier, "active": b.active,
                    "direct": list(b.direct_message_ids), "effective": list(b.effective_message_ids),
                    "direct_blocks": list(b.direct_block_ids), "tokens": b.compressed_tokens,
                    "survived": b.survived_count, "generation": b.generation} for b in s.blocks],
    }


def structural_turn(r: TurnResult) -> dict[str, Any]:
    d = r.nudge
    b = d.breakdown or {}
    return {
        "op": "turn",
        "inject": d.should_inject,
        "tier": d.tier if d.should_inject else None,
        "emergency": bool(b.get("emergencyOverride") or b.get("overLimit")),
        "ranges": [{"start": x.start_ref, "end": x.end_ref, "count": x.count, "tokens": x.tokens,
                    "chars": x.chars, "tool_pct": x.tool_pct, "text_pct": x.text_pct,
                    "dangerous": bool(x.dangerous)} for x in d.compressible_ranges],
        "protected": [{"start": p.start_ref, "end": p.end_ref, "count": p.count, "tokens": p.tokens,
                       "tools": list(p.tools)} for p in d.protected_ranges],
        "tier_targets": [t.block_id for t in d.tier_target_blocks],
        "messages": [[m.id, m.role, m.content_type, text_hash(m.text)] for m in r.messages],
        **_state_record(r.state),
    }


def structural_compress(r: CompressResult) -> dict[str, Any]:
    return {
        "op": "compress",
        "blocks_created": r.blocks_created,
        "tokens_compressed": r.tokens_compressed,
        "errors": [message_kind(e) for e in r.errors],
        "warnings": [message_kind(w) for w in r.warnings],
        **_state_record(r.state),
    }


@dataclass
class Replayer:
    """Holds the session between ops; ``step`` takes one parsed op line."""

    config: KernelConfig
    structural: bool = False
    timing: bool = False  # records are {"op", "n", "ms"}: the kernel call's time only
    state: CompressionState = field(default_factory=CompressionState.initial)
    last_messages: list[Message] = field(default_factory=list)
    last_view: list[Message] = field(default_factory=list)
    last_compress: CompressResult | None = None

    def step(self, op: Any) -> dict[str, Any]:
        if not isinstance(op, dict):
            raise ValueError("an op line must be an object")
        kind = op.get("op")
        if kind == "turn":
            msgs = op.get("messages")
            appended = op.get("append")
            tc = op.get("token_count")
            if (msgs is None) == (appended is None):
                raise ValueError("turn needs exactly one of 'messages' (full history) or 'append'")
            if not isinstance(msgs if msgs is not None else appended, list):
                raise ValueError("turn 'messages' / 'append' must be a list")
            if isinstance(tc, bool) or not isinstance(tc, int) or tc < 0:
                raise ValueError("turn needs a non-negative integer 'token_count'")
            tags = op.get("render_tags", "all")
            if tags not in ("all", "text-only", "none"):
                raise ValueError("render_tags must be 'all', 'text-only' or 'none'")
            if msgs is not None:
                messages = [Message.from_dict(m) for m in msgs]
            else:
                messages = self.last_messages + [Message.from_dict(m) for m in appended]
            ids = set()
            for m in messages:
                if m.id in ids:
                    raise ValueError(f"duplicate message id {m.id!r}")
                ids.add(m.id)
            t0 = time.perf_counter()
            result = process_turn(messages, self.state, self.config, tc, render_tags=tags)
            ms = (time.perf_counter() - t0) * 1000
            self.state = result.state
            if self.timing:
                self.last_messages, self.last_view = messages, result.messages
                return {"op": "turn", "n": len(messages), "ms": ms}
            self.last_messages = messages
            self.last_view = result.messages
            return structural_turn(result) if self.structural else turn_record(result)
        if kind == "compress":
            ranges = op.get("ranges")
            if not isinstance(ranges, list):
                raise ValueError("compress needs a 'ranges' list")
            on = op.get("on", "history")
            if on not in ("history", "view"):
                raise ValueError("compress 'on' must be 'history' (the host's messages) or 'view'")
            call_id = op.get("call_id")
            if call_id is not None and not isinstance(call_id, str):
                raise ValueError("call_id must be a string")
            parsed = parse_compress_args({"content": ranges})
            if parsed.errors:
                res = CompressResult(self.state.copy(), 0, 0, errors=parsed.errors)
            else:
                msgs = self.last_view if on == "view" else self.last_messages
                t0 = time.perf_counter()
                res = apply_compression(parsed.ranges, msgs, self.state, self.config,
                                        compress_call_id=call_id)
                if self.timing:
                    self.state = res.state
                    return {"op": "compress", "n": len(msgs), "ms": (time.perf_counter() - t0) * 1000,
                            "blocks": res.blocks_created}
            self.state = res.state
            self.last_compress = res
            return structural_compress(res) if self.structural else compress_record(res)
        raise ValueError(f"unknown op {kind!r} (expected 'turn' or 'compress')")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number a script may hold")


def replay_lines(lines: Iterable[str], out: TextIO, *, structural: bool = False, timing: bool = False) -> None:
    """Replay script lines, writing one JSON line per op; raises ScriptError on a bad line."""
    replayer: Replayer | None = None
    for no, line in enumerate(lines, start=1):
        s = line.strip()
        if not s or s.startswith("#") or s.startswith("//"):
            continue
        try:
            d = json.loads(s, parse_constant=_no_constant)
        except json.JSONDecodeError as e:
            raise ScriptError(no, f"invalid JSON: {e.msg} (column {e.colno})") from None
        except ValueError as e:  # NaN or Infinity
            raise ScriptError(no, f"invalid JSON: {e}") from None
        except RecursionError:
            raise ScriptError(no, "invalid JSON: nested too deep") from None
        try:
            if replayer is None:
                replayer = Replayer(config_from_line(d), structural=structural, timing=timing)
                continue
            rec = replayer.step(d)
        except ValueError as e:
            raise ScriptError(no, str(e)) from None
        except (TypeError, KeyError, AttributeError, IndexError, RecursionError) as e:
            # A value of a shape no check above foresaw: still this line's fault, not a crash.
            raise ScriptError(no, f"the kernel cannot replay this op ({type(e).__name__}: {e})") from None
        out.write(json.dumps(rec, ensure_ascii=False) + "\n")
        out.flush()
    if replayer is None:
        raise ScriptError(0, "empty script: the first line must be a config object")


def replay_file(path: str, out: TextIO = sys.stdout, *, structural: bool = False, timing: bool = False) -> int:
    """CLI body: 0 on success, 2 on a malformed line (reported on stderr)."""
    try:
        with open(path, encoding="utf-8") as f:
            replay_lines(f, out, structural=structural, timing=timing)
    except ScriptError as e:
        print(f"{path}: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"{path}: cannot read script: {e}", file=sys.stderr)
        return 2
    except UnicodeDecodeError as e:
        print(f"{path}: not a UTF-8 text script (byte {e.object[e.start]:#04x} at offset {e.start})",
              file=sys.stderr)
        return 2
    return 0
