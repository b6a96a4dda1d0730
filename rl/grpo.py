"""GRPO after SFT: ``python -m rl configs/train/grpo_pocket.yaml --out runs/<name> [--resume]``.

A recipe with a ``grpo:`` section (train/grpo_recipe.py) runs here instead of SFT. The policy
starts from the SFT adapter (``grpo.init_adapter``, loaded trainable); the prompts are the
curriculum's decision points (a row's messages less its label, rendered through the run's chat
template) and every row rides along as a JSON column, so the reward terms
(rl/rewards.py) score each completion against the row it answers. TRL's GRPOTrainer logs
each term by name per step (``rewards/<term>/mean``) and the weighted sum as ``reward``.

The reference policy of the KL term (``grpo.beta``) is the SFT adapter itself: given a
PeftModel that already holds an adapter, TRL 1.16 (with peft >= 0.20) copies it into a frozen
second adapter named ``ref`` and computes the reference log-probs with that adapter active (not
with adapters disabled, which would be the base model). The checkpoints hold both adapters;
the final adapter (``<out>/train/final``) holds only the trained one, in the layout
``dtw export`` reads, and the stage's manifest (written last) has the SFT manifest's fields.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

from plumbing.runs import (
    RunDir,
    atomic_write_json,
    fingerprint_sha256,
    paths_sha256,
    write_manifest,
)
from train.recipe import TrainRecipe
from train.sft import (
    check_finite,
    latest_checkpoint,
    open_training_stage,
    resolve_bf16,
    train_fingerprint,
    trainer_arguments,
)

__all__ = ["GrpoError", "build_prompts", "reward_funcs", "run_grpo"]


class GrpoError(ValueError):
    """A GRPO recipe or input that cannot run; the message says which and why."""


def build_prompts(recipe: TrainRecipe, tokenizer: Any, template: str) -> tuple[list[dict[str, str]], dict[str, int]]:
    """The prompt pool: ``[{prompt, row_json}]`` from the train split (seeded draw of
    ``grpo.prompt_pool``) and the rows left out, counted by reason."""
    from eval.workloads.held_out.workload import load_rows
    from plumbing.chat_templates import chat_token_ids

    g = recipe.grpo
    try:
        rows = load_rows(recipe.data.dir, recipe.data.train_split)
    except ValueError as exc:
        raise GrpoError(str(exc)) from None
    random.Random(recipe.trainer.seed).shuffle(rows)
    limit = g.max_prompt_tokens or max(16, recipe.data.max_length - g.max_completion_length)
    out, rejects = [], Counter()
    for row in rows:
        if g.prompt_pool is not None and len(out) >= g.prompt_pool:
            break
        if row["meta"].get("prompt_mode", recipe.data.prompt_mode) != recipe.data.prompt_mode:
            rejects["prompt_mode_mismatch"] += 1
            continue
        if row["messages"][-1].get("role") != "assistant":
            rejects["no_target"] += 1
            continue
        ids = chat_token_ids(tokenizer, row["messages"][:-1], row["tools"] or None, template)
        if len(ids) > limit:
            rejects["too_long"] += 1
            continue
        # TRL tokenises a text prompt itself; the project's rendering (tool calls normalised,
        # special-token strings in content kept as text) is decoded back to text for it.
        out.append({"prompt": tokenizer.decode(ids, skip_special_tokens=False),
                    "row_json": json.dumps(row, sort_keys=True, ensure_ascii=False)})
    if not out:
        raise GrpoError(f"{recipe.data.dir}: no usable decision points for GRPO (left out: {dict(rejects)})")
    return out, dict(rejects)


def reward_funcs(recipe: TrainRecipe) -> tuple[list[Any], list[float]]:
    """One TRL reward function per term (named as the term, so TRL logs it by name) and its weight."""
    from . import rewards

    g = recipe.grpo
    funcs, weights = [], []
    for name, term in rewards.TERMS.items():
        extra = {"slack": g.length_slack, "floor_chars": g.length_floor_chars} if name == "length" else {}

        def func(prompts, completions, row_json, _term=term, _extra=extra, **_kw) -> list[float]:
            return [_term(r, c if isinstance(c, str) else c[0]["content"], **_extra)
                    for r, c in zip(row_json, completions, strict=True)]

        func.__name__ = name
        funcs.append(func)
        weights.append(getattr(g.weights, name))
    return funcs, weights


def _load_policy(recipe: TrainRecipe, resolved: Any) -> Any:
    from peft import PeftModel

    from plumbing.models import load_model

    init = Path(recipe.grpo.init_adapter)
    if not (init / "adapter_config.json").is_file():
        raise GrpoError(f"grpo.init_adapter {init}: no adapter_config.json (train the SFT stage first)")
    base = load_model(resolved, dtype=recipe.model.dtype, trust_remote_code=recipe.model.trust_remote_code,
                      **({"attn_implementation": recipe.model.attn_implementation}
                         if recipe.model.attn_implementation else {}))
    try:
        return PeftModel.from_pretrained(base, str(init), is_trainable=True)
    except (ValueError, RuntimeError, KeyError) as exc:
        raise GrpoError(f"grpo.init_adapter {init}: does not load on {recipe.model.spec}: "
                        f"{str(exc).splitlines()[0]}") from None


def _config(recipe: TrainRecipe, ckpt_dir: Path, weights: list[float], bf16: bool) -> Any:
    from trl import GRPOConfig

    g = recipe.grpo
    return GRPOConfig(
        output_dir=str(ckpt_dir),
        **trainer_arguments(recipe, bf16),
        gradient_checkpointing=recipe.model.gradient_checkpointing,
        remove_unused_columns=False,  # row_json goes to the reward functions
        num_generations=g.num_generations,
        max_completion_length=g.max_completion_length,
        temperature=g.temperature,
        beta=g.beta,
        reward_weights=weights,
        use_vllm=g.use_vllm,
        vllm_mode="colocate",
        vllm_gpu_memory_utilization=g.vllm_gpu_memory_utilization,
        log_completions=False,
    )


def grpo_fingerprint(recipe: TrainRecipe) -> dict[str, Any]:
    """What a GRPO adapter is computed from: the training's (recipe, data manifest) and the
    files of the SFT adapter it starts from (its path may hold another adapter tomorrow)."""
    out = train_fingerprint(recipe)
    init = Path(recipe.grpo.init_adapter) if recipe.grpo and recipe.grpo.init_adapter else None
    out["grpo_init_adapter"] = (paths_sha256(sorted(p for p in init.iterdir() if p.is_file()))
                                if init is not None and init.is_dir() else None)
    return out


def run_grpo(recipe: TrainRecipe, out: str | Path, *, resume: bool = False, force: bool = False, log=print,
             callbacks: list | None = None) -> Path:
    """Run the GRPO stage into ``<out>/train/`` (checkpoints, final adapter, metrics, manifest
    last). Decided like a training (:func:`plumbing.stage.decide`): a complete stage of the same
    inputs is skipped, an interrupted one resumes, one of other inputs is refused
    (:class:`GrpoError`) unless ``resume`` or ``force`` (afresh). Returns the stage folder."""
    import torch
    from accelerate import PartialState
    from trl import GRPOTrainer

    from plumbing.chat_templates import choose_template
    from plumbing.models import load_tokenizer, resolve_model
    from train.data import check_data_dir

    state = PartialState(cpu=not torch.cuda.is_available())
    run = RunDir.create(out)
    stage = run.stage("train")
    ckpt_dir = stage / "checkpoints"
    fingerprint = grpo_fingerprint(recipe)
    decision = open_training_stage(run, fingerprint, state, name="grpo", force=force, resume=resume,
                                   hint="use --force to train it again, or a new --out")
    if decision.action == "skip":
        log(f"[skip] {decision.reason}")
        return stage
    if decision.action == "refuse":
        raise GrpoError(decision.reason)
    started = time.time()
    resume = decision.action == "resume"

    data_manifest = check_data_dir(recipe.data.dir)
    resolved = resolve_model(recipe.model.spec)
    tokenizer = load_tokenizer(resolved, trust_remote_code=recipe.model.trust_remote_code)
    choice = choose_template(tokenizer, recipe.model.chat_template)
    tokenizer.chat_template = choice.template
    prompts, rejects = build_prompts(recipe, tokenizer, choice.template)
    log(f"[grpo] {len(prompts)} prompts ({rejects or 'none left out'}), "
        f"{recipe.grpo.num_generations} completions each")
    policy = _load_policy(recipe, resolved)
    funcs, weights = reward_funcs(recipe)
    bf16 = resolve_bf16(recipe.trainer.bf16)

    from datasets import Dataset

    trainer = GRPOTrainer(model=policy, reward_funcs=funcs, args=_config(recipe, ckpt_dir, weights, bf16),
                          train_dataset=Dataset.from_list(prompts), processing_class=tokenizer,
                          callbacks=callbacks)
    if recipe.grpo.beta and "ref" not in trainer.accelerator.unwrap_model(trainer.model).peft_config:
        # Without the copy TRL would take the base model (adapters disabled) as the reference.
        raise GrpoError("this TRL/peft pair keeps no frozen copy of the SFT adapter as the KL reference "
                        "(needs trl >= 1.16 with peft >= 0.20); set grpo.beta: 0 or upgrade")
    resume_from = latest_checkpoint(ckpt_dir) if resume else None
    if resume and resume_from is None:
        log(f"[grpo] --resume: no checkpoint in {ckpt_dir}, starting from step 0")
    result = trainer.train(resume_from_checkpoint=str(resume_from) if resume_from else None)
    history = trainer.state.log_history
    losses = [h["loss"] for h in history if "loss" in h]
    check_finite(trainer, losses, result.training_loss, recipe.trainer.learning_rate)

    final = stage / "final"
    model = trainer.accelerator.unwrap_model(trainer.model)
    if state.is_main_process:
        # Only the trained adapter: the frozen "ref" copy is the SFT adapter, already on disk.
        model.save_pretrained(str(final), selected_adapters=["default"])
        tokenizer.save_pretrained(str(final))
        steps = [h for h in history if "reward" in h]
        metrics = {
            "method": "grpo",
            "global_step": trainer.state.global_step,
            "train_loss": sum(losses) / len(losses) if losses else result.training_loss,
            "losses": losses,
            "rewards": [h["reward"] for h in steps],
            "reward_terms": {name: [h.get(f"rewards/{name}/mean") for h in steps] for name in
                             (f.__name__ for f in funcs)},
            "train_runtime_s": result.metrics.get("train_runtime"),
            "resumed_from": resume_from.name if resume_from else None,
            "log_history": history,
        }
        atomic_write_json(stage / "metrics.json", metrics)
        write_manifest(
            stage, stage="train", config=recipe,
            inputs={"data": Path(recipe.data.dir), "init_adapter": Path(recipe.grpo.init_adapter) /
                    "adapter_model.safetensors"},
            doctrine=data_manifest.get("doctrine"),
            counts={"prompts": len(prompts), "prompt_rejects": rejects,
                    "completions": trainer.state.global_step * recipe.trainer.per_device_train_batch_size
                    * recipe.trainer.gradient_accumulation_steps * state.num_processes},
            extra={"method": "grpo", "model": resolved.to_manifest(), "chat_template_source": choice.source,
                   "bf16": bf16, "prompt_mode": recipe.data.prompt_mode, "final_adapter": str(final),
                   "init_adapter": recipe.grpo.init_adapter,
                   "reference_policy": "frozen copy of init_adapter (TRL 'ref' adapter)" if recipe.grpo.beta
                   else None,
                   "serving_profiles": data_manifest.get("serving_profiles", []),
                   "metrics": {k: v for k, v in metrics.items() if k != "log_history"},
                   "fingerprint": fingerprint, "fingerprint_sha256": fingerprint_sha256(fingerprint)},
            started_at=started,
        )
        log(f"[grpo] done: {trainer.state.global_step} steps, reward "
            f"{metrics['rewards'][0] if metrics['rewards'] else float('nan'):.3f} -> "
            f"{metrics['rewards'][-1] if metrics['rewards'] else float('nan'):.3f} -> {final}")
    state.wait_for_everyone()
    return stage
