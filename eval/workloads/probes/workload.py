"""Recall probes as a workload of the eval harness (``WORKLOADS["probes"]``).

Per case (one recorded trajectory) and arm:

1. the recorded history is fed to the arm message by message (``feed: steps``, the default):
   before each recorded assistant turn the arm builds the view that call would send, so
   compaction happens as the session grows (auto-compaction past its threshold, the kernel's
   own truncation) and kernel arms answer the nudges shown on the way (up to
   ``max_decisions`` decision calls). ``feed: whole`` hands over the whole history at once
   and only asks about the nudges it raises then;
2. the first question is appended and, unless the arm has compacted already, one compaction
   is forced (``force_compaction``, as the benchmark this comes from forces the first one):
   kernel arms get an urgent nudge (and the engine folds if the model declines),
   auto-compaction summarises; ``full``, ``n_latest_*`` and ``sliding`` never compact.
   Then the arm builds its view; that view is frozen: every question sees
   the same history view, and answers to earlier questions never become memory for later
   ones (each question starts from a copy);
3. the model answers in up to ``max_turns`` turns: task tools get the sandbox-shutdown
   response, ``think`` is acknowledged, ``finish`` carries the final answer, the arm's own
   restore tools (kernel: ``search_context``, ``decompress``; the policy arms'
   ``read_tool_output``, ``expand``, ``search_history``, ``read_history``) run on saved state
   (the oracle of a policy arm opens what its view lacks before answering);
4. the answer is judged per kind (``probes.judge``); the record keeps whether the
   question's evidence survived in the view (for ``n_latest``: in the retained suffix).

:func:`probe_report` compares arms over saved case results: accuracy overall and by kind,
relative to the ``full`` arm (questions ``full`` also fails are counted apart).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from data_gen.sources.swe_rebench import to_session
from doctrine.session import Fact
from eval.arms import ARM_INFO, ARMS, ArmState, apply_reply, force_compaction
from eval.arms.policies.registry import recovery_hint
from eval.arms.policies.tools import tool_counts
from eval.judges import contains, visible_text
from eval.metrics import mean
from eval.workloads.base import Case, RunContext, arm_env, call_record, safe_complete
from eval.workloads.hindsight import decision_reply, summary_reply
from eval.workloads.probes.cases import (
    KINDS,
    ProbeCase,
    edit_code,
    judge,
    sandbox_shutdown_response,
    select_cases,
)
from plumbing.chat_backend import Request
from plumbing.recipe_loader import BaseConfig

__all__ = ["ProbesWorkload", "oracle_answer", "probe_report", "run_probe_case"]

RESTORE_TOOLS = ("compress", "search_context", "decompress", "acp_status")


def oracle_answer(q: dict[str, Any], seen: str) -> str:
    """What a perfect reader of the view answers: the reference when its evidence is visible."""
    if not all(contains(seen, e) for e in q.get("evidence") or []):
        return "I cannot tell from the conversation I can see."
    ref, kind = q["answer"], q["kind"]
    if kind == "files_changed":
        return "\n".join(ref)
    if kind == "first_edit":
        return f"In {ref['path']}:\n```\n{edit_code(ref)}\n```"
    if kind == "first_test_run":
        return f"passed={ref['passed']} failed={ref['failed']}"
    return str(ref)


class ProbeFilters(BaseConfig):
    """``settings.filters`` of the probes workload (``probes.select_cases``)."""

    limit: int | None = Field(None, ge=0, description="most cases kept, the first that pass; left out: 20")
    skip: int | None = Field(None, ge=0, description="the first N source rows are passed over")
    resolved: bool | None = Field(
        None, description="only trajectories that resolved their issue (true) or did not (false); null: both")
    exit_status: list[Any] | None = Field(
        None, description="only trajectories whose recorded exit_status is one of these (e.g. submit)")
    min_messages: int | None = Field(None, description="fewest messages of a converted trajectory")
    max_messages: int | None = Field(None, description="most messages of a converted trajectory")
    min_chars: int | None = Field(
        None, description="fewest characters of a converted trajectory (contents and tool-call arguments)")
    max_chars: int | None = Field(
        None, description="most characters of a converted trajectory (contents and tool-call arguments)")
    repos: list[str] | None = Field(None, description="only trajectories of these repositories (owner/name)")
    one_per_repo: bool | None = Field(None, description="at most one case per repository (the first that passes)")
    min_questions: int | None = Field(
        None, description="fewest questions a trajectory must yield to be a case; left out: 1")
    require_kinds: list[Literal[KINDS]] | None = Field(  # type: ignore[valid-type]
        None, description="question kinds a trajectory must yield, every one of them, to be a case")


class ProbesSettings(BaseConfig):
    """``settings`` of the probes workload (checked when the recipe loads)."""

    source: str = Field(
        description="the recorded trajectories (SWE-rebench OpenHands rows): a parquet/jsonl file or folder "
                    "(a relative path not found as given is taken from the recipe's folder) or a hub "
                    "dataset id")
    filters: ProbeFilters = Field(
        default_factory=ProbeFilters, description="which trajectories become cases (ProbeFilters: limit, skip, "
                                                  "resolved, repos, ...)")
    kinds: list[Literal[KINDS]] | None = Field(  # type: ignore[valid-type]
        None, description="question kinds extracted and asked: files_changed, first_edit, first_test_run, "
                          "first_error; null: all four")
    max_turns: int = Field(
        3, ge=1, description="model turns to answer one question (restore tools may be called before the "
                             "answer)")
    max_decisions: int = Field(
        3, ge=0, description="most decision calls a kernel arm makes on the nudges shown while the history "
                             "is fed")
    feed: Literal["steps", "whole"] = Field(
        "steps", description="steps: the history is fed message by message, the arm compacting as it grows; "
                             "whole: handed over at once, only the nudges it then raises are answered")
    force_compaction: bool = Field(
        True, description="force one compaction before the first question where the arm has not compacted "
                          "(kernel arms get an urgent nudge; full, n_latest_* and sliding never compact)")


class ProbesWorkload:
    name = "probes"
    Settings = ProbesSettings

    def __init__(self, settings: dict[str, Any], base_dir: Path | None = None):
        self.settings = dict(settings)
        src = self.settings.get("source")
        if not src:
            raise ValueError("probes workload: settings.source (a parquet/jsonl path, folder or hub id) is required")
        path = Path(str(src))
        if not path.is_absolute() and base_dir is not None and not path.exists() and (base_dir / path).exists():
            src = str(base_dir / path)
        self.stats: dict[str, Any] = {}
        kinds = tuple(self.settings.get("kinds") or KINDS)
        self.payloads = select_cases(str(src), self.settings.get("filters") or {}, kinds, self.stats)

    def cases(self) -> list[Case]:
        return [Case(p.converted.session_id, p) for p in self.payloads]

    def supports(self, arm: str) -> bool:
        return arm in ARMS

    def run_case(self, case: Case, arm: str, seed: int, ctx: RunContext) -> dict[str, Any]:
        return run_probe_case(case.payload, arm, seed, ctx, int(self.settings.get("max_turns", 3)),
                              int(self.settings.get("max_decisions", 3)), str(self.settings.get("feed", "steps")),
                              bool(self.settings.get("force_compaction", True)))


def _hindsight_session(pc: ProbeCase):
    """The trajectory as a Session whose last step uses every question's evidence, so the
    oracle's decision rule keeps the messages that hold it."""
    s = to_session(pc.converted)
    last = len(s.steps) - 1
    texts = [e for q in pc.questions for e in q.evidence]
    for k, text in enumerate(texts):
        idx = next((i for i, m in enumerate(s.messages) if contains(visible_text([m]), text)), None)
        if idx is not None:
            s.facts.append(Fact(f"probe{k}", text, "exact_values", idx, [last]))
    return s, last


def run_probe_case(pc: ProbeCase, arm: str, seed: int, ctx: RunContext, max_turns: int = 3,
                   max_decisions: int = 3, feed: str = "steps", force: bool = True) -> dict[str, Any]:
    info, arm_fn, backend = ARM_INFO[arm], ARMS[arm], ctx.backend
    msgs = pc.converted.messages
    system = "\n\n".join(m.get("content") or "" for m in msgs if m.get("role") == "system")
    calls: list[dict[str, Any]] = []
    try:
        session, last_step = _hindsight_session(pc)
    except Exception:  # noqa: BLE001 - a row to_session cannot shape: no hindsight, still evaluated
        session, last_step = None, 0

    def summarise(source: list[dict[str, Any]], instruction: str) -> str:
        hint = summary_reply(session, source) if session is not None else {"content": "Earlier work."}
        req = Request(source + [{"role": "user", "content": instruction}], [], False, ctx.max_tokens,
                      {"oracle_reply": hint})
        comp = safe_complete(backend, req)
        calls.append(call_record("summary", req, comp))
        return (comp.message.get("content") or "").strip() or "(empty summary)"

    env = arm_env(ctx, summarise, task_tools=list(pc.converted.tools), system_prompt=system)
    history = [{**m, "id": f"s{i}"} for i, m in enumerate(msgs) if m.get("role") != "system"]
    state = ArmState()
    counters: dict[str, int] = {}

    def decide(view: Any, step: int, purpose: str = "decision") -> dict[str, Any]:
        """The model's reply to a kernel view (the hindsight rule for the oracle), recorded."""
        meta = {"oracle_reply": decision_reply(session, step, view, state.kernel_state, env, 0, seed, counters)}
        comp = safe_complete(backend, Request(view.messages, view.tools, info.use_adapter, ctx.max_tokens, meta))
        calls.append(call_record(purpose, None, comp, view=view))
        return comp.message

    def answer_nudge(view: Any, step: int) -> bool:
        reply = decide(view, step)
        applied = apply_reply(state, env, view, reply)
        calls[-1].update(kernel_errors=applied["kernel_errors"], compress_attempted=applied["compress_attempted"],
                         compress_ok=applied["compress_ok"])
        return bool(applied["compress_attempted"])

    decisions = 0
    if feed == "whole":
        state.history = history
        while info.nudges and session is not None and decisions < max_decisions:
            view = arm_fn(state, env)
            decisions += 1
            if not view.nudge_shown or not answer_nudge(view, last_step):
                break
    else:  # message by message: each recorded assistant turn is a call the arm shapes
        for m in history:
            if m.get("role") == "assistant":
                view = arm_fn(state, env)
                if info.nudges and session is not None and view.nudge_shown and decisions < max_decisions:
                    decisions += 1
                    # The oracle decides by hindsight of the whole case: the questions' evidence
                    # is what the last step uses (see _hindsight_session).
                    answer_nudge(view, last_step)
            state.history.append(m)
    compactions = state.compressions_succeeded + sum(1 for c in calls if c.get("purpose") == "summary")
    forced = "already" if compactions else "off"
    questions = [q.to_dict() for q in pc.questions]
    results = []
    frozen = None  # the state after the first question's view: shared by every question
    for k, q in enumerate(questions):
        qmsg = {"id": f"q{k}", "role": "user", "content": q["question"]}
        if frozen is None:
            st = copy.deepcopy(state)
            st.history.append(qmsg)
            if force and not compactions:
                state = st  # the forced compaction and its calls belong to the case's state
                forced = force_compaction(st, env, arm, (lambda v: decide(v, last_step, "forced"))
                                          if session is not None else None)
            first_view = arm_fn(st, env)
            frozen = copy.deepcopy(st)
            view = first_view
        else:
            st = copy.deepcopy(frozen)
            st.history[-1] = qmsg
            view = arm_fn(st, env)
        seen = visible_text(view.messages[:-1] if view.nudge_shown else view.messages)
        survived = all(contains(seen, e) for e in q["evidence"])
        answer, turns, tools_used = "", 0, []
        for turns in range(1, max_turns + 1):
            if turns > 1:
                view = arm_fn(st, env)
            # The oracle of an arm with recovery tools opens what it cannot see, then answers.
            now = visible_text(view.messages) if info.tools else seen
            hint = recovery_hint(arm, st, env, q["evidence"], now) if info.tools and turns < max_turns else []
            req = Request(view.messages, view.tools, info.use_adapter, ctx.max_tokens,
                          {"oracle_reply": {"role": "assistant", "content": "", "tool_calls": hint} if hint
                           else {"role": "assistant", "content": oracle_answer(q, now)}})
            comp = safe_complete(backend, req)
            calls.append(call_record("answer", req, comp, view=view, question=k))
            tcs = comp.message.get("tool_calls") or []
            if not tcs:
                answer = comp.message.get("content") or ""
                break
            finished = None
            for c in tcs:
                fn = c.get("function") or {}
                name = fn.get("name") or ""
                tools_used.append(name)
                try:
                    args = json.loads(fn.get("arguments") or "{}")
                except (ValueError, TypeError):
                    args = {}
                if (name in RESTORE_TOOLS and info.kind == "kernel") or name in info.tools:
                    applied = apply_reply(st, env, view, {"content": "", "tool_calls": [c]})
                    calls[-1]["kernel_errors"] = calls[-1].get("kernel_errors", []) + applied["kernel_errors"]
                    calls[-1]["recovery"] = calls[-1].get("recovery", []) + applied["recovery"]
                    calls[-1]["recovered"] = calls[-1].get("recovered", 0) + applied["recovered"]
                    calls[-1]["refetched"] = calls[-1].get("refetched", 0) + applied["refetched"]
                    continue
                reply = sandbox_shutdown_response(name, args if isinstance(args, dict) else {})
                if name == "finish":
                    finished = reply
                    continue
                cid = c.get("id") or f"a{k}_{turns}"
                st.history.append({"id": f"q{k}t{turns}{cid}", "role": "assistant", "content": "",
                                   "tool_calls": [c]})
                st.history.append({"id": f"q{k}t{turns}{cid}r", "role": "tool", "tool_call_id": cid, "name": name,
                                   "content": reply})
            if finished is not None:
                answer = finished or (comp.message.get("content") or "")
                break
            answer = comp.message.get("content") or ""  # kept if no later turn answers
            if turns == max_turns - 1:
                st.history.append({"id": f"q{k}t{turns}u", "role": "user", "content": "Please answer the question now."})
        verdict = judge(q, answer)
        results.append({"index": k, "kind": q["kind"], "question": q["question"], "reference": q["answer"],
                        "answer": answer, "correct": bool(verdict["correct"]), "score": verdict["score"],
                        "evidence_survived": survived, "turns": turns, "tools": tools_used,
                        "retained_messages": view.retained_messages, "retained_tokens": view.retained_tokens})
    real = [c for c in calls if c.get("real")]
    by_kind = {}
    for kind in KINDS:
        rs = [r for r in results if r["kind"] == kind]
        if rs:
            by_kind[kind] = {"questions": len(rs), "correct": sum(r["correct"] for r in rs)}
    metrics = {
        "questions": len(results), "correct": sum(r["correct"] for r in results),
        "accuracy": mean([float(r["correct"]) for r in results]) if results else None,
        "evidence_survival": mean([float(r["evidence_survived"]) for r in results]) if results else None,
        "calls": len(calls), "model_calls": len(real),
        "billed_tokens": sum(c["prompt_tokens"] + c["completion_tokens"] for c in calls),
        "prompt_tokens": sum(c["prompt_tokens"] for c in calls),
        "mean_context": mean([r["retained_tokens"] for r in results]) if results else 0.0,
        "peak_context": max((r["retained_tokens"] for r in results), default=0),
        "compressions_attempted": state.compressions_attempted, "compressions_succeeded": state.compressions_succeeded,
        "malformed_calls": sum(1 for c in real if c.get("parse_errors")),
        "kernel_errors": sum(len(c.get("kernel_errors") or []) for c in real),
        "summaries": sum(1 for c in calls if c.get("purpose") == "summary"),
        "decisions": decisions,
        "compactions_before_questions": compactions + int(forced in ("model", "engine", "summary")),
        "compacted": bool(compactions) or forced in ("model", "engine", "summary"),
        "forced_compaction": forced in ("model", "engine", "summary"),
        **tool_counts(real),  # recovery_calls, recoveries, recovery_refetches
    }
    return {"workload": "probes", "case_id": pc.converted.session_id, "feed": feed, "forced": forced,
            "instance_id": pc.converted.meta.get("instance_id"), "questions": results, "by_kind": by_kind,
            "calls": calls, "metrics": metrics}


def probe_report(rows: list[dict[str, Any]], reference_arm: str = "full") -> dict[str, Any]:
    """Per arm: accuracy overall and by kind; questions the reference arm fails apart.

    ``rows`` are saved case results (``harness.load_results``) of the probes workload.
    A question is identified by (case, seed, window, question index). ``clean`` counts only
    questions the reference arm answered correctly; ``reference_failed`` those it failed.
    For every arm, ``evidence_survival`` says how often the needed evidence was in the view
    and ``accuracy_when_survived`` how often it was then answered.
    """
    rows = [r for r in rows if r.get("workload") == "probes"]
    def key(r: dict[str, Any], q: dict[str, Any]) -> tuple:
        return (r.get("case_id"), r.get("seed"), r.get("window"), q["index"])

    ref_ok = {key(r, q): q["correct"] for r in rows if r.get("arm") == reference_arm for q in r["questions"]}
    arms: dict[str, Any] = {}
    for r in rows:
        a = arms.setdefault(r.get("arm"), {"questions": 0, "correct": 0, "by_kind": {}, "clean": [0, 0],
                                           "reference_failed": [0, 0], "survived": 0, "survived_correct": 0})
        for q in r["questions"]:
            a["questions"] += 1
            a["correct"] += q["correct"]
            k = a["by_kind"].setdefault(q["kind"], [0, 0])
            k[0] += q["correct"]
            k[1] += 1
            ok = ref_ok.get(key(r, q))
            if ok is not None:
                bucket = a["clean"] if ok else a["reference_failed"]
                bucket[0] += q["correct"]
                bucket[1] += 1
            if q.get("evidence_survived"):
                a["survived"] += 1
                a["survived_correct"] += q["correct"]
    out = {}
    for arm, a in sorted(arms.items(), key=lambda kv: str(kv[0])):
        n = a["questions"]
        out[arm] = {
            "questions": n, "correct": a["correct"], "accuracy": a["correct"] / n if n else None,
            "by_kind": {k: {"correct": c, "questions": t, "accuracy": c / t} for k, (c, t) in sorted(a["by_kind"].items())},
            "vs_reference": {"clean_correct": a["clean"][0], "clean_questions": a["clean"][1],
                             "clean_accuracy": a["clean"][0] / a["clean"][1] if a["clean"][1] else None,
                             "reference_failed_questions": a["reference_failed"][1],
                             "reference_failed_correct": a["reference_failed"][0]},
            "evidence_survival": a["survived"] / n if n else None,
            "accuracy_when_survived": a["survived_correct"] / a["survived"] if a["survived"] else None,
        }
    return {"reference_arm": reference_arm, "arms": out}
