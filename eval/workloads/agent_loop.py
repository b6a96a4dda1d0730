"""What every model-driven driver shares: which reply calls go to the kernel, and the summariser.

:func:`kernel_calls` splits a reply's tool calls into those :func:`eval.arms.apply_reply`
applies (a kernel arm: ``KERNEL_TOOLS``; a policy arm: its own recovery tools) and the task's
own; :func:`summariser` makes the ``summarise`` callback of an ``ArmEnv`` that asks the backend
for a summary and records the call, its retained context being the summary prompt.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eval.arms import KERNEL_TOOLS, ArmInfo
from eval.workloads.base import RunContext, call_record, safe_complete
from plumbing.chat_backend import Request


def kernel_calls(info: ArmInfo, tool_calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The calls of ``tool_calls`` that the arm's context machinery applies, in order."""
    names = KERNEL_TOOLS if info.kind == "kernel" else info.tools
    return [c for c in tool_calls if (c.get("function") or {}).get("name") in names]


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
