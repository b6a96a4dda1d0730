"""Recall probes: extraction against answers.json, numbering, sandbox, judges, selection, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from data_gen.sources.swe_rebench import convert_row
from eval.workloads.probes.cases import (
    executions,
    extract_questions,
    judge,
    model_judge,
    sandbox_shutdown_response,
    select_cases,
)

FIX = Path(__file__).resolve().parents[1] / "data_gen/fixtures/swe_rebench"
ANSWERS = json.loads((FIX / "answers.json").read_text())


@pytest.fixture(scope="module")
def cases():
    return {c.converted.session_id: c for c in select_cases(str(FIX / "trajectories.parquet"), {"limit": 100})}


@pytest.mark.parametrize("name", ["trajectories.parquet", "trajectories.jsonl"])
def test_extraction_equals_answers_json(name):
    got = {c.converted.session_id: c for c in select_cases(str(FIX / name), {"limit": 100})}
    assert set(got) == set(ANSWERS)
    for tid, ref in ANSWERS.items():
        qs = {q.kind: q for q in got[tid].questions}
        assert got[tid].questions[0].instance_id == ref["instance_id"]
        for kind in ("files_changed", "first_edit", "first_test_run", "first_error"):
            if ref[kind] is None:
                assert kind not in qs, (tid, kind)
            else:
                assert qs[kind].answer == ref[kind], (tid, kind)


def test_repeated_commands_numbered_and_named_in_question(cases):
    ex = executions(cases["fixture-0001"].converted.messages)
    suite = [e for e in ex if e.command == "cd /workspace/textkit && python -m pytest -q"]
    assert [e.number for e in suite] == [1, 2]
    q = next(q for q in cases["fixture-0001"].questions if q.kind == "first_test_run")
    assert q.execution == 1 and "execution 1 of the command `cd /workspace/textkit && python -m pytest -q`" in q.question


def test_input_to_a_running_process_is_not_a_command(cases):
    ex = executions(cases["fixture-0007"].converted.messages)
    assert "C-c" not in [e.command for e in ex]
    assert ex[0].interrupted and "6 passed in 31.02s" in ex[0].output
    assert ex[1].command.startswith("cd /workspace/scheduler && timeout 10") and ex[1].number == 1


def _row(*turns, patch="diff --git a/pkg/a.py b/pkg/a.py\n"):
    msgs = [{"role": "system", "content": "sys"},
            {"role": "user", "content": "<uploaded_files>\n/workspace/pkg\n</uploaded_files>\nFix it."}]
    for k, (name, args, result) in enumerate(turns):
        cid = f"c{k}"
        msgs.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]})
        msgs.append({"role": "tool", "tool_call_id": cid, "name": name, "content": result})
    return convert_row({"trajectory_id": "t1", "instance_id": "o__pkg-1", "repo": "o/pkg", "trajectory": msgs,
                        "tools": [], "model_patch": patch})


def _kinds(conv):
    return {q.kind: q for q in extract_questions(conv)}


def test_first_edit_rules():
    ed = "str_replace_editor"
    failed = (ed, {"command": "str_replace", "path": "/workspace/pkg/pkg/a.py", "old_str": "x", "new_str": "y"},
              "ERROR: No replacement was performed, old_str `x` did not appear verbatim in /workspace/pkg/pkg/a.py.")
    outside = (ed, {"command": "create", "path": "/tmp/r.py", "file_text": "print(1)\n"}, "File created successfully")
    good = (ed, {"command": "str_replace", "path": "/workspace/pkg/pkg/a.py", "old_str": "a = 1", "new_str": "a = 2"},
            "The file /workspace/pkg/pkg/a.py has been edited.")
    q = _kinds(_row(failed, outside, good))["first_edit"]
    assert q.answer == {"path": "/workspace/pkg/pkg/a.py", "command": "str_replace", "old_str": "a = 1", "new_str": "a = 2"}
    sed = ("execute_bash", {"command": "cd /workspace/pkg && sed -i 's/a = 1/a = 3/' pkg/a.py"}, "")
    assert "first_edit" not in _kinds(_row(sed, good))  # the first change cannot be quoted: omitted
    tmp = ("execute_bash", {"command": "python x.py > /tmp/out.txt 2>&1"}, "")
    assert "first_edit" in _kinds(_row(tmp, good))


def test_first_test_run_and_error_rules():
    sh = "execute_bash"
    single = (sh, {"command": "pytest tests/test_a.py::test_one -q"}, "F\nFAILED tests/test_a.py::test_one - ValueError: bad\n1 failed in 0.1s")
    grep = (sh, {"command": "grep -rn 'TypeError: nope' ."}, "./x.py:3:raise TypeError: nope")
    full = (sh, {"command": "python -m pytest -q"}, "..F\n=== 1 failed, 2 passed, 1 warning in 0.50s ===")
    qs = _kinds(_row(grep, single, full))
    assert qs["first_test_run"].answer == {"command": "python -m pytest -q", "passed": 2, "failed": 1}
    assert qs["first_error"].answer == "ValueError: bad"  # grep output is not the code under test
    nocount = (sh, {"command": "pytest -q"}, "ERROR: usage: pytest [options]")
    assert "first_test_run" not in _kinds(_row(nocount, full))  # never replaced by a later run
    tb = (sh, {"command": "python repro.py"}, "Traceback (most recent call last):\n  File \"x\", line 1\n"
                                              "    boom()\nzlib.error: Error -3 while decompressing\n")
    assert _kinds(_row(tb))["first_error"].answer == "zlib.error: Error -3 while decompressing"
    ki = (sh, {"command": "python serve.py"}, "^C\nTraceback (most recent call last):\n  File \"s\"\nKeyboardInterrupt")
    assert "first_error" not in _kinds(_row(ki))


def test_errors_printed_by_the_agents_own_scripts():
    """OpenHands layout: execute_bash results end with a '[Command finished ...]' trailer, and
    the agent's scripts print exceptions without a traceback."""
    sh = "execute_bash"
    own = (sh, {"command": "cd /workspace/pkg && python check.py"},
           "checking...\nERROR: ParseError: unexpected '}' at line 3\n[Command finished with exit code 1]")
    assert _kinds(_row(own))["first_error"].answer == "ParseError: unexpected '}' at line 3"
    runner = (sh, {"command": "python run_tests.py"},
              "FAILED tests/test_a.py::test_two: AttributeError: 'Conf' object has no attribute 'x'\n"
              "[Command finished with exit code 1]")
    assert _kinds(_row(runner))["first_error"].answer == "AttributeError: 'Conf' object has no attribute 'x'"
    from eval.workloads.probes.cases import executions

    conv = _row(own)
    assert "[Command finished" not in executions(conv.messages)[0].output
    plain = (sh, {"command": "python check.py"}, "ERROR: could not find config\n[Command finished with exit code 1]")
    assert "first_error" not in _kinds(_row(plain))  # not an exception: no answer made up


def test_sandbox_shutdown_responses():
    for tool in ("execute_bash", "str_replace_editor", "task_tracker"):
        text = sandbox_shutdown_response(tool, {"command": "ls"})
        assert "shut down" in text and tool in text
    assert sandbox_shutdown_response("think", {"thought": "x"}) == "Your thought has been logged."
    assert sandbox_shutdown_response("finish", {"message": "the answer"}) == "the answer"
    assert "unknown tool" in sandbox_shutdown_response("rm_rf", None)


def test_judges_per_kind():
    files = {"kind": "files_changed", "answer": ["numly/temperature.py", "tests/test_temperature.py"]}
    assert judge(files, "- /workspace/units/numly/temperature.py\n- `tests/test_temperature.py`")["correct"]
    half = judge(files, "numly/temperature.py and setup.py")
    assert not half["correct"] and half["f1"] == pytest.approx(0.5)
    edit = {"kind": "first_edit", "answer": {"command": "str_replace", "path": "/w/a.py", "old_str": "x",
                                             "new_str": "    return \"-\".join(words)"}}
    assert judge(edit, "In src/slug.py:\n```python\nreturn   \"-\".join(words)\n```")["correct"]
    assert not judge(edit, "```\nreturn \"_\".join(words)\n```")["correct"]
    create = {"kind": "first_edit", "answer": {"command": "create", "path": "/w/t.py", "file_text": "def f():\n    return 1\n"}}
    assert judge(create, "```\ndef f():\n  return 1\n```")["correct"]
    counts = {"kind": "first_test_run", "answer": {"command": "pytest", "passed": 11, "failed": 1}}
    assert judge(counts, "passed=11 failed=1")["correct"]
    assert judge(counts, "11 tests passed and 1 failed.")["correct"]
    assert not judge(counts, "passed=1 failed=11")["correct"]
    zero = {"kind": "first_test_run", "answer": {"command": "pytest", "passed": 10, "failed": 0}}
    assert judge(zero, "10 passed, none failed")["correct"]
    err = {"kind": "first_error", "answer": "AssertionError: assert 'hello_world' == 'hello-world'"}
    assert judge(err, "It was:\nE       AssertionError: assert 'hello_world' ==  'hello-world'")["correct"]
    assert not judge(err, "AssertionError: assert 'hello_world'")["correct"]


def test_model_judge_keeps_reasons():
    from eval.backends.oracle import OracleBackend

    q = {"kind": "first_error", "question": "What was the error?", "answer": "KeyError: 'colour'"}
    yes = OracleBackend(lambda r: {"content": 'Verdict: {"correct": true, "reason": "same exception"}'})
    assert model_judge(yes, q, "KeyError 'colour'") == {"correct": True, "reason": "same exception"}
    junk = OracleBackend(lambda r: {"content": "looks fine to me"})
    v = model_judge(junk, q, "x")
    assert v["correct"] is None and "unreadable" in v["reason"]
    seen = {}

    def capture(r):
        seen["prompt"] = r.messages[-1]["content"]
        return {"content": '{"correct": false, "reason": "different key"}'}

    model_judge(OracleBackend(capture), q, "KeyError: 'size'")
    assert "KeyError: 'colour'" in seen["prompt"] and "KeyError: 'size'" in seen["prompt"]


def test_case_selection_filters():
    src = str(FIX / "trajectories.parquet")
    st: dict = {}
    assert len(select_cases(src, {"limit": 3}, stats=st)) == 3
    assert st["cases"] == 3 and st["rows"] == 3
    resolved = select_cases(src, {"limit": 100, "resolved": False})
    assert {c.converted.session_id for c in resolved} == {"fixture-0005", "fixture-0006"}
    need = select_cases(src, {"limit": 100, "require_kinds": ["first_error", "first_test_run"]})
    assert {c.converted.session_id for c in need} == {"fixture-0001", "fixture-0003", "fixture-0004", "fixture-0007"}
    # A filter given as null is left out (a recipe writes `limit: null`): before, int(None) crashed.
    nulls = {k: None for k in ("limit", "skip", "resolved", "min_messages", "min_questions", "require_kinds")}
    assert [c.converted.session_id for c in select_cases(src, nulls)] == \
        [c.converted.session_id for c in select_cases(src, {})]
    with pytest.raises(ValueError, match="unknown probe filters"):
        select_cases(src, {"lmit": 3})
    with pytest.raises(ValueError, match="kinds"):
        select_cases(src, {}, kinds=("first_guess",))


def test_cli_extract(tmp_path):
    from eval.__main__ import main

    out = tmp_path / "q.jsonl"
    assert main(["probes", "extract", str(FIX / "trajectories.jsonl"), "--out", str(out), "--kinds", "first_error"]) == 0
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert rows and all({"instance_id", "kind", "question", "answer"} <= set(r) for r in rows)
    assert {r["kind"] for r in rows} == {"first_error"}
    assert sorted(r["answer"] for r in rows) == sorted(a["first_error"] for a in ANSWERS.values() if a["first_error"])
    assert main(["probes", "extract", str(tmp_path / "missing.parquet"), "--out", str(out)]) == 1
