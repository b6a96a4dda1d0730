"""The report gives the recovery reflex (recover_chosen, recover_success, false_recovery) with
intervals over the decisions each is defined on, resampling sessions, and says n and sessions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.metrics import CLUSTER_METHOD, mean_ci
from eval.report import _interval, build_report

SESSIONS = 5


def _case(root: Path, n: int, session: str, metrics: dict) -> None:
    path = root / "cases" / "base_slim" / f"held_out.{n:05d}__s0.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"status": "done", "arm": "base_slim", "workload": "held_out",
                                "case_id": f"held_out.{n}", "seed": 0, "meta": {"session_id": session},
                                "metrics": metrics, "calls": []}))


@pytest.fixture()
def report(tmp_path):
    """Per session two recovery-labelled decisions and one ordinary one (a counter-lesson), as
    the held_out workload scores them: recover_chosen / recover_success only on the first,
    false_recovery only on the second."""
    run = tmp_path / "eval"
    n = 0
    for s in range(SESSIONS):
        sid = f"proc_sql_{s}"
        for j in range(2):
            chose = s % 2 == 0 or j == 1
            _case(run, n, sid, {"label_kind": "recover", "kind_correct": chose, "recover_chosen": chose,
                                "recover_success": chose and s != 2})
            n += 1
        _case(run, n, sid, {"label_kind": "ordinary", "kind_correct": s != 1, "false_recovery": s == 1})
        n += 1
    out = build_report(run, out=tmp_path / "report")
    return json.loads((out / "report.json").read_text()), (out / "report.md").read_text()


def _defined(metric: str) -> tuple[list[float], list[str]]:
    """The values of ``metric`` on the cases it is defined on, and their sessions."""
    vals, sess = [], []
    for s in range(SESSIONS):
        for j in range(2):
            chose = s % 2 == 0 or j == 1
            v = {"recover_chosen": chose, "recover_success": chose and s != 2}.get(metric)
            if v is not None:
                vals.append(float(v))
                sess.append(f"session:proc_sql_{s}")
        if metric == "false_recovery":
            vals.append(float(s == 1))
            sess.append(f"session:proc_sql_{s}")
    return vals, sess


def test_recovery_figures_have_session_resampled_intervals_with_n_and_sessions(report):
    data, md = report
    arm = data["workloads"]["held_out"]["arms"]["base_slim"]
    expect = {"recover_chosen": (10, CLUSTER_METHOD), "recover_success": (10, CLUSTER_METHOD),
              "false_recovery": (5, "wilson")}  # one counter-lesson per session: nothing to cluster
    table = md[md.index("### held_out: recovery reflex"):].split("\n### ")[0]
    for metric, (n, method) in expect.items():
        vals, sess = _defined(metric)
        assert len(vals) == n
        # over the cases the metric is defined on (never the other kind's), sessions resampled
        assert arm["ci_n"][metric] == n and arm["ci_sessions"][metric] == SESSIONS
        assert arm["ci_method"][metric] == method
        assert arm["ci95"][metric] == pytest.approx(mean_ci(vals, "binary", clusters=sess))
        lo, hi = arm["ci95"][metric]
        assert arm[metric] == pytest.approx(sum(vals) / n)
        assert lo <= arm[metric] <= hi and hi - lo > 0.2
        row = (f"| base_slim | {metric} | {arm[metric]:.3f} | {_interval(arm['ci95'][metric])} | {n} | "
               f"{SESSIONS} | {method} |")
        assert row in table, (row, table)
    # the clustered intervals are wider than treating the ten decisions as independent
    vals, _ = _defined("recover_chosen")
    iid = mean_ci(vals, "binary")
    assert arm["ci95"]["recover_chosen"][1] - arm["ci95"]["recover_chosen"][0] >= iid[1] - iid[0]
    defs = md[md.index("## Definitions"):].split("\n## ")[0]
    for name in ("recover_chosen", "false_recovery", "sessions", "method", "n"):
        assert defs.count(f"- **{name}**:") == 1, name


def test_no_recovery_table_without_recovery_decisions(tmp_path):
    run = tmp_path / "eval"
    for i in range(3):
        _case(run, i, f"s{i}", {"label_kind": "compress", "kind_correct": True, "compress_success": i > 0})
    md = (build_report(run, out=tmp_path / "report") / "report.md").read_text()
    assert "recovery reflex" not in md
