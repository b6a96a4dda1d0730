"""What every workload shares: a case, the per-run context, call records."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from eval.arms.base import ArmEnv
from plumbing.chat_backend import Backend, BackendError, Completion, Request


@dataclass
class Case:
    case_id: str
    payload: Any


@dataclass
class RunContext:
    """Everything a case needs besides its payload, the arm and the seed."""

    backend: Backend
    doctrine: Any
    window: int = 8192
    horizon: int = 2
    max_tokens: int = 256
    arm_settings: dict[str, Any] = field(default_factory=dict)
    kernel_overrides: dict[str, Any] = field(default_factory=dict)
    gate: str = "aggressive"
    host: str = "proxy"
    nudge_style: str = "list"
    tool_parser: str = "lenient"  # plumbing.tool_format.PARSERS: how a reply's calls are read


def arm_env(ctx: RunContext, summarise: Any, *, task_tools: list[dict[str, Any]], system_prompt: str) -> ArmEnv:
    """The :class:`ArmEnv` of one case: the run's window, counter, doctrine, serving
    profile and ``arm_settings`` with the case's tools, system prompt and summariser."""
    return ArmEnv.build(ctx.window, ctx.backend.count_tokens, summarise, task_tools=task_tools,
                        system_prompt=system_prompt, doctrine=ctx.doctrine, kernel_overrides=ctx.kernel_overrides,
                        gate=ctx.gate, host=ctx.host, nudge_style=ctx.nudge_style, **ctx.arm_settings)


def call_record(purpose: str, request: Request | None, completion: Completion | None, *, view: Any = None,
                real: bool = True, prompt_tokens: int | None = None, completion_tokens: int | None = None,
                **extra: Any) -> dict[str, Any]:
    """One call's record: tokens, doctrine tokens, latency, retained context, raw output."""
    rec: dict[str, Any] = {
        "purpose": purpose, "real": real, "time": round(time.time(), 3),
        "prompt_tokens": int(prompt_tokens if prompt_tokens is not None else (completion.prompt_tokens if completion else 0)),
        "completion_tokens": int(completion_tokens if completion_tokens is not None else (completion.completion_tokens if completion else 0)),
        "doctrine_tokens": getattr(view, "doctrine_tokens", 0) if view is not None else 0,
        "retained_messages": getattr(view, "retained_messages", 0) if view is not None else 0,
        "retained_tokens": getattr(view, "retained_tokens", 0) if view is not None else 0,
        "nudge_shown": bool(getattr(view, "nudge_shown", False)),
        "parse_errors": list(completion.parse_errors) if completion else [],
        "kernel_errors": [],
    }
    if completion is not None and real:
        rec.update(latency_s=round(completion.latency_s, 4), raw_text=completion.raw_text,
                   tool_calls=completion.tool_calls)
    if view is not None and getattr(view, "events", None):
        rec["events"] = view.events
    if view is not None and getattr(view, "profile", None) is not None:
        # Kernel arms: the request as sent in the profile's counter; a request larger than the
        # window (after the host's emergency path) is a failure of that call, counted.
        rec["sent_tokens"] = int(getattr(view, "sent_tokens", 0))
        rec["overflow"] = bool(getattr(view, "overflow", False))
    rec.update(extra)
    return rec


def safe_complete(backend: Backend, request: Request) -> Completion:
    """``backend.complete`` where a failure of the call itself becomes a counted parse error."""
    try:
        return backend.complete(request)
    except BackendError:
        raise  # the backend is unusable: the case fails and the run stays incomplete
    except Exception as exc:  # noqa: BLE001 - malformed output must never crash a run
        return Completion({"role": "assistant", "content": ""}, "", [], [f"backend error: {exc}"])
