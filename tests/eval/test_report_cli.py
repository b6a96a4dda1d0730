"""``python -m eval run`` / ``report`` end to end with the oracle backend."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from eval.report import ReportError, build_report

ROOT = Path(__file__).resolve().parents[2]


def sh(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "eval", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("smoke") / "eval"
    p = sh("run", "configs/eval/smoke.yaml", "--out", str(out))
    assert p.returncode == 0, p.stderr[-3000:]
    return out


def test_help_is_fast_and_lists_commands():
    p = sh("--help")
    assert p.returncode == 0 and "run" in p.stdout and "report" in p.stdout
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "eval", "run", "--help"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    imported = {line.split("|")[-1].strip() for line in p.stderr.splitlines() if "|" in line}
    assert not imported & {"torch", "transformers", "vllm", "matplotlib"}


def test_smoke_end_to_end(smoke_run, tmp_path):
    m = json.loads((smoke_run / "manifest.json").read_text())
    assert m["stage"] == "eval" and m["counts"]["cases"] == 11 * 2 + 3 * 6
    assert len(list(smoke_run.glob("cases/*/*.json"))) == m["counts"]["cases"]
    again = sh("run", "configs/eval/smoke.yaml", "--out", str(smoke_run))
    assert again.returncode == 0 and "already done" in again.stderr
    p = sh("report", str(smoke_run))
    assert p.returncode == 0, p.stderr
    rep = smoke_run.parent / "report"
    for name in ("report.md", "report.html", "report.json", "manifest.json", "context_per_call.png",
                 "billed_tokens.png", "accuracy_by_kind.png", "probe_accuracy.png"):
        assert (rep / name).is_file(), name
    html = (rep / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 4 and "src=\"http" not in html
    data = json.loads((rep / "report.json").read_text())
    assert data["complete"] is True
    assert set(data["workloads"]["scripted"]["arms"]) == {
        "full", "n_latest_10", "n_latest_20", "n_latest_40", "sliding", "auto_compact", "micro_auto",
        "deterministic", "doctrine", "base_slim", "distilled"}
    assert set(data["workloads"]["held_out"]["by_kind"]["doctrine"]) == {"compress", "refuse", "ordinary"}
    md = (rep / "report.md").read_text()
    assert "**complete**" in md and "| doctrine |" in md
    rm = json.loads((rep / "manifest.json").read_text())
    assert rm["stage"] == "report" and rm["inputs"]["eval"]["sha256"]


def test_side_by_side_and_incomplete(smoke_run, tmp_path):
    other = tmp_path / "other" / "eval"
    p = sh("run", "configs/eval/smoke.yaml", "--out", str(other), "windows=[4000]", "--max-cases", "5")
    assert p.returncode == 1 and not (other / "manifest.json").exists()
    out = build_report(other)
    md = (out / "report.md").read_text()
    assert "INCOMPLETE (5/40 cases done)" in md
    assert json.loads((out / "report.json").read_text())["complete"] is False
    vs = build_report(smoke_run, vs=other, out=tmp_path / "vsreport")
    md = (vs / "report.md").read_text()
    assert "Side by side" in md and "The other run is INCOMPLETE." in md
    tables = json.loads((vs / "report.json").read_text())["vs"]["tables"]
    assert tables["scripted"][0] == ["arm", "metric", "this run", "other run", "delta"]
    assert len(tables["scripted"]) > 1


def test_bad_inputs(tmp_path):
    with pytest.raises(ReportError):
        build_report(tmp_path)
    p = sh("run", "configs/eval/smoke.yaml", "--out", str(tmp_path / "x"), "arms=[nope]")
    assert p.returncode == 2 and "unknown arms" in p.stderr
    p = sh("report", str(tmp_path / "missing"))
    assert p.returncode == 2
