"""Non-inferiority verdicts from the recipe's margin, and balanced accuracy with intervals."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from eval.metrics import balanced_accuracy, balanced_ci, non_inferiority, paired_balanced
from eval.recipe import EvalRecipe
from eval.report import build_report, summarise_run

NI = {"margin": 0.1, "metrics": ["kind_correct", "balanced_acc"], "pairs": ["distilled_vs_doctrine"]}


def _case(root: Path, arm: str, n: int, metrics: dict) -> None:
    path = root / "cases" / arm / f"held_out.{n:05d}__s0.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"status": "done", "arm": arm, "workload": "held_out", "case_id": f"held_out.{n}",
                                "seed": 0, "metrics": metrics, "calls": []}))


def _run(root: Path, distilled: list[bool], doctrine: list[bool], ni: dict = NI) -> Path:
    kinds = ["compress", "refuse"]
    for i, (a, b) in enumerate(zip(distilled, doctrine, strict=True)):
        _case(root, "distilled", i, {"kind_correct": a, "label_kind": kinds[i % 2]})
        _case(root, "doctrine", i, {"kind_correct": b, "label_kind": kinds[i % 2]})
    (root / "recipe.json").write_text(json.dumps({"sha256": "x", "fingerprint": {}, "report": {"non_inferiority": ni}}))
    return root


def test_verdict_rule():
    assert non_inferiority({"ci95": [-0.04, 0.1]}, 0.05) == "non-inferior"
    assert non_inferiority({"ci95": [-0.3, -0.06]}, 0.05) == "inferior"
    assert non_inferiority({"ci95": [-0.2, 0.1]}, 0.05) == "inconclusive"
    assert non_inferiority({"ci95": [-0.05, 0.0]}, 0.05) == "inconclusive"  # the low end must be above -margin
    # One identical case gives a zero-width interval: too few cases to call non-inferior.
    assert non_inferiority({"ci95": [0.0, 0.0], "n": 1}, 0.05, min_cases=8) == "inconclusive"
    assert non_inferiority({"ci95": [0.0, 0.0], "n": 8}, 0.05, min_cases=8) == "non-inferior"


def test_balanced_accuracy_and_its_interval():
    rows = [{"label_kind": "compress", "kind_correct": True}] * 3 + [{"label_kind": "refuse", "kind_correct": False}]
    assert balanced_accuracy(rows) == 0.5  # not 0.75: each kind weighs the same
    lo, hi = balanced_ci(rows)
    # Four cases, one of them the only 'refuse': no spread within a kind is not certainty
    # (the former stratified bootstrap said [0.5, 0.5] here); per-kind Wilson intervals by MOVER.
    assert lo < 0.3 and hi > 0.7
    mixed = rows + [{"label_kind": "refuse", "kind_correct": True}]
    lo, hi = balanced_ci(mixed, seed=1)
    assert lo < balanced_accuracy(mixed) < hi and (lo, hi) == tuple(balanced_ci(mixed, seed=2))
    a = {i: r for i, r in enumerate(mixed)}
    b = {i: {**r, "kind_correct": False} for i, r in enumerate(mixed)}
    d = paired_balanced(a, b)
    assert d["n"] == 5 and d["diff"] == pytest.approx(0.75) and d["ci95"][0] > 0


def test_report_gives_a_verdict_per_pair_and_metric(tmp_path):
    # Identical answers: 20 concordant pairs cannot rule out a 0.1 drop (Tango: +-0.16), 60 can.
    few = _run(tmp_path / "few", [True, False] * 10, [True, False] * 10)
    v = summarise_run(few)["non_inferiority"]["verdicts"]["held_out"]["distilled_vs_doctrine"]
    assert v["kind_correct"]["verdict"] == "inconclusive" and v["kind_correct"]["ci95"][0] < -0.1
    same = _run(tmp_path / "same", [True, False] * 30, [True, False] * 30)
    ni = summarise_run(same)["non_inferiority"]
    assert ni["margin"] == 0.1 and ni["pairs"] == ["distilled_vs_doctrine"]
    v = ni["verdicts"]["held_out"]["distilled_vs_doctrine"]
    assert v["kind_correct"]["verdict"] == v["balanced_acc"]["verdict"] == "non-inferior"
    assert v["kind_correct"]["n"] == 60 and -0.1 < v["kind_correct"]["ci95"][0] < 0 < v["kind_correct"]["ci95"][1]
    assert v["balanced_acc"]["n_by_kind"] == {"compress": 30, "refuse": 30}

    worse = _run(tmp_path / "worse", [False] * 20, [True] * 20)
    v = summarise_run(worse)["non_inferiority"]["verdicts"]["held_out"]["distilled_vs_doctrine"]
    assert v["kind_correct"]["verdict"] == "inferior" and v["kind_correct"]["diff"] == -1.0

    noisy = _run(tmp_path / "noisy", [True, False, False, True, True, False, True, False],
                 [True, True, False, True, False, True, True, True])
    v = summarise_run(noisy)["non_inferiority"]["verdicts"]["held_out"]["distilled_vs_doctrine"]
    assert v["kind_correct"]["verdict"] == "inconclusive"  # 8 cases cannot tell a 0.1 margin
    out = build_report(noisy, out=tmp_path / "report")
    md = (out / "report.md").read_text()
    assert "## Non-inferiority" in md and "inconclusive" in md and "margin 0.100" in md
    assert "Non-inferiority" in (out / "report.html").read_text()
    data = json.loads((out / "report.json").read_text())
    assert data["non_inferiority"]["verdicts"]["held_out"]["distilled_vs_doctrine"]["kind_correct"]["verdict"] \
        == "inconclusive"


def test_a_pair_that_did_not_run_gets_no_verdict(tmp_path):
    # A recipe may run fewer arms (arms=[...] on the command line): its pairs are left out.
    run = _run(tmp_path / "r", [True, False], [True, False], {**NI, "pairs": ["distilled_vs_base_slim"]})
    assert summarise_run(run)["non_inferiority"]["verdicts"] == {}
    md = (build_report(run, out=tmp_path / "rep") / "report.md").read_text()
    assert "No pair of the recipe ran on a listed metric." in md


def test_no_block_no_verdicts(tmp_path):
    run = _run(tmp_path / "r", [True], [True])
    (run / "recipe.json").unlink()
    assert "non_inferiority" not in summarise_run(run)


@pytest.mark.parametrize("block, message", [
    ({"margin": 0.05, "metrics": ["billed_tokens"]}, "unknown metrics ['billed_tokens']"),
    ({"margin": 0, "metrics": ["kind_correct"]}, "margin"),
    ({"pairs": ["distilled-doctrine"]}, "is not <arm>_vs_<other arm>"),
    ({"margn": 0.05}, "margn"),
])
def test_bad_blocks_are_one_line_errors(block, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        EvalRecipe.model_validate({"arms": ["doctrine", "distilled"], "workloads": [{"name": "held_out"}],
                                   "backend": {"name": "oracle"}, "non_inferiority": block})
