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

The ``proxy_chat`` host (the billion-context proxy as recorded, ``doctrine.kernel.proxy_chat``)
renders through ``render_proxy_flat``: the client's system prompt is view message m00001 with
the doctrine's block after ``---``, the client's tools come before the four compress tools,
tool results go without names, earlier turns' compress calls are gone, and the fill is the
previous call's prompt tokens (the caller passes it as ``token_count``).

Wording at serve time. The proxy appends its own fixed text (ACP TAGS / TOOLS / SUMMARIES,
~2.5K chars) and writes its own nudge sentences; those are the proxy's and are not copied
here. Under ``proxy_chat`` the block and the nudges are the doctrine's texts in the same
places and of the same length class, so a model trained here sees, behind the real proxy, the
same structure (positions, refs, ranges, example call, tool order) in different sentences.
What carries over is what the structure says; what a model keyed to our exact sentences
learned does not. To train robustly, render each session under several paraphrases of the
block and the nudge texts (doctrine versions or prompt sets that differ in wording only) and
evaluate on one held out; the real proxy's text can be checked at serve time only (by the
end-to-end check behind the real proxy), never committed.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from doctrine.kernel.chat import to_chat
from doctrine.kernel.host import NUDGE_MESSAGE_ID, ModelView, render_for_model
from doctrine.kernel.messages import Message
from doctrine.kernel.profile import ServingProfile
from doctrine.kernel.proxy_chat import earlier_folds_dropped, render_proxy_flat
from doctrine.kernel.state import SUMMARY_ID_PREFIX, CompressionState
from doctrine.kernel.turn import process_turn
from doctrine.render.nudges import nudge_text_for, proxy_nudge_text_for
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
    client_system: str = ""  # proxy_chat: the client's system prompt, a view message of its own
    proxy_chat: bool = False  # rendered by ``render_proxy_flat`` (the recorded proxy's layout)


def request_frame(profile: ServingProfile, doctrine: Doctrine | None, *, base_prompt: str = "",
                  task_tools: Sequence[dict[str, Any]] = (), compress_tool: bool = True) -> RequestFrame:
    """The fixed part of a session's requests under ``profile``.

    ``compress_tool=False`` is the engine-driven layout (the deterministic arm): the kernel's
    view without the doctrine, its tools or nudges."""
    count = profile.count_usage
    if compress_tool and doctrine is not None and profile.variant.system_in_view:
        return _proxy_chat_frame(profile, doctrine, base_prompt, task_tools)
    if compress_tool and doctrine is not None:
        mode = profile.prompt_mode
        system = render_system_prompt(doctrine, mode, base_prompt=base_prompt)
        own = tool_schemas(doctrine, mode, host=profile.variant.tools_host)
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


def _proxy_chat_frame(profile: ServingProfile, doctrine: Doctrine, base_prompt: str,
                      task_tools: Sequence[dict[str, Any]]) -> RequestFrame:
    """The ``proxy_chat`` frame: the doctrine's block alone (the client's prompt is in the view;
    ``doctrine.render.proxy_texts``), the client's tools then the compress tools, the
    proxy-shaped nudge with the same four texts as the exported proxy config."""
    from doctrine.render.proxy_texts import proxy_block, proxy_doctrine

    mode = profile.prompt_mode
    block = proxy_block(doctrine, mode)
    own = tool_schemas(doctrine, mode, host=profile.variant.tools_host)
    tools = [dict(t) for t in task_tools] + own
    count = profile.count_usage
    texts = proxy_doctrine(doctrine, mode)  # the four texts the export gives the proxy
    nudge = None if profile.nudge_style == "none" else proxy_nudge_text_for(texts, mode, profile.nudge_style)
    doctrine_text = block + json.dumps([t["function"]["description"] for t in own])
    fixed = count(block) + (count(tool_json(tools)) if tools else 0)
    return RequestFrame(profile, block, tools, fixed, doctrine_text, nudge, True, client_system=base_prompt,
                        proxy_chat=True)


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
    kernel_flat: list[Message] | None = None  # proxy_chat: the kernel's input (client system first)

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
    if frame.proxy_chat:
        return _render_proxy_chat(frame, flat, state, token_count)
    tc = _sized(frame, flat, state) if token_count is None else token_count
    # No nudge renderer in the frame (engine layout, or nudge style "none"): no nudge is shown.
    view = render_for_model(flat, state, p.kernel, tc, p.host_config, frame.nudge_text,
                            count_tokens=p.count_tokens)
    chat = to_chat(view.messages)
    msgs = ([{"role": "system", "content": frame.system}] if frame.system else []) + chat
    sent = frame.fixed_tokens + sum(p.count_usage(m.text) for m in view.messages)
    nudge = view.messages[-1].text if view.nudge_shown else ""
    return Request(msgs, [dict(t) for t in frame.tools], view, tc, sent, p.window, nudge)



def proxy_chat_flat(frame: RequestFrame, flat: list[Message]) -> list[Message]:
    """The client's history as the ``proxy_chat`` host's kernel sees it: the client's system
    prompt first, earlier turns' compress calls gone, tool results without a name."""
    from doctrine.kernel.chat import flatten

    out = earlier_folds_dropped(flat) if not frame.profile.variant.folds_kept else list(flat)
    out = [dataclasses.replace(m, tool_name=None) if m.content_type == "tool-result" else m for m in out]
    head = flatten([{"role": "system", "content": frame.client_system}]) if frame.client_system else []
    return head + out


def _render_proxy_chat(frame: RequestFrame, flat: list[Message], state: CompressionState,
                       token_count: int | None) -> Request:
    p = frame.profile
    hist = proxy_chat_flat(frame, flat)
    # The host's fill is the previous call's prompt tokens; a caller without one (a single
    # request out of context) gets this request's own estimate instead.
    tc = token_count if token_count is not None else _sized_proxy(frame, hist, state)
    own = len(frame.tools) - 4
    r = render_proxy_flat(hist, frame.tools[:own], state, p.kernel, tc, system_block=frame.system,
                          acp_tools=frame.tools[own:], nudge_text=frame.nudge_text, count_tokens=p.count_tokens)
    view_msgs = list(r.view)
    nudge = r.messages[-1]["content"] if r.nudge_shown else ""
    if r.nudge_shown:
        view_msgs.append(Message(id=NUDGE_MESSAGE_ID, role="user", content_type="text", text=nudge))
    view = ModelView(view_msgs, r.state, r.decision, r.truncated, r.nudge_shown)
    whole = p.count_request  # the served model's own count, where the profile names the model
    sent = whole(r.messages, r.tools) if whole else frame.fixed_tokens + sum(p.count_usage(m.text) for m in view_msgs)
    return Request(r.messages, [dict(t) for t in r.tools], view, tc, sent, p.window, nudge, kernel_flat=hist)


def _sized_proxy(frame: RequestFrame, hist: list[Message], state: CompressionState) -> int:
    p = frame.profile
    out = process_turn(hist, state, p.kernel, 0, render_tags="text-only", count_tokens=p.count_tokens).messages
    out = [m for m in out if not m.id.startswith(SUMMARY_ID_PREFIX)]
    return frame.fixed_tokens + sum(p.count_usage(m.text) for m in out)
