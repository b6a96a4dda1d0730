"""The agentic driver: the oracle replays the script exactly; a real model runs end to end."""

from __future__ import annotations

import json

import pytest

from eval.backends.oracle import OracleBackend
from eval.workloads import WORKLOADS
from eval.workloads.agentic import agentic_tasks, run_agentic_task
from eval.workloads.base import RunContext


@pytest.fixture(scope="module")
def tasks():
    return agentic_tasks(0, 1, "phase", "demo")


def test_oracle_reproduces_every_scripted_task(tasks, doctrine):
    kinds = {t.kind for t in tasks}
    assert {"create", "test", "rename", "refactor", "migration"} <= kinds
    for t in tasks:
        r = run_agentic_task(t, "full", 0, RunContext(OracleBackend(), doctrine, window=4096))
        assert r["metrics"]["success"], t.task_id
        assert r["metrics"]["tool_errors"] == 0 and r["metrics"]["tsc_clean"]


def test_test_task_sees_the_failure_then_fixes_it(tasks, doctrine):
    t = next(t for t in tasks if t.kind == "test")
    assert "tests/" + t.prompt.split("tests/")[1].split(" ")[0] not in t.start.files  # not written yet
    r = run_agentic_task(t, "doctrine", 0, RunContext(OracleBackend(), doctrine, window=4096))
    assert r["metrics"]["success"] and r["metrics"]["tests_pass"]
    assert any(f.startswith("tests/") for f in r["files_changed"])


def test_bad_tool_calls_are_counted_not_fatal(tasks, doctrine):
    t = next(t for t in tasks if t.kind == "create")
    bad = iter([{"content": "", "tool_calls": [{"id": "b1", "type": "function", "function": {
        "name": "str_replace_editor", "arguments": "not json"}}]},
                {"content": "", "tool_calls": [{"id": "b2", "type": "function", "function": {
                    "name": "rm_everything", "arguments": "{}"}}]},
                {"content": "", "tool_calls": [{"id": "b3", "type": "function", "function": {
                    "name": "finish", "arguments": json.dumps({"message": "gave up"})}}]}])
    r = run_agentic_task(t, "full", 0, RunContext(OracleBackend(lambda req: next(bad)), doctrine, window=4096))
    m = r["metrics"]
    assert m["tool_errors"] == 2 and m["turns"] == 3 and not m["success"]


def test_workload_picks_tasks_by_kind(doctrine):
    wl = WORKLOADS["agentic"]({"tasks": ["create", "rename"], "size": "demo"}, None)
    assert {c.payload.kind for c in wl.cases()} == {"create", "rename"}


@pytest.mark.slow
def test_hf_backend_runs_a_couple_of_tasks(tasks, doctrine, tiny_model_dir):
    from eval.backends import make_backend

    be = make_backend("hf", {"model": str(tiny_model_dir)})
    for t in [t for t in tasks if t.kind in ("create", "retune")]:
        r = run_agentic_task(t, "full", 0, RunContext(be, doctrine, window=4096, max_tokens=24), max_turns=2)
        m = r["metrics"]
        assert 1 <= m["model_calls"] <= 2 and m["billed_tokens"] > 0
