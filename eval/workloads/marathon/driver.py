"""The Session Marathon's agentic mode (``driver: agentic``): the model performs the tasks.

One long session, as in the scripted mode, but nothing is replayed: for each task the
request joins the arm's history and the model works through the editor and the fake
toolchain (``TsRepo``: ``tsc``, ``jest``, grep, sed) on one repository that carries over
from task to task, until it answers without a tool call, calls ``finish`` or runs out of
``max_turns``. Probe steps are answered by the model and graded as in the scripted mode.
Kernel arms answer the nudges shown on the way (at most ``max_decisions_per_step`` per task);
a compress or recovery call (the policy arms': their own recovery tools) is applied and
the task goes on.

What a replay cannot show becomes real: ``refetches`` counts task calls that repeat an
earlier call of the session and get the same output back (re-reading what was lost from
view), ``tasks_broken`` the tasks after which the repository differs from the scripted
session's, ``tool_errors`` the calls that failed. The oracle backend replays the scripted
actions one per turn, so an oracle run ends every task exactly as the scripted session did.
"""

from __future__ import annotations

import json
from typing import Any

from eval.arms import ARM_INFO, ARMS, ArmState
from eval.arms.policies.tools import tool_counts
from eval.judges import fact_recall, visible_text
from eval.metrics import scripted_metrics
from eval.workloads.agent_loop import route_reply, summariser
from eval.workloads.base import RunContext, call_record, safe_complete
from eval.workloads.hindsight import decision_reply, probe_reply, summary_reply
from eval.workloads.marathon.tasks import run_tool
from eval.workloads.scripted import session_env
from plumbing.chat_backend import Request

__all__ = ["run_agentic_marathon"]

TASK_TOOLS = ("str_replace_editor", "execute_bash")


def run_agentic_marathon(session: Any, snaps: dict[int, Any], afters: dict[int, Any], arm: str, seed: int,
                         ctx: RunContext, *, max_turns: int = 12,
                         max_decisions_per_step: int | None = None) -> dict[str, Any]:
    """Drive ``session`` (a marathon, ``marathon_with_repos``) through ``arm`` with the model
    acting; ``snaps`` / ``afters``: the repository before / after each acting step."""
    info, arm_fn, backend = ARM_INFO[arm], ARMS[arm], ctx.backend
    calls: list[dict[str, Any]] = []
    probes: list[dict[str, Any]] = []
    counters: dict[str, int] = {}

    summarise = summariser(ctx, calls, lambda source: summary_reply(session, source))
    env = session_env(session, ctx, summarise)
    state = ArmState()
    msgs = session.messages
    start = 1 if msgs and msgs[0].get("role") == "system" else 0
    acting = sorted(snaps)
    repo = snaps[acting[0]].copy() if acting else None
    last_after = snaps[acting[0]] if acting else None  # the scripted repository before the next task
    seen_calls: dict[str, str] = {}  # (tool, arguments) -> the last output it gave
    refetches = tool_errors = tasks = broken = unfinished = 0
    seq = 0

    def add(msg: dict[str, Any]) -> None:
        nonlocal seq
        seq += 1
        state.history.append({**msg, "id": f"g{seq:05d}"})

    for step in session.steps:
        lo = max(step.start, start)
        if lo >= step.end:
            continue
        if step.kind == "probe":
            add({k: v for k, v in msgs[lo].items() if k != "id"})
            view = arm_fn(state, env)
            expected = [f.text for f in session.facts if f.id in step.uses]
            req = Request(view.messages, view.tools, info.use_adapter, ctx.max_tokens,
                          {"oracle_reply": probe_reply(expected, view.messages)})
            comp = safe_complete(backend, req)
            answer = comp.message.get("content") or ""
            probes.append({"step": step.index, "score": fact_recall(answer, expected),
                           "survival": fact_recall(visible_text(view.messages), expected), "expected": expected,
                           "answer": answer})
            calls.append(call_record("probe", req, comp, view=view, step=step.index))
            add({"role": "assistant", "content": answer})
            continue
        if step.index in snaps and repo is not None:
            _outside_changes(repo, last_after, snaps[step.index])
            last_after = afters.get(step.index, snaps[step.index])
        if msgs[lo].get("role") == "user":
            add({k: v for k, v in msgs[lo].items() if k != "id"})
        script = [m for m in msgs[lo:step.end] if m.get("role") == "assistant"]
        budget = max_decisions_per_step if max_decisions_per_step is not None else float("inf")
        done = False
        for turn in range(1, max_turns + 1):
            view = arm_fn(state, env)
            # The model acts in every call; a decision is asked of it where a nudge is shown.
            ask = info.nudges and budget > 0 and view.nudge_shown
            if ask:
                budget -= 1
                hint = decision_reply(session, step.index, view, state.kernel_state, env, ctx.horizon, seed,
                                      counters)
                # A decline (plain text) to a decision stands aside: the next call is the task's.
                if not hint.get("tool_calls"):
                    hint = _next(script)
            else:
                hint = _next(script)
            comp = safe_complete(backend, Request(view.messages, view.tools, info.use_adapter, ctx.max_tokens,
                                                  {"oracle_reply": hint}))
            rec = call_record("agent", None, comp, view=view, step=step.index, turn=turn)
            calls.append(rec)
            reply = comp.message
            tcs, decided = route_reply(state, env, view, info, reply, rec)
            if decided and not tcs:
                continue  # a context decision: the task goes on
            if ask and not tcs and not (reply.get("content") or "").strip():
                continue
            if script:
                script.pop(0)
            if not tcs:
                add({"role": "assistant", "content": reply.get("content") or ""})
                done = True
                break
            add({"role": "assistant", "content": reply.get("content") or "", "tool_calls": tcs})
            for j, c in enumerate(tcs):
                fn = c.get("function") or {}
                name, raw = fn.get("name") or "", fn.get("arguments") or "{}"
                try:
                    args = json.loads(raw) if isinstance(raw, str) else raw
                except (ValueError, TypeError):
                    args = None
                if not isinstance(args, dict):
                    out = "ERROR: the arguments are not a JSON object."
                elif name == "finish":
                    out, done = str(args.get("message") or ""), True
                elif name in TASK_TOOLS and repo is not None:
                    out = run_tool(repo, name, args)
                    key = name + json.dumps(args, sort_keys=True)
                    if seen_calls.get(key) == out:
                        refetches += 1
                    seen_calls[key] = out
                else:
                    out = f"ERROR: unknown tool `{name}`."
                tool_errors += out.startswith("ERROR")
                state.history.append({"id": f"g{seq:05d}r{j}", "role": "tool",
                                      "tool_call_id": c.get("id") or f"c{seq}_{j}", "name": name, "content": out})
            if done:
                break
        unfinished += not done
        if step.index in afters and repo is not None:
            tasks += 1
            broken += repo.files != afters[step.index].files
    metrics = scripted_metrics(calls, probes, refetches, state.compressions_attempted, state.compressions_succeeded)
    metrics.update(tool_counts([c for c in calls if c.get("real")]))
    metrics.update(tasks=tasks, tasks_broken=broken, tasks_unfinished=unfinished, tool_errors=tool_errors,
                   task_success=(tasks - broken) / tasks if tasks else None)
    if repo is not None:
        metrics.update(tsc_clean=repo.tsc()[1] == 0, tests_pass=repo.jest()[1] == 0)
    return {"workload": "marathon", "driver": "agentic", "case_id": session.session_id, "family": session.family,
            "calls": calls, "probes": probes, "metrics": metrics, "kernel_errors": state.kernel_errors[:50]}


def _outside_changes(repo: Any, before: Any, after: Any) -> None:
    """Carry the changes made between two tasks by someone else (a teammate's edit, a build
    artifact), the scripted repository's ``before`` -> ``after``, into ``repo``."""
    if before is None:
        return
    for path in set(before.files) | set(after.files):
        if before.files.get(path) != after.files.get(path):
            if path in after.files:
                repo.files[path] = after.files[path]
            else:
                repo.files.pop(path, None)


def _next(script: list[dict[str, Any]]) -> dict[str, Any]:
    """The scripted session's next assistant message (the oracle's reply), or a closing line."""
    if not script:
        return {"role": "assistant", "content": "Done."}
    return {k: v for k, v in script[0].items() if k != "id"}
