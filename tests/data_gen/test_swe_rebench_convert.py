"""convert_row: the article's conversion rules, each reject reason, never raising on bad rows."""

from __future__ import annotations

import copy
import importlib.util
import json
import random
import sys
from collections import Counter
from pathlib import Path

import pytest

from data_gen.sources.swe_rebench import (
    REJECT_REASONS,
    ConvertedTrajectory,
    Rejected,
    UnreadableRow,
    convert_row,
    iter_rows,
    strip_nulls,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "swe_rebench"


def fixture_module():
    """The fixture generator, loaded from its file (the fixtures folder is not a package)."""
    spec = importlib.util.spec_from_file_location("swe_rebench_make_fixtures", FIXTURES / "make_fixtures.py")
    mod = importlib.util.module_from_spec(spec)
    saved, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # no __pycache__ among the fixtures
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.dont_write_bytecode = saved
    return mod


def expected(name: str) -> list[dict]:
    return fixture_module().read_expected(name)

SYSTEM = {"role": "system", "content": "be useful"}
USER = {"role": "user", "content": "fix it"}


def call(cid: str, name: str = "execute_bash", args: str = '{"command": "ls"}', text: str = "") -> dict:
    return {"role": "assistant", "content": text,
            "tool_calls": [{"id": cid, "type": "function", "function": {"name": name, "arguments": args}}]}


def calls(*ids: str, text: str = "") -> dict:
    return {"role": "assistant", "content": text, "tool_calls": [
        {"id": c, "type": "function", "function": {"name": "execute_bash", "arguments": '{"command": "ls"}'}}
        for c in ids]}


def res(cid: str, content: str = "out", name: str | None = "execute_bash") -> dict:
    return {"role": "tool", "tool_call_id": cid, "name": name, "content": content}


def row(*msgs: dict, **extra) -> dict:
    return {"trajectory_id": "t-1", "instance_id": "o__r-1", "repo": "o/r", "trajectory": list(msgs),
            "tools": [], **extra}


def ok(r) -> ConvertedTrajectory:
    out = convert_row(r)
    assert isinstance(out, ConvertedTrajectory), out
    return out


def reason(r) -> str:
    out = convert_row(r)
    assert isinstance(out, Rejected), out
    return out.reason


# ------------------------------------------------------------------ null padding, fields


def test_strip_nulls_removes_padding_at_every_depth_and_keeps_falsy_values():
    padded = {"a": None, "b": {"c": None, "d": 0, "e": [{"f": None, "g": ""}]}, "h": False}
    assert strip_nulls(padded) == {"b": {"d": 0, "e": [{"g": ""}]}, "h": False}


def test_tool_schemas_read_from_the_parquet_lose_their_padding():
    mod = fixture_module()
    first = next(iter_rows(FIXTURES / "trajectories.parquet"))
    bash_props = first["tools"][0]["function"]["parameters"]["properties"]
    assert bash_props["path"] is None  # the padding is really there in the file
    conv = ok(first)
    assert conv.tools == mod.TOOLS  # exactly each tool's own parameters again


def test_messages_keep_only_the_fields_of_their_role():
    padded = row(
        {"role": "system", "content": "s", "tool_calls": None, "name": None, "tool_call_id": None},
        {"role": "user", "content": "u", "tool_calls": None, "name": None, "tool_call_id": None},
        {**call("c1"), "name": None, "tool_call_id": None},
        {**res("c1"), "tool_calls": None},
        {"role": "assistant", "content": "done", "tool_calls": None, "name": None, "tool_call_id": None},
    )
    msgs = ok(padded).messages
    assert msgs[0] == {"role": "system", "content": "s"}
    assert msgs[1] == {"role": "user", "content": "u"}
    assert set(msgs[2]) == {"role", "content", "tool_calls"}
    assert msgs[3] == {"role": "tool", "content": "out", "tool_call_id": "c1", "name": "execute_bash"}
    assert msgs[4] == {"role": "assistant", "content": "done"}


def test_null_content_becomes_an_empty_string_and_text_parts_are_joined():
    r = row(SYSTEM, {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
            {**call("c1"), "content": None}, res("c1"))
    msgs = ok(r).messages
    assert msgs[1]["content"] == "ab"
    assert msgs[2]["content"] == ""


def test_tool_result_without_a_name_takes_the_name_of_its_call():
    msgs = ok(row(SYSTEM, USER, call("c1", name="think", args='{"thought": "x"}'), res("c1", name=None))).messages
    assert msgs[3]["name"] == "think"


def test_meta_carries_the_identifying_fields_and_a_bool_resolved():
    conv = ok(row(SYSTEM, USER, {"role": "assistant", "content": "ok"}, resolved=1, model_patch="diff --git a/x b/x",
                  exit_status="submit", gen_tests_correct=None))
    assert conv.session_id == "t-1"
    assert conv.meta == {"trajectory_id": "t-1", "instance_id": "o__r-1", "repo": "o/r", "resolved": True,
                         "model_patch": "diff --git a/x b/x", "exit_status": "submit"}
    assert conv.system_prompt == "be useful"


def test_instance_id_is_the_session_id_when_there_is_no_trajectory_id():
    r = row(SYSTEM, USER, {"role": "assistant", "content": "ok"})
    del r["trajectory_id"]
    assert ok(r).session_id == "o__r-1"


# ------------------------------------------------------------------ arguments


def test_arguments_stay_the_recorded_json_string():
    args = '{"command":  "grep -rn \\"x\\" ."}'
    conv = ok(row(SYSTEM, USER, call("c1", args=args), res("c1")))
    fn = conv.messages[2]["tool_calls"][0]["function"]
    assert fn["arguments"] == args and json.loads(fn["arguments"]) == {"command": 'grep -rn "x" .'}


def test_decoded_arguments_are_encoded_back_to_a_string():
    r = row(SYSTEM, USER, call("c1"), res("c1"))
    r["trajectory"][2]["tool_calls"][0]["function"]["arguments"] = {"command": "ls"}
    fn = ok(r).messages[2]["tool_calls"][0]["function"]
    assert isinstance(fn["arguments"], str) and json.loads(fn["arguments"]) == {"command": "ls"}


@pytest.mark.parametrize("args", ['{"command": "ls', "[1, 2]", '"ls"', "", None, 7])
def test_arguments_that_are_not_a_json_object_are_rejected(args):
    r = row(SYSTEM, USER, call("c1"), res("c1"))
    r["trajectory"][2]["tool_calls"][0]["function"]["arguments"] = args
    assert reason(r) == "invalid_arguments_json"


# ------------------------------------------------------------------ repairs


def test_final_unanswered_finish_without_text_is_dropped_with_its_message():
    conv = ok(row(SYSTEM, USER, call("c1"), res("c1"), call("c2", name="finish", args='{"message": "done"}')))
    assert [m["role"] for m in conv.messages] == ["system", "user", "assistant", "tool"]
    assert conv.repairs == {"final_finish_dropped": 1}


def test_final_finish_with_text_keeps_the_text_as_a_plain_assistant_message():
    conv = ok(row(SYSTEM, USER, call("c1"), res("c1"), call("c2", name="finish", args="{}", text="All done.")))
    assert conv.messages[-1] == {"role": "assistant", "content": "All done."}


def test_an_answered_finish_is_kept():
    conv = ok(row(SYSTEM, USER, call("c1", name="finish", args="{}"), res("c1", name="finish")))
    assert conv.messages[-2]["tool_calls"][0]["function"]["name"] == "finish"
    assert conv.repairs == {}


def test_an_unanswered_finish_before_the_end_is_not_repaired():
    r = row(SYSTEM, USER, call("c1", name="finish", args="{}"), {"role": "user", "content": "more"},
            {"role": "assistant", "content": "ok"})
    assert reason(r) == "unmatched_tool_call"


def test_trailing_turn_with_a_missing_result_goes_with_its_siblings_results():
    conv = ok(row(SYSTEM, USER, call("c1"), res("c1"), calls("c2", "c3", "c4"), res("c3"), res("c2")))
    assert [m["role"] for m in conv.messages] == ["system", "user", "assistant", "tool"]
    assert conv.repairs == {"trailing_turn_dropped": 1, "trailing_results_dropped": 2}


def test_finish_is_dropped_before_the_trailing_rule_looks_at_its_siblings():
    # finish and a bash call in the last turn, neither answered: both rules apply, in order.
    last = calls("c2", "c3")
    last["tool_calls"][1]["function"] = {"name": "finish", "arguments": "{}"}
    conv = ok(row(SYSTEM, USER, call("c1"), res("c1"), last))
    assert len(conv.messages) == 4
    assert conv.repairs == {"final_finish_dropped": 1, "trailing_turn_dropped": 1, "trailing_results_dropped": 0}


def test_a_complete_last_turn_is_left_alone():
    conv = ok(row(SYSTEM, USER, calls("c1", "c2"), res("c2"), res("c1")))
    assert len(conv.messages) == 5 and conv.repairs == {}


def test_only_the_trailing_turn_is_repaired():
    r = row(SYSTEM, USER, calls("c1", "c2"), res("c1"), {"role": "assistant", "content": "hm"}, call("c3"))
    assert reason(r) == "unmatched_tool_call"


def test_a_foreign_result_after_the_trailing_turn_is_still_rejected():
    r = row(SYSTEM, USER, call("c1"), res("c1"), calls("c2", "c3"), res("c2"), res("zz"))
    assert reason(r) == "unmatched_tool_result"


# ------------------------------------------------------------------ pairing


def test_a_result_without_a_call_is_rejected():
    assert reason(row(SYSTEM, USER, res("c1"), {"role": "assistant", "content": "x"})) == "unmatched_tool_result"


def test_a_result_given_twice_is_rejected():
    assert reason(row(SYSTEM, USER, call("c1"), res("c1"), res("c1"))) == "unmatched_tool_result"


def test_a_result_must_follow_its_turn_directly():
    r = row(SYSTEM, USER, call("c1"), {"role": "assistant", "content": "waiting"}, res("c1"),
            {"role": "assistant", "content": "x"})
    assert reason(r) == "unmatched_tool_call"


def test_a_reused_call_id_is_a_bad_message():
    assert reason(row(SYSTEM, USER, call("c1"), res("c1"), call("c1"), res("c1"))) == "bad_message"


# ------------------------------------------------------------------ reject reasons


@pytest.mark.parametrize("bad, why", [
    ([1, 2], "not_an_object"),
    ("row", "not_an_object"),
    (UnreadableRow("invalid_json_line", "line 3"), "invalid_json_line"),
    ({"trajectory": [USER]}, "missing_id"),
    ({"trajectory_id": "", "instance_id": None, "trajectory": [USER]}, "missing_id"),
    ({"trajectory_id": "t"}, "missing_trajectory"),
    ({"trajectory_id": "t", "trajectory": None}, "missing_trajectory"),
    ({"trajectory_id": "t", "trajectory": []}, "empty_trajectory"),
    ({"trajectory_id": "t", "trajectory": "[]"}, "empty_trajectory"),
    ({"trajectory_id": "t", "trajectory": "not json"}, "bad_trajectory"),
    ({"trajectory_id": "t", "trajectory": {"role": "user"}}, "bad_trajectory"),
    ({"trajectory_id": "t", "trajectory": [USER, "hello"]}, "bad_message"),
    ({"trajectory_id": "t", "trajectory": [USER, {"content": "no role"}]}, "bad_message"),
    ({"trajectory_id": "t", "trajectory": [USER, {"role": "assistant", "content": 3}]}, "bad_message"),
    ({"trajectory_id": "t", "trajectory": [USER, {"role": "assistant", "content": "", "tool_calls": "x"}]},
     "bad_message"),
    ({"trajectory_id": "t", "trajectory": [USER, {"role": "assistant", "content": "",
                                                  "tool_calls": [{"function": {"name": "x"}}]}]}, "bad_message"),
    ({"trajectory_id": "t", "trajectory": [USER, {"role": "tool", "content": "no id"}]}, "bad_message"),
    ({"trajectory_id": "t", "trajectory": [USER], "tools": "nope"}, "bad_tools"),
    ({"trajectory_id": "t", "trajectory": [USER], "tools": [1]}, "bad_tools"),
    ({"trajectory_id": "t", "trajectory": [SYSTEM, USER]}, "no_assistant_turn"),
])
def test_each_reject_reason(bad, why):
    assert why in REJECT_REASONS
    assert reason(bad) == why


def test_reject_keeps_the_row_id_and_a_detail():
    out = convert_row(row(SYSTEM, USER, {"role": "robot", "content": ""}))
    assert isinstance(out, Rejected) and out.row_id == "t-1" and "robot" in out.detail


@pytest.mark.parametrize("name", ["trajectories.parquet", "trajectories.jsonl"])
def test_fixture_rows_reach_their_expected_verdicts(name):
    want = expected(name)
    got = []
    for r in iter_rows(FIXTURES / name, batch_rows=3):
        out = convert_row(r)
        got.append(out.reason if isinstance(out, Rejected) else "accepted")
        if isinstance(out, ConvertedTrajectory):
            assert out.repairs == want[len(got) - 1]["repairs"], out.session_id
    assert got == [w["verdict"] for w in want]
    # every reason a file of that kind can hold is exercised by the fixtures
    kinds = set(got) - {"accepted"}
    assert kinds >= set(REJECT_REASONS) - {"session_invalid", "bad_trajectory", "bad_tools", "not_an_object",
                                           "invalid_json_line"}
    if name.endswith(".jsonl"):
        assert kinds == set(REJECT_REASONS) - {"session_invalid"}
    assert Counter(got)["accepted"] == 8


def test_convert_row_never_raises_on_mangled_rows():
    rows = [r for r in iter_rows(FIXTURES / "trajectories.parquet") if r["trajectory"]]
    rnd = random.Random(7)
    junk = [None, 0, -1, 1.5, "", "x", [], {}, [None], {"role": None}, True]
    verdicts = Counter()
    for k in range(400):
        r = copy.deepcopy(rnd.choice(rows))
        for _ in range(rnd.randint(1, 3)):
            target = r
            path = []
            while isinstance(target, (dict, list)) and target and rnd.random() < 0.8:
                key = rnd.choice(list(target)) if isinstance(target, dict) else rnd.randrange(len(target))
                path.append((target, key))
                target = target[key]
            if path:
                parent, key = path[-1]
                parent[key] = copy.deepcopy(rnd.choice(junk))
        out = convert_row(r)
        assert isinstance(out, (ConvertedTrajectory, Rejected)), k
        if isinstance(out, Rejected):
            assert out.reason in REJECT_REASONS
        verdicts[type(out).__name__] += 1
    assert verdicts["Rejected"] > 0  # the mangling does produce bad rows
