"""Re-render a row's nudge and system prompt in another prompt mode.

Held-out rows carry the context in the mode they were rendered in (``meta.prompt_mode``).
The ``doctrine`` arm must see the doctrine's own texts, so the system prompt is rebuilt with
``render_system_prompt`` (keeping the host's base prompt above the ``---`` rule) and the
trailing nudge is rebuilt with ``render_nudge`` from a ``NudgeView``: taken from
``meta["nudge_view"]`` when the row has one, else parsed back from the nudge's own lines
(ranges, breakdown, growth, target blocks), which is lossless for what a nudge shows.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

from doctrine.render.prompts import (
    BlockView,
    NudgeView,
    RangeView,
    render_nudge,
    render_system_prompt,
)

_RANGE = re.compile(r"^\s+(m\d+)(?:–(m\d+))?\s+(\d+) msgs?\s+([\d.]+K?)\s+\[(.*)\]\s*$")
_BLOCK = re.compile(r"^\s+(b\d+)\s+(\d+) msgs?\s+([\d.]+K?)→([\d.]+K?)(?:\s+\"(.*)\")?\s*$")
_TIER = re.compile(r"\[(?:EMERGENCY )?TIER ([23]) ")


def _tokens(s: str) -> int:
    return int(round(float(s[:-1]) * 1000)) if s.endswith("K") else int(s)


def split_system(text: str, doctrine: Any, mode: str) -> str | None:
    """The host's base prompt of a system prompt rendered in ``mode`` ("" if none), or None."""
    body = render_system_prompt(doctrine, mode)
    if text == body:
        return ""
    sep = "\n\n---\n\n" + body
    if text.endswith(sep):
        return text[: -len(sep)]
    return None


def is_nudge(text: str, doctrine: Any, mode: str) -> bool:
    for part in ("nudge-gentle", "nudge-emergency"):
        head = doctrine.text(part, mode) if part in doctrine.sections else ""
        if head and text.startswith(head):
            return True
    return "Compressible ranges (" in text or bool(_TIER.search(text))


def parse_nudge(text: str, doctrine: Any, mode: str, nudge_style: str = "list"):
    """A ``NudgeView`` that renders back to ``text`` in ``mode`` and ``nudge_style``, or None
    when it cannot."""
    emergency_head = doctrine.text("nudge-emergency", mode) if "nudge-emergency" in doctrine.sections else ""
    voice = "emergency" if emergency_head and text.startswith(emergency_head) else "gentle"
    tier_m = _TIER.search(text)
    tier = int(tier_m.group(1)) if tier_m else 1
    breakdown: dict[str, int] = {}
    growth = 0
    ranges, blocks = [], []
    for line in text.splitlines():
        if line.startswith("Context breakdown: "):
            for part in line[len("Context breakdown: "):].split(" | "):
                amount, _, key = part.partition(" ")
                try:
                    breakdown[key] = _tokens(amount)
                except ValueError:
                    return None
        elif line.startswith("+") and line.endswith(" since last nudge"):
            try:
                growth = _tokens(line[1:].split(" ")[0])
            except ValueError:
                return None
        elif m := _RANGE.match(line):
            start, end = m.group(1), m.group(2) or m.group(1)
            count, tokens, tag = int(m.group(3)), _tokens(m.group(4)), m.group(5)
            pm = re.match(r"tool (\d+)% \| text (\d+)%", tag)
            if pm:
                ranges.append(RangeView(start, end, count, tokens, tool_pct=int(pm.group(1)), text_pct=int(pm.group(2))))
            elif tag.startswith("PROTECTED: "):
                tools = tuple(t.strip() for t in tag[len("PROTECTED: "):].split(" — ")[0].split(","))
                ranges.append(RangeView(start, end, count, tokens, protected=True, tools=tools))
            elif mm := re.match(r"([\d.]+K?) compressible \| ([\d.]+K?) protected: (.*)$", tag):
                # A mixed group: one compressible part and one protected part that coalesce
                # back into the same line (only the sums are shown, so this is lossless).
                tools = tuple(t.strip() for t in mm.group(3).split(","))
                ranges.append(RangeView(start, start, max(0, count - 1), _tokens(mm.group(1))))
                ranges.append(RangeView(start, end, min(1, count), _tokens(mm.group(2)), protected=True,
                                        tools=tools))
            else:
                return None
        elif m := _BLOCK.match(line):
            blocks.append(BlockView(m.group(1), tier - 1, int(m.group(2)), _tokens(m.group(3)),
                                    _tokens(m.group(4)), m.group(5) or ""))
    ex = re.search(r"^Example: compress\((.*)\)$", text, re.M)
    if ex and tier == 1:  # the example names the first compressible range's real end
        try:
            first = json.loads(ex.group(1))["content"][0]
            i = next(i for i, r in enumerate(ranges) if not r.protected)
            if ranges[i].start == first["startId"]:
                ranges[i] = replace(ranges[i], end=first["endId"])
        except (ValueError, KeyError, IndexError, TypeError, StopIteration):
            pass
    view = NudgeView(tier, voice, ranges, breakdown, growth, blocks)
    try:
        again = render_nudge(view, doctrine, mode, nudge_style)
    except Exception:
        return None
    return view if again == text else None


def row_nudge_style(meta: dict[str, Any]) -> str:
    """The nudge style of the profile a row was rendered under ("list" when it does not say):
    the host setting, which a re-render in another prompt mode keeps."""
    extra = meta.get("extra")
    if isinstance(extra, str):
        try:
            extra = json.loads(extra)
        except ValueError:
            extra = None
    profile = ((extra or {}).get("kernel_input") or {}).get("profile") if isinstance(extra, dict) else None
    style = profile.get("nudge_style") if isinstance(profile, dict) else None
    return style if style in ("list", "list_only") else "list"


def _proxy_chat_system(first: dict[str, Any], doctrine: Any, row_mode: str, mode: str) -> str:
    """A ``proxy_chat`` row's system message is the client's (tagged m00001) + ``---`` + the
    proxy-layout block (``doctrine.render.proxy_texts.proxy_block``): swap the block for
    ``mode``'s; a message that does not end with it is kept as the row has it."""
    from doctrine.render.proxy_texts import proxy_block

    content = first.get("content") or ""
    old = proxy_block(doctrine, row_mode)
    if not content.endswith(old):
        return "fallback"
    if row_mode == mode:
        return "kept"
    first["content"] = content[: len(content) - len(old)] + proxy_block(doctrine, mode)
    return "rerendered"


def rerender_context(messages: list[dict[str, Any]], doctrine: Any, row_mode: str, mode: str,
                     meta: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``messages`` with system prompt and trailing nudge rendered in ``mode``.

    Returns the messages and notes: ``system`` / ``nudge`` each "kept", "rerendered" or
    "fallback" (the row's text could not be matched; the doctrine text replaced it anyway
    for the system prompt, the row's nudge was kept).
    """
    notes = {"system": "kept", "nudge": "kept", "nudge_present": False}
    style = row_nudge_style(meta)
    out = [dict(m) for m in messages]
    if meta.get("host") == "proxy_chat" and out and out[0].get("role") == "system":
        notes["system"] = _proxy_chat_system(out[0], doctrine, row_mode, mode)
    elif out and out[0].get("role") == "system":
        base = split_system(out[0].get("content") or "", doctrine, row_mode)
        if base is None:
            notes["system"] = "fallback"
            base = ""
        elif row_mode == mode:
            base = None
        if base is not None:
            out[0]["content"] = render_system_prompt(doctrine, mode, base_prompt=base)
            notes["system"] = notes["system"] if notes["system"] == "fallback" else "rerendered"
    last = out[-1] if out else None
    if last and last.get("role") == "user" and is_nudge(last.get("content") or "", doctrine, row_mode):
        notes["nudge_present"] = True
        if row_mode != mode:
            view = None
            nv = meta.get("nudge_view")
            if isinstance(nv, dict):
                try:
                    view = NudgeView(nv["tier"], nv["voice"], [RangeView(**r) for r in nv.get("ranges", [])],
                                     dict(nv.get("breakdown", {})), int(nv.get("growth", 0)),
                                     [BlockView(**b) for b in nv.get("target_blocks", [])])
                except (KeyError, TypeError):
                    view = None
            view = view or parse_nudge(last["content"], doctrine, row_mode, style)
            if view is None:
                notes["nudge"] = "fallback"
            else:
                out[-1] = {**last, "content": render_nudge(view, doctrine, mode, style) or ""}
                notes["nudge"] = "rerendered"
    return out, notes
