"""A hand-run training knows what it reruns and what it resumes from (medium severity; it
failed so: ``dtw train`` on a changed recipe printed ``[skip]``, exited 0 and kept the old
adapter, where ``dtw data`` refuses the same case; a truncated ``trainer_state.json`` in the
newest checkpoint made every ``--resume`` crash with ``JSONDecodeError`` although the one
before it was intact)."""

from __future__ import annotations

import json
from pathlib import Path

from plumbing.runs import read_manifest

ROOT = Path(__file__).resolve().parents[2]
RECIPE = str(ROOT / "configs/train/smoke.yaml")


def test_a_changed_recipe_is_refused_like_dtw_data_and_forced(sft_rows, tmp_path, capsys):
    from train.__main__ import main

    run = tmp_path / "run"
    common = [RECIPE, "--out", str(run), f"data.dir={sft_rows}", "trainer.save_steps=100"]
    assert main([*common, "trainer.max_steps=1"]) == 0
    weights = run / "train" / "final" / "adapter_model.safetensors"
    before = weights.read_bytes()
    capsys.readouterr()
    assert main([*common, "trainer.max_steps=1"]) == 0 and "[skip] train" in capsys.readouterr().out
    rc = main([*common, "trainer.max_steps=2"])
    err = capsys.readouterr().err
    # today: "[skip] train", exit 0, the one-step adapter kept under the two-step recipe
    assert rc == 2 and "trainer.max_steps: 1 -> 2" in err and "--force" in err, err
    assert weights.read_bytes() == before and read_manifest(run / "train")["config"]["trainer"]["max_steps"] == 1
    assert main([*common, "trainer.max_steps=2", "--force"]) == 0
    m = read_manifest(run / "train")
    assert m["config"]["trainer"]["max_steps"] == 2 and m["metrics"]["global_step"] == 2
    assert weights.read_bytes() != before


def test_resume_passes_over_a_damaged_newest_checkpoint(sft_rows, tmp_path):
    from plumbing.recipe_loader import load_config
    from train.recipe import TrainRecipe
    from train.sft import run_training

    def recipe(steps: int) -> TrainRecipe:
        return load_config(RECIPE, TrainRecipe, [f"data.dir={sft_rows}", f"trainer.max_steps={steps}",
                                                 "trainer.save_steps=1"])

    run = tmp_path / "run"
    run_training(recipe(2), run, log=lambda *_: None)
    state = run / "train" / "checkpoints" / "checkpoint-2" / "trainer_state.json"
    state.write_text(state.read_text()[:40])  # a crash while it was written
    lines: list[str] = []
    run_training(recipe(3), run, resume=True, log=lines.append)  # today: JSONDecodeError
    said = [line for line in lines if "damaged" in line]
    assert len(said) == 1 and "checkpoint-2 is damaged" in said[0] and "resuming from checkpoint-1" in said[0]
    metrics = json.loads((run / "train" / "metrics.json").read_text())
    assert metrics["resumed_from"] == "checkpoint-1" and metrics["global_step"] == 3
    assert read_manifest(run / "train") is not None
