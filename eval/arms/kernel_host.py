"""The kernel arms: the serving host over ``doctrine.kernel``.

``deterministic``, ``doctrine``, ``base_slim``, ``distilled`` (and ``oracle``) render through
the request frame of their serving profile exactly as the host does (``doctrine.render.request``);
after the model replies, :func:`apply_kernel_call` applies a compress call through the kernel
or runs a recovery tool. ``deterministic`` is the engine's own fold every few calls
(:func:`_engine_fold`), whose summary the model writes.
"""

from __future__ import annotations

import json
from typing import Any

from doctrine.kernel.chat import flatten
from doctrine.kernel.compress import CompressRange, apply_compression
from doctrine.kernel.compress_args import compress_tool_call
from doctrine.kernel.decompress import decompress
from doctrine.kernel.profile import resolve_profile
from doctrine.kernel.recommend import viable_ranges
from doctrine.kernel.refs import lookup_ref
from doctrine.kernel.search import build_message_docs, render_search_result, search_context
from doctrine.kernel.state import CompressionState
from doctrine.render.request import render_request, request_frame
from eval.arms.base import SUMMARY_PROMPT, ArmEnv, ArmState, View, _append_exchange, _tokens
from plumbing.tool_format import arguments_object

__all__ = ["KERNEL_TOOLS", "apply_kernel_call", "deterministic", "kernel_arm", "kernel_config", "kernel_profile",
           "mode_profile"]


def mode_profile(mode: str | None, window: int, gate: str, host: str, nudge_style: str,
                 kernel_overrides: dict[str, Any] | None = None):
    """The serving profile of a kernel arm in prompt ``mode`` at ``window`` (the same resolution
    data_gen uses); mode None is the engine layout (``deterministic``): no doctrine prompts,
    no nudges."""
    return resolve_profile(window, gate, host, prompt_mode=mode or "distilled",
                           nudge_style=nudge_style if mode else "none", kernel_overrides=kernel_overrides)


def kernel_profile(env: ArmEnv, mode: str | None):
    """The serving profile of ``env``'s kernel arms in prompt ``mode`` (None: the engine layout)."""
    key = ("profile", mode)
    if key not in env.cache:
        env.cache[key] = mode_profile(mode, env.window, env.kernel.gate, env.kernel.host, env.kernel.nudge_style, env.kernel.overrides)
    return env.cache[key]


def kernel_config(env: ArmEnv, mode: str | None = "distilled"):
    return kernel_profile(env, mode).kernel


def _frame(env: ArmEnv, mode: str | None):
    key = ("frame", mode)
    if key not in env.cache:
        env.cache[key] = request_frame(kernel_profile(env, mode), env.kernel.doctrine, base_prompt=env.system_prompt,
                                       task_tools=env.task_tools, compress_tool=mode is not None)
    return env.cache[key]


def _kernel_render(state: ArmState, env: ArmEnv, mode: str | None, nudges: bool,
                   token_count: int | None = None) -> tuple[View, Any]:
    if state.kernel_state is None:
        state.kernel_state = CompressionState.initial()
    frame = _frame(env, mode)
    flat = flatten(state.history)
    before = state.kernel_state
    req = render_request(frame, flat, before, token_count=token_count)
    state.kernel_state = req.view.state
    if req.overflow:
        state.overflows += 1
    mv = req.view
    retained = sum(1 for m in mv.messages if m.id != "acp_nudge")
    # Doctrine tokens are billed tokens: the backend's counter, never the kernel's.
    if ("doctrine_tokens", mode) not in env.cache:
        env.cache[("doctrine_tokens", mode)] = env.count_tokens(frame.doctrine_text) if frame.doctrine_text else 0
    dt = env.cache[("doctrine_tokens", mode)]
    dt = dt + env.count_tokens(req.nudge_text) if dt and req.nudge_text else dt
    view = View(req.messages, req.tools, retained, _tokens(env, req.messages, req.tools), dt, mv.nudge_shown,
                req.nudge_text, flat, mv.decision, before, req.token_count, mv)
    view.sent_tokens, view.overflow, view.profile = req.sent_tokens, req.overflow, frame.profile
    return view, mv


def kernel_arm(state: ArmState, env: ArmEnv, mode: str = "distilled") -> View:
    """Base model (or base + adapter) with the kernel, prompts in ``mode``; the model decides."""
    view, _ = _kernel_render(state, env, mode, nudges=True)
    return view


def deterministic(state: ArmState, env: ArmEnv) -> View:
    """Every ``deterministic_every`` calls the engine folds the largest recommended range;
    the model only writes that range's summary.

    The clock counts distinct history states (a rebuild of an unchanged history is not a
    new call). The engine's compress exchange joins the history like a model's would.
    """
    if len(state.history) != state.seen_len:  # a new history state = one more call on the clock
        state.calls += 1
        state.seen_len = len(state.history)
    elif state.calls:
        return _kernel_render(state, env, None, nudges=False)[0]
    view, mv = _kernel_render(state, env, None, nudges=False)
    if state.calls % max(1, env.kernel.deterministic_every):
        return view
    event = _engine_fold(state, env, None, view, mv)
    if event is None:
        return view
    view2, _ = _kernel_render(state, env, None, nudges=False)
    view2.events = [event]
    return view2


def _engine_fold(state: ArmState, env: ArmEnv, mode: str | None, view: View, mv: Any) -> dict[str, Any] | None:
    """The engine folds the largest range the kernel recommends in ``mv`` and the model
    writes its summary (a summary call); the event, or None when nothing was folded."""
    # The engine picks as a status surface would: only ranges worth a summary (>= 200 tokens).
    ranges = sorted(viable_ranges(mv.decision.compressible_ranges), key=lambda r: -r.tokens)
    if not ranges:
        return None
    r = ranges[0]
    source = _range_messages(view.flat, state.kernel_state, r.start_ref, r.end_ref)
    summary = env.summarise([{"role": "user", "content": source}], SUMMARY_PROMPT)
    call_id = f"engine_{state.exchange_seq}"
    state.compressions_attempted += 1
    res = apply_compression([CompressRange(r.start_ref, r.end_ref, summary, "engine")], view.flat,
                            state.kernel_state, kernel_config(env, mode), compress_call_id=call_id)
    if res.errors:
        state.kernel_errors.extend(res.errors)
        return None
    state.compressions_succeeded += 1
    state.kernel_state = res.state
    args = {"topic": "engine", "content": [{"startId": r.start_ref, "endId": r.end_ref, "summary": summary}]}
    _append_exchange(state, "compress", args, res.text, call_id)
    return {"event": "engine_compress", "range": [r.start_ref, r.end_ref], "tokens_compressed": res.tokens_compressed}


def _range_messages(flat: list[Any], kstate: Any, start_ref: str, end_ref: str) -> str:
    ids = [m.id for m in flat]
    a, b = lookup_ref(start_ref, kstate), lookup_ref(end_ref, kstate)
    if a not in ids or b not in ids:
        return ""
    i, j = ids.index(a), ids.index(b)
    return "\n".join(f"{m.role}: {m.text}" for m in flat[i:j + 1])


# The kernel tools apply_reply applies (compress and the recovery tools); every driver routes these.
KERNEL_TOOLS = ("compress", "search_context", "decompress")


def apply_kernel_call(state: ArmState, env: ArmEnv, view: View, call: dict[str, Any], reply: dict[str, Any],
                      out: dict[str, Any]) -> bool:
    """Apply one kernel tool call of ``reply`` (compress through the kernel; search_context and
    decompress run) and count it in ``out`` (see ``eval.arms.apply_reply``); False when
    ``call`` names no kernel tool."""
    fn = call.get("function") or {}
    name, args = fn.get("name"), fn.get("arguments") or "{}"
    call_id = call.get("id") or f"call_{state.exchange_seq}"
    if name == "compress":
        out["compress_attempted"] += 1
        state.compressions_attempted += 1
        prof = view.profile or kernel_profile(env, "distilled")
        on = view.flat or [] if prof.variant.compress_on == "history" else view.model_view.messages
        res = compress_tool_call(args, on, state.kernel_state, prof.kernel, call_id=call_id)
        if res.errors:
            out["kernel_errors"].extend(res.errors)
            state.kernel_errors.extend(res.errors)
        if res.blocks_created:
            out["compress_ok"] += 1
            state.compressions_succeeded += 1
            state.kernel_state = res.state
        try:
            parsed = json.loads(args) if isinstance(args, str) else args
        except ValueError:
            parsed = {"raw": args}
        _append_exchange(state, "compress", parsed if isinstance(parsed, dict) else {"content": parsed},
                         res.text, call_id, reply.get("content") or "")
        return True
    if name in ("search_context", "decompress"):
        text = (_run_search(state, view, args) if name == "search_context"
                else _run_decompress(state, view, args,
                                     (view.profile or kernel_profile(env, "distilled")).variant.decompress))
        out["recovery"].append(name)
        out["recovered"] += not text.startswith(f"[{name} FAILED")
        _append_exchange(state, name, arguments_object(args), text, call_id)
        return True
    return False


def _run_search(state: ArmState, view: View, args: Any) -> str:
    query = str(arguments_object(args).get("query") or "")
    try:
        docs = build_message_docs(view.flat or [], state.kernel_state)
        results = search_context(query, state.kernel_state, docs)
        return render_search_result(results, query, len(state.kernel_state.blocks), len(docs))
    except Exception as exc:  # a bad query is the model's failure, counted by the caller
        return f"[search_context FAILED: {exc}]"


def _run_decompress(state: ArmState, view: View, args: Any, style: str = "proxy") -> str:
    """Decompress the way the profile's host does (proxy: restore and deactivate; Pi: the
    block text inline); files, if any, go to a temp folder."""
    import tempfile

    target = str(arguments_object(args).get("blockId") or "")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            res = decompress(state.kernel_state, target, view.flat or [], run_dir=tmp, style=style,
                             inline=True if style == "pi" else None)
    except Exception as exc:  # a bad id is the model's failure, counted by the caller
        return f"[decompress FAILED: {exc}]"
    if res.ok:
        state.kernel_state = res.state
    return res.text
