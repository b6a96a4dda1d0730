"""Pipeline reruns after a change: a stage whose inputs changed (its recipe after the
pipeline's overrides, the model, an earlier stage's output) is refused with the difference,
not skipped; ``--force STAGE`` reruns it and every stage after it; an interrupted training
still resumes from its checkpoint when nothing changed.

The pipeline here is the smoke one with the oracle backend in the eval stage (no training),
so data, eval and report really run, in seconds; the training stage is a stand-in process
(its command line is what is checked)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from pipeline.recipe import PipelineConfig
from pipeline.runner import StageFailed, run_pipeline
from plumbing.recipe_loader import load_config
from plumbing.runs import file_sha256, read_manifest, write_manifest

ROOT = Path(__file__).resolve().parents[2]
EVAL = Path(__file__).with_name("fixtures") / "oracle_eval.yaml"


def recipes(folder: Path) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    out = {"eval": folder / "eval.yaml", "data": folder / "data.yaml", "data3": folder / "data3.yaml",
           "train": folder / "train.yaml", "train9": folder / "train9.yaml"}
    out["eval"].write_text(EVAL.read_text())
    data = (ROOT / "configs/data/smoke.yaml").read_text()
    out["data"].write_text(data)
    out["data3"].write_text(data.replace("  horizon: 2\n", "  horizon: 3\n"))
    train = (ROOT / "configs/train/smoke.yaml").read_text()
    out["train"].write_text(train)
    out["train9"].write_text(train.replace("max_steps: 6", "max_steps: 9"))
    return out


def config(root: Path, paths: dict[str, Path], *over: str) -> PipelineConfig:
    return load_config(ROOT / "configs/pipeline/smoke.yaml", PipelineConfig,
                       [f"runs_dir={root}", "run_name=r", "stages=[doctrine, data, eval, report]",
                        f"data_recipe={paths['data']}", f"eval_recipe={paths['eval']}", *over])


def ran(lines: list[str]) -> list[str]:
    return [line.split()[2].rstrip(":") for line in lines if line.startswith("[run ]")]


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("pipe")
    paths = recipes(root / "recipes")
    lines: list[str] = []
    run = run_pipeline(config(root / "runs", paths), log=lines.append)
    assert ran(lines) == ["doctrine", "data", "eval", "report"]
    return root, paths, run.root


def test_a_changed_data_recipe_or_model_is_refused_not_skipped(first_run):
    root, paths, run = first_run
    lines: list[str] = []
    run_pipeline(config(root / "runs", paths), log=lines.append)  # nothing changed: every stage skipped
    assert ran(lines) == [] and sum(line.startswith("[skip]") for line in lines) == 4
    before = read_manifest(run / "data")
    # today: "[skip]" for every stage, and the old table printed as the result of the new recipe
    with pytest.raises(StageFailed, match=r"stage data: .*recipe\.replay\.horizon: 2 -> 3.*--force data"):
        run_pipeline(config(root / "runs", paths, f"data_recipe={paths['data3']}"), log=lambda s: None)
    with pytest.raises(StageFailed, match=r"stage eval: .*backend\.model: tiny:smollm2-135m-instruct -> "
                                          r"embedded:smollm2-135m-instruct"):
        run_pipeline(config(root / "runs", paths, "model=embedded:smollm2-135m-instruct"), log=lambda s: None)
    assert read_manifest(run / "data") == before  # refused: nothing rerun, nothing deleted


def test_force_data_reruns_every_stage_after_it(first_run):
    root, paths, run = first_run
    old_eval = read_manifest(run / "eval")
    lines: list[str] = []
    cfg = config(root / "runs", paths, f"data_recipe={paths['data3']}")
    run_pipeline(cfg, force=("data",), log=lines.append)
    # today: data reruns, eval and report are skipped and the old table is printed
    assert ran(lines) == ["data", "eval", "report"]
    assert read_manifest(run / "data")["config"]["replay"]["horizon"] == 3
    new_eval = read_manifest(run / "eval")
    assert new_eval["created_at"] >= old_eval["created_at"] and new_eval != old_eval
    report = read_manifest(run / "report")
    assert report["inputs"]["eval"]["sha256"] == file_sha256(run / "eval" / "manifest.json")  # of the new cases
    lines.clear()
    run_pipeline(cfg, log=lines.append)
    assert ran(lines) == []  # and now it is the run of the new recipe: a rerun skips


def test_an_interrupted_training_resumes_only_when_nothing_changed(tmp_path, monkeypatch):
    paths = recipes(tmp_path / "recipes")
    calls: list[list[str]] = []
    real = subprocess.run

    def fake(cmd, *a, **kw):  # the train stage: interrupted after a checkpoint, then finishing
        if cmd[2:4] != ["pipeline.dtw", "train"]:
            return real(cmd, *a, **kw)
        calls.append(cmd)
        stage = tmp_path / "runs" / "r" / "train"
        (stage / "checkpoints" / "checkpoint-3").mkdir(parents=True, exist_ok=True)
        if len(calls) == 1:
            return subprocess.CompletedProcess(cmd, 1)
        write_manifest(stage, stage="train", counts={"steps": len(calls)})
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr("pipeline.runner.subprocess.run", fake)
    over = ["stages=[doctrine, data, train]", f"train_recipe={paths['train']}"]
    with pytest.raises(StageFailed, match="stage train failed"):
        run_pipeline(config(tmp_path / "runs", paths, *over), log=lambda s: None)
    assert "--force" not in calls[0]
    # Resuming the checkpoints of another recipe would mix two trainings: refused.
    with pytest.raises(StageFailed, match=r"stage train: .*interrupted.*trainer\.max_steps: 6 -> 9"):
        run_pipeline(config(tmp_path / "runs", paths, *over, f"train_recipe={paths['train9']}"), log=lambda s: None)
    assert len(calls) == 1
    # Nothing changed: the same command again, and dtw train resumes from its checkpoints
    # (plumbing.stage.decide, tests/reliability/test_stage_contract.py runs it for real).
    run_pipeline(config(tmp_path / "runs", paths, *over), log=lambda s: None)
    assert calls[1] == calls[0]
    # --force train starts afresh: dtw train --force removes the old checkpoints.
    run_pipeline(config(tmp_path / "runs", paths, *over, f"train_recipe={paths['train9']}"), force=("train",),
                 log=lambda s: None)
    assert calls[2][-1] == "--force"
    assert json.loads((tmp_path / "runs" / "r" / "fingerprints.json").read_text())["train"]["fingerprint"][
        "recipe"]["trainer"]["max_steps"] == 9
