"""The pipeline runner: stages write manifests, reruns skip them, timings are kept."""

from __future__ import annotations

import json

import pytest

from doctrine.config import ConfigError, load_config
from doctrine.pipeline import run_pipeline, stage_command
from doctrine.pipeline_config import PipelineConfig


def test_doctrine_stage_runs_once_and_is_skipped_after(project_root, tmp_path):
    cfg = load_config(project_root / "configs/pipeline/demo.yaml", PipelineConfig,
                      [f"runs_dir={tmp_path}", "stages=[doctrine]"])
    lines: list[str] = []
    run = run_pipeline(cfg, log=lines.append)
    manifest = json.loads((run.root / "doctrine" / "manifest.json").read_text())
    assert manifest["doctrine"]["version"] == "v1" and len(manifest["doctrine"]["sha256"]) == 64
    system = (run.root / "doctrine" / "system-doctrine.md").read_text()
    slim = (run.root / "doctrine" / "system-distilled.md").read_text()
    assert len(slim) < len(system) / 3
    assert json.loads((run.root / "timings.json").read_text())["doctrine"] >= 0
    lines.clear()
    run_pipeline(cfg, log=lines.append)
    assert any(line.startswith("[skip] doctrine") for line in lines)


def test_stage_commands_are_the_documented_ones(project_root, tmp_path):
    cfg = load_config(project_root / "configs/pipeline/demo.yaml", PipelineConfig)
    run = tmp_path / "demo"
    assert stage_command(cfg, "data", run)[2:5] == ["data_gen", "build", "configs/data/demo.yaml"]
    train = stage_command(cfg, "train", run)
    assert "--resume" not in train and f"data.dir={run / 'data'}" in train
    (run / "train" / "checkpoints").mkdir(parents=True)
    assert "--resume" in stage_command(cfg, "train", run)  # an interrupted run resumes
    assert stage_command(cfg, "adapter", run)[2:] == ["train", "export", str(run)]
    with pytest.raises(ConfigError, match="eval_recipe"):
        stage_command(cfg.model_copy(update={"eval_recipe": None}), "eval", run)


def test_results_table_is_printed_from_the_report(tmp_path):
    import io

    from rich.console import Console

    from doctrine.pipeline import print_results

    buf = io.StringIO()
    console = Console(file=buf, width=200)
    assert print_results(tmp_path / "report", console) is False  # no report yet: nothing printed
    assert buf.getvalue() == ""
    (tmp_path / "report").mkdir()
    glance = [["arm", "decision_acc", "doctrine_share"], ["doctrine", "0.500", "47%"], ["distilled", "0.250", "11%"]]
    (tmp_path / "report" / "report.json").write_text(json.dumps({"complete": False, "glance": glance}))
    assert print_results(tmp_path / "report", console) is True
    out = buf.getvalue()
    assert "INCOMPLETE" in out and str(tmp_path / "report" / "report.html") in out
    for cell in ("decision_acc", "doctrine_share", "distilled", "0.250", "47%"):
        assert cell in out
