"""``lcm``: a lossless-recursive engine policy (the billion-context paper's section 2 (d) and
3.5 describe the class, LCM [2605.04050]; the paper's ``deterministic`` arm is a deliberately
simplified stand-in, and a faithful one is the future work this arm is).

The engine, not the model, manages the context. The history is never changed (it is the
immutable store); the view is a row of summary nodes followed by the raw messages after the
``frontier``. Once the view passes ``lcm_soft`` of the window, the engine folds the oldest
raw steps outside the fresh tail (the newest ``lcm_fresh_share`` of the window) into a leaf
summary of at most ``lcm_leaf_share`` of the window, again and again until the view is under
``lcm_target``; whenever ``lcm_fanout`` summaries of one depth lie side by side it condenses
them into one summary a level up (summaries of summaries, recursively). If the view is still
larger than the window, the fresh tail is folded too, down to the newest step.

Summaries are made deterministically by the engine (``lcm_summary: extractive``: one line
per message, capped at ``lcm_summary_chars``), or written by the model under test
(``model``, a billed summary call) with the extractive text as the fallback when the model's
is empty or too long. Every node points at what it covers (a leaf at original messages, a
condensed node at its children), and ``expand(id)`` shows that: a condensed node's
children, a leaf's original messages verbatim, or one message by its id. Every original
message is reachable from the view through these pointers.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from eval.arms.base import SUMMARY_PROMPT, ArmEnv, ArmState, View, _tokens, last_user_index
from eval.arms.policies.compaction import message_tokens, step_cut_index, step_units
from eval.arms.policies.tools import ToolRun, function_schema, note_opened
from eval.judges import contains

__all__ = ["ARMS", "TOOLS", "expand", "force", "lcm"]

HEAD = ("Earlier messages are folded into summaries the context engine made. expand(id) shows what one "
        "covers: a summary's parts, or the original messages verbatim.\n")


def _st(state: ArmState) -> dict[str, Any]:
    return state.policy.setdefault("lcm", {"nodes": {}, "active": [], "frontier": 0, "seq": 0})


def _mid(state: ArmState, i: int) -> str:
    return str(state.history[i].get("id") or f"#{i}")


def render_message(state: ArmState, i: int) -> str:
    """One original message as ``expand`` shows it: its id, role (and tool name), verbatim
    content, and its tool calls."""
    m = state.history[i]
    who = m.get("role", "") + (f" {m['name']}" if m.get("name") else "")
    calls = "".join(f"\ncalls {(c.get('function') or {}).get('name')}({(c.get('function') or {}).get('arguments')})"
                    for c in m.get("tool_calls") or [])
    return f"[{_mid(state, i)}] {who}:\n{m.get('content') or ''}{calls}"


def _line(state: ArmState, i: int) -> str:
    m = state.history[i]
    text = " ".join(str(m.get("content") or "").split())
    if m.get("tool_calls"):
        fns = ", ".join(f"{(c.get('function') or {}).get('name')} {str((c.get('function') or {}).get('arguments'))[:80]}"
                        for c in m["tool_calls"])
        text = (text + " " if text else "") + f"calls {fns}"
    who = m.get("role", "") + (f" {m['name']}" if m.get("name") else "")
    return f"{_mid(state, i)} {who}: {text[:160]}"


def _cap(lines: list[str], limit: int) -> str:
    out, used = [], 0
    for k, ln in enumerate(lines):
        if used + len(ln) + 1 > limit and out:
            out.append(f"(+{len(lines) - k} more)")
            break
        out.append(ln[:limit])
        used += len(ln) + 1
    return "\n".join(out)


def _label(node: dict[str, Any]) -> str:
    return f"[{node['id']} · depth {node['depth']} · messages {node['first']}–{node['last']}]"


def _summary(state: ArmState, env: ArmEnv, lines: list[str], source: list[dict[str, Any]]) -> str:
    extractive = _cap(lines, env.engine.lcm_summary_chars)
    if env.engine.lcm_summary != "model":
        return extractive
    text = env.summarise(source, SUMMARY_PROMPT).strip()
    return text if text and len(text) <= 2 * env.engine.lcm_summary_chars else extractive


def _new_node(state: ArmState, depth: int, children: list[Any], first: str, last: str, text: str) -> str:
    lc = _st(state)
    lc["seq"] += 1
    nid = f"S{lc['seq']}"
    lc["nodes"][nid] = {"id": nid, "depth": depth, "children": children, "first": first, "last": last, "text": text}
    state.compressions_attempted += 1
    state.compressions_succeeded += 1
    return nid


def _leaf(state: ArmState, env: ArmEnv, fresh: float) -> str | None:
    """Fold the oldest raw steps outside the fresh tail into one leaf; its id, or None."""
    lc, hist = _st(state), state.history
    lo = lc["frontier"]
    units = step_units(hist, lo)
    if len(units) < 2:
        return None
    fresh_start = step_cut_index(hist, lo, int(fresh * env.window), env) if fresh > 0 else units[-1][0]
    units = [u for u in units if u[1] <= fresh_start]
    if not units:
        return None
    budget, used, end = int(env.engine.lcm_leaf_share * env.window), 0, lo
    for a, b in units:
        t = sum(message_tokens(env, hist[k]) for k in range(a, b))
        if used + t > budget and end > lo:
            break
        used, end = used + t, b
    idx = list(range(lo, end))
    source = [{"role": "user", "content": "\n\n".join(render_message(state, i) for i in idx)}]
    nid = _new_node(state, 1, idx, _mid(state, lo), _mid(state, end - 1),
                    _summary(state, env, [_line(state, i) for i in idx], source))
    lc["active"].append(nid)
    lc["frontier"] = end
    return nid


def _condense(state: ArmState, env: ArmEnv) -> list[str]:
    """Condense every run of ``lcm_fanout`` same-depth nodes side by side (oldest first)."""
    lc, made = _st(state), []
    fan = max(2, env.engine.lcm_fanout)
    changed = True
    while changed:
        changed = False
        act = lc["active"]
        for k in range(len(act) - fan + 1):
            run = act[k:k + fan]
            depths = {lc["nodes"][n]["depth"] for n in run}
            if len(depths) == 1:
                nodes = [lc["nodes"][n] for n in run]
                lines = [f"{n['id']}: {ln}" for n in nodes for ln in n["text"].splitlines()[:3]]
                source = [{"role": "user", "content": "\n\n".join(f"{_label(n)} {n['text']}" for n in nodes)}]
                nid = _new_node(state, depths.pop() + 1, run, nodes[0]["first"], nodes[-1]["last"],
                                _summary(state, env, lines, source))
                lc["active"] = act[:k] + [nid] + act[k + fan:]
                made.append(nid)
                changed = True
                break
    return made


def _render(state: ArmState, env: ArmEnv) -> View:
    lc, hist = _st(state), state.history
    msgs: list[dict[str, Any]] = [{"role": "system", "content": env.system_prompt}] if env.system_prompt else []
    if lc["active"]:
        msgs.append({"role": "user", "content": HEAD + "\n".join(
            f"{_label(lc['nodes'][n])} {lc['nodes'][n]['text']}" for n in lc["active"])})
    lu = last_user_index(hist)
    if lu < lc["frontier"] and hist[lu].get("role") == "user":
        msgs.append({k: v for k, v in hist[lu].items() if k != "id"})
    raw = [{k: v for k, v in m.items() if k != "id"} for m in hist[lc["frontier"]:]]
    msgs += raw
    return View(msgs, list(env.task_tools), len(raw), _tokens(env, msgs, env.task_tools))


def _fold(state: ArmState, env: ArmEnv, target: float, fresh: float) -> list[dict[str, Any]]:
    events = []
    view = _render(state, env)
    while view.retained_tokens > target:
        before = view.retained_tokens
        nid = _leaf(state, env, fresh)
        if nid is None:
            break
        made = _condense(state, env)
        view = _render(state, env)
        events.append({"event": "lcm_fold", "leaf": nid, "condensed": made, "before_tokens": before,
                       "after_tokens": view.retained_tokens})
    return events


def _with_tools(env: ArmEnv) -> ArmEnv:
    return dataclasses.replace(env, task_tools=list(env.task_tools) + [EXPAND])


def lcm(state: ArmState, env: ArmEnv) -> View:
    env = _with_tools(env)
    view = _render(state, env)
    events: list[dict[str, Any]] = []
    if view.retained_tokens > env.engine.lcm_soft * env.window:
        events = _fold(state, env, env.engine.lcm_target * env.window, env.engine.lcm_fresh_share)
        if _render(state, env).retained_tokens > env.window:  # the hard limit: fold the fresh tail too
            events += _fold(state, env, env.window, 0.0)
        view = _render(state, env)
    view.events = events
    return view


def force(state: ArmState, env: ArmEnv) -> str:
    """A forced compaction: fold everything outside the fresh tail."""
    return "engine" if _fold(state, _with_tools(env), 0, env.engine.lcm_fresh_share) else "none"


def expand(state: ArmState, env: ArmEnv, args: dict[str, Any]) -> ToolRun:
    target = str(args.get("id") or "").strip()
    lc = _st(state)
    node = lc["nodes"].get(target)
    if node is not None:
        if node["depth"] == 1:
            text = "\n\n".join(render_message(state, i) for i in node["children"])
        else:
            text = "\n".join(f"{_label(lc['nodes'][c])} {lc['nodes'][c]['text']}" for c in node["children"])
        return ToolRun(f"{_label(node)} covers:\n{text}", ok=True, refetch=note_opened(state, target))
    for i, m in enumerate(state.history):
        if str(m.get("id") or f"#{i}") == target:
            return ToolRun(render_message(state, i), ok=True, refetch=note_opened(state, target))
    known = ", ".join(lc["active"][-5:]) or "none yet"
    return ToolRun(f"[expand FAILED: no summary or message {json.dumps(target)}; summaries in view: {known}]")


EXPAND = function_schema(
    "expand", "Show what a summary covers (its parts, or the original messages verbatim), or one message by id.",
    {"id": {"type": "string", "description": "a summary id such as S3, or a message id shown in a summary"}},
    ["id"])

ARMS = {"lcm": lcm}
ARM_TOOLS = {"lcm": ("expand",)}
TOOLS = {"expand": expand}


def _leaf_of(state: ArmState, i: int) -> str | None:
    for nid, node in _st(state)["nodes"].items():
        if node["depth"] == 1 and i in node["children"]:
            return nid
    return None


def hint(state: ArmState, env: ArmEnv, missing: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """The reference (oracle) policy's recovery: expand the leaf that covers a missing text."""

    out: list[tuple[str, dict[str, Any]]] = []
    opened = state.policy.get("opened", set())
    for i in range(_st(state)["frontier"]):
        if any(contains(render_message(state, i), t) for t in missing):
            nid = _leaf_of(state, i)
            if nid and nid not in opened and ("expand", {"id": nid}) not in out:
                out.append(("expand", {"id": nid}))
    return out
