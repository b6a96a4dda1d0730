"""The baseline arms: plain chat messages, no ref tag, no nudge, no doctrine text.

``full`` keeps everything; ``n_latest_*`` and ``sliding`` keep the newest messages (a cut
that never splits a tool exchange); ``auto_compact`` and ``micro_auto`` are the threshold
compactor (:func:`compacted_view`), whose hooks (:class:`Compaction`) the compaction
article's switches in ``eval/arms/policies/compaction.py`` are made of.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from eval.arms.base import (
    CLEARED,
    SUMMARY_PREFIX,
    SUMMARY_PROMPT,
    ArmEnv,
    ArmInfo,
    ArmState,
    View,
    _split_question,
    _strip,
    _system,
    _tokens,
    _view,
    last_user_index,
    protocol_safe_tail,
)
from plumbing.chat_backend import prompt_text

__all__ = ["ARMS", "ARM_INFO", "SUMMARISERS", "Compaction", "Parts", "auto_compact", "compacted_view", "full",
           "micro_auto", "micro_compact", "n_latest", "sliding"]


def full(state: ArmState, env: ArmEnv) -> View:
    """Unbounded history: the reference condition."""
    return _view(env, state.history, len(state.history))


def n_latest(state: ArmState, env: ArmEnv, n: int = 20) -> View:
    """The newest ``n`` history messages before the question, cut protocol-safely."""
    before, question = _split_question(state.history)
    start = protocol_safe_tail(before, max(0, len(before) - n))
    kept = before[start:]
    return _view(env, kept + question, len(kept))


def sliding(state: ArmState, env: ArmEnv) -> View:
    """Newest messages that fit ``sliding_fraction`` of the window (protocol-safe cut)."""
    budget = int(env.window * env.compaction.sliding_fraction)
    fixed = _tokens(env, _system(env), env.task_tools)
    start, used = len(state.history), fixed
    while start > 0:
        t = env.count_tokens(prompt_text([_strip(state.history[start - 1])]))
        if used + t > budget:
            break
        used += t
        start -= 1
    start = protocol_safe_tail(state.history, start)
    kept = state.history[start:]
    return _view(env, kept, len(kept))


def micro_compact(messages: list[dict[str, Any]], min_chars: int = 500, keep: int = 5) -> list[dict[str, Any]]:
    """Replace old, long tool results with a placeholder.

    The newest ``max(keep, this turn's tool results)`` results stay; "this turn" is
    everything after the last user message.
    """
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    this_turn = sum(1 for m in messages[last_user + 1:] if m.get("role") == "tool")
    tool_idx = [i for i, m in enumerate(messages) if m.get("role") == "tool"]
    protected = set(tool_idx[-max(keep, this_turn):]) if tool_idx else set()
    out = []
    for i, m in enumerate(messages):
        if m.get("role") == "tool" and i not in protected and len(m.get("content") or "") > min_chars:
            m = {**m, "content": CLEARED}
        out.append(m)
    return out


Parts = list[tuple[dict[str, Any], int | None]]  # view messages with their history index (None: made up)


@dataclass(frozen=True)
class Compaction:
    """How a threshold compactor cuts and shapes its view; the defaults are ``auto_compact``.

    ``cut(state, env)`` says where the verbatim part starts when the compactor fires (default:
    the last user message); a last user message older than the cut stays shown, pinned after
    the summary. ``before_micro`` / ``after_micro`` reshape the view's parts around
    micro-compaction; ``on_summary(state, env, old_cut, new_cut)`` runs after each summary;
    ``note(state)`` is text shown after the summary that is never itself re-summarised.
    The compactor variants of ``eval/arms/policies/compaction.py`` are made of these hooks.
    """

    micro: bool = False
    cut: Callable[[ArmState, ArmEnv], int] | None = None
    before_micro: tuple[Callable[[ArmState, ArmEnv, Parts], Parts], ...] = ()
    after_micro: tuple[Callable[[ArmState, ArmEnv, Parts], Parts], ...] = ()
    on_summary: Callable[[ArmState, ArmEnv, int, int], None] | None = None
    note: Callable[[ArmState], str] | None = None


def compacted_view(state: ArmState, env: ArmEnv, how: Compaction) -> View:
    """The threshold compactor: once the view passes ``compact_threshold`` of the window,
    everything before the cut is replaced by one model-written summary (recorded as a call)."""
    def body() -> Parts:
        parts: Parts = []
        if state.summary:
            note = how.note(state) if how.note else ""
            parts.append(({"role": "user", "content": SUMMARY_PREFIX + state.summary + note}, None))
        lu = last_user_index(state.history)
        if lu < state.cut and state.history[lu].get("role") == "user":
            parts.append((state.history[lu], lu))
        parts += [(m, state.cut + i) for i, m in enumerate(state.history[state.cut:])]
        for f in how.before_micro:
            parts = f(state, env, parts)
        if how.micro:
            msgs = micro_compact([m for m, _ in parts], env.compaction.micro_min_chars, env.compaction.micro_keep)
            parts = list(zip(msgs, [o for _, o in parts], strict=True))
        for f in how.after_micro:
            parts = f(state, env, parts)
        return parts

    events = []
    parts = body()
    view = _view(env, [m for m, _ in parts], len(parts))
    if view.retained_tokens > env.compaction.compact_threshold * env.window:
        new = how.cut(state, env) if how.cut else last_user_index(state.history)
        if new > state.cut:
            source = _system(env) + [_strip(m) for m, o in parts if o is None or o < new]
            summary = env.summarise(source, SUMMARY_PROMPT)
            events.append({"event": "auto_compact", "before_tokens": view.retained_tokens,
                           "summarised_messages": new - state.cut + (1 if state.summary else 0)})
            old = state.cut
            state.summary, state.cut = summary, new
            if how.on_summary:
                how.on_summary(state, env, old, new)
            parts = body()
            view = _view(env, [m for m, _ in parts], len(parts))
            events[-1]["after_tokens"] = view.retained_tokens
    view.events = events
    return view


def _compacted(state: ArmState, env: ArmEnv, micro: bool) -> View:
    return compacted_view(state, env, Compaction(micro=micro))


def auto_compact(state: ArmState, env: ArmEnv) -> View:
    """One summary of everything before the last user message once the context passes 80%."""
    return _compacted(state, env, micro=False)


def micro_auto(state: ArmState, env: ArmEnv) -> View:
    """Micro-compaction of old tool results before each call, plus auto compaction."""
    return _compacted(state, env, micro=True)


ARMS: dict[str, Callable[[ArmState, ArmEnv], View]] = {
    "full": full,
    "n_latest_10": partial(n_latest, n=10),
    "n_latest_20": partial(n_latest, n=20),
    "n_latest_40": partial(n_latest, n=40),
    "sliding": sliding,
    "auto_compact": auto_compact,
    "micro_auto": micro_auto,
}
ARM_INFO: dict[str, ArmInfo] = {name: ArmInfo("baseline") for name in ARMS}
# The threshold compactors: a forced compaction is one summary.
SUMMARISERS: set[str] = {"auto_compact", "micro_auto"}
