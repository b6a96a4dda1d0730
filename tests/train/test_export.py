"""Export: PEFT layout for vLLM, offline vLLM LoRA checks, serving prompt set, merge."""

from __future__ import annotations

import json

import pytest

from plumbing.recipe_loader import load_config
from train.export import ExportError, check_vllm_lora, export_adapter
from train.recipe import TrainRecipe
from train.sft import run_training


@pytest.fixture(scope="module")
def trained_run(project_root, sft_data_dir, tmp_path_factory):
    recipe = load_config(project_root / "configs/train/smoke.yaml", TrainRecipe,
                         [f"data.dir={sft_data_dir}", "trainer.max_steps=2", "trainer.save_steps=100"])
    run = tmp_path_factory.mktemp("exp") / "run"
    run_training(recipe, run)
    return run


def test_export_writes_servable_adapter(trained_run, capsys):
    out = export_adapter(trained_run, merge=True)
    for name in ("adapter_config.json", "adapter_model.safetensors", "chat_template.jinja", "tools.json",
                 "README.md", "manifest.json", "serving/manifest.json", "serving/README.md", "merged/model.safetensors"):
        assert (out / name).is_file(), name
    manifest = json.loads((out / "manifest.json").read_text())
    info = manifest["adapter"]
    assert manifest["doctrine"]["version"] == "v1" and len(manifest["doctrine"]["sha256"]) == 64
    assert info["prompt_mode"] == "distilled" and info["chat_template_source"] == "project"
    assert info["base_model_id"] == "tiny-smollm2-135m-instruct"
    assert info["data_manifest_sha256"] and info["metrics"]["global_step"] == 2
    assert manifest["inputs"]["train"]["sha256"]
    assert "--max-lora-rank 8" in info["serve_command"] and "--enable-lora" in info["serve_command"]
    assert "python -m vllm.entrypoints.openai.api_server" in capsys.readouterr().out
    assert "--tool-call-parser hermes" in info["serve_command"] and f"={out.resolve()}" in info["serve_command"]
    proxy = json.loads((out / "billion-context.json").read_text())["compress"]
    assert proxy["acknowledgePromptsRisk"] is True and all(proxy["prompts"].values())
    serving = json.loads((out / "serving/manifest.json").read_text())
    assert serving["acknowledgeRisk"] is True
    names = [t["function"]["name"] for t in json.loads((out / "tools.json").read_text())]
    assert names[:3] == ["compress", "decompress", "search_context"]


def test_merged_weights_match_base_plus_adapter(trained_run):
    import torch
    from peft import PeftModel

    from plumbing.models import load_model

    out = export_adapter(trained_run, merge=True)
    train_manifest = json.loads((trained_run / "train" / "manifest.json").read_text())
    base = load_model(train_manifest["model"]["path"], dtype="float32")
    with_adapter = PeftModel.from_pretrained(base, str(out)).eval()
    merged = load_model(str(out / "merged"), dtype="float32").eval()
    ids = torch.tensor([[1, 200, 300, 400, 500]])
    with torch.no_grad():
        a, b = with_adapter(ids).logits, merged(ids).logits
    assert torch.allclose(a, b, atol=1e-4)


def test_prompt_set_renders_the_training_prompts(trained_run):
    from doctrine.render.prompts import EXAMPLE_VIEWS, render_nudge, render_system_prompt
    from doctrine.spec import load_doctrine, resolve_doctrine

    out = export_adapter(trained_run)
    served = resolve_doctrine("v1", prompt_set=out / "serving", acknowledge_risk=True)
    doc = load_doctrine("v1")
    assert render_system_prompt(served, "doctrine") == render_system_prompt(doc, "distilled")
    for view in EXAMPLE_VIEWS.values():
        assert render_nudge(view, served, "doctrine") == render_nudge(view, doc, "distilled")


@pytest.mark.parametrize("change,message", [
    ({"r": 4}, "not one vLLM supports"),
    ({"r": 32}, "exceeds export.max_lora_rank 16"),
    ({"use_dora": True}, "DoRA"),
    ({"modules_to_save": ["lm_head"]}, "modules_to_save"),
    ({"target_modules": ["q_proj", "embed_tokens"]}, "not linear layers"),
])
def test_vllm_constraints_are_enforced(trained_run, change, message):
    train_manifest = json.loads((trained_run / "train" / "manifest.json").read_text())
    from pathlib import Path

    cfg = {"r": 8, "target_modules": ["q_proj", "v_proj"], **change}
    problems = check_vllm_lora(cfg, 16, Path(train_manifest["model"]["path"]))
    assert any(message in p for p in problems), problems
    assert check_vllm_lora({"r": 8, "target_modules": ["q_proj", "down_proj"]}, 16,
                           Path(train_manifest["model"]["path"])) == []


def test_export_refuses_an_unservable_adapter(trained_run, tmp_path):
    import shutil

    run = tmp_path / "bad"
    shutil.copytree(trained_run, run)
    cfg_path = run / "train" / "final" / "adapter_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["use_dora"] = True
    cfg_path.write_text(json.dumps(cfg))
    manifest = json.loads((run / "train" / "manifest.json").read_text())
    manifest["final_adapter"] = str(run / "train" / "final")
    (run / "train" / "manifest.json").write_text(json.dumps(manifest))
    shutil.rmtree(run / "adapter", ignore_errors=True)
    with pytest.raises(ExportError, match="DoRA"):
        export_adapter(run)
    assert not (run / "adapter").exists()  # checks run before anything is written
