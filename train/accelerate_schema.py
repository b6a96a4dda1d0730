"""Schema of ``configs/accelerate/*.yaml``: the accelerate config keys this project uses.

accelerate reads these files itself; this schema exists so that a misspelt key fails in
our config test instead of being silently ignored at launch on a GPU machine.
"""

from __future__ import annotations

from typing import Any, Literal

from plumbing.recipe_loader import BaseConfig


class AccelerateConfig(BaseConfig):
    compute_environment: Literal["LOCAL_MACHINE"] = "LOCAL_MACHINE"
    distributed_type: Literal["NO", "MULTI_CPU", "MULTI_GPU", "FSDP", "DEEPSPEED"]
    num_processes: int = 1
    num_machines: int = 1
    machine_rank: int = 0
    main_process_ip: str | None = None
    main_process_port: int | None = None
    gpu_ids: str | None = None
    mixed_precision: Literal["no", "fp16", "bf16"] = "no"
    use_cpu: bool = False
    rdzv_backend: str | None = None
    same_network: bool | None = None
    debug: bool = False
    downcast_bf16: str | None = None
    main_training_function: str | None = None
    enable_cpu_affinity: bool | None = None
    fsdp_config: dict[str, Any] | None = None
    deepspeed_config: dict[str, Any] | None = None
