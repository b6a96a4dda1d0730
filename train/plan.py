"""``python -m train plan RECIPE --gpus N --gpu-memory GB``: what a run needs before a GPU is rented.

Per device: the base weights at the recipe's dtype (divided over the GPUs with ``--sharded``:
FSDP / ZeRO-3; replicated under DDP), the LoRA parameters with their gradients and AdamW moments
(fp32: PEFT keeps adapters in float32 over a bf16 base; 16 bytes a parameter, sharded too),
activations at the recipe's ``data.max_length`` (with gradient checkpointing: each decoder layer's
input plus one layer's activations being recomputed; without: every layer's), and the logits
the loss materialises: by default TRL's fused LM head, which projects in tiles and never holds
the full logits (two float32 tiles); with ``trainer.target_only_logits`` (or
``data.shared_prefix``) the project's loss, which holds the target positions' logits over the
whole vocabulary (the logits, a float32 copy, the loss's and the logged metrics' buffers). Then tokens per optimizer step and the step time and tokens/s at a
stated MFU. An estimate, checked on the tiny model against measured CPU memory
(tests/train/test_plan.py) for the target-only path; TRL's fused head is Triton's on a GPU and
cannot be measured here (its torch fallback on the CPU holds several full tiles instead: 2.4 GB
at 2 x 1024 tokens of the tiny model against the kernel's 0.54). Allocator slack is not in it.

Model dimensions come from the model's ``config.json`` (local, embedded and tiny models) or,
for the hub models the GPU recipes name (there is no hub here), from :data:`KNOWN_CONFIGS`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from .recipe import TrainRecipe

__all__ = ["KNOWN_CONFIGS", "ModelDims", "PlanError", "model_dims", "plan"]

# The fields of the hub models' config.json that the plan reads, copied from
# https://huggingface.co/Qwen/Qwen2.5-7B-Instruct/blob/main/config.json and
# https://huggingface.co/Qwen/Qwen2.5-32B-Instruct/blob/main/config.json (2026-12; the pinned
# revision of gpu_8b.yaml has the same dimensions).
KNOWN_CONFIGS: dict[str, dict[str, Any]] = {
    "Qwen/Qwen2.5-7B-Instruct": {
        "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28, "num_attention_heads": 28,
        "num_key_value_heads": 4, "vocab_size": 152064, "tie_word_embeddings": False, "qkv_bias": True},
    "Qwen/Qwen2.5-32B-Instruct": {
        "hidden_size": 5120, "intermediate_size": 27648, "num_hidden_layers": 64, "num_attention_heads": 40,
        "num_key_value_heads": 8, "vocab_size": 152064, "tie_word_embeddings": False, "qkv_bias": True},
}

# TRL's fused LM head tiles (trl/kernels/chunked_logprob.py TOKEN_CHUNK_SIZE and
# trl/trainer/utils.py _CHUNKED_LOGPROB_CHUNK_SIZE, TRL 1.16).
TRL_TOKEN_TILE, TRL_VOCAB_TILE = 4096, 32768
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "auto": 2}
GB = 1e9


class PlanError(ValueError):
    pass


class ModelDims:
    def __init__(self, cfg: dict[str, Any], source: str):
        try:
            self.hidden = int(cfg["hidden_size"])
            self.intermediate = int(cfg["intermediate_size"])
            self.layers = int(cfg["num_hidden_layers"])
            self.heads = int(cfg["num_attention_heads"])
            self.vocab = int(cfg["vocab_size"])
        except (KeyError, TypeError, ValueError) as exc:
            raise PlanError(f"{source}: config lacks {exc} (a decoder-only transformer config is needed)") from None
        self.kv_heads = int(cfg.get("num_key_value_heads") or self.heads)
        self.head_dim = int(cfg.get("head_dim") or self.hidden // self.heads)
        self.tied = bool(cfg.get("tie_word_embeddings", False))
        self.qkv_bias = bool(cfg.get("qkv_bias", cfg.get("attention_bias", False)))
        self.source = source

    # in/out features of each linear a LoRA target can name
    def linear_shapes(self) -> dict[str, tuple[int, int]]:
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        h, i = self.hidden, self.intermediate
        return {"q_proj": (h, q), "k_proj": (h, kv), "v_proj": (h, kv), "o_proj": (q, h),
                "gate_proj": (h, i), "up_proj": (h, i), "down_proj": (i, h)}

    def layer_params(self) -> int:
        n = sum(a * b for a, b in self.linear_shapes().values()) + 2 * self.hidden
        if self.qkv_bias:
            n += (self.heads + 2 * self.kv_heads) * self.head_dim
        return n

    def head_params(self) -> int:
        return self.vocab * self.hidden

    def params(self) -> int:
        embed = self.vocab * self.hidden
        return embed + (0 if self.tied else self.head_params()) + self.layers * self.layer_params() + self.hidden


def model_dims(spec: str) -> ModelDims:
    from plumbing.models import ModelSpecError, parse_spec, resolve_model

    kind, name, _rev = parse_spec(spec)
    if kind == "hub" and name in KNOWN_CONFIGS:
        return ModelDims(KNOWN_CONFIGS[name], f"built-in config of {name}")
    try:
        path = resolve_model(spec).path
    except ModelSpecError as exc:
        known = ", ".join(KNOWN_CONFIGS)
        raise PlanError(f"{spec}: {exc} (built-in configs: {known}; or name a local folder with config.json)") from None
    cfg_path = Path(path) / "config.json"
    return ModelDims(json.loads(cfg_path.read_text()), str(cfg_path))


def _lora_params(dims: ModelDims, recipe: TrainRecipe) -> int:
    shapes = dims.linear_shapes()
    targets = list(shapes) if recipe.lora.target_modules == "all-linear" else recipe.lora.target_modules
    unknown = [t for t in targets if t not in shapes]
    if unknown:
        raise PlanError(f"lora.target_modules {unknown}: the plan knows {', '.join(shapes)}")
    per_layer = sum(recipe.lora.r * (shapes[t][0] + shapes[t][1]) for t in targets)
    layers = len(recipe.lora.layers) if recipe.lora.layers else dims.layers
    return per_layer * layers


def _activation_bytes(dims: ModelDims, recipe: TrainRecipe, tokens: int, act_bytes: int) -> dict[str, float]:
    """Saved activations for one micro-batch of ``tokens`` tokens."""
    h, i = dims.hidden, dims.intermediate
    kv = dims.kv_heads * dims.head_dim
    q = dims.heads * dims.head_dim
    # Per token and layer, the tensors autograd keeps: two norm inputs and outputs (4h), q, k, v
    # (q + 2kv), the attention output (q) and its softmax statistics (sdpa / flash: no L x L),
    # the MLP's gate, up, activation and product (4i).
    per_layer = (4 * h + 2 * q + 2 * kv + 4 * i) * act_bytes
    if recipe.lora.dropout > 0:  # LoRA dropout copies its input per adapted linear (+ a 1-byte mask)
        shapes = dims.linear_shapes()
        targets = list(shapes) if recipe.lora.target_modules == "all-linear" else recipe.lora.target_modules
        per_layer += sum(shapes[t][0] for t in targets) * (act_bytes + 1)
    if recipe.model.gradient_checkpointing:
        kept = dims.layers * h * act_bytes + per_layer  # layer inputs + the layer being recomputed
    else:
        kept = dims.layers * per_layer
    return {"activations": tokens * kept, "per_layer_per_token": per_layer}


def plan(recipe: TrainRecipe, *, gpus: int, gpu_memory_gb: float, gpu_tflops: float = 989.0,
         mfu: float = 0.35, sharded: bool = False, target_tokens: int = 256) -> dict[str, Any]:
    if gpus < 1 or gpu_memory_gb <= 0 or gpu_tflops <= 0 or not 0 < mfu <= 1 or target_tokens < 1:
        raise PlanError("--gpus >= 1, --gpu-memory > 0, --gpu-flops > 0, 0 < --mfu <= 1 and --target-tokens >= 1")
    dims = model_dims(recipe.model.spec)
    t = recipe.trainer
    w_bytes = DTYPE_BYTES[recipe.model.dtype]
    # Activations are stored at the compute dtype: bf16 under autocast or a bf16 model.
    act_bytes = 2 if (t.bf16 is True or w_bytes == 2) else 4
    shard = gpus if sharded else 1
    length = recipe.data.max_length
    batch = t.per_device_train_batch_size
    micro_tokens = batch * length
    targets = min(target_tokens, length)

    params = dims.params()
    lora = _lora_params(dims, recipe)
    weights = params * w_bytes / shard
    lora_state = lora * 16 / shard  # fp32 weight + grad + AdamW exp_avg + exp_avg_sq
    act = _activation_bytes(dims, recipe, micro_tokens, act_bytes)
    if t.target_only_logits or recipe.data.shared_prefix:
        # train/trainer.py at its forward peak, per (target position, vocabulary entry): the
        # model's logits (compute dtype), their float32 copy (none when that is float32), the
        # cross-entropy's saved log-softmax (4) and the metrics' log-softmax, exp and product (12)
        logits = batch * targets * dims.vocab * (act_bytes + (4 if act_bytes != 4 else 0) + 4 + 12)
    else:
        # TRL's fused LM head: the head runs in tiles of TRL_TOKEN_TILE positions x TRL_VOCAB_TILE
        # vocabulary entries (one float32 buffer in the forward, one in the backward); no full logits
        logits = 2 * min(micro_tokens, TRL_TOKEN_TILE) * min(dims.vocab, TRL_VOCAB_TILE) * 4
    total = weights + lora_state + act["activations"] + logits

    # Model FLOPs a token: forward 2P, backward through the activations 2P (the frozen base needs
    # no weight gradients; LoRA's are negligible), causal attention 2 * 2 * L/2 * q per layer in
    # the forward and twice that in the backward. Recomputation is not useful work: it lowers MFU.
    body = params - dims.head_params() - dims.vocab * dims.hidden * (0 if dims.tied else 1)
    q = dims.heads * dims.head_dim
    attn = dims.layers * 2 * length * q * 3
    head_share = (targets / length) if t.target_only_logits else 1.0
    flops_token = 4 * body + attn + 4 * dims.head_params() * head_share
    tokens_step = micro_tokens * t.gradient_accumulation_steps * gpus
    step_s = tokens_step * flops_token / (gpus * gpu_tflops * 1e12 * mfu)
    return {
        "recipe_model": recipe.model.spec,
        "model_source": dims.source,
        "parameters": params,
        "lora_parameters": lora,
        "gpus": gpus,
        "sharded": sharded,
        "gpu_memory_gb": gpu_memory_gb,
        "per_device_memory_gb": round(total / GB, 3),
        "memory_gb": {"weights": round(weights / GB, 3), "lora_params_grads_adamw": round(lora_state / GB, 3),
                      "activations": round(act["activations"] / GB, 3), "logits": round(logits / GB, 3)},
        "fits": total <= gpu_memory_gb * GB,
        "headroom_gb": round(gpu_memory_gb - total / GB, 3),
        "max_length": length,
        "per_device_batch": batch,
        "gradient_accumulation_steps": t.gradient_accumulation_steps,
        "gradient_checkpointing": recipe.model.gradient_checkpointing,
        "target_only_logits": t.target_only_logits,
        "assumed_target_tokens_per_sample": targets,
        "tokens_per_step": tokens_step,
        "target_tokens_per_step": batch * t.gradient_accumulation_steps * gpus * targets,
        "model_flops_per_token": flops_token,
        "mfu": mfu,
        "gpu_tflops": gpu_tflops,
        "step_time_s": round(step_s, 3),
        "tokens_per_s": round(tokens_step / step_s, 1),
        "target_tokens_per_s": round(batch * t.gradient_accumulation_steps * gpus * targets / step_s, 1),
    }


def format_plan(p: dict[str, Any]) -> str:
    m = p["memory_gb"]
    lines = [
        f"model      {p['recipe_model']}: {p['parameters'] / 1e9:.2f}B parameters, LoRA {p['lora_parameters'] / 1e6:.1f}M "
        f"({p['model_source']})",
        f"topology   {p['gpus']} GPU(s) x {p['gpu_memory_gb']:g} GB, weights {'sharded (FSDP / ZeRO-3)' if p['sharded'] else 'replicated (DDP / one GPU)'}",
        f"memory     {p['per_device_memory_gb']:.2f} GB per device: weights {m['weights']:.2f}, LoRA params+grads+AdamW "
        f"{m['lora_params_grads_adamw']:.2f}, activations {m['activations']:.2f} "
        f"({p['per_device_batch']} x {p['max_length']} tokens, checkpointing {'on' if p['gradient_checkpointing'] else 'off'}), "
        f"logits {m['logits']:.2f} ({'target positions, full vocabulary' if p['target_only_logits'] else 'TRL fused head tiles'})",
        f"fits       {'yes' if p['fits'] else 'NO'} ({p['headroom_gb']:+.2f} GB headroom)",
        f"step       {p['tokens_per_step']:,} tokens, every sample at max_length: an upper bound "
        f"({p['target_tokens_per_step']:,} target tokens at "
        f"{p['assumed_target_tokens_per_sample']} a sample), {p['step_time_s']:.2f} s at MFU {p['mfu']:g} of "
        f"{p['gpu_tflops']:g} TFLOPS",
        f"throughput {p['tokens_per_s']:,.0f} tokens/s, {p['target_tokens_per_s']:,.0f} target tokens/s",
    ]
    return "\n".join(lines)


def main_plan(args) -> int:
    import sys

    from plumbing.recipe_loader import ConfigError, load_config

    try:
        recipe = load_config(args.recipe, TrainRecipe, args.overrides or [])
        p = plan(recipe, gpus=args.gpus, gpu_memory_gb=args.gpu_memory, gpu_tflops=args.gpu_flops,
                 mfu=args.mfu, sharded=args.sharded, target_tokens=args.target_tokens)
    except (ConfigError, PlanError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not all(math.isfinite(v) for v in (p["step_time_s"], p["per_device_memory_gb"])):
        print("error: the plan is not finite; check the recipe's sizes", file=sys.stderr)
        return 2
    print(json.dumps(p, indent=2) if args.json else format_plan(p))
    return 0
