"""GRPO reward terms, computed by the project itself (no judge model).

Each term is a plain function over (row, completion text) -> float, where ``row`` is a
curriculum row ``{messages, tools, meta}`` (the last message is the label) and the text is
what the policy generated after the row's context. They score the reply the way the eval does
(``eval.workloads.held_out.workload.score_reply`` on the row's rebuilt kernel turn), so a
reward and the curve's figures cannot disagree:

* ``kernel_accepts``: the compress call parses, the kernel applies every range (ids assigned,
  one block a range) and every boundary is an id the context showed: 1; a fold the kernel
  refuses: -1;
* ``summary_score``: the checker's (``doctrine.conform.check_summary``) mean score of the summaries;
* ``values_in_context``: share of the summaries' exact items (``doctrine.exact_items.exact_items``)
  that occur verbatim in the context: an invented or recalled value costs;
* ``right_kind``: the reply takes the label's kind of move (fold / ordinary action / recovery /
  decline: ``decision_correct``): 1, else 0;
* ``length``: 0 up to ``slack`` x the label's length (plus a floor), then down linearly to -1
  at twice that, so digests stop.

The three fold-quality terms pay only where the label folds and the reply folds: the policy
earns nothing for folding where the doctrine would not (``right_kind`` is 0 there).
"""

from __future__ import annotations

import functools
import json
from typing import Any

from doctrine.spec import resolve_doctrine
from eval.workloads.held_out.recall import recall_scores
from eval.workloads.held_out.workload import (
    KIND_OF_LABEL,
    rebuild_row,
    score_reply,
)
from eval.workloads.nudges import is_nudge
from plumbing.chat_backend import reply_from_text
from plumbing.tool_format import format_assistant_text

__all__ = ["TERMS", "kernel_accepts", "length", "right_kind", "row_from_json", "score", "summary_score",
           "values_in_context"]


def row_from_json(text: str) -> dict[str, Any]:
    """A row as the GRPO dataset column holds it (JSON), with ``tools`` and ``meta`` as objects."""
    row = json.loads(text)
    for key in ("tools", "meta"):
        if isinstance(row.get(key), str):
            row[key] = json.loads(row[key])
    return row


@functools.lru_cache(maxsize=4)
def _doctrine(version: str) -> Any:
    return resolve_doctrine(version)


@functools.lru_cache(maxsize=512)
def _score_cached(row_json: str, text: str) -> dict[str, Any]:
    row = row_from_json(row_json)
    meta = row.get("meta") or {}
    doctrine = _doctrine(str(meta.get("doctrine_version") or "v1"))
    mode = str(meta.get("prompt_mode") or "distilled")
    context, target = row["messages"][:-1], row["messages"][-1]
    last = context[-1] if context else {}
    nudge = last.get("role") == "user" and is_nudge(last.get("content") or "", doctrine, mode)
    comp = reply_from_text(text, prompt_tokens=0, completion_tokens=0, latency_s=0.0)
    rebuilt, _how = rebuild_row(row)
    nudge_meta = meta.get("nudge") if isinstance(meta.get("nudge"), dict) else {}
    out = score_reply(comp.message, target, context, row.get("tools") or [], comp.parse_errors, nudge,
                      KIND_OF_LABEL.get(str(meta.get("kind")), "ordinary"), doctrine,
                      view_refs=meta.get("view_refs"), nudge_tier=nudge_meta.get("tier"), rebuilt=rebuilt)
    out.update(recall_scores(comp.message, context, None))
    out["_label_chars"] = len(format_assistant_text(target.get("content"), target.get("tool_calls")))
    return out


def score(row: dict[str, Any] | str, text: str) -> dict[str, Any]:
    """The eval's scores of ``text`` as the reply to ``row`` (cached: the terms share one scoring)."""
    key = row if isinstance(row, str) else json.dumps(row, sort_keys=True, ensure_ascii=False)
    return _score_cached(key, text)


def _folds_where_label_folds(s: dict[str, Any]) -> bool:
    return s["label_kind"] == "compress" and s["pred_kind"] == "compress"


def kernel_accepts(row: dict[str, Any] | str, text: str) -> float:
    s = score(row, text)
    if not _folds_where_label_folds(s):
        return 0.0
    # compress_accepted: parsed, the kernel (or the refs) resolved every range without error;
    # range_valid also holds one block per range when the row rebuilds (ids assigned).
    ok = bool(s.get("compress_accepted") and s.get("range_valid") and s.get("ranges_visible"))
    return 1.0 if ok else -1.0


def summary_score(row: dict[str, Any] | str, text: str) -> float:
    s = score(row, text)
    return float(s.get("summary_score") or 0.0) if _folds_where_label_folds(s) else 0.0


def values_in_context(row: dict[str, Any] | str, text: str) -> float:
    s = score(row, text)
    if not _folds_where_label_folds(s):
        return 0.0
    copied, missing = s.get("values_copied", 0), s.get("values_not_in_context", 0)
    return copied / (copied + missing) if copied + missing else 1.0


def right_kind(row: dict[str, Any] | str, text: str) -> float:
    return 1.0 if score(row, text)["kind_correct"] else 0.0


def length(row: dict[str, Any] | str, text: str, *, slack: float = 1.5, floor_chars: int = 200) -> float:
    allowed = slack * score(row, text)["_label_chars"] + floor_chars
    over = len(text) - allowed
    return 0.0 if over <= 0 else -min(1.0, over / allowed)


TERMS = {"kernel_accepts": kernel_accepts, "summary_score": summary_score,
         "values_in_context": values_in_context, "right_kind": right_kind, "length": length}
