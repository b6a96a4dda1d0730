"""Context-management arms: what each arm shows the model before a call.

An arm is a plain function ``arm(state, env) -> View``. ``state`` (:class:`ArmState`) is
one session's memory for that arm: the history it keeps (the session's replayed messages,
plus, for kernel arms, the compress exchanges that happened) and whatever the arm adds (a
compaction summary, the kernel state). ``env`` (:class:`ArmEnv`) is shared: the window,
the token counter, the doctrine, the session's task tools and system prompt, and a
``summarise`` callable that asks the model under test for a summary (recorded as a call).

Baselines (``full``, ``n_latest_*``, ``sliding``, ``auto_compact``, ``micro_auto``) work
on OpenAI chat messages and never show a ref tag, a nudge or the doctrine. Kernel arms
(``deterministic``, ``doctrine``, ``base_slim``, ``distilled``) render through
``doctrine.kernel.host.render_for_model`` exactly as the serving host does; after the model
replies, :func:`apply_reply` applies its compress call (or recovery call) to the state.
No arm ever shows how full the context is; the summary prompt below says nothing of it.

The seeds' other policies (the compaction article's switches, ``lcm``,
``full_retention_search``) live in ``eval/policies/`` and are registered at the end of this
module; the compactor variants reuse :func:`compacted_view`, and their recovery tools run
in :func:`apply_reply` beside the kernel's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
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
from doctrine.request import render_request, request_frame
from plumbing.chat_backend import prompt_text
from plumbing.tool_format import arguments_object

__all__ = ["ARMS", "ARM_INFO", "FORCERS", "POLICY_TOOLS", "SUMMARISERS", "ArmEnv", "ArmInfo", "ArmState", "Compaction",
           "View", "apply_reply", "arm_profile", "compacted_view", "force_compaction", "kernel_profile",
           "last_user_index", "micro_compact", "protocol_safe_tail"]

# The baselines' one summary prompt (generic, as a threshold compactor would use).
SUMMARY_PROMPT = ("Summarise the conversation above so that the work can continue from the summary "
                  "alone. Keep file paths, line numbers, error messages, exact values, decisions and "
                  "the user's requests. Reply with the summary text only.")
CLEARED = "[Old tool result content cleared]"
SUMMARY_PREFIX = "Summary of the earlier conversation:\n"


@dataclass(frozen=True)
class ArmInfo:
    kind: str  # "baseline" | "kernel"
    prompt_mode: str | None = None  # kernel arms: "doctrine" | "distilled" | None (no doctrine)
    use_adapter: bool = False
    nudges: bool = False
    tools: tuple[str, ...] = ()  # policy arms: the recovery tools the arm serves (eval/policies/tools.py)
    reference: bool = False  # answered by the oracle policy (the labeler), whatever the run's backend


@dataclass
class ArmEnv:
    window: int
    count_tokens: Callable[[str], int]
    summarise: Callable[[list[dict[str, Any]], str], str]
    doctrine: Any = None  # doctrine.spec.Doctrine (kernel arms)
    task_tools: list[dict[str, Any]] = field(default_factory=list)
    system_prompt: str = ""
    kernel_overrides: dict[str, Any] = field(default_factory=dict)
    compact_threshold: float = 0.8
    sliding_fraction: float = 0.75
    micro_min_chars: int = 500
    micro_keep: int = 5
    deterministic_every: int = 3  # decision points between engine compressions
    gate: str = "aggressive"  # gate preset of the serving profile (doctrine.kernel.profile)
    host: str = "proxy"  # host variant of the serving profile
    nudge_style: str = "list"
    # The seeds' other policies (eval/policies/; the settings are documented in eval/README.md).
    tail_share: float = 0.2  # compact_tail / compact_step_cut / compact_plus: verbatim tail, share of the window
    offload_preview_chars: int = 200  # compact_offload / compact_plus: head of a saved output left beside its handle
    retry_markers: tuple[str, ...] = ("ERROR", "Error:", "error:", "command not found", "No such file or directory")
    lcm_soft: float = 0.7  # lcm: the engine compacts once the context passes this share of the window
    lcm_target: float = 0.5  # lcm: ... until it is back under this share
    lcm_fresh_share: float = 0.25  # lcm: the newest messages, up to this share of the window, stay raw
    lcm_leaf_share: float = 0.1  # lcm: at most this share of the window goes into one leaf summary
    lcm_fanout: int = 4  # lcm: this many same-depth summaries in a row are condensed into one
    lcm_summary_chars: int = 600  # lcm: the longest summary text
    lcm_summary: str = "extractive"  # lcm: "extractive" (engine, no model call) or "model" (extractive fallback)
    retention_share: float = 0.5  # full_retention_search: the recent window kept in the context
    search_limit: int = 5  # full_retention_search: hits one search_history call returns
    cache: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)  # profiles, frames


@dataclass
class ArmState:
    history: list[dict[str, Any]] = field(default_factory=list)  # chat messages with stable "id"
    summary: str | None = None  # auto-compaction summary
    cut: int = 0  # history index where the post-summary tail starts
    kernel_state: Any = None
    calls: int = 0  # decision points seen
    compressions_attempted: int = 0
    compressions_succeeded: int = 0
    kernel_errors: list[str] = field(default_factory=list)
    exchange_seq: int = 0
    seen_len: int = -1  # history length at the last context build (the deterministic clock)
    overflows: int = 0  # requests sent larger than the window (after the host's emergency path)
    policy: dict[str, Any] = field(default_factory=dict)  # policy arms' own state (eval/policies/)


@dataclass
class View:
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    retained_messages: int
    retained_tokens: int
    doctrine_tokens: int = 0
    nudge_shown: bool = False
    nudge_text: str = ""
    flat: list[Any] | None = None  # kernel arms: the flat input of this turn
    decision: Any = None  # kernel arms: the kernel's NudgeDecision (hindsight policies read it)
    kernel_before: Any = None  # kernel arms: the CompressionState this turn started from
    token_count: int = 0  # kernel arms: the size estimate the kernel decided on
    model_view: Any = None  # kernel arms: render_for_model's ModelView
    events: list[dict[str, Any]] = field(default_factory=list)  # compactions done before the call
    sent_tokens: int = 0  # kernel arms: the request as sent, in the profile's usage counter
    overflow: bool = False  # kernel arms: sent_tokens > window
    profile: Any = None  # kernel arms: the ServingProfile the request was rendered under


# ----------------------------------------------------------------------------- helpers


def _strip(m: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in m.items() if k != "id"}


def _system(env: ArmEnv) -> list[dict[str, Any]]:
    return [{"role": "system", "content": env.system_prompt}] if env.system_prompt else []


def _tokens(env: ArmEnv, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
    return env.count_tokens(prompt_text(messages, tools))


def _split_question(history: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(history before the question, [question]): a trailing user message is the question."""
    if history and history[-1].get("role") == "user":
        return history[:-1], history[-1:]
    return history, []


def protocol_safe_tail(messages: list[dict[str, Any]], start: int) -> int:
    """Move a cut at ``start`` towards newer messages until no tool exchange is split.

    A retained tool result must have its call retained, and a retained call must keep all
    of its results: leading tool results are dropped, and so is a leading assistant call
    whose results are not all inside the retained part.
    """
    n = len(messages)
    while start < n:
        m = messages[start]
        if m.get("role") == "tool":
            start += 1
            continue
        calls = {c.get("id") for c in (m.get("tool_calls") or [])}
        if calls:
            later = {x.get("tool_call_id") for x in messages[start + 1:] if x.get("role") == "tool"}
            if not calls <= later:
                start += 1
                continue
        break
    return start


def _view(env: ArmEnv, body: list[dict[str, Any]], retained: int) -> View:
    msgs = _system(env) + [_strip(m) for m in body]
    return View(msgs, list(env.task_tools), retained, _tokens(env, msgs, env.task_tools))


# ----------------------------------------------------------------------------- baselines


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
    budget = int(env.window * env.sliding_fraction)
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
    The compactor variants of ``eval/policies/compaction.py`` are made of these hooks.
    """

    micro: bool = False
    cut: Callable[[ArmState, ArmEnv], int] | None = None
    before_micro: tuple[Callable[[ArmState, ArmEnv, Parts], Parts], ...] = ()
    after_micro: tuple[Callable[[ArmState, ArmEnv, Parts], Parts], ...] = ()
    on_summary: Callable[[ArmState, ArmEnv, int, int], None] | None = None
    note: Callable[[ArmState], str] | None = None


def last_user_index(history: list[dict[str, Any]]) -> int:
    return max((i for i, m in enumerate(history) if m.get("role") == "user"), default=0)


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
            msgs = micro_compact([m for m, _ in parts], env.micro_min_chars, env.micro_keep)
            parts = list(zip(msgs, [o for _, o in parts], strict=True))
        for f in how.after_micro:
            parts = f(state, env, parts)
        return parts

    events = []
    parts = body()
    view = _view(env, [m for m, _ in parts], len(parts))
    if view.retained_tokens > env.compact_threshold * env.window:
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


# ----------------------------------------------------------------------------- kernel arms


def arm_profile(arm: str, window: int, gate: str, host: str, nudge_style: str,
                kernel_overrides: dict[str, Any] | None = None):
    """The serving profile kernel arm ``arm`` runs under at ``window`` (the same resolution
    data_gen uses); None for a baseline arm. The deterministic arm's is the engine layout:
    no doctrine prompts, no nudges."""
    info = ARM_INFO[arm]
    if info.kind != "kernel":
        return None
    mode = info.prompt_mode
    return resolve_profile(window, gate, host, prompt_mode=mode or "distilled",
                           nudge_style=nudge_style if mode else "none", kernel_overrides=kernel_overrides)


def kernel_profile(env: ArmEnv, mode: str | None):
    """The serving profile of ``env``'s kernel arms in prompt ``mode`` (None: the engine layout)."""
    key = ("profile", mode)
    if key not in env.cache:
        arm = {"doctrine": "doctrine", "distilled": "base_slim", None: "deterministic"}[mode]
        env.cache[key] = arm_profile(arm, env.window, env.gate, env.host, env.nudge_style, env.kernel_overrides)
    return env.cache[key]


def kernel_config(env: ArmEnv, mode: str | None = "distilled"):
    return kernel_profile(env, mode).kernel


def _frame(env: ArmEnv, mode: str | None):
    key = ("frame", mode)
    if key not in env.cache:
        env.cache[key] = request_frame(kernel_profile(env, mode), env.doctrine, base_prompt=env.system_prompt,
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
    if state.calls % max(1, env.deterministic_every):
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


def force_compaction(state: ArmState, env: ArmEnv, arm: str,
                     decide: Callable[[View], dict[str, Any]] | None = None) -> str:
    """Compact ``state`` once, now, whatever its size (a recall-probe case forces a first
    compaction before its first question, as the benchmark it comes from does). Returns how:

    * ``model``: a kernel arm shown an urgent nudge (the kernel told the context is full)
      compressed, through ``decide`` (the model's reply to that view);
    * ``engine``: the kernel arm declined (or is ``deterministic``): the engine folded the
      largest recommended range and the model wrote its summary;
    * ``summary``: ``auto_compact`` / ``micro_auto`` summarised everything before the question;
    * ``none``: nothing could be folded, or the arm never compacts (``full``, ``n_latest_*``,
      ``sliding`` drop messages instead).
    """
    import dataclasses

    info = ARM_INFO[arm]
    if arm in FORCERS:  # the policy arms of eval/policies/ (lcm: the engine folds)
        return FORCERS[arm](state, env)
    if arm in SUMMARISERS:
        if state.summary is None:
            ARMS[arm](state, dataclasses.replace(env, compact_threshold=1e-9))
        return "summary" if state.summary is not None else "none"
    if info.kind != "kernel":
        return "none"
    mode = info.prompt_mode
    view, mv = _kernel_render(state, env, mode, nudges=info.nudges, token_count=env.window)
    if decide is not None and info.nudges and view.nudge_shown:
        applied = apply_reply(state, env, view, decide(view))
        if applied["compress_ok"]:
            return "model"
        view, mv = _kernel_render(state, env, mode, nudges=False, token_count=env.window)
    return "engine" if _engine_fold(state, env, mode, view, mv) is not None else "none"


def _range_messages(flat: list[Any], kstate: Any, start_ref: str, end_ref: str) -> str:
    ids = [m.id for m in flat]
    a, b = lookup_ref(start_ref, kstate), lookup_ref(end_ref, kstate)
    if a not in ids or b not in ids:
        return ""
    i, j = ids.index(a), ids.index(b)
    return "\n".join(f"{m.role}: {m.text}" for m in flat[i:j + 1])


def _append_exchange(state: ArmState, name: str, args: dict[str, Any], result: str, call_id: str,
                     content: str = "") -> None:
    state.exchange_seq += 1
    sid = f"a{state.exchange_seq:05d}"  # inserted actions map to no session message
    state.history.append({"id": sid, "role": "assistant", "content": content, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}}]})
    state.history.append({"id": sid + "#result", "role": "tool", "tool_call_id": call_id, "name": name, "content": result})


# The kernel tools apply_reply applies (compress and the recovery tools); every driver routes these.
KERNEL_TOOLS = ("compress", "search_context", "decompress")


def apply_reply(state: ArmState, env: ArmEnv, view: View, reply: dict[str, Any]) -> dict[str, Any]:
    """Apply a kernel arm's reply: compress calls go through the kernel, recovery tools run.

    Returns counts for the call record: ``compress_attempted``, ``compress_ok``,
    ``kernel_errors`` (strings), ``recovery`` (tool names run), ``recovered`` (recovery calls
    that returned what they were asked for), ``refetched`` (policy tool calls that opened a
    target already opened in this state). The policy arms' tools (``POLICY_TOOLS``) run here
    too, on the arm's own saved state. Errors never raise.
    """
    out: dict[str, Any] = {"compress_attempted": 0, "compress_ok": 0, "kernel_errors": [], "recovery": [],
                           "recovered": 0, "refetched": 0}
    for call in reply.get("tool_calls") or []:
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
        elif name in ("search_context", "decompress"):
            text = (_run_search(state, view, args) if name == "search_context"
                    else _run_decompress(state, view, args,
                                         (view.profile or kernel_profile(env, "distilled")).variant.decompress))
            out["recovery"].append(name)
            out["recovered"] += not text.startswith(f"[{name} FAILED")
            _append_exchange(state, name, arguments_object(args), text, call_id)
        elif name in POLICY_TOOLS:  # read_tool_output, expand, search_history, read_history
            run = POLICY_TOOLS[name](state, env, arguments_object(args))
            out["recovery"].append(name)
            out["recovered"] += run.ok
            out["refetched"] += run.refetch
            _append_exchange(state, name, arguments_object(args), run.text, call_id)
    return out


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


ARMS: dict[str, Callable[[ArmState, ArmEnv], View]] = {
    "full": full,
    "n_latest_10": partial(n_latest, n=10),
    "n_latest_20": partial(n_latest, n=20),
    "n_latest_40": partial(n_latest, n=40),
    "sliding": sliding,
    "auto_compact": auto_compact,
    "micro_auto": micro_auto,
    "deterministic": deterministic,
    "doctrine": partial(kernel_arm, mode="doctrine"),
    "oracle": partial(kernel_arm, mode="distilled"),
    "base_slim": partial(kernel_arm, mode="distilled"),
    "distilled": partial(kernel_arm, mode="distilled"),
}

ARM_INFO: dict[str, ArmInfo] = {
    **{name: ArmInfo("baseline") for name in ("full", "n_latest_10", "n_latest_20", "n_latest_40",
                                              "sliding", "auto_compact", "micro_auto")},
    "deterministic": ArmInfo("kernel"),
    "doctrine": ArmInfo("kernel", "doctrine", False, True),
    # The distilled frame (base_slim's prompts) answered by the oracle policy: the reference fold a run's model
    # arms are read against (the Marathon's plots show what folding looks like).
    "oracle": ArmInfo("kernel", "distilled", False, True, reference=True),
    "base_slim": ArmInfo("kernel", "distilled", False, True),
    "distilled": ArmInfo("kernel", "distilled", True, True),
}

# Arms whose force_compaction is one summary (the threshold compactors); the policy modules
# add theirs, and FORCERS holds the arms that force their own way.
SUMMARISERS: set[str] = {"auto_compact", "micro_auto"}
FORCERS: dict[str, Callable[[ArmState, ArmEnv], str]] = {}
POLICY_TOOLS: dict[str, Callable[[ArmState, ArmEnv, dict[str, Any]], Any]] = {}

# The seeds' other context policies (eval/policies/): the article's compaction switches, a
# lossless-recursive engine (lcm) and full retention with search. Imported last: they build
# on the helpers above.
from eval.policies.registry import register  # noqa: E402

register(ARMS, ARM_INFO, SUMMARISERS, FORCERS, POLICY_TOOLS)
