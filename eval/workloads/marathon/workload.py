"""The Session Marathon as a workload of the eval harness (``WORKLOADS["marathon"]``).

Driver mode ``scripted``: the marathon Session goes through ``eval.workloads.scripted``
(the workload supplies the task actions; the model under test makes the compression
decisions and answers the probes; every scripted step is a billed call whose prompt is the
arm's visible context; re-fetches are counted there). This module adds the marathon's own
grading on top of that run:

- probe items: each item is correct when one of its accepted strings occurs in the answer
  with word boundaries (after whitespace normalisation); reported as correct / total, per
  probe kind and for the deep-recall probes apart (the "78/84" of the billion-context paper's
  Table 3);
- phase variant: each migration step's answer is graded against the plan (execution
  fidelity = share of the step's plan items it names); a step missing any item is an
  execution error;
- summaries: every summary the model wrote (compress calls, auto-compaction and engine
  summaries) is scored with ``doctrine.conform.check_summary`` against its source range.

Settings: ``seeds`` (default ``[0]``), ``passes`` (6), ``variants`` (``["repetitive"]``,
also ``"phase"``), ``size`` (``demo`` / ``small`` / ``full`` / ``large``) or
``tool_output_lines`` + ``extra_tests``. Driver mode ``agentic`` lives in
``eval.workloads.agentic``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from doctrine.conform import check_summary
from eval.arms import ARMS, SUMMARY_PROMPT
from eval.workloads.base import Case, RunContext
from eval.workloads.marathon.driver import run_agentic_marathon
from eval.workloads.marathon.tasks import SIZES, MarathonSize, marathon_session, marathon_with_repos
from eval.workloads.scripted import DecisionSettings, decision_settings, run_session
from plumbing.chat_backend import Backend, Completion, Request

__all__ = ["MarathonWorkload", "SummaryRecorder", "grade_items", "item_correct", "marathon_grades"]

_TAG_REF = re.compile(r'<acp tokens="[^"]*" type="[^"]*">(m\d+)</acp>')


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text or "").strip()


def item_correct(answer: str, accept: list[str]) -> bool:
    """One accepted string occurs in ``answer`` not glued to a word character on either side."""
    a = _norm(answer)
    for cand in accept:
        c = _norm(cand)
        if c and re.search(r"(?<![\w])" + re.escape(c) + r"(?![\w])", a):
            return True
    return False


def grade_items(answer: str, items: list[dict[str, Any]]) -> list[bool]:
    return [item_correct(answer, it.get("accept") or []) for it in items]


def answer_text(call: dict[str, Any]) -> str:
    """What a call record says: its raw text plus the decoded string values of its tool calls."""
    parts = [call.get("raw_text") or ""]
    for c in call.get("tool_calls") or []:
        raw = (c.get("function") or {}).get("arguments") or ""
        parts.append(raw if isinstance(raw, str) else json.dumps(raw))
        try:
            stack = [json.loads(raw) if isinstance(raw, str) else raw]
        except ValueError:
            continue
        while stack:
            v = stack.pop()
            if isinstance(v, str):
                parts.append(v)
            elif isinstance(v, dict):
                stack.extend(v.values())
            elif isinstance(v, list):
                stack.extend(v)
    return "\n".join(parts)


def marathon_grades(session: Any, calls: list[dict[str, Any]]) -> dict[str, Any]:
    """Item-level probe grades and phase-step fidelity from a scripted run's call records."""
    meta = session.meta
    by_step = {c.get("step"): c for c in calls if c.get("purpose") == "probe"}
    probes, phase = [], []
    for key, items in sorted(meta.get("probe_items", {}).items(), key=lambda kv: int(kv[0])):
        step = int(key)
        call = by_step.get(step)
        text = answer_text(call) if call else ""
        ok = grade_items(text, items)
        if key in meta.get("phase_steps", {}):
            info = meta["phase_steps"][key]
            phase.append({"step": step, "migration_step": info["migration_step"], "items": len(ok),
                          "correct": sum(ok), "fidelity": sum(ok) / len(ok) if ok else 1.0,
                          "error": not all(ok), "asked": call is not None})
        else:
            info = meta.get("probes", {}).get(key, {})
            probes.append({"step": step, "probe": info.get("probe"), "pass": info.get("pass"),
                           "deep": bool(info.get("deep")), "items": len(ok), "correct": sum(ok),
                           "asked": call is not None, "answer": text[:500]})
    out: dict[str, Any] = {
        "probe_items": sum(p["items"] for p in probes),
        "probe_items_correct": sum(p["correct"] for p in probes),
        "deep_items": sum(p["items"] for p in probes if p["deep"]),
        "deep_items_correct": sum(p["correct"] for p in probes if p["deep"]),
    }
    out["probe_score"] = out["probe_items_correct"] / out["probe_items"] if out["probe_items"] else None
    kinds: dict[str, list[int]] = {}
    for p in probes:
        k = kinds.setdefault(str(p["probe"]), [0, 0])
        k[0] += p["correct"]
        k[1] += p["items"]
    out["by_probe"] = {k: {"correct": c, "items": n} for k, (c, n) in sorted(kinds.items())}
    if phase:
        out["phase_steps"] = len(phase)
        out["exec_errors"] = sum(1 for p in phase if p["error"])
        out["execution_fidelity"] = sum(p["fidelity"] for p in phase) / len(phase)
    return {"metrics": out, "probes": probes, "phase": phase}


# ---------------------------------------------------------------------------- summaries


class SummaryRecorder(Backend):
    """Passes calls through to ``inner`` and keeps every summary the model wrote, with its
    source messages, so their conformance can be scored after the run."""

    def __init__(self, inner: Backend, summary_prompt: str):
        self.inner, self.name, self.summary_prompt = inner, inner.name, summary_prompt
        self.summaries: list[dict[str, Any]] = []

    def complete(self, request: Request) -> Completion:
        comp = self.inner.complete(request)
        try:
            self._record(request, comp)
        except Exception as exc:  # noqa: BLE001 - grading must never break the run
            self.summaries.append({"kind": "unreadable", "error": str(exc)})
        return comp

    def _record(self, request: Request, comp: Completion) -> None:
        msgs = request.messages
        if msgs and msgs[-1].get("role") == "user" and msgs[-1].get("content") == self.summary_prompt:
            self.summaries.append({"kind": "compaction", "source": msgs[:-1],
                                   "summary": comp.message.get("content") or ""})
        for call in comp.message.get("tool_calls") or []:
            fn = call.get("function") or {}
            if fn.get("name") != "compress":
                continue
            try:
                args = json.loads(fn.get("arguments") or "{}")
            except ValueError:
                self.summaries.append({"kind": "compress", "error": "arguments are not JSON"})
                continue
            for r in (args.get("content") or []) if isinstance(args, dict) else []:
                if not isinstance(r, dict):
                    continue
                src = _range_source(msgs, str(r.get("startId", "")), str(r.get("endId", "")))
                self.summaries.append({"kind": "compress", "source": src, "summary": str(r.get("summary") or ""),
                                       **({} if src else {"error": "range not found in the prompt"})})

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def stats(self) -> dict[str, Any]:
        return self.inner.stats()

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()


def _ref(text: str) -> str | None:
    m = re.fullmatch(r"[mM]0*(\d{1,6})", text.strip())
    return f"m{int(m.group(1)):05d}" if m else None


def _range_source(msgs: list[dict[str, Any]], start: str, end: str) -> list[dict[str, Any]] | None:
    a, b = _ref(start), _ref(end)
    if not a or not b:
        return None
    pos = {}
    for i, m in enumerate(msgs):
        for ref in _TAG_REF.findall(m.get("content") or "" if isinstance(m.get("content"), str) else ""):
            pos.setdefault(ref, i)
    if a not in pos or b not in pos or pos[a] > pos[b]:
        return None
    return msgs[pos[a]:pos[b] + 1]


def conformance(summaries: list[dict[str, Any]], doctrine: Any = None) -> dict[str, Any]:
    """Mean ``check_summary`` score and pass count over the recorded summaries."""
    scores, passed, unscored = [], 0, 0
    for s in summaries:
        if not s.get("source") or "summary" not in s:
            unscored += 1
            continue
        try:
            rep = check_summary(s["source"], s["summary"], doctrine=doctrine)
        except Exception:  # noqa: BLE001 - a summary the checker cannot read is counted, not fatal
            unscored += 1
            continue
        scores.append(rep.score)
        passed += bool(rep.passed)
    return {"summaries": len(summaries), "summaries_scored": len(scores), "summaries_passed": passed,
            "summaries_unscored": unscored,
            "summary_conformance": sum(scores) / len(scores) if scores else None}


# ---------------------------------------------------------------------------- the workload


class MarathonSettings(DecisionSettings):
    """``settings`` of the marathon workload (checked when the recipe loads)."""

    seeds: list[int] = Field(
        default_factory=lambda: [0], description="marathon seeds: each draws its own task order and values, "
                                                 "one case per seed and variant (the recipe's seeds repeat "
                                                 "each case)")
    variants: list[Literal["repetitive", "phase"]] | None = Field(
        None, description="variants run, one case per seed each: repetitive (18 tasks a pass) or phase "
                          "(adds a 6-step migration whose plan is stated once); left out: [variant]")
    variant: Literal["repetitive", "phase"] = Field(
        "repetitive", description="the one variant run when variants is not given")
    passes: int = Field(
        6, ge=1, description="passes of 18 tasks in the one long session (at most 12); later passes are "
                             "probed on what earlier ones did")
    size: Literal[tuple(SIZES)] = Field(  # type: ignore[valid-type]
        "full", description="preset of the tool outputs' bulk: demo, small, full, large (roughly 36K, 43K, "
                            "64K, 120K history tokens over 6 passes)")
    tool_output_lines: int | None = Field(
        None, ge=0, description="lines of the big report module, build log and README, in place of the "
                                "size preset's; left out: the preset's")
    extra_tests: int | None = Field(
        None, ge=0, description="filler tests per module (they lengthen the verbose jest listing), in place "
                                "of the size preset's; left out: the preset's")
    max_tasks: int | None = Field(
        None, ge=0, description="keep only the marathon's first K steps (tasks and probes), for CPU demos; "
                                "0 or null: the whole marathon")
    driver: Literal["scripted", "agentic"] = Field(
        "scripted", description="scripted: the task actions are replayed and the model only decides "
                                "compressions and answers probes (cheap); agentic: the model performs every "
                                "task itself through the editor and the fake tsc/jest (marathon.driver)")
    max_turns: int = Field(12, ge=1, description="agentic driver only: model calls allowed per task")


class MarathonWorkload:
    name = "marathon"
    Settings = MarathonSettings

    def __init__(self, settings: dict[str, Any], base_dir: Path | None = None):
        self.settings = dict(settings)
        self.decisions = decision_settings(self.settings)  # a bad value fails before any case runs
        # Read through the settings model: its defaults fill what is left out, and a null means
        # "left out" wherever the description says so (before, `extra_tests: null` crashed).
        self.cfg = cfg = MarathonSettings.model_validate(self.settings)
        seeds = cfg.seeds
        variants = cfg.variants or [cfg.variant]
        passes = cfg.passes
        size: str | MarathonSize = cfg.size
        if cfg.tool_output_lines is not None or cfg.extra_tests is not None:
            base = SIZES[cfg.size]
            size = MarathonSize(base.tool_output_lines if cfg.tool_output_lines is None else cfg.tool_output_lines,
                                base.extra_tests if cfg.extra_tests is None else cfg.extra_tests)
        self.driver = cfg.driver
        self.repos: dict[str, tuple[dict[int, Any], dict[int, Any]]] = {}  # agentic: repo before/after each step
        if self.driver == "agentic":
            self.sessions = []
            for v in variants:
                for s in seeds:
                    session, snaps, afters = marathon_with_repos(int(s), passes, v, size)
                    self.sessions.append(session)
                    self.repos[session.session_id] = (snaps, afters)
        else:
            self.sessions = [marathon_session(int(s), passes, v, size) for v in variants for s in seeds]
        # max_tasks shortens the marathon to its first K steps (a CPU demo cannot afford 108).
        if cfg.max_tasks:
            self.sessions = [s.truncated(cfg.max_tasks).validate() for s in self.sessions]

    def cases(self) -> list[Case]:
        return [Case(s.session_id, s) for s in self.sessions]

    def supports(self, arm: str) -> bool:
        return arm in ARMS

    def run_case(self, case: Case, arm: str, seed: int, ctx: RunContext) -> dict[str, Any]:
        from dataclasses import replace


        recorder = SummaryRecorder(ctx.backend, SUMMARY_PROMPT)
        if self.driver == "agentic":
            snaps, afters = self.repos[case.payload.session_id]
            result = run_agentic_marathon(case.payload, snaps, afters, arm, seed, replace(ctx, backend=recorder),
                                          max_turns=self.cfg.max_turns,
                                          max_decisions_per_step=self.decisions["max_decisions_per_step"])
        else:
            result = run_session(case.payload, arm, seed, replace(ctx, backend=recorder), **self.decisions)
        grades = marathon_grades(case.payload, result["calls"])
        conf = conformance(recorder.summaries, ctx.doctrine)
        result["metrics"].update({k: v for k, v in grades["metrics"].items() if k != "by_probe"})
        result["metrics"].update(conf)
        result.update(workload="marathon", variant=case.payload.meta.get("variant"),
                      marathon={"by_probe": grades["metrics"]["by_probe"], "probes": grades["probes"],
                                "phase": grades["phase"]})
        return result
