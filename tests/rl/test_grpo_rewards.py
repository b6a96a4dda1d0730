"""The GRPO reward terms (rl/rewards.py) on hand-made replies to real kernel rows (the
held-out smoke rows: replayed by data_gen, each rebuilds to the kernel turn it shows)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.workloads.held_out.workload import load_rows, rebuild_row
from plumbing.tool_format import format_assistant_text
from rl import rewards as R

FIXTURE = Path(__file__).resolve().parents[2] / "configs" / "eval" / "fixtures" / "held_out"


@pytest.fixture(scope="module")
def rows():
    out = {}
    for r in load_rows(FIXTURE, "test"):
        out.setdefault(r["meta"]["kind"], r)
    return out


def _text(message: dict) -> str:
    return format_assistant_text(message.get("content"), message.get("tool_calls"))


def _fold(start: str, end: str, summary: str) -> str:
    return _text({"content": "", "tool_calls": [{"function": {"name": "compress", "arguments": json.dumps(
        {"topic": "t", "content": [{"startId": start, "endId": end, "summary": summary}]})}}]})


def _label_summary(row) -> str:
    return json.loads(row["messages"][-1]["tool_calls"][0]["function"]["arguments"])["content"][0]["summary"]


def test_the_label_fold_earns_every_term(rows):
    row = rows["emergency"]
    assert rebuild_row(row)[1] == "kernel"  # scored by the kernel's own application
    label = _text(row["messages"][-1])
    assert R.kernel_accepts(row, label) == 1.0
    assert R.right_kind(row, label) == 1.0
    assert R.summary_score(row, label) > 0.5
    assert R.values_in_context(row, label) == 1.0
    assert R.length(row, label) == 0.0


def test_a_range_the_kernel_refuses_costs(rows):
    row = rows["emergency"]
    summary = _label_summary(row)
    assert R.kernel_accepts(row, _fold("m09990", "m09999", summary)) == -1.0  # ids never assigned
    assert R.kernel_accepts(row, _fold("m00002", "m00009", "too short")) == -1.0  # the kernel's own refusal
    assert R.summary_score(row, _fold("m09990", "m09999", summary)) == 0.0  # nothing folded, nothing checked


def test_an_invented_value_costs(rows):
    row = rows["emergency"]
    summary = _label_summary(row)
    invented = _fold("m00002", "m00009", summary + " Saw `ZQX-40417 checksum drift` in /opt/nowhere/ghost_7.py.")
    assert R.kernel_accepts(row, invented) == 1.0
    assert 0.0 < R.values_in_context(row, invented) < R.values_in_context(row, _text(row["messages"][-1]))


def test_the_wrong_kind_of_move_earns_nothing(rows):
    fold_row, decline_row = rows["emergency"], rows["refusal"]
    decline_text = _text(decline_row["messages"][-1])
    assert R.right_kind(decline_row, decline_text) == 1.0
    # Folding where the label declines: wrong kind, and no fold-quality pay either.
    fold = _text(fold_row["messages"][-1])
    assert R.right_kind(decline_row, fold) == 0.0
    assert (R.kernel_accepts(decline_row, fold), R.summary_score(decline_row, fold),
            R.values_in_context(decline_row, fold)) == (0.0, 0.0, 0.0)
    # Declining where the label folds.
    assert R.right_kind(fold_row, "Not now: I still need these messages.") == 0.0


def test_an_overlong_reply_costs_more_the_longer_it_runs(rows):
    row = rows["emergency"]
    label = _text(row["messages"][-1])
    long1, long2 = label + " pad" * 200, label + " pad" * 2000
    assert R.length(row, label + " ok") == 0.0
    assert R.length(row, long2) < R.length(row, long1) < 0.0
    assert R.length(row, long2) == -1.0


def _without(summary: str, *needles: str) -> str:
    lines = summary.split("\n")
    kept = [ln for ln in lines if not any(n in ln for n in needles)]
    assert len(kept) < len(lines)  # the fixture still holds what is dropped
    return "\n".join(kept)


def test_an_applied_fold_with_a_worse_summary_scores_lower(rows):
    row = rows["emergency"]
    summary = _label_summary(row)
    best = R.summary_score(row, _text(row["messages"][-1]))
    # The error line the step needs (the checker's exact value), dropped from both places it is quoted.
    no_error = _fold("m00002", "m00009", _without(summary, "exact error", "it failed with"))
    lazy = _fold("m00002", "m00009", "Looked through the billing-worker log with ls and grep and found database "
                                     "errors at checkout; the raw output is folded here. Refs: m00002–m00009")
    for worse in (no_error, lazy):
        assert R.kernel_accepts(row, worse) == 1.0 and R.right_kind(row, worse) == 1.0  # applied, same move
        assert R.summary_score(row, worse) < best
        assert R.score(row, worse)["exact_values_kept"] < R.score(row, _text(row["messages"][-1]))["exact_values_kept"]


def test_an_applied_summary_with_an_invented_or_altered_value_scores_lower(rows):
    row = rows["emergency"]
    summary = _label_summary(row)
    best = R.summary_score(row, _text(row["messages"][-1]))
    # The checker counts numbers and quotes the source does not hold, and values changed from it.
    invented = _fold("m00002", "m00009", summary + "\n- Saw `ZQX-40417 checksum drift` in /opt/nowhere/ghost_7.py.")
    altered = _fold("m00002", "m00009", summary.replace("pool_size=8", "pool_size=16"))
    assert altered != _fold("m00002", "m00009", summary)
    for wrong in (invented, altered):
        assert R.kernel_accepts(row, wrong) == 1.0
        assert R.summary_score(row, wrong) < best
