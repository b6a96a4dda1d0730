"""Held-out decisions scored teacher-forced: the labelled reply against the other decisions.

Beside the generated reply (never instead of it), each held-out decision is scored by the
log-probability the model gives the first K tokens of each candidate reply after the same
prompt (``Backend.score_replies``; only the hf backend has it, the others are reported as
``not supported``). The candidates are the label and one reply of each other decision form,
built from the case's own context:

- ``compress``: a compress call over the first range the nudge lists (the ``first_range``
  policy of ``eval.backends.oracle``); with no nudge, over the first message ref the context
  shows;
- ``act``: the session's task action: the last task-tool call the context holds (same tool,
  same arguments: the action the session was carrying on with), else the first task tool
  with empty arguments;
- ``decline``: a short plain reply that carries on without folding (``DECLINE``).

An alternative of the label's own form is left out (a task action is not scored against the
label's task action), and a plain-text label (a decline, or an ordinary answer) has no
``decline`` alternative. Only the first K tokens count (``first_tokens``, 12 by default): for
a tool call they hold the ``<tool_call>`` tag, the tool's name and the start of its
arguments, i.e. the decision, and little of its content; a reply shorter than K is scored
over all of its tokens, its end-of-turn token included.

Metrics per decision: ``decision_logprob`` (summed log-probability of the label's first K
tokens), ``decision_margin`` (label minus the best alternative), ``decision_win`` (the label
beats every alternative), ``decision_candidates`` (alternatives scored) and
``decision_best_alt`` (the form of the strongest alternative).
"""

from __future__ import annotations

import json
import re
from typing import Any

from eval.backends.oracle import first_range_policy
from plumbing.chat_backend import BackendError, Request

__all__ = ["DECLINE", "alternatives", "score_decision"]

DECLINE = "I'll carry on with the task; nothing needs folding right now."
FIRST_TOKENS = 12
KERNEL_TOOLS = {"compress", "decompress", "search_context", "acp_status"}
_MREF = re.compile(r"\bm\d{5}\b")


def _form(message: dict[str, Any]) -> str:
    names = [(c.get("function") or {}).get("name") for c in message.get("tool_calls") or []]
    if "compress" in names:
        return "compress"
    if "search_context" in names or "decompress" in names:
        return "recover"
    return "act" if names else "text"


def _task_action(context: list[dict[str, Any]], task_tools: list[dict[str, Any]]) -> dict[str, Any] | None:
    for m in reversed(context):
        if m.get("role") != "assistant":
            continue
        for c in m.get("tool_calls") or []:
            fn = c.get("function") or {}
            if fn.get("name") and fn["name"] not in KERNEL_TOOLS:
                args = fn.get("arguments")
                args = args if isinstance(args, str) else json.dumps(args or {})
                return {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "alt_act_0", "type": "function", "function": {"name": fn["name"], "arguments": args}}]}
    names = [(t.get("function") or {}).get("name") for t in task_tools]
    names = [n for n in names if n and n not in KERNEL_TOOLS]
    if not names:
        return None
    return {"role": "assistant", "content": "", "tool_calls": [
        {"id": "alt_act_0", "type": "function", "function": {"name": names[0], "arguments": "{}"}}]}


def _compress_call(request: Request, context: list[dict[str, Any]]) -> dict[str, Any] | None:
    reply = first_range_policy(request)
    if reply.get("tool_calls"):
        return reply
    refs = [r for m in context for r in _MREF.findall(m.get("content") or "")]
    if not refs:
        return None
    args = {"topic": "earlier work", "content": [
        {"startId": refs[0], "endId": refs[0], "summary": f"Earlier work in {refs[0]}, folded."}]}
    return {"role": "assistant", "content": "", "tool_calls": [
        {"id": "alt_compress_0", "type": "function", "function": {"name": "compress", "arguments": json.dumps(args)}}]}


def alternatives(target: dict[str, Any], request: Request, task_tools: list[dict[str, Any]]) -> list[tuple[str, dict]]:
    """(form, reply) of each alternative decision to the label ``target`` (see the module notes)."""
    label = _form(target)
    context = request.messages
    out: list[tuple[str, dict]] = []
    if label != "compress" and (c := _compress_call(request, context)) is not None:
        out.append(("compress", c))
    if label != "act" and (a := _task_action(context, task_tools)) is not None:
        out.append(("act", a))
    if label != "text":
        out.append(("decline", {"role": "assistant", "content": DECLINE}))
    return out


def score_decision(backend: Any, request: Request, target: dict[str, Any], task_tools: list[dict[str, Any]],
                   first_tokens: int = FIRST_TOKENS) -> dict[str, Any]:
    """The decision_* metrics of one held-out decision, or ``{"decision_scoring": "not
    supported ..."}`` when the backend cannot score."""
    fn = getattr(backend, "score_replies", None)
    if fn is None:
        return {"decision_scoring": f"not supported by the {getattr(backend, 'name', '?')} backend"}
    alts = alternatives(target, request, task_tools)
    label = {k: v for k, v in target.items() if k in ("role", "content", "tool_calls")}
    try:
        scores = fn(request, [label] + [r for _, r in alts], first_tokens)
    except NotImplementedError as exc:
        return {"decision_scoring": f"not supported: {exc}"}
    except BackendError as exc:
        return {"decision_scoring": f"failed: {exc}"}
    sums = [sum(s) for s in scores]
    out: dict[str, Any] = {"decision_scoring": "teacher-forced", "decision_logprob": sums[0],
                           "decision_candidates": len(alts)}
    if alts:
        best = max(range(1, len(sums)), key=lambda i: sums[i])
        out["decision_margin"] = sums[0] - sums[best]
        out["decision_win"] = sums[0] > sums[best]
        out["decision_best_alt"] = alts[best - 1][0]
    return out
