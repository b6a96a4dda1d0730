"""The scripted-session driver: replay a ``doctrine.session.Session`` through an arm.

The session's own task actions are replayed message by message. Before every assistant
message the arm builds the context a real agent call would send; that call is *billed*
(prompt tokens of the arm's context + the replayed message's tokens) without running the
model. The model under test is really called only where the arm gives it a decision: at
each step boundary and at every shown nudge (kernel arms: compress, decline or recover;
``decide_at: nudge`` skips the step-boundary call when no nudge is shown and
``max_decisions_per_step`` caps the calls per step, for slow CPU runs),
to write a summary (auto-compaction, deterministic engine), and to answer probe steps (an
arm with recovery tools, ``eval/arms/policies/``, may call them first: up to ``MAX_RECOVERY`` calls,
run by ``apply_reply``; the oracle calls them for the facts its view lacks).

Per case: calls, billed tokens, mean/peak context, compressions succeeded/attempted,
re-fetches (a task step uses a fact that is in neither a raw message nor a summary in the
visible context), probe accuracy (share of the probe's facts quoted exactly) and evidence
survival (share of the probe's facts visible when it is asked). The Session Marathon
(``eval.workloads.marathon.workload``) runs its one long session on this driver too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from data_gen.recipe import GeneratedSize
from data_gen.synthetic import generate
from doctrine.session import Session, SessionError
from eval.arms import ARM_INFO, ARMS, ArmEnv, ArmState, apply_reply
from eval.arms.policies.registry import recovery_hint
from eval.arms.policies.tools import tool_counts
from eval.judges import contains, fact_recall, visible_text
from eval.metrics import scripted_metrics
from eval.workloads.agent_loop import summariser
from eval.workloads.base import Case, RunContext, arm_env, call_record, safe_complete
from eval.workloads.hindsight import decision_reply, probe_reply, summary_reply
from plumbing.chat_backend import Request, prompt_text
from plumbing.recipe_loader import BaseConfig


class DecisionSettings(BaseConfig):
    """Settings that bound a kernel arm's decision calls (see :func:`decision_settings`)."""

    decide_at: Literal["step", "nudge"] = Field(
        "step", description="when a kernel arm's model is asked for a decision (scripted replay): step, at "
                            "every task-step boundary and every nudge shown; nudge, at a step boundary only "
                            "where a nudge is shown (fewer calls, but spontaneous compressions go unmeasured)")
    max_decisions_per_step: int | None = Field(
        None, ge=1, description="most decision and nudge calls of a kernel arm per task step; once reached, "
                                "the rest of the step replays (still billed) without asking. null: no cap")


class ScriptedSettings(DecisionSettings):
    """``settings`` of the scripted workload (checked when the recipe loads)."""

    sessions: str | list[str] = Field(
        default_factory=list, description="JSONL file(s) of doctrine Session.to_json, one session (one case) "
                                          "a line; a relative path not found as given is taken from the "
                                          "recipe's folder")
    families: list[str] = Field(
        default_factory=list, description="data_gen.synthetic families (ALL_FAMILIES) to generate sessions of, "
                                          "one case per family and session seed, besides any sessions files")
    session_seeds: list[int] = Field(
        default_factory=lambda: [0], description="seeds the families' sessions are generated with (the "
                                                 "session's content; the recipe's seeds repeat each case)")
    size: GeneratedSize = Field(default_factory=GeneratedSize,
                                description="size of the sessions generated for ``families`` "
                                            "(data_gen.recipe.GeneratedSize: steps, tool_output_lines)")


def load_sessions(settings: dict[str, Any], base_dir: Path | None = None) -> list[Any]:
    """Sessions from ``sessions`` (JSONL files of ``Session.to_json``) and/or ``families``
    (``data_gen.synthetic.generate(family, seed, size)`` over ``session_seeds``)."""
    out = []
    paths = settings.get("sessions") or []
    for p in [paths] if isinstance(paths, str) else paths:
        path = Path(p)
        if not path.is_absolute() and base_dir is not None and not path.exists():
            path = base_dir / path
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            try:
                out.append(Session.from_dict(json.loads(line)).validate())
            except (ValueError, SessionError) as exc:
                raise ValueError(f"{path}:{n}: {exc}") from None
    families = settings.get("families") or []
    if families:
        shape = GeneratedSize.model_validate(settings.get("size") or {}).session_size()
        for fam in families:
            for seed in settings.get("session_seeds", [0]):
                out.append(generate(fam, seed, shape))
    return out


class ScriptedWorkload:
    name = "scripted"
    Settings = ScriptedSettings

    def __init__(self, settings: dict[str, Any], base_dir: Path | None = None):
        self.settings = dict(settings)
        self.decisions = decision_settings(self.settings)  # a bad value fails before any case runs
        self.sessions = load_sessions(self.settings, base_dir)

    def cases(self) -> list[Case]:
        return [Case(s.session_id, s) for s in self.sessions]

    def supports(self, arm: str) -> bool:
        return arm in ARMS

    def run_case(self, case: Case, arm: str, seed: int, ctx: RunContext) -> dict[str, Any]:
        return run_session(case.payload, arm, seed, ctx, **self.decisions)


DECIDE_AT = ("step", "nudge")
MAX_RECOVERY = 2  # recovery-tool calls a policy arm may make before a probe answer


def decision_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """The workload settings that bound a kernel arm's decision calls (slow CPU runs):
    ``decide_at`` ``step`` (default: ask at every step boundary) or ``nudge`` (only where a
    nudge is shown), and ``max_decisions_per_step`` (default: no cap; once reached, the rest
    of the step replays without asking, nudge or not)."""
    value = str(settings.get("decide_at", "step"))
    if value not in DECIDE_AT:
        raise ValueError(f"decide_at must be one of {', '.join(DECIDE_AT)}, got {value!r}")
    cap = settings.get("max_decisions_per_step")
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
        raise ValueError(f"max_decisions_per_step must be a positive integer, got {cap!r}")
    return {"decide_at": value, "max_decisions_per_step": cap}


def session_env(session: Any, ctx: RunContext, summarise) -> ArmEnv:
    msgs = session.messages
    system = msgs[0].get("content") or "" if msgs and msgs[0].get("role") == "system" else ""
    return arm_env(ctx, summarise, task_tools=list(session.tools), system_prompt=system)


def run_session(session: Any, arm: str, seed: int, ctx: RunContext, decide_at: str = "step",
                max_decisions_per_step: int | None = None) -> dict[str, Any]:
    """Drive one session through one arm; returns the case result (records + metrics).

    ``decide_at="nudge"`` calls a kernel arm's model at a step boundary only when a nudge is
    shown there (spontaneous compressions between nudges are then not measured);
    ``max_decisions_per_step`` caps the decision and nudge calls per task step."""
    info, arm_fn, backend = ARM_INFO[arm], ARMS[arm], ctx.backend
    calls: list[dict[str, Any]] = []
    probes: list[dict[str, Any]] = []
    counters: dict[str, int] = {}

    summarise = summariser(ctx, calls, lambda source: summary_reply(session, source))
    env = session_env(session, ctx, summarise)
    state = ArmState()
    start = 1 if session.messages and session.messages[0].get("role") == "system" else 0
    msgs = [{**m, "id": f"s{i:05d}"} for i, m in enumerate(session.messages)]  # the labeler's ids
    refetches = 0

    def decide(step_index: int, purpose: str, view) -> bool:
        """A real decision call; True when it ran a kernel tool (an extra call), False when
        the model declined or acted normally (then this call stands in for the task call)."""
        meta = {"oracle_reply": decision_reply(session, step_index, view, state.kernel_state, env,
                                               ctx.horizon, seed, counters)}
        req = Request(view.messages, view.tools, info.use_adapter, ctx.max_tokens, meta)
        comp = safe_complete(backend, req)
        rec = call_record(purpose, req, comp, view=view, step=step_index)
        applied = apply_reply(state, env, view, comp.message)
        rec.update(kernel_errors=applied["kernel_errors"], compress_attempted=applied["compress_attempted"],
                   compress_ok=applied["compress_ok"], recovery=applied["recovery"],
                   recovered=applied["recovered"], refetched=applied["refetched"])
        calls.append(rec)
        return bool(applied["compress_attempted"] or applied["recovery"])

    def recover(step_index: int, view, expected: list[str]):
        """A policy arm's probe: while the model calls the arm's recovery tools (the oracle:
        for the expected facts it cannot see), run them and rebuild the view; at most
        ``MAX_RECOVERY`` such calls, then the answer is asked for."""
        for _ in range(MAX_RECOVERY):
            hint = recovery_hint(arm, state, env, expected, visible_text(view.messages))
            if not hint:
                break
            req = Request(view.messages, view.tools, info.use_adapter, ctx.max_tokens,
                          {"oracle_reply": {"role": "assistant", "content": "", "tool_calls": hint}})
            comp = safe_complete(backend, req)
            tcs = [c for c in comp.message.get("tool_calls") or [] if (c.get("function") or {}).get("name") in info.tools]
            if not tcs:
                return view, (req, comp)  # the model answered: that is its probe answer
            rec = call_record("recovery", req, comp, view=view, step=step_index)
            applied = apply_reply(state, env, view, {"content": comp.message.get("content") or "", "tool_calls": tcs})
            rec.update(recovery=applied["recovery"], recovered=applied["recovered"], refetched=applied["refetched"])
            calls.append(rec)
            view = arm_fn(state, env)
        return view, None

    for step in session.steps:
        lo = max(step.start, start)
        if step.kind == "probe":
            q_end = lo + 1
            state.history.extend(msgs[lo:q_end])
            view = arm_fn(state, env)
            expected = [f.text for f in session.facts if f.id in step.uses]
            seen = visible_text(view.messages)  # what the probe finds in view (evidence survival)
            answered = None
            if info.tools:
                view, answered = recover(step.index, view, expected)
            req, comp = answered or (None, None)
            if comp is None:
                req = Request(view.messages, view.tools, info.use_adapter, ctx.max_tokens,
                              {"oracle_reply": probe_reply(expected, view.messages)})
                comp = safe_complete(backend, req)
            answer = comp.message.get("content") or ""
            probes.append({"step": step.index, "score": fact_recall(answer, expected),
                           "survival": fact_recall(seen, expected), "expected": expected, "answer": answer})
            calls.append(call_record("probe", req, comp, view=view, step=step.index))
            state.history.extend(msgs[q_end:step.end])  # the recorded answer continues the session
            continue
        # Facts the step uses that were introduced before it must be visible at its start.
        opener = lo + 1 if lo < step.end and msgs[lo].get("role") == "user" else lo
        state.history.extend(msgs[lo:opener])
        view = arm_fn(state, env)
        seen = visible_text(view.messages)
        for f in session.facts:
            if f.id in step.uses and f.message < lo and not contains(seen, f.text):
                refetches += 1
        stands_in = False  # a real decision call took the place of the next task call
        budget = max_decisions_per_step if max_decisions_per_step is not None else float("inf")
        if info.nudges and (decide_at == "step" or view.nudge_shown) and budget > 0:
            budget -= 1
            stands_in = not decide(step.index, "decision", view)
        for i in range(opener, step.end):
            m = msgs[i]
            if m.get("role") == "assistant":
                view = arm_fn(state, env)
                if info.nudges and view.nudge_shown and not stands_in and budget > 0:
                    budget -= 1
                    if decide(step.index, "nudge", view):
                        view = arm_fn(state, env)
                    else:
                        stands_in = True
                if stands_in:
                    stands_in = False
                else:
                    completion = env.count_tokens(prompt_text([{k: v for k, v in m.items() if k != "id"}]))
                    calls.append(call_record("task", None, None, view=view, real=False,
                                             prompt_tokens=view.retained_tokens,
                                             completion_tokens=completion, step=step.index))
            state.history.append(m)
    metrics = scripted_metrics(calls, probes, refetches, state.compressions_attempted,
                               state.compressions_succeeded)
    metrics.update(tool_counts([c for c in calls if c.get("real")]))
    metrics["oracle_labeler_points"] = counters.get("labeler", 0)
    metrics["oracle_rule_points"] = counters.get("rule", 0)
    return {"workload": "scripted", "case_id": session.session_id, "family": session.family,
            "calls": calls, "probes": probes, "metrics": metrics,
            "kernel_errors": state.kernel_errors[:50]}
