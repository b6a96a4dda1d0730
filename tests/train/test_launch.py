"""`accelerate launch` with the cpu topology: 2-process data-parallel training of the tiny model."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
def test_two_process_cpu_data_parallel(project_root, sft_data_dir, tmp_path):
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or "accelerate"
    cmd = [accelerate, "launch", "--config_file", "configs/accelerate/cpu.yaml", "--main_process_port", "29517",
           "-m", "train", "configs/train/smoke.yaml", "--out", str(tmp_path / "run"),
           f"data.dir={sft_data_dir}", "trainer.max_steps=2", "trainer.save_steps=100"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    out = subprocess.run(cmd, cwd=project_root, capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    manifest = json.loads((tmp_path / "run" / "train" / "manifest.json").read_text())
    assert manifest["metrics"]["world_size"] == 2
    assert manifest["metrics"]["distributed_type"] == "MULTI_CPU"
    assert manifest["metrics"]["global_step"] == 2
    assert (tmp_path / "run" / "train" / "final" / "adapter_model.safetensors").is_file()
