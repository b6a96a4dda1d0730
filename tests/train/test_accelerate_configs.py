"""configs/accelerate/: the FSDP and DeepSpeed blocks name only keys accelerate launch knows
(the schema takes them as free dicts, and accelerate ignores a misspelt one silently), and the
CPU rehearsal runs the GPU config's FSDP settings.

ZeRO-3 is validated here only: accelerate turns DeepSpeed off whenever use_cpu is set, so it
has no CPU rehearsal (see train/README.md).
"""

from __future__ import annotations

import pytest
import yaml

from plumbing.recipe_loader import load_config
from train.accelerate_schema import AccelerateConfig


def _launch_options() -> set[str]:
    from accelerate.commands.launch import launch_command_parser

    return {opt.lstrip("-") for action in launch_command_parser()._actions for opt in action.option_strings}


@pytest.mark.parametrize("name", ["fsdp2.yaml", "fsdp2_cpu.yaml", "zero3.yaml"])
def test_sharding_blocks_name_launch_options(project_root, name):
    path = project_root / "configs" / "accelerate" / name
    cfg = load_config(path, AccelerateConfig)
    block = cfg.fsdp_config if cfg.distributed_type == "FSDP" else cfg.deepspeed_config
    assert block, f"{name}: no sharding block"
    unknown = sorted(set(block) - _launch_options())
    assert not unknown, f"{name}: keys accelerate launch does not know: {unknown}"


def test_zero3_is_stage_3(project_root):
    cfg = load_config(project_root / "configs/accelerate/zero3.yaml", AccelerateConfig)
    assert cfg.distributed_type == "DEEPSPEED" and cfg.deepspeed_config["zero_stage"] == 3


def test_cpu_rehearsal_has_the_gpu_fsdp_settings(project_root):
    gpu = yaml.safe_load((project_root / "configs/accelerate/fsdp2.yaml").read_text())
    cpu = yaml.safe_load((project_root / "configs/accelerate/fsdp2_cpu.yaml").read_text())
    assert cpu["fsdp_config"] == gpu["fsdp_config"]
    assert cpu["distributed_type"] == gpu["distributed_type"] == "FSDP"
    assert cpu["use_cpu"] is True and cpu["num_processes"] == 2 and cpu["mixed_precision"] == "no"
