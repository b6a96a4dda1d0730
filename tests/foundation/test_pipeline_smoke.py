"""configs/pipeline/smoke.yaml end to end: every stage of the pipeline, as `make demo` runs
them, on the tiny model (about a minute and a half on 2 CPU cores), under a run name that
is not the recipe's, so each stage must read the folders of this run."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

STAGES = ["doctrine", "data", "train", "adapter", "eval", "report"]


@pytest.mark.slow
def test_smoke_pipeline_runs_every_stage_and_a_rerun_skips_them(project_root, tmp_path):
    cmd = [sys.executable, "-m", "pipeline", "configs/pipeline/smoke.yaml", f"runs_dir={tmp_path}",
           "run_name=try2"]
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    p = subprocess.run(cmd, cwd=project_root, capture_output=True, text=True, timeout=900, env=env)
    assert p.returncode == 0, (p.stdout + p.stderr)[-4000:]
    run = tmp_path / "try2"
    for stage in STAGES:
        assert (run / stage / "manifest.json").is_file(), stage
        assert f"[done] {stage}" in p.stdout
    # The stages read this run's folders, never the recipes' runs/smoke defaults.
    ev = json.loads((run / "eval" / "manifest.json").read_text())
    assert ev["config"]["workloads"][0]["settings"]["data_dir"] == str(run / "data")
    assert ev["config"]["backend"]["adapter_dir"] == str(run / "adapter")
    assert ev["counts"]["cases"] == 6  # 2 held-out rows x (doctrine, base_slim, distilled)
    train = json.loads((run / "train" / "manifest.json").read_text())
    assert train["config"]["data"]["dir"] == str(run / "data")
    report = json.loads((run / "report" / "report.json").read_text())
    assert report["complete"] and [row[0] for row in report["glance"][1:]] == ["doctrine", "base_slim", "distilled"]
    assert "Results at a glance" in p.stdout

    again = subprocess.run(cmd, cwd=project_root, capture_output=True, text=True, timeout=300, env=env)
    assert again.returncode == 0, again.stderr[-2000:]
    assert [line.split(":")[0] for line in again.stdout.splitlines() if line.startswith("[skip]")] == \
        [f"[skip] {s}" for s in STAGES]
