"""GRPO after SFT on the tiny model: a real GRPOTrainer run from a tiny adapter standing for
the SFT one, the reference policy it is regularised toward, kill-and-resume, and export."""

from __future__ import annotations

import json
import math

import pytest

from plumbing.recipe_loader import load_config
from train.recipe import TrainRecipe
from train.sft import latest_checkpoint


@pytest.fixture(scope="module")
def sft_adapter(tiny_model_dir, tmp_path_factory):
    """A LoRA adapter on the tiny model with non-zero weights on both sides, so that its
    policy differs from the base model's (as a trained SFT adapter's does)."""
    import torch
    from peft import LoraConfig, get_peft_model

    from plumbing.models import load_model, resolve_model

    torch.manual_seed(0)
    base = load_model(resolve_model("tiny:smollm2-135m-instruct"), dtype="float32")
    model = get_peft_model(base, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"],
                                            init_lora_weights=False, task_type="CAUSAL_LM"))
    out = tmp_path_factory.mktemp("sft") / "final"
    model.save_pretrained(str(out))
    return out


def grpo(project_root, data_dir, adapter, *overrides):
    return load_config(project_root / "configs/train/grpo_pocket.yaml", TrainRecipe, [
        "model.spec=tiny:smollm2-135m-instruct", f"data.dir={data_dir}", "data.max_length=2048",
        f"grpo.init_adapter={adapter}", "grpo.num_generations=2", "grpo.max_completion_length=8",
        "trainer.per_device_train_batch_size=2", "trainer.max_steps=2", "trainer.save_steps=1",
        "trainer.learning_rate=1e-2", "trainer.bf16=false", *overrides])


class _Interrupt(Exception):
    pass


def _tensors(path):
    from safetensors.torch import load_file

    return {k.replace(".ref.", ".").replace(".default.", "."): v for k, v in load_file(str(path)).items()}


def test_grpo_killed_resumes_logs_every_term_keeps_the_sft_reference_and_exports(
        project_root, sft_data_dir, sft_adapter, tmp_path):
    from transformers import TrainerCallback

    from rl.grpo import run_grpo
    from train.export import export_adapter

    class DieAfterCheckpoint(TrainerCallback):
        def on_save(self, args, state, control, **kw):
            if state.global_step == 1:
                raise _Interrupt()

    recipe = grpo(project_root, sft_data_dir, sft_adapter)
    with pytest.raises(_Interrupt):
        run_grpo(recipe, tmp_path / "run", callbacks=[DieAfterCheckpoint()])
    stage = tmp_path / "run" / "train"
    assert not (stage / "manifest.json").exists()
    ckpt = latest_checkpoint(stage / "checkpoints")
    assert ckpt.name == "checkpoint-1" and (ckpt / "optimizer.pt").is_file()
    # The reference the KL term pulls toward is the SFT adapter (TRL's frozen "ref" copy), not
    # the base model (adapters disabled): its weights are the init adapter's.
    init = _tensors(sft_adapter / "adapter_model.safetensors")
    ref, trained = _tensors(ckpt / "ref" / "adapter_model.safetensors"), _tensors(ckpt / "adapter_model.safetensors")
    assert ref.keys() == init.keys() == trained.keys()
    assert all((ref[k] == init[k]).all() for k in init) and any(v.abs().sum() > 0 for v in ref.values())

    run_grpo(recipe, tmp_path / "run", resume=True)
    manifest = json.loads((stage / "manifest.json").read_text())
    assert manifest["stage"] == "train" and manifest["method"] == "grpo"
    assert manifest["counts"]["prompts"] == 12 and manifest["inputs"]["init_adapter"]["sha256"]
    metrics = json.loads((stage / "metrics.json").read_text())
    assert metrics["global_step"] == 2 and metrics["resumed_from"] == "checkpoint-1"
    assert len(metrics["rewards"]) == 2  # the log history carries the killed run's steps
    assert set(metrics["reward_terms"]) == {"kernel_accepts", "summary_score", "values_in_context",
                                            "right_kind", "length"}
    assert all(math.isfinite(x) for xs in metrics["reward_terms"].values() for x in xs)
    final = stage / "final"
    assert (final / "adapter_model.safetensors").is_file() and not (final / "ref").exists()
    # Decided like a training: the same inputs skip, other inputs are refused with the change named.
    from rl.grpo import GrpoError

    logs: list[str] = []
    run_grpo(recipe, tmp_path / "run", log=logs.append)
    assert logs and logs[0].startswith("[skip] grpo") and manifest == json.loads((stage / "manifest.json").read_text())
    changed = recipe.model_copy(update={"trainer": recipe.trainer.model_copy(update={"learning_rate": 1e-3})})
    with pytest.raises(GrpoError, match="learning_rate"):
        run_grpo(changed, tmp_path / "run")
    assert manifest["fingerprint_sha256"]
    out = export_adapter(tmp_path / "run")
    assert (out / "adapter_model.safetensors").is_file()


def test_a_missing_init_adapter_is_a_one_line_error(project_root, sft_data_dir, tmp_path, capsys):
    from rl.__main__ import main

    rc = main([str(project_root / "configs/train/grpo_pocket.yaml"), "--out", str(tmp_path / "run"),
               "model.spec=tiny:smollm2-135m-instruct", f"data.dir={sft_data_dir}",
               f"grpo.init_adapter={tmp_path / 'nowhere'}"])
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: grpo.init_adapter") and "no adapter_config.json" in err and "\n" not in err


def test_dtw_train_refuses_a_grpo_recipe_and_dtw_grpo_an_sft_one(project_root, sft_data_dir, tmp_path, capsys):
    from pipeline.dtw import main

    grpo_recipe = str(project_root / "configs/train/grpo_pocket.yaml")
    assert main(["train", grpo_recipe, "--out", str(tmp_path / "a"), f"data.dir={sft_data_dir}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "dtw grpo " in err and "\n" not in err
    assert not (tmp_path / "a").exists()  # refused before anything is written
    sft_recipe = str(project_root / "configs/train/demo.yaml")
    assert main(["grpo", sft_recipe, "--out", str(tmp_path / "b")]) == 2
    assert "no grpo: section" in capsys.readouterr().err
