"""The FSDP2 path rehearsed on 2 CPU processes (configs/accelerate/fsdp2_cpu.yaml).

One FSDP2 run of the tiny model is SIGKILLed after its first checkpoint and resumed; its
exported adapter must equal a single-process run of the same steps: same global batch
(2 processes x 2 samples = 1 process x 2 samples x 2 accumulation steps, so the micro-batches
are the same padded tensors), same sampler seed and order, same LoRA init (seed 0, rank 0's
weights broadcast), dropout 0. What remains is float summation order (a gloo reduce-scatter of
two gradients against accumulation in one process), measured at ~1.5e-7; the tolerance 1e-5 is
far below one optimizer step (lr 1e-3 moves a weight by ~1e-3), so a lost optimizer state, a
skipped or repeated batch or a wrong loss normalisation would fail it (resuming from FSDP's own
checkpoint, whose model part holds no adapter tensors, was 5.5e-3 off). The tiny model here has
head size 32 (2 heads over hidden 64), the smallest vLLM-CPU runs, so vLLM loads the adapter.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

TOLERANCE = 1e-5
STEPS = ["trainer.max_steps=4", "trainer.save_steps=2"]


def _accelerate() -> str:
    return shutil.which("accelerate", path=str(Path(sys.executable).parent)) or "accelerate"


def _free_port() -> int:
    """A port no process listens on now: a fixed one collides with a second test run (or a
    killed run's rendezvous still closing) and a rank fails to join."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch_cmd(data, model, out, logs: Path, *extra):
    # --tee 3 --log_dir: torchrun keeps each rank's stdout and stderr in a file of its own
    # (<logs>/<run>/attempt_0/<rank>/), so a failure can show every rank's side.
    return [_accelerate(), "launch", "--config_file", "configs/accelerate/fsdp2_cpu.yaml",
            "--main_process_port", str(_free_port()), "--tee", "3", "--log_dir", str(logs),
            "-m", "train", "configs/train/smoke.yaml", "--out", str(out),
            f"data.dir={data}", f"model.spec={model}", *STEPS, *extra]


def _rank_logs(logs: Path, launcher: str = "", chars: int = 2500) -> str:
    """The launcher's output and the tail of each rank's stderr and stdout, for an assertion."""
    parts = [f"--- launcher ---\n{launcher[-chars:]}"] if launcher else []
    for f in sorted(logs.rglob("*.log")):
        text = f.read_text(errors="replace")
        if text.strip():
            parts.append(f"--- rank {f.parent.name} {f.name} ---\n{text[-chars:]}")
    return "\n".join(parts) or f"(no rank logs under {logs})"


def _kill_tree(pid: int) -> None:
    import psutil

    root = psutil.Process(pid)
    below = root.children(recursive=True)
    for p in [root, *below]:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(below, timeout=30)  # not the launcher: Popen.wait reaps it


ENV = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}


@pytest.fixture(scope="module")
def runs(project_root, sft_data_dir, embedded_model):
    """(fsdp run, single-process run): the FSDP one killed after checkpoint-2 and resumed."""
    import tempfile

    from plumbing.models import build_tiny_model
    from plumbing.recipe_loader import load_config
    from plumbing.tiny_model import TinyModelConfig
    from train.export import export_adapter
    from train.recipe import TrainRecipe
    from train.sft import run_training

    # Outside pytest's basetemp, which concurrent pytest runs prune (vLLM reads it later).
    root = Path(tempfile.mkdtemp(prefix="dtw-fsdp-cpu-"))
    try:  # removed on failure too
        model = build_tiny_model(root / "tiny32", TinyModelConfig(heads=2, kv_heads=1))
        fsdp = root / "fsdp"

        # 1. FSDP2 over 2 CPU processes, killed (SIGKILL to the launcher and every process under it:
        #    torchrun starts its workers in sessions of their own) once checkpoint-2 is complete
        #    (its trainer_state.json is written last).
        log = root / "first-run.log"
        with log.open("w") as sink:
            proc = subprocess.Popen(_launch_cmd(sft_data_dir, model, fsdp, root / "logs-first"), cwd=project_root,
                                    env=ENV, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
        marker = fsdp / "train" / "checkpoints" / "checkpoint-2" / "trainer_state.json"
        deadline = time.time() + 300
        while not marker.is_file() and proc.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        if proc.poll() is None:
            _kill_tree(proc.pid)
        proc.wait(timeout=60)
        tail = _rank_logs(root / "logs-first", log.read_text())
        assert marker.is_file(), f"no checkpoint-2 before the run ended (rc {proc.returncode}):\n{tail}"
        assert proc.returncode == -signal.SIGKILL, f"the run ended before it could be killed:\n{tail}"
        assert not (fsdp / "train" / "manifest.json").exists()
        # FSDP's sharded checkpoint (one file per rank, its model part empty for LoRA) and beside
        # it the gathered adapter the resume loads back into the shards (train/fsdp.py).
        assert sorted(p.name for p in (marker.parent / "pytorch_model_fsdp_0").glob("*.distcp")) == [
            "__0_0.distcp", "__1_0.distcp"]
        assert (marker.parent / "adapter_model.safetensors").is_file()

        # 2. Resume to the end.
        out = subprocess.run(_launch_cmd(sft_data_dir, model, fsdp, root / "logs-resume", "--resume"),
                             cwd=project_root, env=ENV, capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, _rank_logs(root / "logs-resume", out.stdout + out.stderr)
        export_adapter(fsdp)

        # 3. The same steps in one process: micro-batches of 2, accumulated over 2.
        single = root / "single"
        recipe = load_config(project_root / "configs/train/smoke.yaml", TrainRecipe, [
            f"data.dir={sft_data_dir}", f"model.spec={model}", *STEPS, "trainer.gradient_accumulation_steps=2"])
        run_training(recipe, single)
        export_adapter(single)
        yield fsdp, single
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_killed_and_resumed_fsdp_adapter_equals_single_process(runs):
    import torch
    from safetensors.torch import load_file

    fsdp, single = runs
    metrics = json.loads((fsdp / "train" / "metrics.json").read_text())
    assert metrics["distributed_type"] == "FSDP" and metrics["world_size"] == 2
    assert metrics["resumed_from"] == "checkpoint-2"
    assert metrics["global_step"] == 4
    a = load_file(str(fsdp / "adapter" / "adapter_model.safetensors"))
    b = load_file(str(single / "adapter" / "adapter_model.safetensors"))
    # Key names exactly as a single-process PEFT save writes them (no wrapper prefixes).
    assert list(a) == list(b) and len(a) == 16
    assert not any("_checkpoint_wrapped_module" in k or "_fsdp_wrapped_module" in k or "_orig_mod" in k for k in a)
    diff = max((a[k] - b[k]).abs().max().item() for k in a)
    assert diff <= TOLERANCE, f"max abs difference {diff:.3g} > {TOLERANCE}"
    # The adapter trained (lora_B starts at zero): equality is not of two untouched inits.
    assert max(v.abs().max().item() for k, v in a.items() if "lora_B" in k) > 100 * TOLERANCE
    assert all(torch.isfinite(v).all() for v in a.values())
    single_losses = json.loads((single / "train" / "metrics.json").read_text())["losses"]
    assert metrics["losses"] == pytest.approx(single_losses, abs=1e-4)
    cfg_a = json.loads((fsdp / "adapter" / "adapter_config.json").read_text())
    cfg_b = json.loads((single / "adapter" / "adapter_config.json").read_text())
    # PEFT keeps target_modules as a set: its order differs between processes (hash seeds).
    assert sorted(cfg_a.pop("target_modules")) == sorted(cfg_b.pop("target_modules"))
    assert cfg_a == cfg_b


@pytest.mark.vllm
@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM not installed")
def test_vllm_cpu_serves_the_fsdp_adapter(runs, project_root):
    fsdp, _ = runs
    out = subprocess.run([sys.executable, "-m", "train.vllm_check", str(fsdp), "--json", "--max-tokens", "8",
                          "--memory-utilization", os.environ.get("DTW_VLLM_MEMORY", "0.1")],
                         cwd=project_root, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-4000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["adapter"]["tokens"] > 0
    assert result["adapter"]["first_logprobs"] != result["base"]["first_logprobs"]
