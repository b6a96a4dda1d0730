"""The one renderer of a model request: (serving profile, kernel state, doctrine) -> request.

Every place that shows the model a kernel-managed context (data_gen's replay and its logged
and teacher sources, every kernel arm of the eval, the held-out workload) renders it here,
so training and evaluation send the same bytes for the same state:

    frame = request_frame(profile, doctrine, base_prompt=host_prompt, task_tools=tools)
    req = render_request(frame, flat_messages, kernel_state)
    req.messages, req.tools        # the OpenAI chat request: system + view (+ trailing nudge)
    req.view.state                 # the kernel state after this turn
    req.token_count                # the fill the kernel decided on (profile.usage_counter)
    req.overflow                   # the request as sent is larger than the window

``frame`` holds what does not change within a session (system prompt, tool schemas, their
size, the nudge renderer). ``render_request`` sizes the request the way the host does (the
system prompt and tool schemas plus the rendered view), runs the kernel turn with that size
(``render_for_model``: tags, summaries, emergency truncation and nudge as the profile's host
sends them) and measures what is finally sent.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from doctrine.kernel.chat import to_chat
from doctrine.kernel.host import ModelView, render_for_model
from doctrine.kernel.messages import Message
from doctrine.kernel.profile import ServingProfile
from doctrine.kernel.state import SUMMARY_ID_PREFIX, CompressionState
from doctrine.kernel.turn import process_turn
from doctrine.render.nudges import nudge_text_for
from doctrine.render.prompts import render_system_prompt
from doctrine.render.tools import tool_schemas
from doctrine.spec import Doctrine


@dataclass
class RequestFrame:
    profile: ServingProfile
    system: str
    tools: list[dict[str, Any]]
    fixed_tokens: int  # usage counter over the system prompt and the tool schemas as JSON
    doctrine_text: str  # the doctrine's own text in the frame (system rules + tool descriptions)
    nudge_text: Callable[[Any], str | None] | None
    compress_tool: bool = True


def request_frame(profile: ServingProfile, doctrine: Doctrine | None, *, base_prompt: str = "",
                  task_tools: Sequence[dict[str, Any]] = (), compress_tool: bool = True) -> RequestFrame:
    """The fixed part of a session's requests under ``profile``.

    ``compress_tool=False`` is the engine-driven layout (the deterministic arm): the kernel's
    view without the doctrine, its tools or nudges."""
    count = profile.count_usage
    if compress_tool and doctrine is not None:
        mode = profile.prompt_mode
        system = render_system_prompt(doctrine, mode, base_prompt=base_prompt)
        own = tool_schemas(doctrine, mode, host=profile.host)
        tools = own + [dict(t) for t in task_tools]
        if profile.compact_tools:
            tools = [compact_tool(t) for t in tools]
        doctrine_text = render_system_prompt(doctrine, mode) + json.dumps(
            [t["function"]["description"] for t in own])
        nudge = None if profile.nudge_style == "none" else nudge_text_for(doctrine, mode, profile.nudge_style)
    else:
        system, tools, doctrine_text, nudge = base_prompt, [dict(t) for t in task_tools], "", None
    fixed = (count(system) if system else 0) + (count(tool_json(tools)) if tools else 0)
    return RequestFrame(profile, system, tools, fixed, doctrine_text, nudge, compress_tool)


def compact_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """``tool`` without its parameters' descriptions (names, types, enums and required kept;
    the function's own one-line description stays, and the distilled system prompt lists it
    too). What the ``pocket`` profile sends: ~220 fewer SmolLM2 tokens over the eight tools."""

    def strip(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k != "description"}
        if isinstance(x, list):
            return [strip(v) for v in x]
        return x

    out = json.loads(json.dumps(tool))
    fn = out.get("function")
    if isinstance(fn, dict) and isinstance(fn.get("parameters"), dict):
        fn["parameters"] = strip(fn["parameters"])
    return out


def tool_json(tools: Sequence[dict[str, Any]]) -> str:
    return json.dumps(list(tools), ensure_ascii=False, sort_keys=True)


@dataclass
class Request:
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    view: ModelView
    token_count: int  # what the kernel's gates read
    sent_tokens: int  # the request as finally sent (after truncation, with the nudge)
    window: int
    nudge_text: str = ""

    @property
    def overflow(self) -> bool:
        return self.sent_tokens > self.window

    @property
    def nudge_shown(self) -> bool:
        return self.view.nudge_shown


def _sized(frame: RequestFrame, flat: list[Message], state: CompressionState) -> int:
    """The host's size estimate for this turn: fixed part + the view it would send."""
    p = frame.profile
    host = p.host_config
    out = process_turn(flat, state, p.kernel, 0, render_tags=host.tags, count_tokens=p.count_tokens).messages
    if host.summaries == "compress-call":
        out = [m for m in out if not m.id.startswith(SUMMARY_ID_PREFIX)]
    return frame.fixed_tokens + sum(p.count_usage(m.text) for m in out)


def render_request(frame: RequestFrame, flat: list[Message], state: CompressionState, *,
                   token_count: int | None = None) -> Request:
    """Run the kernel turn over ``flat`` and build the request the profile's host sends.

    ``token_count`` overrides the host's own estimate (a logged session replays the size
    its host recorded)."""
    p = frame.profile
    tc = _sized(frame, flat, state) if token_count is None else token_count
    # No nudge renderer in the frame (engine layout, or nudge style "none"): no nudge is shown.
    view = render_for_model(flat, state, p.kernel, tc, p.host_config, frame.nudge_text,
                            count_tokens=p.count_tokens)
    chat = to_chat(view.messages)
    msgs = ([{"role": "system", "content": frame.system}] if frame.system else []) + chat
    sent = frame.fixed_tokens + sum(p.count_usage(m.text) for m in view.messages)
    nudge = view.messages[-1].text if view.nudge_shown else ""
    return Request(msgs, [dict(t) for t in frame.tools], view, tc, sent, p.window, nudge)

