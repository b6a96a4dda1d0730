"""Held-out replies scored by applying them to the row's kernel state (eval.workloads.held_out.applied)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from eval.backends.oracle import OracleBackend
from eval.workloads.base import RunContext
from eval.workloads.fixtures import held_out_fixture_rows
from eval.workloads.held_out.workload import load_rows, rebuild_row, run_row

FIXTURE = Path(__file__).resolve().parents[2] / "configs" / "eval" / "fixtures" / "held_out"


@pytest.fixture(scope="module")
def rows():
    return {r["meta"]["kind"] + ("_search" if "query" in json.dumps(r["messages"][-1].get("tool_calls")) else ""): r
            for r in load_rows(FIXTURE, "test")}


def _call(name, args):
    return {"role": "assistant", "content": "", "tool_calls": [
        {"id": "x1", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}


def _compress(start, end, summary):
    return _call("compress", {"topic": "t", "content": [{"startId": start, "endId": end, "summary": summary}]})


def _run(row, reply, doctrine, arm="base_slim"):
    res = run_row(row, arm, RunContext(OracleBackend(policy=lambda req: reply), doctrine))
    return res["metrics"], res["calls"][0]


def test_the_fixture_file_is_what_data_gen_builds(doctrine):
    # The smoke rows are real replayed rows; regenerate with python -m eval.workloads.fixtures FILE.
    lines = (FIXTURE / "test" / "rows.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(x) for x in lines] == held_out_fixture_rows(doctrine), (
        "the smoke held-out rows differ from what data_gen builds now (a label or kernel change): rewrite them with "
        "python -m eval.workloads.fixtures configs/eval/fixtures/held_out/test/rows.jsonl")


def test_every_row_rebuilds_to_the_context_it_shows(rows):
    for row in rows.values():
        rebuilt, how = rebuild_row(row)
        assert how == "kernel" and rebuilt is not None
    bad = copy.deepcopy(rows["refusal"])
    bad["messages"][1]["content"] += " (edited)"
    assert rebuild_row(bad) == (None, "mismatch")
    old = copy.deepcopy(rows["refusal"])
    del old["meta"]["kernel_input"]
    assert rebuild_row(old) == (None, "refs")
    broken = copy.deepcopy(rows["refusal"])
    broken["meta"]["kernel_input"]["profile"]["sha256"] = "0" * 64
    assert rebuild_row(broken)[1].startswith("error: kernel_input: serving profile")


@pytest.mark.parametrize("arm", ["doctrine", "base_slim"])
def test_the_labels_apply_cleanly(rows, doctrine, arm):
    for kind, row in rows.items():
        m, rec = _run(row, row["messages"][-1], doctrine, arm)
        assert m["scored_by"] == "kernel" and m["kind_correct"], kind
        if m["label_kind"] == "compress":
            assert m["compress_success"] and m["blocks_created"] == 1 and m["kernel_errors"] == 0, kind
            assert rec["kernel_errors"] == []
        if m["label_kind"] == "recover":
            assert m["recover_success"] is True and m.get("recover_errors") == 0, kind


def test_kernel_errors_fail_the_compress_and_are_recorded(rows, doctrine):
    row = rows["emergency"]
    summary = json.loads(row["messages"][-1]["tool_calls"][0]["function"]["arguments"])["content"][0]["summary"]
    for reply, says in ((_compress("m00002", "m00009", "too short"), "summary too short"),
                        (_compress("m09990", "m09999", summary), "was never assigned"),
                        (_compress("m00002", "m00005", summary), "total compressible content too small")):
        m, rec = _run(row, reply, doctrine)
        assert m["pred_kind"] == "compress" and m["kernel_errors"] >= 1 and m["blocks_created"] == 0
        assert m["range_valid"] is False and m["compress_success"] is False
        assert any(says in e for e in rec["kernel_errors"])


def test_the_summary_is_checked_against_what_the_kernel_folded(rows, doctrine):
    row = rows["emergency"]
    summary = json.loads(row["messages"][-1]["tool_calls"][0]["function"]["arguments"])["content"][0]["summary"]
    # The label's summary of m00002..m00009 on a range the kernel folds as m00006..m00009:
    # a valid compress, but the summary reports what that fold does not hold.
    m, _ = _run(row, _compress("m00006", "m00009", summary), doctrine)
    assert m["range_valid"] is True and m["blocks_created"] == 1
    assert m["conformance_passed"] is False and m["compress_success"] is False


def test_recovery_replies_are_run_on_the_state(rows, doctrine):
    row = rows["recovery"]  # the label decompresses b2, the block holding the needed fact
    assert row["messages"][-1]["tool_calls"][0]["function"]["name"] == "decompress"
    m, _ = _run(row, _call("decompress", {"blockId": "b2"}), doctrine)
    assert m["recover_success"] is True and m["restored"] == ["b2"]
    m, _ = _run(row, _call("decompress", {"blockId": "b1"}), doctrine)  # a block, not the needed one
    assert m["recover_success"] is False and m["restored"] == ["b1"] and m["kind_correct"]
    m, _ = _run(row, _call("decompress", {"blockId": "b99"}), doctrine)
    assert m["recover_success"] is False and m["recover_errors"] == 1
    m, _ = _run(row, {"role": "assistant", "content": "Carrying on."}, doctrine)
    assert m["recover_success"] is False and not m["kind_correct"]
    search = rows["recovery_search"]
    query = json.loads(search["messages"][-1]["tool_calls"][0]["function"]["arguments"])["query"]
    assert _run(search, _call("search_context", {"query": query}), doctrine)[0]["recover_success"] is True
    m, _ = _run(search, _call("search_context", {"query": "zzz qqq"}), doctrine)
    assert m["recover_success"] is False and m["recover_errors"] == 1


GRADED = ("compress_chosen", "compress_parsed", "compress_accepted", "ranges_visible", "summary_score",
          "exact_values_kept", "compress_success")


def _graded(row, reply, doctrine):
    m, _rec = _run(row, reply, doctrine)
    return {k: m.get(k) for k in GRADED}


def test_graded_compress_metrics_follow_the_steps_to_a_fold(rows, doctrine):
    row = rows["emergency"]
    label = row["messages"][-1]
    oracle = _graded(row, label, doctrine)
    assert oracle == dict.fromkeys(GRADED, True) | {"summary_score": oracle["summary_score"],
                                                     "exact_values_kept": oracle["exact_values_kept"]}
    assert oracle["summary_score"] >= 0.7 and oracle["exact_values_kept"] == 1.0
    # A task action where the label folds: nothing chosen, every step 0.
    task = _graded(row, _call("execute_bash", {"command": "ls"}), doctrine)
    assert task["compress_chosen"] is False and task["compress_parsed"] is False
    assert task["summary_score"] == 0.0 and task["exact_values_kept"] == 0.0 and task["compress_success"] is False
    # A compress call with broken arguments: chosen, not parsed.
    bad = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "x1", "type": "function", "function": {"name": "compress", "arguments": "{\"topic\": \"t\", \"content\": ["}}]}
    broken = _graded(row, bad, doctrine)
    assert broken["compress_chosen"] is True and broken["compress_parsed"] is False
    assert broken["compress_accepted"] is False and broken["compress_success"] is False
    # A well-formed fold over a range the model never saw: parsed, not visible, not accepted.
    summary = json.loads(label["tool_calls"][0]["function"]["arguments"])["content"][0]["summary"]
    unseen = _graded(row, _compress("m09990", "m09999", summary), doctrine)
    assert unseen["compress_chosen"] and unseen["compress_parsed"]
    assert unseen["ranges_visible"] is False and unseen["compress_accepted"] is False
    assert unseen["compress_success"] is False
    # The label's summary kept, its exact values dropped: the share falls below 1.
    lines = [ln for ln in summary.splitlines() if "`" not in ln]
    lossy = _graded(row, _compress(*_label_range(label), "\n".join(lines) + "\nValues left out."), doctrine)
    assert lossy["compress_parsed"] and lossy["exact_values_kept"] < 1.0


def _label_range(label):
    r = json.loads(label["tool_calls"][0]["function"]["arguments"])["content"][0]
    return r["startId"], r["endId"]


def test_graded_metrics_are_only_for_compress_labelled_rows(rows, doctrine):
    m, _ = _run(rows["refusal"], rows["refusal"]["messages"][-1], doctrine)
    assert not any(k in m for k in GRADED[:-1])


def test_a_reply_cut_at_the_cap_and_a_label_over_it_are_counted(rows, doctrine):
    row = next(r for k, r in rows.items() if r["meta"]["kind"] in ("emergency", "nudged_compress"))
    label = row["messages"][-1]
    fits = run_row(row, "base_slim", RunContext(OracleBackend(policy=lambda req: label), doctrine, max_tokens=4096))
    assert fits["metrics"]["label_over_cap"] is False and fits["metrics"]["cut_at_cap"] is False
    short = run_row(row, "base_slim", RunContext(OracleBackend(policy=lambda req: label), doctrine, max_tokens=16))
    # The oracle writes the whole label: longer than 16 tokens, so the label is over the cap,
    # and a reply of 16 tokens or more reached it.
    assert short["metrics"]["label_over_cap"] is True
    assert short["metrics"]["cut_at_cap"] is (short["metrics"]["completion_tokens"] >= 16)
