"""FSDP2 for LoRA: adapter saves and resumes that work, and the same path on CPU processes.

**CPU processes.** accelerate shards a model only on an accelerator: launched with ``distributed_type: FSDP`` and
``use_cpu: true`` (configs/accelerate/fsdp2_cpu.yaml) every process comes up ``MULTI_CPU`` over
gloo and the ``FSDP_*`` settings the launcher exported are silently dropped, so the run would be
plain data parallel. torch's ``fully_shard`` itself runs on CPU tensors over gloo, so here the
accelerator state is switched to FSDP with the plugin built from those same settings: from then
on model preparation, sharded checkpoints, resume and the final save go through accelerate's
FSDP2 code, as on a GPU machine.

**LoRA under FSDP.** ``Trainer.save_model`` writes no adapter under ``SHARDED_STATE_DICT``, and
the sharded checkpoint's model part is *empty*: accelerate saves it through PEFT, which picks the
adapter's tensors by module names (``..._checkpoint_wrapped_module.self_attn.q_proj.lora_A`` once
FSDP's activation checkpointing wraps the layers) that the state dict's keys (wrapper prefix
removed) never match; a resume then continues from the initial adapter with the restored optimizer
state. So the project's trainer saves the adapter itself at every checkpoint and at the end
(:func:`save_sharded_adapter`: gathered, PEFT layout, the key names of a single-process save) and
loads it back into the shards on resume (:func:`load_sharded_adapter`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["clean_name", "fsdp_activation_checkpointing", "fsdp_requested", "load_sharded_adapter",
           "save_sharded_adapter", "shard_on_cpu"]


def _flag(name: str) -> bool:
    return os.environ.get(name, "false").strip().lower() == "true"


def fsdp_requested() -> bool:
    """The process was started by ``accelerate launch`` with an FSDP config."""
    return _flag("ACCELERATE_USE_FSDP")


def fsdp_activation_checkpointing() -> bool:
    """FSDP checkpoints every wrapped decoder layer itself (``fsdp_activation_checkpointing``);
    the Trainer refuses ``gradient_checkpointing`` on top of it, so the recipe's setting is
    carried out by FSDP instead."""
    return fsdp_requested() and _flag("FSDP_ACTIVATION_CHECKPOINTING")


def shard_on_cpu(accelerator) -> bool:
    """Turn a CPU multi-process accelerator into an FSDP one when FSDP was asked for.

    Returns True when it switched. Must run before ``accelerator.prepare`` (the Trainer's
    ``create_accelerator_and_postprocess`` is the place).
    """
    import torch
    from accelerate.state import PartialState
    from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin

    state = accelerator.state
    if not fsdp_requested() or torch.cuda.is_available() or state.distributed_type != DistributedType.MULTI_CPU:
        return False
    plugin = FullyShardedDataParallelPlugin()  # the FSDP_* settings accelerate launch exported
    if plugin.fsdp_version != 2:
        raise RuntimeError("FSDP on CPU processes is rehearsed with FSDP2 only (fsdp_version: 2)")
    if state.mixed_precision != "no":
        plugin.set_mixed_precision(state.mixed_precision)
    state.fsdp_plugin = plugin
    state.distributed_type = DistributedType.FSDP
    PartialState._shared_state["distributed_type"] = DistributedType.FSDP
    return True


# Prefixes that wrappers put into parameter names: FSDP1's flat-parameter module, the
# activation-checkpoint wrapper (FSDP's and accelerate's), torch.compile.
WRAPPER_PREFIXES = ("_fsdp_wrapped_module.", "_checkpoint_wrapped_module.", "_orig_mod.")


def clean_name(name: str) -> str:
    """A parameter name as the unwrapped PEFT model has it (``module.`` of DDP dropped too)."""
    for prefix in WRAPPER_PREFIXES:
        name = name.replace(prefix, "")
    return name[len("module."):] if name.startswith("module.") else name


def gathered_trainable_state(model) -> dict:
    """The full (unsharded) trainable tensors of a possibly sharded model, on CPU, under the
    names the wrapped model gives them.

    A collective under FSDP2: every process must call it (each parameter is a DTensor whose
    shards are all-gathered); only the trainable ones are gathered, not the frozen base.
    """
    from torch.distributed.tensor import DTensor

    out = {}
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        full = p.full_tensor() if isinstance(p, DTensor) else p
        out[name] = full.detach().to("cpu").clone()
    return out


def save_sharded_adapter(trainer, out_dir: str) -> None:
    """Write the PEFT adapter of an FSDP run (``adapter_config.json`` +
    ``adapter_model.safetensors``) with the key names a single-process run writes.

    A collective: every process calls it (the Trainer's ``save_model`` does). PEFT picks its
    tensors by the wrapped model's module names (``..._checkpoint_wrapped_module.self_attn...``
    under FSDP activation checkpointing), so it is given the gathered tensors under those names
    and the file it writes is then rewritten with the wrapper prefixes removed.
    """
    from safetensors.torch import load_file, save_file

    state = gathered_trainable_state(trainer.model)
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    if trainer.accelerator.is_main_process:
        peft_model = trainer.accelerator.unwrap_model(trainer.model)
        peft_model.save_pretrained(out_dir, state_dict=state, safe_serialization=True)
        weights = Path(out_dir) / "adapter_model.safetensors"
        saved = load_file(str(weights))
        if not saved:
            raise RuntimeError(f"{weights}: PEFT selected no adapter tensors from the sharded model")
        tmp = weights.with_name(".tmp-" + weights.name)
        save_file({clean_name(k): v.contiguous() for k, v in saved.items()}, str(tmp), metadata={"format": "pt"})
        tmp.replace(weights)
    trainer.accelerator.wait_for_everyone()


def _adapter_key(param_name: str, adapter: str) -> str:
    """The key PEFT saves a trainable parameter under (wrappers and adapter name removed)."""
    return re.sub(rf"\.(lora_[A-Za-z_]+)\.{re.escape(adapter)}\.", r".\1.", clean_name(param_name))


def load_sharded_adapter(model, checkpoint: str) -> int:
    """Copy ``checkpoint/adapter_model.safetensors`` into the (sharded) trainable parameters of
    ``model``; every process calls it. Returns the number of tensors loaded; a missing file or
    tensor is an error (resuming from the initial adapter would pass silently otherwise)."""
    import torch
    from safetensors.torch import load_file
    from torch.distributed.tensor import DTensor, distribute_tensor

    weights = Path(checkpoint) / "adapter_model.safetensors"
    if not weights.is_file():
        raise RuntimeError(f"{weights}: missing; this FSDP checkpoint holds no adapter to resume from "
                           "(written before the project saved adapters in FSDP checkpoints): resume from "
                           "another checkpoint or train into a new --out")
    saved = load_file(str(weights))
    adapter = getattr(model, "active_adapter", "default")
    adapter = adapter if isinstance(adapter, str) else adapter[0]
    n = 0
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not p.requires_grad:
                continue
            key = _adapter_key(name, adapter)
            if key not in saved:
                raise RuntimeError(f"{weights}: no tensor {key} for the trainable parameter {name}")
            full = saved[key].to(dtype=p.dtype)
            if isinstance(p, DTensor):
                p.to_local().copy_(distribute_tensor(full, p.device_mesh, p.placements).to_local())
            else:
                p.copy_(full.to(p.device))
            n += 1
    return n
