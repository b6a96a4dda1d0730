"""``python -m train plan``: the JSON it prints, its arithmetic, and its memory estimate against a
measured CPU run of the tiny model.

The measurement: a fresh process loads the recipe's model with its LoRA and runs two
forward/backward/AdamW steps of the project's target-only loss (train/trainer.py: logits at the
last T positions, their cross-entropy and the logged metrics' softmax) on one
(batch x max_length) token batch, and reports its peak RSS (``VmHWM``, reset once the model is loaded:
imports and loading may peak higher) minus the RSS then, plus the weights' bytes. The tiny model is dominated by the logits (49K vocabulary over a 64-wide
model), so this checks the weights + logits terms chiefly. The plan must be within 15% of the
measurement (it was 4-7% under it on 2026-12-03: allocator and autograd buffers it leaves out).
TRL's default fused LM head is Triton's on a GPU and is not measured here (train/plan.py).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from train.__main__ import main

TOLERANCE = 0.15

MEASURE = r'''
import json, resource, sys
import torch
from peft import LoraConfig, get_peft_model
from plumbing.models import load_model, resolve_model
from plumbing.recipe_loader import load_config
from train.recipe import TrainRecipe

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()

def peak_rss():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))

torch.set_num_threads(1)
targets = int(sys.argv[2])
recipe = load_config(sys.argv[1], TrainRecipe, sys.argv[3:])
path = str(resolve_model(recipe.model.spec).path)
model = load_model(path, dtype=recipe.model.dtype)
model = get_peft_model(model, LoraConfig(r=recipe.lora.r, lora_alpha=recipe.lora.alpha,
                       lora_dropout=recipe.lora.dropout, target_modules=recipe.lora.target_modules,
                       task_type="CAUSAL_LM"))
if recipe.model.gradient_checkpointing:
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.enable_input_require_grads()
model.train()
opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
# The peak is measured from here (VmHWM reset): lazy imports and loading happen before it; the
# weights (13 MB for the tiny model) are added back from their byte count.
weights = sum(p.numel() * p.element_size() for p in model.parameters())
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
base = rss()
b, l = recipe.trainer.per_device_train_batch_size, recipe.data.max_length
ids = torch.randint(0, model.config.vocab_size, (b, l), generator=torch.Generator().manual_seed(0))
keep = torch.arange(l - targets - 1, l - 1)
for _ in range(2):
    logits = model(input_ids=ids, logits_to_keep=keep, use_cache=False).logits.float()
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), ids[:, 1:][:, keep].reshape(-1))
    with torch.no_grad():  # the metrics train/trainer.py logs from the kept logits
        logp = logits.detach().log_softmax(-1)
        entropy = -(logp.exp() * logp).sum(-1)
        del logp, entropy
    loss.backward()
    del logits, loss
    opt.step()
    opt.zero_grad(set_to_none=True)
print(json.dumps({"measured_gb": (peak_rss() - base + weights) / 1e9}))
'''


def _plan(capsys, *args) -> dict:
    assert main(["plan", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_fields_and_arithmetic(capsys):
    p = _plan(capsys, "configs/train/gpu_8b.yaml", "--gpus", "8", "--gpu-memory", "80")
    assert isinstance(p["fits"], bool) and p["per_device_memory_gb"] > 0
    assert p["parameters"] == 7_615_616_512  # Qwen2.5-7B-Instruct's parameter count (7.61B)
    m = p["memory_gb"]
    assert p["per_device_memory_gb"] == pytest.approx(sum(m.values()), abs=0.01)
    assert m["weights"] == pytest.approx(7_615_616_512 * 2 / 1e9, abs=0.001)  # bf16, replicated
    assert p["tokens_per_step"] == 1 * 16 * 8 * 32768
    assert p["tokens_per_s"] == pytest.approx(p["tokens_per_step"] / p["step_time_s"], rel=1e-3)
    sharded = _plan(capsys, "configs/train/gpu_8b.yaml", "--gpus", "8", "--gpu-memory", "80", "--sharded")
    assert sharded["memory_gb"]["weights"] == pytest.approx(m["weights"] / 8, abs=0.001)
    # TRL's fused head: two float32 tiles of 4096 positions x 32768 vocabulary entries
    assert m["logits"] == pytest.approx(2 * 4096 * 32768 * 4 / 1e9, abs=0.001)
    target_only = _plan(capsys, "configs/train/gpu_8b.yaml", "trainer.target_only_logits=true",
                        "--gpus", "8", "--gpu-memory", "80", "--target-tokens", "256")
    # the project's loss: 256 targets x 152,064 vocabulary x (2 + 4 + 4 + 12) bytes
    assert target_only["memory_gb"]["logits"] == pytest.approx(256 * 152064 * 22 / 1e9, abs=0.001)
    half = _plan(capsys, "configs/train/gpu_8b.yaml", "--gpus", "8", "--gpu-memory", "80", "--mfu", "0.175")
    assert half["step_time_s"] == pytest.approx(2 * p["step_time_s"], rel=1e-3)
    # Fits or not is the comparison with the memory given.
    assert _plan(capsys, "configs/train/smoke.yaml", "--gpus", "1", "--gpu-memory", "1000")["fits"] is True
    assert _plan(capsys, "configs/train/smoke.yaml", "--gpus", "1", "--gpu-memory", "0.01")["fits"] is False


def test_bad_input_is_one_line(capsys):
    assert main(["plan", "configs/train/smoke.yaml", "--gpus", "0", "--gpu-memory", "80"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err
    assert main(["plan", "configs/train/smoke.yaml", "lora.rr=3", "--gpus", "1", "--gpu-memory", "80"]) == 2
    assert "lora.rr" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("overrides", [
    ["data.max_length=1024"],
    ["data.max_length=1024", "trainer.per_device_train_batch_size=1", "model.gradient_checkpointing=true"],
])
def test_plan_matches_measured_cpu_memory(capsys, project_root, embedded_model, overrides):
    overrides = [*overrides, "trainer.target_only_logits=true"]
    planned = _plan(capsys, "configs/train/smoke.yaml", *overrides, "--target-tokens", "512",
                    "--gpus", "1", "--gpu-memory", "80")
    out = subprocess.run([sys.executable, "-c", MEASURE, "configs/train/smoke.yaml", "512", *overrides],
                         cwd=project_root, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    measured = json.loads(out.stdout.strip().splitlines()[-1])["measured_gb"]
    assert planned["per_device_memory_gb"] == pytest.approx(measured, rel=TOLERANCE), (planned, measured)
