"""What every model-driven driver shares: which reply calls go to the kernel, and the summariser.

:func:`kernel_calls` splits a reply's tool calls into those :func:`eval.arms.apply_reply`
applies (a kernel arm: ``KERNEL_TOOLS``; a policy arm: its own recovery tools) and the task's
own; :func:`summariser` makes the ``summarise`` callback of an ``ArmEnv`` that asks the backend
for a summary and records the call, its retained context being the summary prompt.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eval.arms import KERNEL_TOOLS, ArmInfo, apply_reply
from eval.workloads.base import RunContext, call_record, safe_complete
from plumbing.chat_backend import Request


def kernel_calls(info: ArmInfo, tool_calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The calls of ``tool_calls`` that the arm's context machinery applies, in order."""
    names = KERNEL_TOOLS if info.kind == "kernel" else info.tools
    return [c for c in tool_calls if (c.get("function") or {}).get("name") in names]


def route_reply(state: Any, env: Any, view: Any, info: ArmInfo, reply: dict[str, Any],
                rec: dict[str, Any]) -> tuple[list[dict[str, Any]], bool]:
    """Apply the kernel calls of ``reply`` (:func:`kernel_calls`) to ``state`` and count them in
    the call record ``rec``; returns the reply's task calls and whether it held a kernel call.
    A reply of kernel calls only is a context decision: the task does not advance."""
    tcs = reply.get("tool_calls") or []
    kernel = kernel_calls(info, tcs)
    if not kernel:
        return tcs, False
    applied = apply_reply(state, env, view, {"content": reply.get("content") or "", "tool_calls": kernel})
    rec.update(kernel_errors=applied["kernel_errors"], compress_attempted=applied["compress_attempted"],
               compress_ok=applied["compress_ok"], recovery=applied["recovery"],
               recovered=applied["recovered"], refetched=applied["refetched"])
    return [c for c in tcs if c not in kernel], True


def summariser(ctx: RunContext, calls: list[dict[str, Any]],
               oracle_reply: Callable[[list[dict[str, Any]]], dict[str, Any]]) -> Callable[[list[dict[str, Any]], str], str]:
    """``summarise(source, instruction) -> text``; each call is appended to ``calls`` as a
    ``summary`` record whose ``retained_tokens`` is the summary prompt's token count."""

    def summarise(source: list[dict[str, Any]], instruction: str) -> str:
        req = Request(source + [{"role": "user", "content": instruction}], [], False, ctx.max_tokens,
                      {"oracle_reply": oracle_reply(source)})
        comp = safe_complete(ctx.backend, req)
        calls.append(call_record("summary", req, comp, retained_tokens=comp.prompt_tokens))
        return (comp.message.get("content") or "").strip() or "(empty summary)"

    return summarise
