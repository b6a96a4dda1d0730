"""lora.init_adapter: training goes on from an adapter (an on-policy round's SFT start)."""

from __future__ import annotations

import json

import pytest


def _run(project_root, sft_data_dir, out, *overrides):
    from plumbing.recipe_loader import load_config
    from train.recipe import TrainRecipe
    from train.sft import run_training

    recipe = load_config(project_root / "configs/train/smoke.yaml", TrainRecipe,
                         [f"data.dir={sft_data_dir}", "trainer.save_steps=100", "trainer.max_steps=2", *overrides])
    return run_training(recipe, out), recipe


def _lora(folder):
    from safetensors.torch import load_file

    return load_file(str(folder / "adapter_model.safetensors"))


def test_training_goes_on_from_the_given_adapter(project_root, sft_data_dir, tmp_path):
    import torch

    from train.sft import train_fingerprint

    first, _ = _run(project_root, sft_data_dir, tmp_path / "sft")
    start = _lora(first / "final")
    assert any(k.endswith("lora_B.weight") and v.abs().sum() > 0 for k, v in start.items())
    # A step at a learning rate too small to move the weights: the result is the start adapter.
    # (A new adapter would start with lora_B = 0.)
    again, recipe = _run(project_root, sft_data_dir, tmp_path / "round", f"lora.init_adapter={first / 'final'}",
                         "trainer.max_steps=1", "trainer.learning_rate=1e-12", "trainer.warmup_ratio=0")
    went_on = _lora(again / "final")
    assert went_on.keys() == start.keys()
    assert all(torch.allclose(went_on[k], start[k], atol=1e-6) for k in start)
    manifest = json.loads((again / "manifest.json").read_text())
    assert "init_adapter" in manifest["inputs"]
    # The fingerprint follows the start adapter's files, not its path.
    before = train_fingerprint(recipe)["init_adapter"]
    (first / "final" / "adapter_model.safetensors").write_bytes(
        (first / "final" / "adapter_model.safetensors").read_bytes() + b" ")
    assert train_fingerprint(recipe)["init_adapter"] != before


def test_an_init_adapter_that_is_not_one_is_a_one_line_error(project_root, sft_data_dir, tmp_path):
    from plumbing.subcommands import CommandError

    (tmp_path / "empty").mkdir()
    with pytest.raises(CommandError, match="lora.init_adapter: .*no adapter_config.json"):
        _run(project_root, sft_data_dir, tmp_path / "x", f"lora.init_adapter={tmp_path / 'empty'}")
