"""The billion-context proxy over OpenAI chat completions, as recorded (``proxy_chat``).

``render_proxy_chat`` builds the upstream request the proxy (v0.1.45, acp-kernel 0.0.36,
``stream: true``) sends for one client request. It reproduces what
``tools/proxy_record/`` recorded (facts in ``tools/proxy_record/FINDINGS.md``;
``tests/doctrine/kernel/test_proxy_chat.py`` checks it against the structural fixtures).
This differs from the ``proxy`` host variant of ``profile.py``, which was written from the
kernel's spec:

* the client's system message is a message like any other: it gets the first ref
  (``m00001``) and a ``text-only`` tag, and can be offered and folded. The proxy's block
  is appended to its text after ``SYSTEM_SEPARATOR``. When no client system message is
  left (folded), the block alone becomes a new system message at the front, untagged;
* tool results carry no tool name, upstream or inside the kernel (acp-kernel 0.0.36's chat
  reader never reads ``name``). Upstream they go without ``name``. In the kernel, the
  recent-zone exception for ``bash``/``read``/search tools then applies to their calls
  only, not their results (``proxy_flatten``);
* tools are the client's, in its order, then the proxy's four (``ACP_TOOL_ORDER``);
* earlier folds leave nothing in view: the kernel's summary messages are dropped, and the
  compress call and its result exist only in the same turn's re-request
  (``rerequest_after_compress``). Only the client's own history carries anything else;
* the nudge is one trailing user message, untagged, on this request only;
* offered ranges are the kernel's recommended ranges with fewer than 200 tokens dropped;
* compress is applied to the kernel's view (tagged text), not the client's messages;
* the context count the gates read is the previous upstream response's ``prompt_tokens``
  (0 on a session's first call), including any nudge it carried. The proxy first takes
  ``max_tokens`` (8,192 when absent) off the declared window: ``effective_limit``.

The proxy's wording (system block, tool descriptions, nudge text) is not here. The caller
passes its own texts, the doctrine's, in ``system_block``, ``acp_tools`` and ``nudge_text``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from doctrine.kernel.chat import flatten, to_chat
from doctrine.kernel.compress import apply_compression
from doctrine.kernel.config import KernelConfig
from doctrine.kernel.messages import Message
from doctrine.kernel.nudge import NudgeDecision
from doctrine.kernel.recommend import Range, viable_ranges
from doctrine.kernel.state import SUMMARY_ID_PREFIX, CompressionState
from doctrine.kernel.turn import process_turn

SYSTEM_SEPARATOR = "\n\n---\n\n"
ACP_TOOL_ORDER = ("compress", "decompress", "search_context", "acp_status")
DEFAULT_MAX_TOKENS = 8192  # what the proxy assumes when a request sets no max_tokens
TITLE_MAX_TOKENS = 200  # at or below it the proxy injects nothing (a title request)
MAX_ROUNDS = 10  # upstream requests per client request while the model keeps calling proxy tools


def effective_limit(window: int, max_tokens: int | None) -> int:
    """The limit the proxy's kernel sees: the window less this request's output budget."""
    out = DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens
    return window - out if 0 < out < window else window


# The proxy's own compress settings (its config file's ``compress`` block) and what each sets
# in the kernel (the proxy's ``applyCompressSettings``). Nothing else of the kernel config is
# reachable through the proxy: the gentle gate's minimum growth floor (20,000) among them.
PROXY_SETTINGS = ("modelContextLimit", "maxContextLimit", "emergencyThresholdPercent", "nudgeGrowthTokens",
                  "preserveRecentMessages", "preserveRecentTokens", "minCompressRange", "tiers")
# The settings of the recordings that fold (tuned-8k, pocket-3k): the recent zone and the
# minimum range shrunk so folds can happen below ~20K windows.
SMALL_WINDOW_SETTINGS = {"preserveRecentTokens": 800, "minCompressRange": 1000}


def _ratio(v: float | str) -> float:
    if isinstance(v, str):
        s = v.strip()
        return float(s[:-1]) / 100 if s.endswith("%") else float(s)
    return float(v)


def proxy_config(window: int, max_tokens: int | None = None,
                 settings: dict[str, Any] | None = None) -> KernelConfig:
    """The kernel config the proxy runs for a declared ``window``, a request's
    ``max_tokens`` and its ``compress`` settings (unknown keys are refused, with the list)."""
    s = dict(settings or {})
    unknown = sorted(set(s) - set(PROXY_SETTINGS))
    if unknown:
        raise ValueError(f"not a setting of the proxy's compress block: {unknown}; "
                         f"expected some of {list(PROXY_SETTINGS)}")
    limit = s.pop("modelContextLimit", None)
    if isinstance(limit, str) and limit.strip().endswith("%"):
        limit = int(window * _ratio(limit))
    base = int(limit) if limit is not None else window
    over: dict[str, Any] = {"nudge": {}, "truncate": {}, "compress": {}, "tiers": {}}
    if "maxContextLimit" in s:
        over["nudge"]["max_context_limit_pct"] = _ratio(s["maxContextLimit"])
    if "emergencyThresholdPercent" in s:
        pct = _ratio(s["emergencyThresholdPercent"])
        over["nudge"]["emergency_threshold_pct"] = pct
        over["truncate"]["threshold"] = pct
    if s.get("nudgeGrowthTokens", 0) > 0:
        over["nudge"].update(growth_floor=s["nudgeGrowthTokens"], growth_cap=s["nudgeGrowthTokens"])
    if "preserveRecentMessages" in s:
        over["preserve_recent_messages"] = s["preserveRecentMessages"]
    if "preserveRecentTokens" in s:
        over["preserve_recent_tokens"] = s["preserveRecentTokens"]
    if "minCompressRange" in s:
        over["compress"]["min_compress_range"] = s["minCompressRange"]
    if "tiers" in s:
        over["tiers"]["enabled"] = bool(s["tiers"])
    over = {k: v for k, v in over.items() if v != {}}
    return KernelConfig.for_limit(effective_limit(base, max_tokens), **over)


@dataclass
class ProxyChatRequest:
    messages: list[dict[str, Any]]  # the upstream chat messages
    tools: list[dict[str, Any]]
    view: list[Message]  # the kernel's view (tagged), what a compress call is applied to
    state: CompressionState
    decision: NudgeDecision
    offered: list[Range]  # the ranges a nudge may list (viable ones only)
    nudge_shown: bool
    truncated: list = dataclasses.field(default_factory=list)  # the kernel's emergency truncations


def proxy_flatten(client_messages: list[dict[str, Any]]) -> list[Message]:
    """The client's chat messages as the proxy's kernel sees them: tool results nameless."""
    return [dataclasses.replace(m, tool_name=None) if m.content_type == "tool-result" else m
            for m in flatten(client_messages)]


def _upstream_chat(view: list[Message]) -> list[dict[str, Any]]:
    out = []
    for m in to_chat(view):
        if m.get("role") == "tool":
            m = {k: v for k, v in m.items() if k != "name"}
        out.append(m)
    return out


def _with_system_block(chat: list[dict[str, Any]], block: str) -> list[dict[str, Any]]:
    if not block:
        return chat
    if chat and chat[0].get("role") == "system":
        first = dict(chat[0])
        first["content"] = (first.get("content") or "") + SYSTEM_SEPARATOR + block
        return [first, *chat[1:]]
    return [{"role": "system", "content": block}, *chat]


def render_proxy_chat(client_messages: list[dict[str, Any]], client_tools: list[dict[str, Any]],
                      state: CompressionState, config: KernelConfig, token_count: int, *,
                      system_block: str, acp_tools: list[dict[str, Any]],
                      nudge_text: Callable[[NudgeDecision, list[Range]], str] | None = None
                      ) -> ProxyChatRequest:
    """The upstream request for one client request (round 1 of a turn)."""
    return render_proxy_flat(proxy_flatten(client_messages), client_tools, state, config, token_count,
                             system_block=system_block, acp_tools=acp_tools, nudge_text=nudge_text)


def render_proxy_flat(flat: list[Message], client_tools: list[dict[str, Any]], state: CompressionState,
                      config: KernelConfig, token_count: int, *, system_block: str,
                      acp_tools: list[dict[str, Any]],
                      nudge_text: Callable[[NudgeDecision, list[Range]], str] | None = None,
                      count_tokens: Callable[[str], int] | None = None) -> ProxyChatRequest:
    """``render_proxy_chat`` over flat kernel messages (tool results already nameless): what
    ``doctrine.render.request.render_request`` calls for the ``proxy_chat`` host."""
    names = [t.get("function", {}).get("name") for t in acp_tools]
    if tuple(names) != ACP_TOOL_ORDER:
        raise ValueError(f"acp_tools must be {list(ACP_TOOL_ORDER)} in that order, got {names}")
    turn = process_turn(flat, state, config, token_count, render_tags="text-only", count_tokens=count_tokens)
    offered = viable_ranges(turn.nudge.compressible_ranges)
    view = [m for m in turn.messages if not m.id.startswith(SUMMARY_ID_PREFIX)]
    chat = _with_system_block(_upstream_chat(view), system_block)
    shown = False
    if turn.nudge.should_inject and nudge_text is not None:
        text = nudge_text(turn.nudge, offered)
        if text:
            chat.append({"role": "user", "content": text})
            shown = True
    return ProxyChatRequest(chat, [*client_tools, *acp_tools], view, turn.state, turn.nudge, offered, shown,
                            list(turn.truncated))


def rerequest_after_compress(req: ProxyChatRequest, rounds: list[tuple[dict[str, Any], str]],
                             system_block: str) -> list[dict[str, Any]]:
    """The re-request after ``len(rounds)`` rounds whose model answer was a proxy tool call:
    the turn's view (the nudge gone, nothing re-pruned, so folded messages are still there),
    then each round's call and its result (no ``name``), oldest first. The proxy re-requests
    until an answer has no proxy tool call, at most 10 rounds in all. This is the only
    request in which the model sees its own fold."""
    chat = _upstream_chat(req.view)
    for call, result_text in rounds:
        chat.append({"role": "assistant", "content": None, "tool_calls": [call]})
        chat.append({"role": "tool", "tool_call_id": call.get("id"), "content": result_text})
    return _with_system_block(chat, system_block)


def apply_proxy_compress(ranges: list[dict[str, Any]], req: ProxyChatRequest, config: KernelConfig,
                         call_id: str | None = None):
    """Apply a compress call the proxy's way: on the kernel's tagged view of this turn."""
    return apply_compression(ranges, req.view, req.state, config, compress_call_id=call_id)


def earlier_folds_dropped(flat: list[Message], acp_names: tuple[str, ...] = ACP_TOOL_ORDER) -> list[Message]:
    """The client's history as the proxy has it: calls of its own tools (and their results)
    from earlier turns never reach the client, so they are not in later requests. Those
    after the last client message (this turn's rounds) stay: the re-request shows them."""
    ids = {m.tool_call_id for m in flat if m.content_type == "tool-call" and m.tool_name in acp_names}
    own = [m.content_type in ("tool-call", "tool-result") and m.tool_call_id in ids for m in flat]
    last_client = max((i for i, o in enumerate(own) if not o), default=-1)
    return [m for i, m in enumerate(flat) if not own[i] or i > last_client]
