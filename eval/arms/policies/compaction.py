"""The compaction article's switches as arms, built on the shipped compactor (``micro_auto``).

The SWE-rebench compaction article (section 3.3, "Proposed improvements to the compaction
mechanism", and the mechanism sequence of section 4.8) designs four optional switches on
top of the shipped micro + auto compaction. Each arm here is ``eval.arms.compacted_view``
with the shipped micro-compaction plus one switch (``compact_plus``: all four):

- ``compact_tail``: when the compactor fires, a recent share of the history
  (``tail_share`` of the window, in tokens) stays verbatim instead of only the last user
  message; the cut is a plain message cut (it may split a tool exchange);
- ``compact_step_cut``: the same tail, cut at whole steps (a user message, or an assistant
  message with all of its tool results), so no result loses its call and no result group
  is split;
- ``compact_offload``: tool outputs micro-compaction clears, and long ones the summary
  replaces, are saved; the view shows a handle (with the output's head) that
  ``read_tool_output`` opens, byte for byte;
- ``compact_retry_collapse``: a settled retry chain (failed calls of one tool followed by a
  call of it that worked) shows only the final call and result, with a note of the failed
  attempts; a chain still failing stays whole. It runs before micro-compaction, so retries
  do not push useful results out of its window.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import Any

from eval.arms.base import CLEARED, ArmEnv, ArmState, View
from eval.arms.baselines import Compaction, Parts, compacted_view
from eval.arms.policies.tools import ToolRun, function_schema, note_opened
from eval.judges import contains
from plumbing.chat_backend import prompt_text

__all__ = ["ARMS", "TOOLS", "collapse_retries", "message_cut", "offload_cleared", "read_tool_output", "step_cut",
           "step_units", "tail_budget"]


def message_tokens(env: ArmEnv, m: dict[str, Any]) -> int:
    return env.count_tokens(prompt_text([{k: v for k, v in m.items() if k != "id"}]))


def tail_budget(env: ArmEnv) -> int:
    return int(env.compaction.tail_share * env.window)


# ----------------------------------------------------------------------------- cuts


def message_cut(state: ArmState, env: ArmEnv) -> int:
    """``compact_tail``: the start of the longest suffix of the history whose messages fit
    the tail budget (never before the current cut; the newest message is always kept)."""
    hist, budget = state.history, tail_budget(env)
    start, used = len(hist), 0
    while start > state.cut:
        t = message_tokens(env, hist[start - 1])
        if used + t > budget and start < len(hist):
            break
        used += t
        start -= 1
    return start


def step_units(messages: list[dict[str, Any]], lo: int = 0, hi: int | None = None) -> list[tuple[int, int]]:
    """``messages[lo:hi]`` as whole steps ``(start, end)``: a user message alone, or an
    assistant message with the tool results of its calls that follow it; a tool result whose
    call is not in its step stands alone (only at ``lo``, where a cut already split it)."""
    hi = len(messages) if hi is None else hi
    units: list[tuple[int, int]] = []
    i = lo
    while i < hi:
        m = messages[i]
        j = i + 1
        calls = {c.get("id") for c in (m.get("tool_calls") or [])} if m.get("role") == "assistant" else set()
        while calls and j < hi and messages[j].get("role") == "tool" and messages[j].get("tool_call_id") in calls:
            j += 1
        units.append((i, j))
        i = j
    return units


def step_cut_index(history: list[dict[str, Any]], lo: int, budget: int, env: ArmEnv) -> int:
    """The start of the newest whole steps of ``history[lo:]`` that fit ``budget`` tokens
    (at least the newest step)."""
    units = step_units(history, lo)
    start, used = len(history), 0
    for a, b in reversed(units):
        t = sum(message_tokens(env, history[k]) for k in range(a, b))
        if used + t > budget and start < len(history):
            break
        used += t
        start = a
    return start


def step_cut(state: ArmState, env: ArmEnv) -> int:
    """``compact_step_cut``: the tail budget filled with whole steps, newest first."""
    return step_cut_index(state.history, state.cut, tail_budget(env), env)


# ----------------------------------------------------------------------------- retries


def _failed(text: str, env: ArmEnv) -> bool:
    """A failed tool result: its first line starts with a one-word marker (``ERROR``,
    ``Error:``) or holds a phrase marker (``command not found``) of ``retry_markers``."""
    lines = (text or "").strip().splitlines()
    first = lines[0] if lines else ""
    return any(first.startswith(k) if " " not in k else k in first for k in env.compaction.retry_markers)


def _single_step(parts: Parts, i: int) -> tuple[str, str] | None:
    """(tool name, result text) when ``parts[i]`` is an assistant message with one tool call
    and ``parts[i + 1]`` its result."""
    if i + 1 >= len(parts):
        return None
    m, r = parts[i][0], parts[i + 1][0]
    calls = m.get("tool_calls") or []
    if m.get("role") != "assistant" or len(calls) != 1 or r.get("role") != "tool" \
            or r.get("tool_call_id") != calls[0].get("id"):
        return None
    return str((calls[0].get("function") or {}).get("name") or ""), str(r.get("content") or "")


def retry_chains(parts: Parts, env: ArmEnv) -> list[tuple[int, int, bool]]:
    """Retry chains in ``parts``: ``(start, end, settled)``, ``end`` after the chain's last
    result. A chain is one or more failed single-call steps of one tool in a row, followed
    (settled) by a step of that tool whose result is not a failure, or by nothing yet
    (active: the agent is still retrying)."""
    out = []
    i = 0
    while i < len(parts):
        step = _single_step(parts, i)
        if step is None or not _failed(step[1], env):
            i += 1
            continue
        name, j = step[0], i
        while (s := _single_step(parts, j)) is not None and s[0] == name and _failed(s[1], env):
            j += 2
        nxt = _single_step(parts, j)
        if nxt is not None and nxt[0] == name:
            out.append((i, j + 2, True))
            i = j + 2
        else:
            if j >= len(parts):
                out.append((i, j, False))
            i = j
    return out


def collapse_retries(state: ArmState, env: ArmEnv, parts: Parts) -> Parts:
    """Settled chains become their final call and result, the result prefixed with a note of
    the failed attempts; active chains stay whole."""
    out: Parts = []
    last = 0
    for a, b, settled in retry_chains(parts, env):
        if not settled:
            continue
        out.extend(parts[last:a])
        fails = (b - a) // 2 - 1
        name = _single_step(parts, a)[0]  # type: ignore[index]
        first_err = (str(parts[a + 1][0].get("content") or "").strip().splitlines() or [""])[0][:160]
        final_call, final_result = parts[b - 2], parts[b - 1]
        note = (f"[retry note: {fails} earlier {name} attempt{'s' if fails > 1 else ''} failed before this one "
                f"(first error: {first_err}); they are left out]\n")
        out.append(final_call)
        out.append(({**final_result[0], "content": note + str(final_result[0].get("content") or "")},
                    final_result[1]))
        last = b
    out.extend(parts[last:])
    return out


# ----------------------------------------------------------------------------- offload


def _handle(state: ArmState, index: int) -> str:
    m = state.history[index]
    return f"out-{m.get('id') or index}"


def _save(state: ArmState, index: int) -> str:
    store = state.policy.setdefault("outputs", {})
    h = _handle(state, index)
    if h not in store:
        m = state.history[index]
        store[h] = {"content": str(m.get("content") or ""), "name": m.get("name") or "", "index": index}
    return h


def _handle_text(state: ArmState, env: ArmEnv, h: str) -> str:
    saved = state.policy["outputs"][h]
    text = saved["content"]
    head = text[:env.compaction.offload_preview_chars]
    return (f"[Tool output saved as {h} ({len(text)} characters, {text.count(chr(10)) + 1} lines); "
            f"read_tool_output(handle=\"{h}\") shows it in full. It begins:]\n{head}"
            + ("\n[...]" if len(text) > len(head) else ""))


def offload_cleared(state: ArmState, env: ArmEnv, parts: Parts) -> Parts:
    """Every tool result micro-compaction cleared is saved and shown as its handle."""
    out: Parts = []
    for m, o in parts:
        if o is not None and m.get("role") == "tool" and m.get("content") == CLEARED:
            h = _save(state, o)
            m = {**m, "content": _handle_text(state, env, h)}
        out.append((m, o))
    return out


def offload_summarised(state: ArmState, env: ArmEnv, old: int, new: int) -> None:
    """The long tool results a summary just replaced are saved (their handles are listed
    after the summary, never summarised themselves)."""
    for i in range(old, new):
        m = state.history[i]
        if m.get("role") == "tool" and len(str(m.get("content") or "")) > env.compaction.micro_min_chars:
            h = _save(state, i)
            listed = state.policy.setdefault("listed", [])
            if h not in listed:
                listed.append(h)


NOTE_MAX = 20  # handles listed after the summary (the newest)


def handles_note(state: ArmState) -> str:
    listed = state.policy.get("listed") or []
    if not listed:
        return ""
    store = state.policy["outputs"]
    lines = [f"- {h}: {store[h]['name'] or 'tool'} output, {len(store[h]['content'])} characters: "
             f"{(store[h]['content'].strip().splitlines() or [''])[0][:100]}" for h in listed[-NOTE_MAX:]]
    more = f"\n(and {len(listed) - NOTE_MAX} older ones)" if len(listed) > NOTE_MAX else ""
    return "\n\nSaved tool outputs (read_tool_output(handle) shows one in full):\n" + "\n".join(lines) + more


def read_tool_output(state: ArmState, env: ArmEnv, args: dict[str, Any]) -> ToolRun:
    """The saved output behind ``handle``, verbatim."""
    h = str(args.get("handle") or "").strip()
    store = state.policy.get("outputs") or {}
    if h not in store:
        known = ", ".join(sorted(store)[-5:]) or "none saved yet"
        return ToolRun(f"[read_tool_output FAILED: no saved output {h!r}; saved: {known}]")
    return ToolRun(store[h]["content"], ok=True, refetch=note_opened(state, h))


READ_TOOL_OUTPUT = function_schema(
    "read_tool_output", "Show a saved tool output in full, by the handle shown in its place.",
    {"handle": {"type": "string", "description": "the handle, e.g. out-s00012"}}, ["handle"])


# ----------------------------------------------------------------------------- arms


def _arm(how: Compaction, tools: tuple[dict[str, Any], ...], state: ArmState, env: ArmEnv) -> View:
    if tools:
        env = dataclasses.replace(env, task_tools=list(env.task_tools) + list(tools))
    return compacted_view(state, env, how)


_OFFLOAD = {"after_micro": (offload_cleared,), "on_summary": offload_summarised, "note": handles_note}

SWITCHES: dict[str, tuple[Compaction, tuple[dict[str, Any], ...]]] = {
    "compact_tail": (Compaction(micro=True, cut=message_cut), ()),
    "compact_step_cut": (Compaction(micro=True, cut=step_cut), ()),
    "compact_offload": (Compaction(micro=True, **_OFFLOAD), (READ_TOOL_OUTPUT,)),
    "compact_retry_collapse": (Compaction(micro=True, before_micro=(collapse_retries,)), ()),
    "compact_plus": (Compaction(micro=True, cut=step_cut, before_micro=(collapse_retries,), **_OFFLOAD),
                     (READ_TOOL_OUTPUT,)),
}

ARMS = {name: partial(_arm, how, tools) for name, (how, tools) in SWITCHES.items()}
ARM_TOOLS = {name: tuple(t["function"]["name"] for t in tools) for name, (_, tools) in SWITCHES.items()}
TOOLS = {"read_tool_output": read_tool_output}


def hint(state: ArmState, env: ArmEnv, missing: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """The reference (oracle) policy's recovery: open each saved output holding a missing text."""

    out = []
    for h, saved in (state.policy.get("outputs") or {}).items():
        if any(contains(saved["content"], t) for t in missing) and h not in state.policy.get("opened", set()):
            out.append(("read_tool_output", {"handle": h}))
    return out
