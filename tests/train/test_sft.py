"""LoRA SFT on the tiny model: a real TRL run, its manifest, and kill-and-resume."""

from __future__ import annotations

import json
import math

import pytest

from plumbing.recipe_loader import load_config
from train.recipe import TrainRecipe
from train.sft import latest_checkpoint, run_training


def smoke(project_root, data_dir, *overrides):
    return load_config(project_root / "configs/train/smoke.yaml", TrainRecipe,
                       [f"data.dir={data_dir}", *overrides])


def test_smoke_training_writes_adapter_and_manifest(project_root, sft_data_dir, tmp_path):
    stage = run_training(smoke(project_root, sft_data_dir, "trainer.eval_steps=3"), tmp_path / "run")
    manifest = json.loads((stage / "manifest.json").read_text())
    assert manifest["stage"] == "train"
    assert manifest["doctrine"]["version"] == "v1"
    assert manifest["inputs"]["data"]["sha256"]
    assert manifest["chat_template_source"] == "project"
    assert manifest["counts"]["train_samples"] == 12 and manifest["counts"]["train_rejects"] == {}
    assert 0 < manifest["counts"]["target_tokens"] < manifest["counts"]["train_tokens"]
    metrics = json.loads((stage / "metrics.json").read_text())
    assert metrics["global_step"] == 6
    assert all(math.isfinite(x) for x in metrics["losses"]) and len(metrics["losses"]) == 6
    assert any("eval_loss" in h for h in metrics["log_history"])
    final = stage / "final"
    assert (final / "adapter_config.json").is_file() and (final / "adapter_model.safetensors").is_file()
    assert json.loads((final / "adapter_config.json").read_text())["r"] == 8
    # A full checkpoint (optimizer, scheduler, RNG) exists for resume.
    ckpt = latest_checkpoint(stage / "checkpoints")
    assert ckpt is not None and (ckpt / "optimizer.pt").is_file() and (ckpt / "scheduler.pt").is_file()
    assert list(ckpt.glob("rng_state*.pth"))
    # A second call of the same recipe with the manifest present is a skip, not a retrain.
    mtime = (stage / "manifest.json").stat().st_mtime
    run_training(smoke(project_root, sft_data_dir, "trainer.eval_steps=3"), tmp_path / "run")
    assert (stage / "manifest.json").stat().st_mtime == mtime


def test_learning_happens(project_root, sft_data_dir, tmp_path):
    """Twelve steps at a high learning rate on a dozen samples: the loss must fall."""
    stage = run_training(smoke(project_root, sft_data_dir, "trainer.max_steps=12",
                               "trainer.learning_rate=5e-3", "trainer.save_steps=100"), tmp_path / "run")
    losses = json.loads((stage / "metrics.json").read_text())["losses"]
    assert sum(losses[-3:]) / 3 < sum(losses[:3]) / 3


class _Interrupt(Exception):
    pass


def test_killed_run_resumes_to_planned_steps_with_matching_loss(project_root, sft_data_dir, tmp_path):
    from transformers import TrainerCallback

    class DieAfterCheckpoint(TrainerCallback):
        """Stands in for a kill: the process dies right after checkpoint-3 is on disk."""

        def on_save(self, args, state, control, **kw):
            if state.global_step == 3:
                raise _Interrupt()

    recipe = smoke(project_root, sft_data_dir)
    with pytest.raises(_Interrupt):
        run_training(recipe, tmp_path / "killed", callbacks=[DieAfterCheckpoint()])
    stage = tmp_path / "killed" / "train"
    assert not (stage / "manifest.json").exists()  # incomplete stage
    assert latest_checkpoint(stage / "checkpoints").name == "checkpoint-3"
    run_training(recipe, tmp_path / "killed", resume=True)
    resumed = json.loads((stage / "metrics.json").read_text())
    assert resumed["global_step"] == 6 and resumed["resumed_from"] == "checkpoint-3"
    run_training(recipe, tmp_path / "straight")
    straight = json.loads((tmp_path / "straight" / "train" / "metrics.json").read_text())
    # Steps 4-6 of the resumed run see the same batches, RNG and optimizer state.
    for a, b in zip(resumed["losses"][-3:], straight["losses"][-3:], strict=True):
        assert a == pytest.approx(b, rel=1e-3, abs=1e-4)
    # train_loss is the mean over every logged step of the run, the resumed one included.
    assert len(resumed["losses"]) == len(straight["losses"]) == 6
    assert resumed["train_loss"] == pytest.approx(sum(resumed["losses"]) / 6)
    assert resumed["train_loss"] == pytest.approx(straight["train_loss"], rel=1e-3, abs=1e-4)


def test_missing_data_stage_is_a_clear_error(project_root, tmp_path):
    from train.data import DataError

    with pytest.raises(DataError, match="no such data folder"):
        run_training(smoke(project_root, tmp_path / "nope"), tmp_path / "run")
    (tmp_path / "half").mkdir()
    with pytest.raises(DataError, match="no complete manifest.json"):
        run_training(smoke(project_root, tmp_path / "half"), tmp_path / "run")


@pytest.mark.parametrize("override, key", [
    ("trainer.gradient_accumulation_steps=0", "trainer.gradient_accumulation_steps"),
    ("data.max_length=-1", "data.max_length"),
    ("trainer.per_device_train_batch_size=0", "trainer.per_device_train_batch_size"),
    ("trainer.max_steps=0", "trainer.max_steps"),
    ("trainer.save_steps=0", "trainer.save_steps"),
    ("trainer.bf16=sometimes", "trainer.bf16"),
    ("model.spec=", "model.spec: .*empty model spec"),
    ("model.spec=embedded:nope", "model.spec: .*unknown embedded model"),
])
def test_impossible_trainer_values_fail_at_config_validation(project_root, tmp_path, override, key):
    from plumbing.recipe_loader import ConfigError

    with pytest.raises(ConfigError, match=key):
        smoke(project_root, tmp_path, override)


def test_bf16_auto_follows_native_support(monkeypatch, project_root, tmp_path):
    """``bf16: auto`` turns autocast on only where bf16 matmuls are native (emulated bf16 on
    an AVX2-only CPU made a demo step ~20x slower than float32)."""
    import train.sft as sft

    assert smoke(project_root, tmp_path, "trainer.bf16=auto").trainer.bf16 == "auto"
    monkeypatch.setattr(sft, "bf16_support", lambda: "none")
    assert sft.resolve_bf16("auto") is False
    assert sft.resolve_bf16(True) is True  # an explicit setting is kept as given
    monkeypatch.setattr(sft, "bf16_support", lambda: "cpu-native")
    assert sft.resolve_bf16("auto") is True
    assert sft.resolve_bf16(False) is False
