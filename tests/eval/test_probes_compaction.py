"""Recall probes where compaction happens: the history fed message by message, a first
compaction forced before the first question, and the main report's accuracy by kind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.backends.oracle import OracleBackend
from eval.report import build_report
from eval.workloads import WORKLOADS
from eval.workloads.base import RunContext

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests/data_gen/fixtures/swe_rebench/trajectories.parquet"
ARMS = ("full", "n_latest_10", "auto_compact", "deterministic", "doctrine")


def _run(doctrine, arms=ARMS, **settings):
    wl = WORKLOADS["probes"]({"source": str(FIX), "filters": {"limit": 8}, **settings}, None)
    out = []
    for arm in arms:
        for case in wl.cases():
            r = wl.run_case(case, arm, 0, RunContext(OracleBackend(), doctrine, window=1500))
            r.update(arm=arm, seed=0, window=1500, status="done", case_id=f"probes.{r['case_id']}.w1500")
            out.append(r)
    return out


@pytest.fixture(scope="module")
def stepwise(doctrine):
    return _run(doctrine)


def test_kernel_arms_compress_while_the_session_grows(stepwise, doctrine):
    rows = [r for r in stepwise if r["arm"] == "doctrine"]
    assert sum(r["metrics"]["decisions"] for r in rows) > 0
    for r in rows:
        purposes = [c["purpose"] for c in r["calls"]]
        if "decision" in purposes:  # every nudge decision comes before the first question
            assert max(i for i, p in enumerate(purposes) if p == "decision") < purposes.index("answer")
    grown = sum(r["metrics"]["compressions_succeeded"] for r in rows)
    whole = sum(r["metrics"]["compressions_succeeded"] for r in _run(doctrine, ("doctrine",), feed="whole"))
    assert grown > whole  # fed whole, the kernel sees one size and folds far less


def test_a_first_compaction_is_forced_where_none_happened(stepwise):
    for r in stepwise:
        m = r["metrics"]
        if r["arm"] in ("full", "n_latest_10"):
            assert r["forced"] == "none" and not m["compacted"]  # these arms never compact
            continue
        assert r["forced"] in ("already", "model", "engine", "summary", "none")
        assert m["compacted"] == (r["forced"] != "none")
        if m["forced_compaction"]:
            assert any(c["purpose"] in ("summary", "forced") for c in r["calls"])
    for arm in ("auto_compact", "deterministic", "doctrine"):
        rows = [r for r in stepwise if r["arm"] == arm]
        assert sum(r["metrics"]["compacted"] for r in rows) >= len(rows) - 1, arm  # one case has nothing to fold
    assert {r["forced"] for r in stepwise if r["arm"] == "auto_compact"} == {"summary"}


def test_forcing_can_be_turned_off(doctrine):
    rows = _run(doctrine, ("auto_compact",), force_compaction=False)
    assert {r["forced"] for r in rows} == {"off"} and not any(r["metrics"]["forced_compaction"] for r in rows)


def test_the_main_report_gives_accuracy_by_kind_and_against_full(stepwise, tmp_path):
    run = tmp_path / "eval"
    for r in stepwise:
        p = run / "cases" / r["arm"] / f"{r['case_id']}__s0.json"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(r))
    out = build_report(run, out=tmp_path / "report")
    data = json.loads((out / "report.json").read_text())
    rec = data["workloads"]["probes"]["recall"]
    assert rec["reference_arm"] == "full" and rec["arms"]["full"]["accuracy"] == 1.0
    doc = rec["arms"]["doctrine"]
    assert set(doc["by_kind"]) >= {"first_error", "files_changed"}
    assert doc["vs_reference"]["clean_questions"] == 26 and doc["vs_reference"]["clean_correct"] < 26
    md = (out / "report.md").read_text()
    assert "### probes: accuracy by kind and relative to full" in md and "| vs full | full failed |" in md
    assert data["workloads"]["probes"]["arms"]["doctrine"]["compacted"] > 0.8
