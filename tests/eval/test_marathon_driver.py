"""The Session Marathon's agentic mode: the model performs the tasks (eval.workloads.marathon.driver)."""

from __future__ import annotations

import json

import pytest

from eval.backends import make_backend
from eval.backends.oracle import OracleBackend
from eval.recipe import EvalRecipe
from eval.workloads import WORKLOADS
from eval.workloads.base import RunContext

SETTINGS = {"seeds": [1], "passes": 1, "size": "demo", "max_tasks": 8}


def _run(doctrine, backend, arm="full", **settings):
    wl = WORKLOADS["marathon"]({**SETTINGS, **settings}, None)
    (case,) = wl.cases()
    return wl.run_case(case, arm, 0, RunContext(backend, doctrine, window=4096))


@pytest.mark.parametrize("arm", ["full", "n_latest_10", "doctrine"])
def test_the_oracle_performs_every_task_as_scripted(doctrine, arm):
    agentic = _run(doctrine, OracleBackend(), arm, driver="agentic")
    scripted = _run(doctrine, OracleBackend(), arm)
    m = agentic["metrics"]
    assert agentic["driver"] == "agentic" and m["tasks"] == 7
    assert m["tasks_broken"] == 0 and m["tool_errors"] == 0 and m["tsc_clean"] and m["tests_pass"]
    assert m["probe_score"] == scripted["metrics"]["probe_score"] == 1.0
    # Every task action is a real model call now, not a billed replay.
    assert m["model_calls"] > scripted["metrics"]["model_calls"]
    assert not any(c["purpose"] == "task" for c in agentic["calls"])
    if arm == "doctrine":
        assert m["compressions_succeeded"] >= 1


def test_a_model_that_does_nothing_breaks_the_tasks(doctrine):
    m = _run(doctrine, make_backend("never_compress"), driver="agentic")["metrics"]
    assert m["tasks_broken"] >= 3 and m["task_success"] < 0.6
    assert m["probe_score"] == 0.0


def test_refetches_are_calls_repeated_for_the_same_output(doctrine):
    def again(req):
        call = {"id": "c", "type": "function",
                "function": {"name": "execute_bash", "arguments": json.dumps({"command": "ls"})}}
        return {"role": "assistant", "content": "", "tool_calls": [call]}

    m = _run(doctrine, OracleBackend(policy=again), driver="agentic", max_turns=3)["metrics"]
    assert m["tasks_unfinished"] == 7 and m["refetches"] >= 7 * 2 - 2


def test_driver_is_checked_when_the_recipe_loads():
    wl = {"name": "marathon", "settings": {**SETTINGS, "driver": "agentic"}}
    EvalRecipe.model_validate({"arms": ["full"], "workloads": [wl], "backend": {"name": "oracle"}})
    bad = {"name": "marathon", "settings": {**SETTINGS, "driver": "live"}}
    with pytest.raises(ValueError, match="driver"):
        EvalRecipe.model_validate({"arms": ["full"], "workloads": [bad], "backend": {"name": "oracle"}})
