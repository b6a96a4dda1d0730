"""Intervals and paired comparisons in the report, and the reference policies as backends."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from eval.backends import make_backend
from eval.metrics import bootstrap_ci, mean_ci, metric_scale, paired_comparison
from plumbing.chat_backend import Request

ROOT = Path(__file__).resolve().parents[2]


def test_bootstrap_interval_is_seeded_and_holds_the_mean():
    vals = [0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.0]
    lo, hi = bootstrap_ci(vals, seed=3)
    assert (lo, hi) == tuple(bootstrap_ci(vals, seed=3))
    assert lo < sum(vals) / len(vals) < hi and 0.0 <= lo and hi <= 1.0
    assert bootstrap_ci([0.5]) == [0.5, 0.5] and bootstrap_ci([]) == []


def test_an_interval_of_counts_stops_at_zero_and_a_real_one_does_not():
    """Three spread-out billed-token counts: the t interval would reach below 0; a count's
    mean cannot, so its interval stops there. A real-valued metric keeps the t interval, and a
    paired difference of counts may be negative."""
    billed = [200.0, 3000.0, 6400.0]
    assert metric_scale("billed_tokens", billed) == "count"
    assert metric_scale("peak_context", billed) == "count"
    assert metric_scale("billed_tokens", [-1.0, 2.0]) == "real"  # not a count: no clipping
    lo, hi = mean_ci(billed, "count")
    raw = mean_ci(billed, "real")
    assert raw[0] < 0 and lo == 0.0 and hi == raw[1]
    assert mean_ci([5.0], "count") == []  # one value says nothing of the spread


def test_paired_comparison_uses_only_shared_cases():
    a = {("c1", 0): {"acc": 1.0}, ("c2", 0): {"acc": 1.0}, ("c3", 0): {"acc": 0.0}, ("only_a", 0): {"acc": 1.0}}
    b = {("c1", 0): {"acc": 0.0}, ("c2", 0): {"acc": 0.0}, ("c3", 0): {"acc": 0.0}}
    d = paired_comparison(a, b)["acc"]
    assert d["n"] == 3 and d["diff"] == pytest.approx(2 / 3)
    # "acc" is no known rate: a mean of three values gets Student's t, wide as it should be
    lo, hi = d["ci95"]
    assert d["method"] == "t" and lo < 0 < d["diff"] < 1 < hi
    # a rate (bool values) gets Tango's interval for paired rates, inside [-1, 1]
    a = {k: {"kind_correct": bool(v["acc"])} for k, v in a.items()}
    b = {k: {"kind_correct": bool(v["acc"])} for k, v in b.items()}
    d = paired_comparison(a, b)["kind_correct"]
    lo, hi = d["ci95"]
    assert d["method"] == "tango" and -1.0 <= lo < d["diff"] < hi <= 1.0 and d["n"] == 3


def _nudged(text):
    return Request([{"role": "system", "content": "s"}, {"role": "user", "content": text}], [], False, 64, {})


def test_reference_policies():
    nudge = ("[ACP] Context maintenance.\nCompressible ranges (2, oldest first):\n"
             "  m00002–m00005  4 msgs  1.2K [tool 90% | text 10%]\n  m00009–m00012  4 msgs  900")
    never = make_backend("never_compress").complete(_nudged(nudge))
    assert not never.tool_calls and never.message["content"]
    first = make_backend("first_range").complete(_nudged(nudge))
    (call,) = first.tool_calls
    args = json.loads(call["function"]["arguments"])
    assert call["function"]["name"] == "compress"
    assert [(r["startId"], r["endId"]) for r in args["content"]] == [("m00002", "m00005")]
    plain = make_backend("first_range").complete(_nudged("Please fix the failing test in mod_1."))
    assert not plain.tool_calls


@pytest.fixture(scope="module")
def policy_reports(tmp_path_factory):
    """report.json of the smoke recipe answered by the oracle and by never_compress."""
    out = {}
    for name in ("oracle", "never_compress", "first_range"):
        run = tmp_path_factory.mktemp(name) / "eval"
        p = subprocess.run([sys.executable, "-m", "eval", "run", "configs/eval/smoke.yaml", "--out", str(run),
                            f"backend.name={name}"], cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr[-2000:]
        p = subprocess.run([sys.executable, "-m", "eval", "report", str(run), "--quiet"], cwd=ROOT,
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr[-2000:]
        out[name] = (json.loads((run.parent / "report" / "report.json").read_text()),
                     (run.parent / "report" / "report.md").read_text(),
                     [json.loads(p.read_text()) for p in run.glob("cases/*/held_out.*.json")])
    return out


def test_the_decision_metric_separates_the_oracle_from_never_compressing(policy_reports):
    for arm in ("doctrine", "base_slim", "distilled"):
        oracle = policy_reports["oracle"][0]["workloads"]["held_out"]["arms"][arm]
        never = policy_reports["never_compress"][0]["workloads"]["held_out"]["arms"][arm]
        assert oracle["balanced_acc"] >= 0.95 and never["balanced_acc"] <= 0.6
        # The labels themselves pass the checker and succeed as compress calls; declining does not.
        assert oracle["conformance_passed"] >= 0.9 and oracle["compress_success"] >= 0.9
        assert never["compress_success"] == 0.0
        # Replies are applied to each row's rebuilt kernel state: the labels apply cleanly and
        # restore the needed block; declining restores nothing.
        assert oracle["kernel_errors"] == 0 and oracle["recover_success"] >= 0.9
        assert never["recover_success"] == 0.0
        # Compressing the first listed range with a one-line note is a compress, not a good one.
        lazy = policy_reports["first_range"][0]["workloads"]["held_out"]["arms"][arm]
        assert lazy["compress_success"] <= 0.5 < oracle["compress_success"]
        assert lazy["kernel_errors"] >= 1  # its one-line summary of a block range is too short
    for name in ("oracle", "never_compress", "first_range"):
        cases = policy_reports[name][2]
        assert {c["metrics"]["scored_by"] for c in cases} == {"kernel"}


def test_report_carries_intervals_and_pairs(policy_reports):
    data, md, _ = policy_reports["never_compress"]
    held = data["workloads"]["held_out"]["arms"]
    for arm in ("doctrine", "base_slim", "distilled"):
        lo, hi = held[arm]["ci95"]["kind_correct"]
        assert lo <= held[arm]["kind_correct"] <= hi
    pair = data["paired"]["held_out"]["distilled_vs_base_slim"]["kind_correct"]
    # The six smoke rows come from one log_triage session: the report says so (sessions 1) and
    # names the session-resampling method (pin updated when the report began to count sessions).
    assert set(pair) == {"diff", "ci95", "n", "sessions", "method", "n_by_kind"} and pair["n"] == 6
    assert pair["sessions"] == 1 and pair["method"] == "cluster bootstrap"
    assert held["distilled"]["ci_sessions"]["kind_correct"] == 1 and "(1 session)" in md
    assert "distilled_vs_doctrine" in data["paired"]["scripted"]
    assert "### held_out: paired comparisons" in md and "95% interval" in md
    conf = data["workloads"]["held_out"]["confusion"]["distilled"]
    assert sum(n for row in conf.values() for n in row.values()) == 6
    assert set(conf["compress"]) <= {"decline", "final"}  # never_compress never compresses
    assert "Replies by labelled decision" in md
    # The smoke recipe's non_inferiority block: every arm answers alike, so [0, 0]; but six
    # cases are under the default min_cases (8), so the verdict stays inconclusive.
    ni = data["non_inferiority"]
    assert ni["margin"] == 0.05 and ni["pairs"] == ["distilled_vs_doctrine", "distilled_vs_base_slim"]
    assert ni["min_cases"] == 8
    for pair in ni["pairs"]:
        v = ni["verdicts"]["held_out"][pair]
        assert {"balanced_acc", "compress_success"} <= set(v)  # no compress reply: no conformance_passed
        # Six identical cases: no longer a zero-width [0, 0] but an honest wide interval around 0.
        lo, hi = v["balanced_acc"]["ci95"]
        assert lo < -0.2 and hi > 0.2 and v["balanced_acc"]["diff"] == 0 and v["balanced_acc"]["n"] == 6
        assert v["balanced_acc"]["verdict"] == "inconclusive"
    assert "## Non-inferiority" in md
    assert "balanced_acc" in data["workloads"]["held_out"]["arms"]["doctrine"]["ci95"]


def test_report_shows_reading_or_recall(policy_reports):
    # The smoke data has no train split: no nearest_train_sim. The labels copy their exact items
    # from the context, all but (today) one: the tier-2 label's header cuts a topic inside an
    # escaped quote (`query=db_wait_ms{service=\]`), which the context never shows.
    data, md, _ = policy_reports["oracle"]
    arm = data["workloads"]["held_out"]["arms"]["distilled"]
    assert arm["values_copied"] >= 40 and arm["values_not_in_context"] <= 1
    assert "nearest_train_sim" not in arm
    items = arm["values_copied"] + arm["values_not_in_context"]
    assert "### held_out: reading or recall" in md and f"{arm['values_not_in_context']} of {items}" in md
    assert "reading or recall" not in policy_reports["never_compress"][1]  # no summary written
