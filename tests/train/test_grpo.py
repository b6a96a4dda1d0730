"""GRPO after SFT on the tiny model: a real GRPOTrainer run from a tiny SFT adapter, the
reference policy it is regularised toward, kill-and-resume, and export of the result."""

from __future__ import annotations

import json
import math

import pytest

from plumbing.recipe_loader import load_config
from train.recipe import TrainRecipe
from train.sft import latest_checkpoint, run_training


@pytest.fixture(scope="module")
def sft_adapter(project_root, sft_data_dir, tmp_path_factory):
    recipe = load_config(project_root / "configs/train/smoke.yaml", TrainRecipe,
                         [f"data.dir={sft_data_dir}", "trainer.max_steps=2", "trainer.save_steps=100",
                          "trainer.eval_steps=null"])
    return run_training(recipe, tmp_path_factory.mktemp("sft") / "run") / "final"


def grpo(project_root, data_dir, adapter, *overrides):
    return load_config(project_root / "configs/train/grpo_pocket.yaml", TrainRecipe, [
        "model.spec=tiny:smollm2-135m-instruct", f"data.dir={data_dir}", "data.max_length=2048",
        f"grpo.init_adapter={adapter}", "grpo.num_generations=2", "grpo.max_completion_length=12",
        "trainer.per_device_train_batch_size=2", "trainer.max_steps=3", "trainer.save_steps=2",
        "trainer.learning_rate=1e-3", "trainer.bf16=false", *overrides])


def test_grpo_steps_log_every_term_and_write_an_exportable_adapter(project_root, sft_data_dir, sft_adapter,
                                                                     tmp_path):
    from train.export import export_adapter
    from train.grpo import run_grpo

    stage = run_grpo(grpo(project_root, sft_data_dir, sft_adapter), tmp_path / "run")
    manifest = json.loads((stage / "manifest.json").read_text())
    assert manifest["stage"] == "train" and manifest["method"] == "grpo"
    assert manifest["counts"]["prompts"] == 12 and manifest["inputs"]["init_adapter"]["sha256"]
    metrics = json.loads((stage / "metrics.json").read_text())
    assert metrics["global_step"] == 3 and len(metrics["rewards"]) == 3
    assert set(metrics["reward_terms"]) == {"kernel_accepts", "summary_score", "values_in_context",
                                            "right_kind", "length"}
    assert all(math.isfinite(x) for xs in metrics["reward_terms"].values() for x in xs)
    final = stage / "final"
    assert (final / "adapter_model.safetensors").is_file() and not (final / "ref").exists()
    out = export_adapter(tmp_path / "run")
    assert (out / "adapter_model.safetensors").is_file()
