"""A model as the replay's policy: the student whose states an on-policy round labels.

    from data_gen.student import student_policy
    policy = student_policy(backend, max_tokens=320)          # any plumbing.chat_backend.Backend
    for sample in replay_session(session, ..., policy=policy):  # rows: the doctrine's labels
        ...                                                     # at the states the student visits

At every labelled decision point the student is shown the row's own prompt (the messages
before the target, the row's tools) and answers. Its answer becomes the session's move
(:func:`move_from_reply`): a compress call is handed to the kernel (applied or refused, the
kernel's answer lands in the context), a recovery call is run, anything else (a task
action, a decline, text, a reply that does not parse) lets the scripted session go on. The
label the row carries is always the doctrine's, so the rows teach the right move from the
states the student's own folds made, including the call that corrects a refused fold.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from doctrine.label.labeler import Label
from plumbing.chat_backend import Backend, BackendError, Request
from plumbing.tool_format import arguments_object

__all__ = ["RECOVERY_TOOLS", "move_from_reply", "student_policy"]

RECOVERY_TOOLS = ("decompress", "search_context")
# How the backends say a prompt does not fit the model (vLLM, OpenAI-compatible servers, HF).
_OVERFLOW = re.compile(r"maximum context length|context length exceeded|context_length_exceeded|"
                       r"prompt is too long|longer than the maximum", re.I)


def move_from_reply(message: dict[str, Any], parse_errors: list[str] | None = None) -> Label:
    """The session move of a student's reply (an assistant ``message`` with ``tool_calls``):
    its first compress or recovery call, else ``session`` (the script goes on)."""
    calls = [c for c in message.get("tool_calls") or [] if isinstance(c, dict)]
    for call in calls:
        fn = call.get("function") or {}
        name = fn.get("name")
        if name == "compress" or name in RECOVERY_TOOLS:
            cid = str(call.get("id") or "student-call")
            one = {"role": "assistant", "content": message.get("content"),
                   "tool_calls": [{"id": cid, "type": "function",
                                   "function": {"name": name, "arguments": fn.get("arguments") or "{}"}}]}
            args = arguments_object(fn.get("arguments"))
            action = ({"type": "compress", "args": args, "call_id": cid} if name == "compress"
                      else {"type": "tool", "name": name, "args": args, "call_id": cid})
            return Label(kind="student", message=one, reason=name, action=action)
    reason = "malformed" if parse_errors and not calls else ("task_call" if calls else "text")
    return Label(kind="student", message={"role": "assistant", "content": message.get("content")}, reason=reason)


def student_policy(backend: Backend, *, max_tokens: int = 320, use_adapter: bool = True,
                   replies: list[dict[str, Any]] | None = None) -> Callable[[Any, Any], Label]:
    """A replay policy that asks ``backend`` at every point. ``replies`` (if given) collects
    one record per answer: the session, step, the label's kind, the reply text and the move."""

    def policy(sample: Any, label: Any) -> Label:
        # meta: the label, read only by the reference backends (the oracle replays it: a round
        # played by the oracle is the ordinary build's replay, the check that the loop is sound).
        request = Request(messages=sample.messages[:-1], tools=sample.tools, use_adapter=use_adapter,
                          max_tokens=max_tokens, meta={"oracle_reply": label.message})
        try:
            completion = backend.complete(request)
        except BackendError as exc:  # a failed call is a move that lets the script go on, counted
            # A prompt over the student's context: every later state is longer still, so the
            # session ends here (the replay stops at a context_overflow move) instead of asking
            # again at each step (measured: 31 of 85 asks of a live round were such errors).
            reason = "context_overflow" if _OVERFLOW.search(str(exc)) else "backend_error"
            move = Label(kind="student", message={"role": "assistant", "content": ""}, reason=reason)
            if replies is not None:
                replies.append(_record(sample, label, f"[backend error] {exc}", move))
            return move
        move = move_from_reply(completion.message, completion.parse_errors)
        if replies is not None:
            replies.append(_record(sample, label, completion.raw_text, move))
        return move

    return policy


def _record(sample: Any, label: Any, text: str, move: Label) -> dict[str, Any]:
    meta = sample.meta
    return {"session_id": meta.get("session_id"), "step": meta.get("step"), "window": meta.get("window"),
            "label_kind": getattr(label, "kind", ""), "reply": text, "move": move.action.get("type", "session"),
            "reason": move.reason}
