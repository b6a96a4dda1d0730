"""Both model-driven drivers (the agentic workload's task loop and the Marathon's agentic mode)
route a reply's calls through one loop (eval.workloads.agent_loop) and record summaries alike."""

from __future__ import annotations

import json

import pytest

from eval.backends.oracle import POLICIES, OracleBackend
from eval.workloads import WORKLOADS
from eval.workloads.agentic import agentic_tasks, run_agentic_task
from eval.workloads.base import RunContext

RECOVERY = [("search_context", {"query": "parser"}), ("decompress", {"block_id": "b999"})]


def _recovering_oracle():
    """The oracle, except that its first agent reply calls the kernel's two recovery tools."""
    first = [True]

    def policy(req):
        if req.tools and first[0]:
            first[0] = False
            return {"role": "assistant", "content": "", "tool_calls": [
                {"id": f"r{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                for i, (n, a) in enumerate(RECOVERY)]}
        return POLICIES["oracle"](req)

    return OracleBackend(policy)


def _agentic(doctrine, arm, window=4096):
    task = next(t for t in agentic_tasks(0) if t.kind == "create")
    return run_agentic_task(task, arm, 0, RunContext(_recovering_oracle(), doctrine, window=window))


def _marathon(doctrine, arm, window=4096):
    wl = WORKLOADS["marathon"]({"seeds": [1], "passes": 1, "size": "demo", "max_tasks": 3, "driver": "agentic"}, None)
    (case,) = wl.cases()
    return wl.run_case(case, arm, 0, RunContext(_recovering_oracle(), doctrine, window=window))


def test_both_drivers_route_the_kernel_recovery_tools_to_the_kernel(doctrine):
    for result in (_agentic(doctrine, "doctrine"), _marathon(doctrine, "doctrine")):
        first = next(c for c in result["calls"] if c["purpose"] == "agent")
        assert first["recovery"] == [n for n, _ in RECOVERY]
        assert result["metrics"]["tool_errors"] == 0  # not run as task tools


@pytest.mark.parametrize("run", [_agentic, _marathon])
def test_summary_calls_record_the_summary_prompt_as_retained_context(doctrine, run):
    result = run(doctrine, "compact_tail", window=300)
    summaries = [c for c in result["calls"] if c["purpose"] == "summary"]
    assert summaries, "the window should force a compaction"
    assert all(c["retained_tokens"] == c["prompt_tokens"] > 0 for c in summaries)
