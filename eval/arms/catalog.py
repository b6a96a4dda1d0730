"""The arm catalog: every arm by name (``ARMS``, ``ARM_INFO``) from the baselines, the kernel
host and the seeds' other policies (``eval/arms/policies/``), and what needs all of them:
an arm's serving profile, a forced compaction, applying a reply.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial
from typing import Any

from eval.arm_names import ARM_NAMES
from eval.arms import baselines, kernel_host
from eval.arms.base import ArmEnv, ArmInfo, ArmState, View, _append_exchange
from eval.arms.kernel_host import deterministic, kernel_arm
from eval.arms.policies.registry import register
from plumbing.tool_format import arguments_object

__all__ = ["ARMS", "ARM_INFO", "FORCERS", "POLICY_TOOLS", "SUMMARISERS", "apply_reply", "arm_profile",
           "force_compaction"]

ARMS: dict[str, Callable[[ArmState, ArmEnv], View]] = {
    **baselines.ARMS,
    "deterministic": deterministic,
    "doctrine": partial(kernel_arm, mode="doctrine"),
    "oracle": partial(kernel_arm, mode="distilled"),
    "base_slim": partial(kernel_arm, mode="distilled"),
    "distilled": partial(kernel_arm, mode="distilled"),
}

ARM_INFO: dict[str, ArmInfo] = {
    **baselines.ARM_INFO,
    "deterministic": ArmInfo("kernel"),
    "doctrine": ArmInfo("kernel", prompt_mode="doctrine", nudges=True),
    # The distilled frame (base_slim's prompts) answered by the oracle policy: the reference fold a run's model
    # arms are read against (the Marathon's plots show what folding looks like).
    "oracle": ArmInfo("kernel", prompt_mode="distilled", nudges=True, reference=True),
    "base_slim": ArmInfo("kernel", prompt_mode="distilled", nudges=True),
    "distilled": ArmInfo("kernel", prompt_mode="distilled", use_adapter=True, nudges=True),
}

# Arms whose force_compaction is one summary (the threshold compactors); the policy modules
# add theirs, and FORCERS holds the arms that force their own way.
SUMMARISERS: set[str] = set(baselines.SUMMARISERS)
FORCERS: dict[str, Callable[[ArmState, ArmEnv], str]] = {}
POLICY_TOOLS: dict[str, Callable[[ArmState, ArmEnv, dict[str, Any]], Any]] = {}

# The seeds' other context policies: the article's compaction switches, a lossless-recursive
# engine (lcm) and full retention with search.
register(ARMS, ARM_INFO, SUMMARISERS, FORCERS, POLICY_TOOLS)
if set(ARMS) != set(ARM_NAMES):  # every declared name has an arm, and every arm a name
    raise RuntimeError(f"eval/arm_names.py and the arm catalog disagree: {sorted(set(ARMS) ^ set(ARM_NAMES))}")


def arm_profile(arm: str, window: int, gate: str, host: str, nudge_style: str,
                kernel_overrides: dict[str, Any] | None = None):
    """The serving profile kernel arm ``arm`` runs under at ``window`` (the same resolution
    data_gen uses); None for a baseline arm. The deterministic arm's is the engine layout:
    no doctrine prompts, no nudges."""
    info = ARM_INFO[arm]
    if info.kind != "kernel":
        return None
    return kernel_host.mode_profile(info.prompt_mode, window, gate, host, nudge_style, kernel_overrides)


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
    info = ARM_INFO[arm]
    if arm in FORCERS:  # the policy arms of eval/arms/policies/ (lcm: the engine folds)
        return FORCERS[arm](state, env)
    if arm in SUMMARISERS:
        if state.summary is None:
            ARMS[arm](state, dataclasses.replace(env, compaction=dataclasses.replace(env.compaction, compact_threshold=1e-9)))
        return "summary" if state.summary is not None else "none"
    if info.kind != "kernel":
        return "none"
    mode = info.prompt_mode
    view, mv = kernel_host._kernel_render(state, env, mode, nudges=info.nudges, token_count=env.window)
    if decide is not None and info.nudges and view.nudge_shown:
        applied = apply_reply(state, env, view, decide(view))
        if applied["compress_ok"]:
            return "model"
        view, mv = kernel_host._kernel_render(state, env, mode, nudges=False, token_count=env.window)
    return "engine" if kernel_host._engine_fold(state, env, mode, view, mv) is not None else "none"


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
        if kernel_host.apply_kernel_call(state, env, view, call, reply, out):
            continue
        fn = call.get("function") or {}
        name, args = fn.get("name"), fn.get("arguments") or "{}"
        if name in POLICY_TOOLS:  # read_tool_output, expand, search_history, read_history
            call_id = call.get("id") or f"call_{state.exchange_seq}"
            run = POLICY_TOOLS[name](state, env, arguments_object(args))
            out["recovery"].append(name)
            out["recovered"] += run.ok
            out["refetched"] += run.refetch
            _append_exchange(state, name, arguments_object(args), run.text, call_id)
    return out
