"""Optional model judge: ask a model whether a summary follows the doctrine, with reasons.

The deterministic checker (:func:`doctrine.conform.check_summary`) stays the default and the
floor; a judge is a second opinion whose agreement with the checker (and with hand-labelled
verdicts) is measured, never a replacement. The judge sees the doctrine's summary rules
(``how-to-compress``), the source range as plain text and the summary, and must answer with
one JSON object ``{"verdict": "pass" | "fail", "reasons": [...]}``.

    from doctrine.conform.judge import judge_summary
    verdict = judge_summary(messages, summary, complete=my_chat_fn)   # complete(messages) -> str
    verdict.passed, verdict.reasons, verdict.error

``complete`` is any callable that sends chat messages to a model and returns the reply text
(the benchmark wires it to an OpenAI-compatible server through the eval's ``openai``
backend). A reply that is not such an object is a :class:`JudgeVerdict` with ``error`` set
and ``passed=None``: counted, never guessed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .messages import normalise_messages
from .settings import default_doctrine

__all__ = ["JudgeVerdict", "judge_messages", "judge_summary", "parse_verdict"]

MAX_SOURCE_CHARS = 24_000

_INSTRUCTIONS = (
    "You review summaries that replace a range of a coding agent's history. The agent will carry on "
    "from the summary alone. Judge it by these rules:\n\n{rules}\n\n"
    "A summary passes when a colleague could continue the work from it: the goal, decisions with "
    "their reasons, exact errors, paths with lines and values are kept (words may change, exact items "
    "may not), open items stay open, and nothing is invented or altered. It fails when it loses a "
    "load-bearing item, lists bare fragments, pastes output, repeats itself or states wrong values.\n\n"
    'Answer with one JSON object and nothing else: {{"verdict": "pass" or "fail", "reasons": '
    '["short reason", ...]}}.'
)


@dataclass
class JudgeVerdict:
    passed: bool | None
    reasons: list[str] = field(default_factory=list)
    error: str | None = None
    raw: str = ""


def _source_text(messages: Any) -> str:
    parts = []
    for m in normalise_messages(messages):
        who = m.role if m.kind == "text" else f"{m.role} {m.kind} {m.tool_name or ''}".strip()
        parts.append(f"[{m.key}] {who}:\n{m.text}")
    text = "\n\n".join(parts)
    if len(text) > MAX_SOURCE_CHARS:
        half = MAX_SOURCE_CHARS // 2
        text = text[:half] + "\n[... middle of the range cut for length ...]\n" + text[-half:]
    return text


def judge_messages(messages: Any, summary: str, *, doctrine: Any = None, tier: int = 1) -> list[dict[str, str]]:
    """The chat messages a judge is sent."""
    doc = doctrine if doctrine is not None else default_doctrine()
    rules = doc.text("how-to-compress") if "how-to-compress" in doc.sections else ""
    if tier > 1:
        name = "tier2" if tier == 2 else "tier3"
        rules += "\n\n" + (doc.text(name) if name in doc.sections else "")
    return [
        {"role": "system", "content": _INSTRUCTIONS.format(rules=rules.strip())},
        {"role": "user", "content": f"SOURCE RANGE\n{_source_text(messages)}\n\nSUMMARY (tier {tier})\n{summary}"},
    ]


_OBJECT = re.compile(r"\{.*\}", re.S)


def parse_verdict(text: str) -> JudgeVerdict:
    """Read the judge's reply; anything but a JSON object with a pass/fail verdict is an error."""
    m = _OBJECT.search(text or "")
    if not m:
        return JudgeVerdict(None, error="no JSON object in the reply", raw=text)
    try:
        obj = json.loads(m.group(0))
    except ValueError as exc:
        return JudgeVerdict(None, error=f"malformed JSON ({exc})", raw=text)
    verdict = obj.get("verdict") if isinstance(obj, dict) else None
    if not isinstance(verdict, str) or verdict.strip().lower() not in ("pass", "fail"):
        return JudgeVerdict(None, error=f"verdict must be 'pass' or 'fail', got {verdict!r}", raw=text)
    reasons = obj.get("reasons") if isinstance(obj.get("reasons"), list) else []
    return JudgeVerdict(verdict.strip().lower() == "pass", [str(r)[:300] for r in reasons][:10], raw=text)


def judge_summary(messages: Any, summary: str, *, complete: Callable[[list[dict[str, str]]], str],
                  doctrine: Any = None, tier: int = 1) -> JudgeVerdict:
    """Ask ``complete`` for a verdict on ``summary``; a failed call is an error verdict."""
    try:
        reply = complete(judge_messages(messages, summary, doctrine=doctrine, tier=tier))
    except Exception as exc:  # a judge server's failure must not stop a benchmark run
        return JudgeVerdict(None, error=f"judge call failed: {str(exc)[:200]}")
    return parse_verdict(reply)
