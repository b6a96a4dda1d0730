"""Programmatic judges: exact match, fact recall, set F1 and counts. No model is a judge."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from doctrine.session import string_values

__all__ = ["contains", "exact_match", "fact_recall", "normalise", "set_f1", "visible_text"]


def normalise(text: str) -> str:
    """Whitespace runs become one space; ends are stripped (case is kept: facts are exact)."""
    return re.sub(r"\s+", " ", text or "").strip()


def exact_match(prediction: str, reference: str) -> bool:
    return normalise(prediction) == normalise(reference)


def contains(haystack: str, needle: str) -> bool:
    """``needle`` occurs in ``haystack`` after whitespace normalisation of both."""
    n = normalise(needle)
    return bool(n) and n in normalise(haystack)


def fact_recall(answer: str, facts: Iterable[str]) -> float:
    """Share of ``facts`` quoted exactly (whitespace-normalised) in ``answer``; 1.0 for none."""
    facts = [f for f in facts if normalise(f)]
    if not facts:
        return 1.0
    return sum(contains(answer, f) for f in facts) / len(facts)


def set_f1(predicted: Iterable[Any], reference: Iterable[Any]) -> dict[str, float]:
    """Precision, recall and F1 of two sets (both empty: all 1.0)."""
    p, r = set(predicted), set(reference)
    if not p and not r:
        return {"precision": 1.0, "recall": 1.0, "f1": 1.0}
    tp = len(p & r)
    prec = tp / len(p) if p else 0.0
    rec = tp / len(r) if r else 0.0
    f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
    return {"precision": prec, "recall": rec, "f1": f1}


def _strings(value: Any) -> list[str]:
    return string_values(value)


def visible_text(messages: list[dict[str, Any]]) -> str:
    """Everything a model can read in ``messages``: contents plus the decoded string values
    of tool-call arguments (summaries ride in the retained compress calls as JSON)."""
    parts = []
    for m in messages:
        parts.append(m.get("content") or "" if isinstance(m.get("content"), (str, type(None))) else str(m["content"]))
        for c in m.get("tool_calls") or []:
            raw = (c.get("function") or {}).get("arguments") or ""
            parts.append(raw if isinstance(raw, str) else json.dumps(raw))
            try:
                parts.extend(_strings(json.loads(raw) if isinstance(raw, str) else raw))
            except ValueError:
                pass
    return "\n".join(parts)
