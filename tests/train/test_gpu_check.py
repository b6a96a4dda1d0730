"""``make gpu-check`` on a machine without a CUDA GPU: one line, exit 0, nothing run or written."""

from __future__ import annotations

import importlib.util

from plumbing.recipe_loader import load_config
from train.recipe import TrainRecipe


def _module(project_root):
    spec = importlib.util.spec_from_file_location("gpu_check", project_root / "benchmarks" / "gpu_check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_without_gpu_one_line_and_nothing_written(project_root, tmp_path, capsys, monkeypatch):
    mod = _module(project_root)
    monkeypatch.setattr(mod, "has_cuda", lambda: False)
    assert mod.main(["--out", str(tmp_path / "check")]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "no CUDA GPU" in out
    assert not (tmp_path / "check").exists()


def test_the_training_overrides_it_passes_load(project_root):
    # The GPU branch's train overrides are valid for the recipe it runs (checked here, not first on a GPU).
    recipe = load_config(project_root / "configs/train/gpu_8b.yaml", TrainRecipe, [
        "data.dir=/tmp/x", "trainer.max_steps=5", "trainer.save_steps=100000", "trainer.eval_steps=null",
        "trainer.logging_steps=1", "trainer.report_to=[none]"])
    assert recipe.trainer.max_steps == 5 and recipe.trainer.eval_steps is None
