"""The pipeline runner: stages write manifests, reruns skip them, timings are kept."""

from __future__ import annotations

import json

import pytest

from pipeline.recipe import PipelineConfig
from pipeline.runner import PIPELINE, run_pipeline, stage_command
from plumbing.recipe_loader import ConfigError, load_config


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
    assert stage_command(cfg, "data", run)[2:5] == ["pipeline.dtw", "data", "configs/data/demo.yaml"]
    train = stage_command(cfg, "train", run)
    assert train[2:5] == ["pipeline.dtw", "train", cfg.train_recipe] and f"data.dir={run / 'data'}" in train
    assert stage_command(cfg, "adapter", run)[2:] == ["pipeline.dtw", "export", str(run)]
    assert stage_command(cfg, "report", run)[2:4] == ["pipeline.dtw", "report"]
    accelerate = stage_command(cfg.model_copy(update={"accelerate_config": "configs/accelerate/cpu.yaml"}), "train", run)
    assert accelerate[accelerate.index("-m", 3):][:3] == ["-m", "train", cfg.train_recipe]  # accelerate launch -m train
    # Only a stage that says it is launched by accelerate is; the others stay dtw commands.
    launched = cfg.model_copy(update={"accelerate_config": "configs/accelerate/cpu.yaml"})
    assert [s for s in PIPELINE if "accelerate.commands.launch" in " ".join(
        stage_command(launched, s, run) if PIPELINE[s].command else [])] == ["train"]
    with pytest.raises(ConfigError, match="eval_recipe"):
        stage_command(cfg.model_copy(update={"eval_recipe": None}), "eval", run)


def test_results_table_is_printed_from_the_report(tmp_path):
    import io

    from rich.console import Console

    from eval.glance import print_results

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


# --------------------------------------------- the pipeline says where each stage's inputs are


def test_a_renamed_run_points_every_stage_at_its_own_folders(project_root, tmp_path):
    from eval.recipe import EvalRecipe
    from pipeline.runner import stage_overrides
    from train.recipe import TrainRecipe

    cfg = load_config(project_root / "configs/pipeline/demo.yaml", PipelineConfig, ["run_name=try2"])
    run = tmp_path / "try2"
    # today: the eval recipe's held_out workload reads runs/demo/data whatever the run is called
    ev = load_config(project_root / cfg.eval_recipe, EvalRecipe, stage_overrides(cfg, "eval", run))
    held = next(w for w in ev.workloads if w.name == "held_out")
    assert held.settings["data_dir"] == str(run / "data") == ev.data_dir
    assert ev.backend.adapter_dir == str(run / "adapter") and ev.backend.model == cfg.model
    assert ev.doctrine_version == cfg.doctrine_version
    tr = load_config(project_root / cfg.train_recipe, TrainRecipe, stage_overrides(cfg, "train", run))
    assert tr.data.dir == str(run / "data") and tr.model.spec == cfg.model
    assert f"doctrine_version={cfg.doctrine_version}" in stage_command(cfg, "data", run)
    assert stage_command(cfg, "eval", run)[-4:] == stage_overrides(cfg, "eval", run)


def test_an_eval_recipe_that_reads_other_data_fails_before_any_stage(project_root, tmp_path):
    # configs/eval/smoke.yaml's held_out workload names its own fixture rows: in a pipeline
    # its cases would not be of the run's curriculum.
    cfg = load_config(project_root / "configs/pipeline/demo.yaml", PipelineConfig,
                      [f"runs_dir={tmp_path}", "stages=[doctrine, eval]", "eval_recipe=configs/eval/smoke.yaml"])
    with pytest.raises(ConfigError, match=r"eval stage \(eval_recipe\).*settings.data_dir 'fixtures/held_out' "
                                          r"is not the run's data_dir"):
        run_pipeline(cfg, log=lambda s: None)
    assert not (tmp_path / "demo").exists()  # not even the doctrine stage ran


def test_a_typo_in_a_stage_recipe_fails_before_the_first_stage(project_root, tmp_path):
    bad = tmp_path / "configs/train/typo.yaml"
    bad.parent.mkdir(parents=True)
    text = (project_root / "configs/train/smoke.yaml").read_text().replace("max_steps:", "max_stesp:")
    bad.write_text(text)
    cfg = load_config(project_root / "configs/pipeline/demo.yaml", PipelineConfig,
                      [f"runs_dir={tmp_path / 'runs'}", f"train_recipe={bad}"])
    with pytest.raises(ConfigError, match=r"train stage \(train_recipe\).*unknown key 'trainer.max_stesp'"):
        run_pipeline(cfg, log=lambda s: None)  # today: the data stage runs first, training fails later
    assert not (tmp_path / "runs").exists()
