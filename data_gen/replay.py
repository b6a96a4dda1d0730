"""Replay a Session through the context kernel, labelling every decision point.

    from data_gen.replay import replay_session
    for sample in replay_session(session, window=8192, gate="aggressive", horizon=2, seed=0):
        sample.messages[-1]          # the target assistant message
        sample.meta["kind"]          # nudged_compress, refusal, ..., ordinary

How a session is driven
-----------------------
The session's leading system message becomes the host's base prompt (it is not a kernel
message); every other message gets the stable raw id ``sNNNNN`` (its session index), so
each kernel ref maps back to a session message (``doctrine.label.needed``). Decision points
sit at every step boundary: before the step's first assistant message, after its user
message(s) are in the history. At each point the kernel runs over the whole flat history
(size first, then ``render_for_model`` with that size, then an untagged pass for range
sizes), the labeler decides, and its action is applied the way a host would keep it:

* compress: ``apply_compression``; the compress call and its result text stay in the
  history (they carry the summaries), and the same boundary is looked at again;
* search_context / decompress: the tool result (``doctrine.kernel.search`` /
  ``decompress``) is appended, and the next point at the same boundary answers with it;
* session action (ordinary, refusal, recovery answer): the session's next assistant
  message, with the label's text where it differs, continues the history.

The request (system prompt, tool schemas, tagged view, trailing nudge) and its size come
from the serving profile (``doctrine.kernel.profile.resolve_profile(window, gate, host,
...)``) through the one renderer, ``doctrine.render.request.render_request``: the same code every
eval kernel arm runs. Gate presets (``gate``: ``reference``, ``default``, ``aggressive``) are
defined there, once; ``kernel_overrides`` are merged last. Every sample's meta carries the
profile's hash (``serving_profile``).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from doctrine.kernel.chat import to_chat
from doctrine.kernel.compress import apply_compression
from doctrine.kernel.config import KernelConfig
from doctrine.kernel.decompress import decompress
from doctrine.kernel.profile import PRESETS, resolve_profile
from doctrine.kernel.state import CompressionState
from doctrine.label import LabelConfig, LabelSkipped, label_decision
from doctrine.label.labeler import counter_recovery, search_result
from doctrine.label.needed import ACTION_PREFIX, session_msg_id, tool_units
from doctrine.label.point import DecisionPoint, RecoveryState, build_point
from doctrine.render.request import request_frame

__all__ = ["GATES", "DecisionSample", "ReplayStats", "apply_action", "kernel_config_for", "replay_session"]

GATES = PRESETS
_CHAT_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name", "reasoning_content")


def kernel_config_for(window: int, gate: str = "default", overrides: dict[str, Any] | None = None) -> KernelConfig:
    """The kernel config a replay at ``window`` with preset ``gate`` runs (the profile's)."""
    return resolve_profile(window, gate, kernel_overrides=overrides).kernel


@dataclass
class DecisionSample:
    """One SFT row: ``messages`` (target last), ``tools`` and ``meta``."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    meta: dict[str, Any]
    # In-memory only (not serialised): the decision point and label behind the row.
    point: Any = field(default=None, repr=False, compare=False)
    label: Any = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"messages": self.messages, "tools": self.tools, "meta": self.meta}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, ensure_ascii=False)


@dataclass
class ReplayStats:
    """Counts of one or more replays: points seen, samples by kind, skips by reason."""

    points: int = 0
    samples: int = 0
    kinds: Counter = field(default_factory=Counter)
    skipped: Counter = field(default_factory=Counter)
    details: list[str] = field(default_factory=list)  # the first few skip details, for debugging
    # With a policy (on-policy replay): what the policy's own moves did, e.g. asked,
    # compress, applied, refused, session, recovery, malformed, and "refusal:<reason>".
    policy: Counter = field(default_factory=Counter)

    def skip(self, reason: str, detail: str = "") -> None:
        self.skipped[reason] += 1
        if len(self.details) < 50:
            self.details.append(f"{reason}: {detail}" if detail else reason)

    def to_dict(self) -> dict[str, Any]:
        out = {"points": self.points, "samples": self.samples, "kinds": dict(sorted(self.kinds.items())),
               "skipped": dict(sorted(self.skipped.items()))}
        if self.policy:
            out["policy"] = dict(sorted(self.policy.items()))
        return out


def _with_id(msg: dict[str, Any], raw_id: str) -> dict[str, Any]:
    out = {k: copy.deepcopy(msg[k]) for k in _CHAT_KEYS if k in msg and msg[k] is not None}
    out.setdefault("content", "")
    out["id"] = raw_id
    return out


def _boundary(session: Any, step: Any) -> int | None:
    for i in range(step.start, step.end):
        if session.messages[i].get("role") == "assistant":
            return i
    return None


def replay_session(session: Any, *, window: int, kernel_overrides: dict[str, Any] | None = None,
                   gate: str = "default", host: str = "proxy", prompt_mode: str = "distilled",
                   doctrine: Any = None, horizon: int = 2, seed: int = 0,
                   label_config: LabelConfig | None = None,
                   stats: ReplayStats | None = None, run_dir: str | None = None,
                   labeler: Any = None, nudge_style: str = "list",
                   usage_counter: str = "acp-default", policy: Any = None) -> Iterator[DecisionSample]:
    """Drive ``session`` through the kernel and yield one labelled sample per decision point.

    Deterministic: the same session, settings and seed give byte-identical samples
    (``DecisionSample.to_json``). ``stats`` (if given) collects the counts, skipped points
    by reason included. ``run_dir`` is where a proxy-style decompress may write a file
    (default: a private temp folder per call); rows name it ``VIRTUAL_RUN_DIR``.
    ``labeler`` replaces ``label_decision`` (same signature), e.g. a teacher model.
    ``nudge_style="none"`` never shows a nudge (the kernel still decides, silently), so every
    label is a spontaneous compression, a recovery or an ordinary turn.
    """
    label_fn = labeler or label_decision
    if doctrine is None:
        from doctrine.spec import load_doctrine

        doctrine = load_doctrine("v1")
    session.validate()  # a malformed session fails here, with a SessionError naming it
    profile = resolve_profile(window, gate, host, prompt_mode=prompt_mode, nudge_style=nudge_style,
                              kernel_overrides=kernel_overrides, usage_counter=usage_counter)
    cfg = label_config or LabelConfig()
    if cfg.tools_host != profile.variant.tools_host:  # the host decides tool shapes and decompress style
        cfg = dataclasses.replace(cfg, tools_host=profile.variant.tools_host)
    stats = stats if stats is not None else ReplayStats()
    msgs = session.messages
    first = 1 if msgs and msgs[0].get("role") == "system" else 0
    base_prompt = (msgs[0].get("content") or "") if first else ""
    frame = request_frame(profile, doctrine, base_prompt=base_prompt, task_tools=copy.deepcopy(list(session.tools)))
    system_prompt, tools = frame.system, frame.tools
    units = tool_units(msgs)

    history: list[dict[str, Any]] = []
    state = CompressionState.initial()
    replaced: dict[int, dict[str, Any]] = {}
    pos = first
    n_action = 0
    # proxy_chat: the fill is the previous call's prompt tokens (0 on a session's first call)
    prev_sent: int | None = 0 if profile.variant.context_count == "previous-prompt" else None
    common = {"source": session.source, "family": session.family, "session_id": session.session_id,
              "window": window, "gate": gate, "horizon": horizon, "seed": seed, "prompt_mode": prompt_mode,
              "host": profile.host, "serving_profile": profile.sha256}

    for step in session.steps:
        b = _boundary(session, step)
        if b is None or b < pos:
            stats.skip("no_assistant_turn", f"{session.session_id} step {step.index}")
            continue
        while pos < b:
            history.append(_with_id(replaced.get(pos, msgs[pos]), session_msg_id(pos)))
            pos += 1
        recovery: RecoveryState | None = None
        for action_index in range(cfg.max_actions_per_boundary + 1):
            point = build_point(session, step.index, b, history, state, frame,
                                action_index=action_index, recovery=recovery, units=units,
                                token_count=prev_sent)
            state = point.state
            if prev_sent is not None:
                prev_sent = point.sent_tokens
            stats.points += 1
            if action_index == cfg.max_actions_per_boundary:
                stats.skip("action_limit", f"{session.session_id} step {step.index}")
                break
            try:
                label = label_fn(point, doctrine=doctrine, horizon=horizon, seed=seed, config=cfg)
            except LabelSkipped as e:
                stats.skip(e.reason, f"{session.session_id} step {step.index}: {e.detail}")
                break
            stats.samples += 1
            stats.kinds[label.kind] += 1
            sample = _sample(point, label, system_prompt, tools, common, step)
            yield sample
            move = _policy_move(policy, sample, label, stats) if policy is not None else label
            act = move.action
            if act["type"] == "session":
                if move.reason == "context_overflow" and move is not label:
                    return  # the policy's context no longer fits its model: the session ends here
                if move is label and label.message != _target_of(msgs[b]):
                    replaced[b] = label.message
                break
            n_action += 1
            if move is label:
                state, restored = apply_action(point, label, history, f"{ACTION_PREFIX}{n_action:04d}", cfg, run_dir)
            else:
                state, restored = _apply_policy_move(point, move, history, f"{ACTION_PREFIX}{n_action:04d}", cfg,
                                                     run_dir, stats)
            # An urgent fold in the middle of a recovery leaves the recovery in progress.
            recovery = restored if act["type"] != "compress" else recovery
    return


def _policy_move(policy: Any, sample: DecisionSample, label: Any, stats: ReplayStats) -> Any:
    """The policy's move at ``sample`` (the label's own where it returns None)."""
    stats.policy["asked"] += 1
    move = policy(sample, label)
    if move is None:
        return label
    kind = move.action.get("type", "session")
    stats.policy["recovery" if kind == "tool" else kind] += 1
    if kind == "session":
        stats.policy[f"session:{move.reason or 'label'}"] += 1
    return move


def _apply_policy_move(point: DecisionPoint, move: Any, history: list[dict[str, Any]], action_id: str,
                       cfg: LabelConfig, run_dir: str | None,
                       stats: ReplayStats) -> tuple[CompressionState, RecoveryState | None]:
    """A policy's compress or recovery call as a host would answer it: an applied fold changes
    the state; a refused one (ranges the kernel refuses, arguments it cannot read, an unknown
    block) leaves the state as it was and its refusal in the history, for the next point."""
    act = move.action
    call_msg = dict(move.message)
    call_msg["id"] = action_id
    state, recovery = point.state, None
    if act["type"] == "compress":
        from doctrine.label.actions import host_ranges

        try:
            res = apply_compression(host_ranges(act["args"]), point.compress_messages, point.state, point.kconfig,
                                    compress_call_id=act["call_id"], count_tokens=point.count_tokens,
                                    clock_ms=lambda: 0)
            errors, result = list(res.errors), res.text
            if res.blocks_created:
                state = res.state
        except ValueError as exc:  # arguments the host cannot read
            errors, result = [str(exc)], f"compress refused: {exc}"
        if state is point.state:
            stats.policy["refused"] += 1
            for e in errors[:3] or ["no block created"]:
                stats.policy[f"refusal:{_reason(e)}"] += 1
            if not result:
                result = "compress refused: " + "; ".join(errors or ["no block created"])
        else:
            stats.policy["applied"] += 1
    else:
        try:
            result, state = _run_tool(point, act, cfg, run_dir)
        except (KeyError, ValueError, TypeError) as exc:  # a block id or query the host cannot use
            result = f"{act.get('name')} failed: {exc}"
        recovery = RecoveryState([], act["name"], result, [], act["args"].get("blockId"))
    history.append(_with_id(call_msg, action_id))
    history.append({"role": "tool", "tool_call_id": act["call_id"], "name": act.get("name", "compress"),
                    "content": result, "id": f"{action_id}#result"})
    return state, recovery


def _reason(error: str) -> str:
    """A refusal's reason without its ids and numbers (counted across replies)."""
    import re

    text = error.split(":", 1)[1] if error.startswith("range ") and ":" in error else error
    return re.sub(r"\b[mb]\d+\b|\d+", "#", text).strip()[:80]


def _target_of(msg: dict[str, Any]) -> dict[str, Any]:
    from doctrine.label.actions import session_message

    return session_message(msg)


def apply_action(point: DecisionPoint, label: Any, history: list[dict[str, Any]], action_id: str,
                 cfg: LabelConfig, run_dir: str | None) -> tuple[CompressionState, RecoveryState | None]:
    """Apply a compress or tool label the way a host keeps it; appends to ``history``.

    Returns the new kernel state and, for a recovery tool, the recovery in progress.
    The assistant call gets raw id ``action_id``, its result ``action_id#result``.
    """
    act = label.action
    call_msg = dict(label.message)
    call_msg["id"] = action_id
    recovery = None
    if act["type"] == "compress":
        from doctrine.label.actions import host_ranges

        res = apply_compression(host_ranges(act["args"]), point.compress_messages, point.state, point.kconfig,
                                compress_call_id=act["call_id"], count_tokens=point.count_tokens,
                                clock_ms=lambda: 0)
        state, result = res.state, res.text
    elif act["type"] == "tool":
        result, state = _run_tool(point, act, cfg, run_dir)
        r = act.get("recovery") or {}
        recovery = RecoveryState(list(r.get("fact_ids", [])), act["name"], result, list(r.get("blocks", [])),
                                 r.get("hit_block") or act["args"].get("blockId"))
    else:
        raise ValueError(f"label action {act['type']!r} is not a compress or tool action")
    history.append(_with_id(call_msg, action_id))
    history.append({"role": "tool", "tool_call_id": act["call_id"], "name": act.get("name", "compress"),
                    "content": result, "id": f"{action_id}#result"})
    return state, recovery


# The run folder a replayed decompress result names (the file itself goes to a private
# scratch folder): rows must not depend on TMPDIR or on where the scratch folder was made.
VIRTUAL_RUN_DIR = "/tmp/dtw-replay"


def _run_tool(point: DecisionPoint, act: dict[str, Any], cfg: LabelConfig,
              run_dir: str | None) -> tuple[str, CompressionState]:
    args = act["args"]
    if act["name"] == "search_context":
        text, _top = search_result(point, args["query"], cfg)
        return text, point.state
    if run_dir is None:  # no scratch folder given: a private one for this call
        with tempfile.TemporaryDirectory(prefix="dtw-replay-") as tmp:
            return _run_tool(point, act, cfg, tmp)
    # A body the host would put in a file goes to a fixed name per block under run_dir (the
    # hosts' own names carry a timestamp): the result text must not depend on the clock or
    # on files left by an earlier run.
    target = os.path.join(run_dir, f"acp-decompress-{args['blockId']}.txt")
    res = decompress(point.state, args["blockId"], point.flat, run_dir=run_dir, inline=args.get("inline"),
                     style=cfg.tools_host, now_ms=0, to_file=_to_file_if_large(point, args, cfg, target))
    return res.text.replace(os.path.realpath(run_dir), VIRTUAL_RUN_DIR), res.state


def _to_file_if_large(point: DecisionPoint, args: dict[str, Any], cfg: LabelConfig, target: str) -> str | None:
    from doctrine.kernel.decompress import (
        PI_MESSAGE_INLINE_MAX,
        PROXY_INLINE_MAX,
        collect_block_content,
    )

    if args.get("inline"):
        return None
    bid = args["blockId"]
    if bid.startswith("m"):  # a Pi message restore: inline below its size limit
        raw = point.state.by_ref.get(bid)
        m = point.by_id.get(raw) if raw else None
        return target if m is not None and len(m.text) >= PI_MESSAGE_INLINE_MAX else None
    block = point.state.block(bid)
    if block is None:
        return None
    body = collect_block_content(point.state, block, point.flat, full=bool(args.get("full"))).text or block.summary
    limit = PROXY_INLINE_MAX if cfg.tools_host == "proxy" else 0
    return target if len(body) > limit else None


def view_refs(point: DecisionPoint) -> list[list[str]]:
    """The ids a compress range can name for every message the model is shown, in view order
    (the order ``to_chat`` flattens back to): its kernel ref (``m00012``), plus the block ids
    (``b3``) a compress call made (the proxy host keeps summaries in those calls) or a summary
    message stands for. Evaluation resolves a model's range against them the way the kernel
    would, instead of guessing from the tags a host happens to render."""
    from doctrine.kernel.state import SUMMARY_ID_PREFIX

    state = point.state
    by_call: dict[str, list[str]] = {}
    for b in state.blocks:
        if b.compress_call_id:
            by_call.setdefault(b.compress_call_id, []).append(b.block_id)
    out: list[list[str]] = []
    for m in point.view.messages:
        mid = m.id or ""
        ids = [mid[len(SUMMARY_ID_PREFIX):]] if mid.startswith(SUMMARY_ID_PREFIX) else []
        ref = state.by_raw.get(mid)
        if ref:
            ids.insert(0, ref)
        if m.content_type == "tool-call" and m.tool_call_id:
            ids += by_call.get(m.tool_call_id, [])
        out.append(ids)
    return out


def _kernel_input(point: DecisionPoint, label: Any) -> dict[str, Any]:
    """The turn's kernel input (``doctrine.render.snapshot``), so evaluation can apply a reply to the
    same state; a recovery row adds the blocks holding the facts it needs and their texts."""
    from doctrine.render.snapshot import kernel_snapshot

    rec = (label.action or {}).get("recovery") if isinstance(getattr(label, "action", None), dict) else None
    needed = None
    if rec:
        ids = set(rec.get("fact_ids") or [])
        needed = {"blocks": list(rec.get("blocks") or []),
                  "facts": [f.text for f in point.session.facts if f.id in ids]}
    flat = point.kernel_flat if point.kernel_flat is not None else point.flat
    return kernel_snapshot(flat, point.state_before, point.profile, point.token_count, needed)


def _sample(point: DecisionPoint, label: Any, system_prompt: str, tools: list[dict[str, Any]],
            common: dict[str, Any], step: Any) -> DecisionSample:
    if point.request_messages is not None and point.profile is not None and point.profile.variant.system_in_view:
        head = copy.deepcopy(point.request_messages)  # proxy_chat: the request exactly as sent
    else:
        head = [{"role": "system", "content": system_prompt}] + to_chat(point.view.messages)
    messages = head + [copy.deepcopy(label.message)]
    d = point.nudge
    meta = dict(common)
    meta.update({
        "kind": label.kind, "step": point.step, "step_kind": step.kind, "action_index": point.action_index,
        "doctrine_version": label.doctrine_version, "doctrine_sha256": label.doctrine_sha256,
        "labeler": label.labeler, "labeler_version": label.labeler_version, "reason": label.reason,
        "conformance": label.conformance, "ranges": label.ranges, "facts": label.facts,
        "declined": bool(getattr(label, "declined", False)),
        "nudge": {"shown": point.nudge_shown, "tier": d.tier if point.nudge_shown else None,
                  "voice": d.voice if point.nudge_shown else None},
        "token_count": point.token_count,
        "view_refs": view_refs(point),
        "kernel_input": _kernel_input(point, label),
    })
    if label.kind == "ordinary" and not meta["declined"]:
        why = counter_recovery(point)
        if why:  # the same kind of step as a recovery, with the detail in view: no recovery call
            meta.update(counter_recovery=True, counter_recovery_why=why)
    return DecisionSample(messages, copy.deepcopy(tools), meta, point=point, label=label)


