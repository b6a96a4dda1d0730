"""Driver mode ``agentic``: the model drives the tools itself on the marathon's repository.

A case is one marathon task. It starts from the in-memory repository as it was before the
scripted agent's first action on that task (``marathon_with_repos``); the model sees the
task's request and calls ``str_replace_editor`` (view / create / str_replace / insert) and
``execute_bash`` (the fake ``tsc`` / ``jest`` / grep / sed of ``TsRepo``) until it answers
without a tool call, calls ``finish``, or runs out of ``max_turns``. Kernel arms may also
compress, and the policy arms may call their recovery tools (both through the same
``apply_reply`` as the scripted driver).

The oracle backend replays the scripted actions one per turn, so an oracle run must leave
the repository exactly as the scripted session did (``success``). Other models are judged
the same way, plus whether ``tsc`` is clean and the test suite passes afterwards. This
driver is deliberately minimal: one task per case, no probes, no cross-task memory.

Settings: ``seed`` (0), ``variant`` ("repetitive"), ``size`` ("demo"), ``passes`` (1),
``tasks`` (task kinds to run, default ``["create", "test"]``), ``max_turns`` (12).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from eval.arms import ARM_INFO, ARMS, ArmState
from eval.arms.policies.tools import tool_counts
from eval.workloads.agent_loop import route_reply, summariser
from eval.workloads.base import Case, RunContext, arm_env, call_record, safe_complete
from eval.workloads.marathon.fake_ts_repo import TsRepo
from eval.workloads.marathon.tasks import marathon_with_repos, run_tool
from plumbing.chat_backend import Request, prompt_text
from plumbing.recipe_loader import BaseConfig

__all__ = ["AgenticTask", "AgenticWorkload", "agentic_tasks", "run_agentic_task"]

TASK_TOOL_NAMES = ("str_replace_editor", "execute_bash")


@dataclass
class AgenticTask:
    task_id: str
    kind: str  # the marathon task (create, test, rename, ...) or "migration"
    system: str
    prompt: str
    script: list[dict[str, Any]]  # the scripted assistant messages (the oracle's replies)
    start: TsRepo
    expected: TsRepo  # the repository after the scripted task
    tools: list[dict[str, Any]]


def _kind(prompt: str) -> str:
    words = {"Add a module": "create", "Write jest tests": "test", "Rename the function": "rename",
             "Product wants sessions": "retune", "Move `": "refactor", "Run the whole test": "suite",
             "Run the production": "build", "Where is": "explore", "Document the": "docs",
             "A teammate": "typefix", "Bump the package": "version", "Add `": "extend"}
    return next((v for k, v in words.items() if prompt.startswith(k)), "other")


def agentic_tasks(seed: int = 0, passes: int = 1, variant: str = "repetitive", size: str = "demo") -> list[AgenticTask]:
    """Every task step of the marathon that acts on the repository, in session order."""
    session, snaps, afters = marathon_with_repos(seed, passes, variant, size)
    steps = [s for s in session.steps if s.index in snaps]
    system = session.messages[0]["content"]
    out = []
    for s in steps:
        msgs = session.messages[s.start:s.end]
        if msgs and msgs[0]["role"] == "user":
            prompt, script = msgs[0]["content"], [m for m in msgs[1:] if m["role"] == "assistant"]
        else:  # a migration execution step: its request is the probe step before it
            prev = session.messages[s.start - 2] if s.start >= 2 else {"content": "continue"}
            prompt, script = prev.get("content") or "continue", [m for m in msgs if m["role"] == "assistant"]
        out.append(AgenticTask(f"{session.session_id}.step{s.index}", _kind(prompt) if msgs[0]["role"] == "user"
                               else "migration", system, prompt, script, snaps[s.index], afters[s.index],
                               list(session.tools)))
    return out


def run_agentic_task(task: AgenticTask, arm: str, seed: int, ctx: RunContext, max_turns: int = 12) -> dict[str, Any]:
    """Let the model work on ``task`` through ``arm``; returns records and metrics."""
    info, arm_fn, backend = ARM_INFO[arm], ARMS[arm], ctx.backend
    repo = task.start.copy()
    calls: list[dict[str, Any]] = []

    summarise = summariser(ctx, calls, lambda source: {"role": "assistant", "content": "Earlier work on the task."})

    env = arm_env(ctx, summarise, task_tools=list(task.tools), system_prompt=task.system)
    state = ArmState(history=[{"id": "u0", "role": "user", "content": task.prompt}])
    tool_errors = finished = 0
    script = list(task.script)
    turn = 0
    for turn in range(1, max_turns + 1):
        view = arm_fn(state, env)
        hint = script[0] if script else {"role": "assistant", "content": "Done."}
        comp = safe_complete(backend, Request(view.messages, view.tools, info.use_adapter, ctx.max_tokens,
                                              {"oracle_reply": {k: v for k, v in hint.items() if k != "id"}}))
        rec = call_record("agent", None, comp, view=view, turn=turn)
        calls.append(rec)
        reply = comp.message
        tcs, decided = route_reply(state, env, view, info, reply, rec)
        if decided and not tcs:
            continue  # a context decision, not a task action: the script does not advance
        if script:
            script.pop(0)
        if not tcs:
            state.history.append({"id": f"a{turn}", "role": "assistant", "content": reply.get("content") or ""})
            break
        state.history.append({"id": f"a{turn}", "role": "assistant", "content": reply.get("content") or "",
                              "tool_calls": tcs})
        for j, c in enumerate(tcs):
            fn = c.get("function") or {}
            name = fn.get("name") or ""
            try:
                args = json.loads(fn.get("arguments") or "{}")
            except (ValueError, TypeError):
                args = None
            if not isinstance(args, dict):
                out = "ERROR: the arguments are not a JSON object."
            elif name == "finish":
                out, finished = str(args.get("message") or ""), 1
            elif name in TASK_TOOL_NAMES:
                out = run_tool(repo, name, args)
            else:
                out = f"ERROR: unknown tool `{name}`."
            tool_errors += out.startswith("ERROR")
            state.history.append({"id": f"a{turn}r{j}", "role": "tool", "tool_call_id": c.get("id") or f"c{turn}_{j}",
                                  "name": name, "content": out})
        if finished:
            break
    tsc_out, tsc_code = repo.tsc()
    _, jest_code = repo.jest()
    real = [c for c in calls if c.get("real")]
    metrics = {
        "calls": len(calls), "model_calls": len(real), "turns": turn,
        "billed_tokens": sum(c["prompt_tokens"] + c["completion_tokens"] for c in calls),
        "peak_context": max((c["retained_tokens"] for c in calls), default=0),
        "success": repo.files == task.expected.files, "tsc_clean": tsc_code == 0, "tests_pass": jest_code == 0,
        "tool_errors": tool_errors, "malformed_calls": sum(1 for c in real if c.get("parse_errors")),
        "kernel_errors": sum(len(c.get("kernel_errors") or []) for c in real),
        **tool_counts(real),
        "history_tokens": backend.count_tokens(prompt_text([{k: v for k, v in m.items() if k != "id"}
                                                            for m in state.history])),
    }
    changed = sorted(f for f in set(repo.files) | set(task.start.files) if repo.files.get(f) != task.start.files.get(f))
    return {"workload": "agentic", "case_id": task.task_id, "kind": task.kind, "calls": calls, "metrics": metrics,
            "files_changed": changed}


class AgenticSettings(BaseConfig):
    """``settings`` of the agentic workload (checked when the recipe loads)."""

    seed: int = Field(0, description="seed of the marathon the tasks are taken from (its task order and values)")
    passes: int = Field(1, ge=1, description="passes of the marathon generated to take tasks from (at most 12)")
    variant: Literal["repetitive", "phase"] = Field(
        "repetitive", description="marathon variant: repetitive, or phase (adds a 6-step migration whose plan "
                                  "is stated once)")
    size: str = Field(
        "demo", description="marathon size preset (demo, small, full, large): the bulk of file views, build "
                            "logs and test listings")
    tasks: list[str] = Field(
        default_factory=lambda: ["create", "test"],
        description="task kinds run, one case each (the first task of that kind in session order): create, "
                    "test, rename, retune, refactor, suite, build, explore, extend, docs, typefix, version, "
                    "migration (a step no user request opens); a kind with no task adds no case")
    max_turns: int = Field(
        12, ge=1, description="model calls allowed per task before it stops unfinished")


class AgenticWorkload:
    name = "agentic"
    Settings = AgenticSettings

    def __init__(self, settings: dict[str, Any], base_dir: Path | None = None):
        self.settings = dict(settings)
        tasks = agentic_tasks(int(self.settings.get("seed", 0)), int(self.settings.get("passes", 1)),
                              self.settings.get("variant", "repetitive"), self.settings.get("size", "demo"))
        wanted = self.settings.get("tasks", ["create", "test"])
        picked, seen = [], set()
        for t in tasks:  # the first task of each wanted kind
            if t.kind in wanted and t.kind not in seen:
                picked.append(t)
                seen.add(t.kind)
        self.tasks = picked

    def cases(self) -> list[Case]:
        return [Case(t.task_id, t) for t in self.tasks]

    def supports(self, arm: str) -> bool:
        return arm in ARMS

    def run_case(self, case: Case, arm: str, seed: int, ctx: RunContext) -> dict[str, Any]:
        return run_agentic_task(case.payload, arm, seed, ctx, int(self.settings.get("max_turns", 12)))
