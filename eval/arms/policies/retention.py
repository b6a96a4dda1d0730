"""``full_retention_search``: the complete history kept outside the context, searchable.

The other end of the retention axis the billion-context paper sets out (section 2 (b), the
full-retention-with-retrieval systems such as PRO-LONG [2607.20064]; one of the arms its
section 8.2 plans): nothing is summarised and nothing is lost. The view is the newest whole
steps that fit ``retention_share`` of the window (the last user message stays shown if it
is older), plus one line saying how many earlier messages the log holds. The model reaches
the rest with ``search_history(query)`` (the kernel's hybrid BM25 + character-bigram
scoring over every message of the log; ``search_limit`` hits, each with its id and a
preview) and ``read_history(id)`` (one message, verbatim).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from doctrine.kernel.search import SearchDoc, hybrid_scores, make_preview
from eval.arms.base import ArmEnv, ArmState, View, _tokens, last_user_index
from eval.arms.policies.compaction import step_cut_index
from eval.arms.policies.lcm import render_message
from eval.arms.policies.tools import ToolRun, function_schema, note_opened
from eval.judges import contains

__all__ = ["ARMS", "TOOLS", "full_retention_search", "read_history", "search_history"]


def _with_tools(env: ArmEnv) -> ArmEnv:
    return dataclasses.replace(env, task_tools=list(env.task_tools) + [SEARCH_HISTORY, READ_HISTORY])


def full_retention_search(state: ArmState, env: ArmEnv) -> View:
    env = _with_tools(env)
    hist = state.history
    start = step_cut_index(hist, 0, int(env.engine.retention_share * env.window), env) if hist else 0
    msgs: list[dict[str, Any]] = [{"role": "system", "content": env.system_prompt}] if env.system_prompt else []
    if start > 0:
        first, last = hist[0].get("id") or "#0", hist[start - 1].get("id") or f"#{start - 1}"
        msgs.append({"role": "user", "content": (
            f"The session log keeps all {start} earlier messages ({first} to {last}), not shown here. "
            "search_history(query) finds messages in the log; read_history(id) shows one verbatim.")})
        lu = last_user_index(hist)
        if lu < start and hist[lu].get("role") == "user":
            msgs.append({k: v for k, v in hist[lu].items() if k != "id"})
    raw = [{k: v for k, v in m.items() if k != "id"} for m in hist[start:]]
    msgs += raw
    return View(msgs, list(env.task_tools), len(raw), _tokens(env, msgs, env.task_tools))


def _doc_text(m: dict[str, Any]) -> str:
    calls = " ".join(str((c.get("function") or {}).get("arguments") or "") for c in m.get("tool_calls") or [])
    return " ".join(x for x in (str(m.get("content") or ""), calls) if x)


def search_history(state: ArmState, env: ArmEnv, args: dict[str, Any]) -> ToolRun:
    query = str(args.get("query") or "").strip()
    if not query:
        return ToolRun("[search_history FAILED: give a query]")
    docs, where = [], []
    for i, m in enumerate(state.history):
        text = _doc_text(m)
        if text:
            docs.append(SearchDoc(kind="message", ref=str(m.get("id") or f"#{i}"), text=text, title="", tier=0,
                                  role=m.get("role")))
            where.append(i)
    scores = hybrid_scores(docs, query) if docs else []
    ranked = sorted((k for k, s in enumerate(scores) if s > 0), key=lambda k: (-scores[k], k))[:env.engine.search_limit]
    state.policy.setdefault("searched", set()).add(query)
    if not ranked:
        return ToolRun(f"No message of the log matches {query!r} ({len(docs)} messages searched).")
    lines = [f"{len(ranked)} of {len(docs)} messages match {query!r}; read_history(id) shows one:"]
    for k in ranked:
        m = state.history[where[k]]
        who = m.get("role", "") + (f" {m['name']}" if m.get("name") else "")
        lines.append(f"- {docs[k].ref} ({who}): {make_preview(docs[k].text, query, 160)}")
    return ToolRun("\n".join(lines), ok=True)


def read_history(state: ArmState, env: ArmEnv, args: dict[str, Any]) -> ToolRun:
    target = str(args.get("id") or "").strip()
    for i, m in enumerate(state.history):
        if str(m.get("id") or f"#{i}") == target:
            return ToolRun(render_message(state, i), ok=True, refetch=note_opened(state, target))
    return ToolRun(f"[read_history FAILED: no message {target!r} in the log]")


SEARCH_HISTORY = function_schema(
    "search_history", "Search every earlier message of the session log; returns message ids with previews.",
    {"query": {"type": "string", "description": "words or an exact phrase to look for"}}, ["query"])
READ_HISTORY = function_schema(
    "read_history", "Show one message of the session log verbatim, by its id.",
    {"id": {"type": "string", "description": "a message id from search_history"}}, ["id"])

ARMS = {"full_retention_search": full_retention_search}
ARM_TOOLS = {"full_retention_search": ("search_history", "read_history")}
TOOLS = {"search_history": search_history, "read_history": read_history}


def hint(state: ArmState, env: ArmEnv, missing: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """The reference (oracle) policy's recovery: search for a missing text first, then read
    the message of the log that holds it."""

    out: list[tuple[str, dict[str, Any]]] = []
    searched, opened = state.policy.get("searched", set()), state.policy.get("opened", set())
    for t in missing:
        query = " ".join(t.split())[:80]
        if query not in searched:
            out.append(("search_history", {"query": query}))
            continue
        for i, m in enumerate(state.history):
            mid = str(m.get("id") or f"#{i}")
            if contains(render_message(state, i), t) and mid not in opened:
                out.append(("read_history", {"id": mid}))
                break
    return out
