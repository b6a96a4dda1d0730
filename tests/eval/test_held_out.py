"""Held-out decisions on a tiny project-made parquet split."""

from __future__ import annotations

import json

import pytest

from doctrine.render.prompts import EXAMPLE_VIEWS, render_nudge, render_system_prompt
from eval.backends.oracle import OracleBackend
from eval.workloads.base import RunContext
from eval.workloads.fixtures import held_out_rows
from eval.workloads.held_out.workload import HeldOutWorkload, classify, load_rows, run_row
from eval.workloads.nudges import parse_nudge, rerender_context


@pytest.fixture()
def data_dir(tmp_path, doctrine):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = held_out_rows(doctrine, 6)
    # data_gen stores tools as a JSON string; parquet structs add None for absent keys.
    table = pa.Table.from_pylist([{**r, "tools": json.dumps(r["tools"])} for r in rows])
    (tmp_path / "test").mkdir()
    pq.write_table(table, tmp_path / "test" / "shard-00000.parquet")
    return tmp_path


def test_parquet_rows_round_trip(data_dir, doctrine):
    rows = load_rows(data_dir, "test")
    want = held_out_rows(doctrine, 6)
    assert len(rows) == 6
    for got, exp in zip(rows, want, strict=True):
        assert got["messages"] == exp["messages"] and got["tools"] == exp["tools"]
        assert got["meta"]["kind"] == exp["meta"]["kind"]
    with pytest.raises(ValueError, match="no"):
        load_rows(data_dir, "validation")


def test_oracle_is_the_upper_reference(data_dir, doctrine):
    wl = HeldOutWorkload({"data_dir": str(data_dir), "split": "test"})
    ctx = RunContext(OracleBackend(), doctrine)
    for case in wl.cases():
        for arm in ("doctrine", "base_slim", "distilled"):
            m = wl.run_case(case, arm, 0, ctx)["metrics"]
            assert m["kind_correct"] and m["tool_call_valid"] is not False
            if m["label_kind"] == "compress":
                assert m["range_valid"] and m["range_overlap"] == 1.0 and "conformance_score" in m
    assert not wl.supports("full") and wl.supports("distilled")


def test_max_tokens_setting_caps_these_calls_only(data_dir, doctrine):
    class Caps(OracleBackend):
        def __init__(self):
            super().__init__()
            self.caps = []

        def complete(self, request):
            self.caps.append(request.max_tokens)
            return super().complete(request)

    be = Caps()
    ctx = RunContext(be, doctrine, max_tokens=192)
    case = HeldOutWorkload({"data_dir": str(data_dir), "split": "test"}).cases()[0]
    HeldOutWorkload({"data_dir": str(data_dir), "split": "test"}).run_case(case, "base_slim", 0, ctx)
    HeldOutWorkload({"data_dir": str(data_dir), "split": "test", "max_tokens": 512}).run_case(case, "base_slim", 0, ctx)
    assert be.caps == [192, 512] and ctx.max_tokens == 192


def test_wrong_decisions_are_scored_down(doctrine):
    rows = held_out_rows(doctrine, 3)  # compress, refusal, ordinary

    def always_compress_elsewhere(req):
        args = {"content": [{"startId": "m00001", "endId": "m00007", "summary": "s" * 60}]}
        return {"role": "assistant", "content": "", "tool_calls": [
            {"id": "z", "type": "function", "function": {"name": "compress", "arguments": json.dumps(args)}}]}

    ctx = RunContext(OracleBackend(policy=always_compress_elsewhere), doctrine)
    out = [run_row(r, "base_slim", ctx)["metrics"] for r in rows]
    assert [m["kind_correct"] for m in out] == [True, False, False]
    assert out[0]["range_valid"] is False  # m00007 is not in the context
    assert 0 < out[0]["range_overlap"] < 1


def test_doctrine_arm_rerenders_system_prompt_and_nudge(doctrine):
    row = held_out_rows(doctrine, 1)[0]
    ctx = RunContext(OracleBackend(), doctrine)
    seen = {}

    def spy(req):
        seen["messages"] = req.messages
        seen["tools"] = req.tools
        return req.meta["target"]

    ctx.backend = OracleBackend(policy=spy)
    res = run_row(row, "doctrine", ctx)
    assert res["rerender"] == {"system": "rerendered", "nudge": "rerendered", "nudge_present": True}
    assert seen["messages"][0]["content"] == render_system_prompt(doctrine, "doctrine")
    assert seen["messages"][-1]["content"] != row["messages"][-2]["content"]
    assert doctrine.text("philosophy", "doctrine") in seen["messages"][-1]["content"]
    assert seen["tools"][0]["function"]["description"] == doctrine.text("tool-compress", "doctrine")
    slim = run_row(row, "base_slim", ctx)
    assert slim["metrics"]["prompt_tokens"] < res["metrics"]["prompt_tokens"]
    assert slim["metrics"]["doctrine_tokens"] < res["metrics"]["doctrine_tokens"]


@pytest.mark.parametrize("name", sorted(EXAMPLE_VIEWS))
@pytest.mark.parametrize("mode", ["distilled", "doctrine"])
def test_nudges_parse_back_losslessly(doctrine, name, mode):
    view = EXAMPLE_VIEWS[name]
    text = render_nudge(view, doctrine, mode)
    parsed = parse_nudge(text, doctrine, mode)
    assert parsed is not None
    other = "doctrine" if mode == "distilled" else "distilled"
    assert render_nudge(parsed, doctrine, other) == render_nudge(view, doctrine, other)


@pytest.mark.parametrize("name", ["nudge-emergency", "nudge-tier2"])
def test_list_only_nudges_parse_back_and_rerender_in_their_style(doctrine, name):
    view = EXAMPLE_VIEWS[name]
    text = render_nudge(view, doctrine, "distilled", "list_only")
    assert parse_nudge(text, doctrine, "distilled") is None  # the list style would add an example
    parsed = parse_nudge(text, doctrine, "distilled", "list_only")
    assert parsed is not None
    meta = {"extra": json.dumps({"kernel_input": {"profile": {"nudge_style": "list_only"}}})}
    msgs = [{"role": "system", "content": render_system_prompt(doctrine, "distilled")},
            {"role": "user", "content": text}]
    out, notes = rerender_context(msgs, doctrine, "distilled", "doctrine", meta)
    assert notes["nudge"] == "rerendered"
    assert out[-1]["content"] == render_nudge(view, doctrine, "doctrine", "list_only")
    assert "Example:" not in out[-1]["content"]


def test_unparseable_nudge_is_kept_and_noted(doctrine):
    msgs = [{"role": "system", "content": "custom host prompt"},
            {"role": "user", "content": "Compressible ranges (1, oldest first):\n  garbage line here"}]
    out, notes = rerender_context(msgs, doctrine, "distilled", "doctrine", {})
    assert notes["nudge"] == "fallback" and out[-1] == msgs[-1]
    assert notes["system"] == "fallback" and out[0]["content"] == render_system_prompt(doctrine, "doctrine")


def test_classify():
    call = lambda n: {"tool_calls": [{"function": {"name": n, "arguments": "{}"}}]}  # noqa: E731
    assert classify(call("compress"), True) == "compress"
    assert classify(call("search_context"), False) == "recover"
    assert classify({"content": "later"}, True) == "refuse"
    assert classify(call("bash"), False) == "ordinary"
    # text imitating markup is malformed, never a refusal
    assert classify({"content": '<acp tokens="3" type="text">m00002</acp> done'}, True) == "malformed"
    assert classify({"content": "<tool_response>ok</tool_response>"}, False) == "malformed"
    assert classify({"content": 'compress({"content": [{"startId": "m1"}]})'}, True) == "malformed"


def test_a_plain_reply_is_not_a_free_pass():
    from eval.workloads.held_out.workload import decision_correct

    act = {"tool_calls": [{"function": {"name": "bash", "arguments": "{}"}}]}
    plain = {"content": "Continuing with the task."}
    assert decision_correct("refuse", plain, act, True) and decision_correct("refuse", act, act, True)
    assert not decision_correct("ordinary", plain, act, False)  # the label acts: so must the reply
    assert decision_correct("ordinary", act, act, False)
    assert decision_correct("ordinary", plain, {"content": "All tests pass."}, False)
    assert not decision_correct("compress", plain, act, True)


def test_select_rows_per_kind_and_window():
    from eval.workloads.held_out.workload import select_rows

    rows = [{"meta": {"kind": k, "window": w, "n": i}} for i, (k, w) in enumerate(
        [("ordinary", 2048), ("emergency", 2048), ("ordinary", 2048), ("refusal", 4096), ("emergency", 4096),
         ("refusal", 2048), ("nudged_compress", 4096)])]
    got = select_rows(rows, kinds=["refusal", "ordinary", "nudged_compress"], per_kind=1)
    assert [r["meta"]["n"] for r in got] == [3, 0, 6]  # recipe kind order, first of each in file order
    got = select_rows(rows, kinds=["refusal", "emergency"], per_kind=1, windows=[2048])
    assert [r["meta"]["n"] for r in got] == [5, 1]
    assert [r["meta"]["n"] for r in select_rows(rows, per_kind=2, limit=3)] == [0, 1, 2]
    assert select_rows(rows, kinds=["tier3"]) == []


def test_select_rows_takes_at_most_per_session_decisions_of_a_kind_from_one_session():
    from eval.workloads.held_out.workload import HeldOutSettings, select_rows

    # Session a has 4 emergencies and 1 refusal, b has 2 emergencies, c 1; rows without a
    # session id are each their own session.
    spec = [("a", "emergency")] * 4 + [("a", "refusal"), ("b", "emergency"), ("b", "emergency"),
                                       ("c", "emergency"), (None, "emergency"), (None, "emergency")]
    rows = [{"meta": {"kind": k, "n": i, **({"session_id": s} if s else {})}} for i, (s, k) in enumerate(spec)]
    got = select_rows(rows, per_session=2)
    assert [r["meta"]["n"] for r in got] == [0, 1, 4, 5, 6, 7, 8, 9]
    # With per_kind the capped picks still spread: one of each session first, then second ones.
    got = select_rows(rows, kinds=["emergency"], per_kind=5, per_session=2)
    assert sorted(r["meta"]["n"] for r in got) == [0, 5, 7, 8, 9]  # the first round: a, b, c and the two lone rows
    assert max(sum(r["meta"].get("session_id") == s for r in got) for s in "abc") <= 2
    assert [r["meta"]["n"] for r in select_rows(rows, per_session=1, kinds=["emergency"])] == [0, 5, 7, 8, 9]
    assert len(select_rows(rows)) == len(rows)  # no cap asked: every row
    assert HeldOutSettings().per_session == 2  # the workload's default cap


def test_nearest_train_sim_and_values_not_in_context(data_dir, doctrine):
    import pyarrow as pa
    import pyarrow.parquet as pq

    # Train holds rows 0-2 (one compress label: row 0's); the test split rows 0-5.
    train = held_out_rows(doctrine, 3)
    (data_dir / "train").mkdir()
    pq.write_table(pa.Table.from_pylist([{**r, "tools": json.dumps(r["tools"])} for r in train]),
                   data_dir / "train" / "shard-00000.parquet")
    wl = HeldOutWorkload({"data_dir": str(data_dir), "split": "test"})
    assert wl.train_targets() is wl.train_targets()  # read once, kept for the run
    cases = wl.cases()
    oracle = [wl.run_case(c, "base_slim", 0, RunContext(OracleBackend(), doctrine))["metrics"] for c in cases]
    compress = [m for m in oracle if m["label_kind"] == "compress"]
    assert len(compress) == 2
    assert compress[0]["nearest_train_sim"] == 1.0  # the train label itself
    assert 0.8 < compress[1]["nearest_train_sim"] < 1.0  # same phrasing, other values
    # The label copies its path:line, test file path and error string from the context.
    assert [m["values_copied"] for m in compress] == [3, 3]
    assert all(m["values_not_in_context"] == 0 and m["values_not_in_context_share"] == 0.0 for m in compress)
    assert all("nearest_train_sim" not in m for m in oracle if m["label_kind"] != "compress")

    def recalls_a_value(req):
        summary = "Ran pytest: `BATCH_VALUE=64` was set; see src/parser/mod_0.py:20."
        args = {"content": [{"startId": "m00002", "endId": "m00004", "summary": summary}]}
        return {"role": "assistant", "content": "", "tool_calls": [
            {"id": "z", "type": "function", "function": {"name": "compress", "arguments": json.dumps(args)}}]}

    m = wl.run_case(cases[0], "base_slim", 0, RunContext(OracleBackend(policy=recalls_a_value), doctrine))["metrics"]
    assert (m["values_copied"], m["values_not_in_context"]) == (1, 1)
    assert m["values_not_in_context_share"] == 0.5
    assert m["nearest_train_sim"] < 0.8
    # No train split: the context figures stay, nearest_train_sim is left out.
    (data_dir / "train" / "shard-00000.parquet").unlink()
    m = HeldOutWorkload({"data_dir": str(data_dir), "split": "test"}).run_case(
        cases[0], "base_slim", 0, RunContext(OracleBackend(), doctrine))["metrics"]
    assert "nearest_train_sim" not in m and m["values_copied"] == 3
