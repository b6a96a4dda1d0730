"""Facts drawn from tool output itself (errors, versions, settings), not only paths."""

from __future__ import annotations

import json

from data_gen.sources.trajectory_facts import steps_and_facts


def _call(cid: str, command: str, text: str = "") -> dict:
    return {"role": "assistant", "content": text, "tool_calls": [
        {"id": cid, "type": "function", "function": {"name": "execute_bash", "arguments": json.dumps({"command": command})}}]}


def _out(cid: str, content: str) -> dict:
    return {"role": "tool", "tool_call_id": cid, "name": "execute_bash", "content": content}


def _facts(*msgs: dict) -> dict[str, list]:
    _steps, facts = steps_and_facts([{"role": "system", "content": "s"}, {"role": "user", "content": "go"}, *msgs])
    out: dict[str, list] = {}
    for f in facts:
        out.setdefault(f.kind, []).append(f)
    return out


def test_a_rerun_uses_the_errors_of_the_last_run():
    f = _facts(_call("c1", "cd /src && go test ./proxy/... | tail -5"),
               _out("c1", "--- FAIL: TestTimeout (0.3s)\n    handler_test.go:42: got 503, want 504\nFAIL"),
               _call("c2", "go test ./proxy/..."), _out("c2", "ok"))
    errors = {x.text: x.used_at for x in f["error_strings"]}
    assert set(errors) == {"--- FAIL: TestTimeout (0.3s)", "handler_test.go:42: got 503, want 504"}
    assert all(u == [1] for u in errors.values())  # step 0 ran it, step 1 reran it


def test_a_version_and_a_setting_printed_by_a_tool_are_used_when_a_later_step_carries_them():
    f = _facts(_call("c1", "grep -n retry go.mod"), _out("c1", "9:\tgithub.com/acme/retry v0.4.47"),
               _call("c2", "grep -n grace config.yaml"), _out("c2", "14:  shutdown_grace_period: 5s"),
               _call("c3", "cd ~/go/pkg/mod/github.com/acme/retry@v0.4.47 && ls",
                     "shutdown_grace_period: 5s is shorter than a job"), _out("c3", "retry.go"))
    texts = {x.text for x in f["exact_values"]}
    assert {"v0.4.47", "shutdown_grace_period: 5s"} <= texts
    assert all(x.used_at == [2] for x in f["exact_values"] if x.text in ("v0.4.47", "shutdown_grace_period: 5s"))


def test_values_no_later_step_carries_are_no_facts():
    f = _facts(_call("c1", "kubectl get deploy"), _out("c1", "memory: 512Mi\nreplicas: 6"),
               _call("c2", "kubectl get pods"), _out("c2", "none"))
    assert "exact_values" not in f


def test_a_note_before_the_task_opens_no_empty_step():
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "FYI: CI runs node 20."},
            {"role": "user", "content": "Fix the build."}, _call("c1", "make"), _out("c1", "ok")]
    steps, _facts = steps_and_facts(msgs)
    assert len(steps) == 1 and (steps[0].start, steps[0].end) == (0, 5)
