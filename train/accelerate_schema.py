"""Schema of ``configs/accelerate/*.yaml``: the accelerate config keys this project uses.

accelerate reads these files itself; this schema exists so that a misspelt key fails in
our config test instead of being silently ignored at launch on a GPU machine. The meanings
are accelerate's (``accelerate config --help``); the bounds are what a launch accepts.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from plumbing.recipe_loader import BaseConfig


class AccelerateConfig(BaseConfig):
    compute_environment: Literal["LOCAL_MACHINE"] = Field(
        "LOCAL_MACHINE", description="where the processes run (this project: the local machine)")
    distributed_type: Literal["NO", "MULTI_CPU", "MULTI_GPU", "FSDP", "DEEPSPEED"] = Field(
        description="how processes share the work: NO (one), MULTI_CPU / MULTI_GPU (DDP), FSDP, DEEPSPEED")
    num_processes: int = Field(1, ge=1, description="processes started in all (one per GPU, or CPU workers)")
    num_machines: int = Field(1, ge=1, description="machines taking part")
    machine_rank: int = Field(0, ge=0, description="this machine's index among num_machines")
    main_process_ip: str | None = Field(None, description="address of machine 0 (several machines only)")
    main_process_port: int | None = Field(None, ge=1, le=65535, description="port of the rendezvous on machine 0")
    gpu_ids: str | None = Field(None, description="GPUs used, e.g. 'all' or '0,1'")
    mixed_precision: Literal["no", "fp16", "bf16"] = Field(
        "no", description="autocast precision accelerate sets up (the recipe's trainer.bf16 decides for TRL)")
    use_cpu: bool = Field(False, description="run on the CPU even where a GPU is present")
    rdzv_backend: str | None = Field(None, description="torch.distributed rendezvous backend (static, c10d)")
    same_network: bool | None = Field(None, description="all machines on one network")
    debug: bool = Field(False, description="accelerate's debug mode (checks collective shapes)")
    downcast_bf16: str | None = Field(None, description="TPU only: downcast float32 to bf16")
    main_training_function: str | None = Field(None, description="function a notebook launch calls")
    enable_cpu_affinity: bool | None = Field(None, description="pin each process to the CPUs near its GPU")
    fsdp_config: dict[str, Any] | None = Field(None, description="FSDP settings (fsdp_version, sharding, "
                                               "offload...), as accelerate's fsdp_config")
    deepspeed_config: dict[str, Any] | None = Field(None, description="DeepSpeed settings (zero_stage, "
                                                    "offload...), as accelerate's deepspeed_config")
