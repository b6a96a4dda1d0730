"""One name per meaning: every figure the report can print is defined once, counts are integers."""

from __future__ import annotations

import json
from pathlib import Path

from eval.metric_defs import DEFINITIONS
from eval.report import COLUMNS, HEADLINE, build_report


def _case(root: Path, arm: str, workload: str, n: int, metrics: dict) -> None:
    path = root / "cases" / arm / f"{workload}.{n:05d}__s0.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    questions = [{"index": 0, "kind": "value", "correct": bool(metrics.get("accuracy")), "evidence_survived": True}]
    path.write_text(json.dumps({"status": "done", "arm": arm, "workload": workload, "case_id": f"{workload}.{n}",
                                "seed": 0, "metrics": metrics, "calls": [],
                                **({"questions": questions} if workload == "probes" else {})}))


def test_every_column_the_report_can_print_has_a_definition():
    names = {c for cols in COLUMNS.values() for c in cols} | {name for name, _, _ in HEADLINE}
    assert sorted(names - set(DEFINITIONS)) == []


def test_report_defines_what_it_shows_once_and_prints_counts_as_integers(tmp_path):
    run = tmp_path / "eval"
    _case(run, "full", "probes", 0, {"questions": 1, "accuracy": 1.0, "model_calls": 3})
    _case(run, "full", "probes", 1, {"questions": 1, "accuracy": 0.0, "model_calls": 2})
    _case(run, "distilled", "marathon", 0, {"probe_accuracy": 0.0, "probe_score": 1.0, "calls": 4})
    for i, ok in enumerate((True, False, True)):
        _case(run, "distilled", "held_out", i, {"kind_correct": ok, "label_kind": "compress", "decision_win": ok,
                                                "decision_margin": 1.5 if ok else -0.5})
    out = build_report(run, out=tmp_path / "report")
    md = (out / "report.md").read_text()
    probes = md[md.index("## probes"):].split("\n## ")[0]
    header, _, row = probes.splitlines()[2:5]
    cells = dict(zip(header.strip("| ").split(" | "), row.strip("| ").split(" | "), strict=True))
    assert cells["questions"] == "2" and cells["model_calls"] == "5" and cells["cases"] == "2"  # not 1.000
    defs = md[md.index("## Definitions"):].split("\n## ")[0]
    for name in ("probe_accuracy", "probe_score", "decision_margin", "decision_win", "questions", "95% interval"):
        assert defs.count(f"- **{name}**:") == 1, name
    assert "verbatim" in defs and "any of its" in defs  # the two probe figures say how they differ
    data = json.loads((out / "report.json").read_text())
    assert set(data["definitions"]) >= {"probe_accuracy", "probe_score", "balanced_acc"}
    # the glance cells carry n beside the interval
    assert "n=3" in md[md.index("## Results at a glance"):md.index("## Definitions")]
