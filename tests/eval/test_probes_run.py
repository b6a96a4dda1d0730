"""The recall-probe workload end to end with the oracle backend, and its cross-arm report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.backends.oracle import OracleBackend
from eval.workloads import WORKLOADS
from eval.workloads.base import RunContext
from eval.workloads.probes.workload import probe_report

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests/data_gen/fixtures/swe_rebench/trajectories.parquet"


@pytest.fixture(scope="module")
def wl():
    return WORKLOADS["probes"]({"source": str(FIX), "filters": {"limit": 8}}, None)


@pytest.fixture(scope="module")
def rows(wl, doctrine):
    out = []
    for arm in ("full", "n_latest_10", "auto_compact", "doctrine"):
        for case in wl.cases():
            r = wl.run_case(case, arm, 0, RunContext(OracleBackend(), doctrine, window=1500))
            r.update(arm=arm, seed=0, window=1500)
            out.append(r)
    return out


def test_full_arm_answers_everything(rows):
    full = [r for r in rows if r["arm"] == "full"]
    assert sum(r["metrics"]["questions"] for r in full) == 26
    assert all(q["correct"] and q["evidence_survived"] for r in full for q in r["questions"])


def test_n_latest_failures_are_lost_evidence(rows):
    nl = [q for r in rows if r["arm"] == "n_latest_10" for q in r["questions"]]
    assert any(not q["evidence_survived"] for q in nl)
    assert all(q["evidence_survived"] for q in nl if q["correct"])  # the oracle reads what it sees
    assert all(q["retained_messages"] <= 10 for q in nl)


def test_every_question_sees_the_same_view(rows):
    for r in rows:
        if r["arm"] != "auto_compact":
            continue
        assert r["metrics"]["summaries"] <= 1  # compaction happened once, for the first question
        assert len({q["retained_messages"] for q in r["questions"]}) == 1


def test_report_relative_to_full(rows):
    rep = probe_report(rows)
    assert rep["arms"]["full"]["accuracy"] == 1.0
    nl = rep["arms"]["n_latest_10"]
    v = nl["vs_reference"]
    assert v["clean_questions"] + v["reference_failed_questions"] == nl["questions"] == 26
    assert nl["accuracy"] < 1.0 and nl["evidence_survival"] < 1.0
    assert set(nl["by_kind"]) == {"files_changed", "first_edit", "first_test_run", "first_error"}
    # a question the reference arm fails is reported apart
    broken = json.loads(json.dumps(rows))
    for r in broken:
        if r["arm"] == "full":
            r["questions"][0]["correct"] = False
    v2 = probe_report(broken)["arms"]["n_latest_10"]["vs_reference"]
    assert v2["reference_failed_questions"] == 8 and v2["clean_questions"] == 18


def test_sandbox_is_shut_during_answers(wl, doctrine):
    calls = iter([{"content": "", "tool_calls": [{"id": "x1", "type": "function", "function": {
        "name": "execute_bash", "arguments": json.dumps({"command": "git diff"})}}]},
                  {"content": "", "tool_calls": [{"id": "x2", "type": "function", "function": {
                      "name": "finish", "arguments": json.dumps({"message": "src/textkit/slug.py"})}}]}])
    seen = []

    def policy(req):
        seen.append(req.messages)
        return next(calls, {"content": "done"})

    case = wl.cases()[0]
    r = WORKLOADS["probes"]({"source": str(FIX), "filters": {"limit": 1}, "kinds": ["files_changed"]},
                            None).run_case(case, "full", 0, RunContext(OracleBackend(policy), doctrine, window=4000))
    q = r["questions"][0]
    assert q["tools"] == ["execute_bash", "finish"] and q["answer"] == "src/textkit/slug.py" and q["correct"]
    assert "shut down" in seen[1][-1]["content"]


def test_cli_report(rows, tmp_path):
    from eval.__main__ import main
    from plumbing.runs import atomic_write_json

    for r in rows:
        atomic_write_json(tmp_path / "cases" / r["arm"] / f"{r['case_id']}__s0.json", {**r, "status": "done"})
    assert main(["probes", "report", str(tmp_path)]) == 0
    rep = json.loads((tmp_path / "probes_report.json").read_text())
    assert rep["arms"]["full"]["correct"] == 26
    assert main(["probes", "report", str(tmp_path / "nothing")]) == 1


def test_recipe_runs_through_the_harness(tmp_path):
    from eval.harness import load_results, run_eval
    from eval.recipe import EvalRecipe
    from plumbing.recipe_loader import load_config

    path = ROOT / "configs/eval/probes_demo.yaml"
    recipe = load_config(path, EvalRecipe, ["arms=[\"full\",\"n_latest_10\"]"])
    summary = run_eval(recipe, tmp_path / "eval", base_dir=path.parent, log=lambda s: None)
    assert summary.complete
    rep = probe_report(load_results(tmp_path / "eval"))
    assert rep["arms"]["full"]["questions"] == 26
