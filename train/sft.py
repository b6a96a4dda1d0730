"""LoRA SFT on a data_gen curriculum with TRL's SFTTrainer and PEFT.

    python -m train configs/train/demo.yaml --out runs/demo
    accelerate launch --config_file configs/accelerate/cpu.yaml -m train configs/train/demo.yaml --out runs/demo
    python -m train configs/train/demo.yaml --out runs/demo trainer.max_steps=200 --resume  # go on, more steps

Checkpoints go to ``runs/<name>/train/checkpoints/checkpoint-<step>/`` (full trainer state:
optimizer, scheduler, RNG, data position), the final adapter to ``runs/<name>/train/final/``
and the stage manifest last. The recipe is the same for every topology. A rerun decides with
:func:`plumbing.stage.decide`: complete from the same recipe and data, skipped; interrupted,
resumed from its newest intact checkpoint; trained or started from others, refused
(``--force`` starts afresh, ``--resume`` goes on from the checkpoints anyway).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from plumbing.runs import (
    RunDir,
    atomic_write_json,
    fingerprint_sha256,
    manifest_content_sha256,
    paths_sha256,
    redact_secrets,
    write_manifest,
)
from plumbing.stage import Decision, decide, record_fingerprint

from .recipe import TrainRecipe

__all__ = ["NonFiniteTraining", "TrainingChanged", "latest_checkpoint", "open_training_stage", "run_training",
           "train_fingerprint"]


class TrainingChanged(ValueError):
    """A complete training rerun by hand on another recipe or other data: refused unless forced."""


class NoTrainableTokens(RuntimeError):
    pass


class NonFiniteTraining(RuntimeError):
    """Training ended with non-finite adapter weights or a non-finite loss (it diverged):
    no final adapter and no manifest are written, so nothing downstream can ship it."""


def check_finite(trainer, losses: list[float], final_loss: float, learning_rate: float) -> None:
    """Raise :class:`NonFiniteTraining` when a trainable weight (on any process) or a logged
    or final loss is NaN or infinite."""
    import math

    import torch

    bad = [name for name, p in trainer.model.named_parameters()
           if p.requires_grad and p.numel() and not bool(torch.isfinite(p.detach()).all())]
    total = sum(1 for _, p in trainer.model.named_parameters() if p.requires_grad)
    # Every process counts its own (possibly sharded) weights; all agree on the verdict.
    n_bad = int(trainer.accelerator.reduce(torch.tensor([len(bad)], device=trainer.accelerator.device),
                                           reduction="sum").item())
    bad_losses = [x for x in [*losses, final_loss] if not math.isfinite(x)]
    if not n_bad and not bad_losses:
        return
    what = []
    if n_bad:
        what.append(f"{n_bad} of {total} trainable tensors are non-finite"
                    + (f" (first: {bad[0]})" if bad else ""))
    if bad_losses:
        what.append(f"the loss is {bad_losses[-1]}")
    raise NonFiniteTraining(
        f"training diverged after step {trainer.state.global_step}: {'; '.join(what)}. No final adapter "
        f"or manifest was written (the checkpoints are of the diverged run); lower "
        f"trainer.learning_rate (now {learning_rate:g}) or trainer.max_grad_norm and train into a new --out")


class GuardedCollator:
    """Wraps the trainer's collator: a batch with no label token would silently train on
    nothing (the all-zero-mask failure of templates without generation markers)."""

    def __init__(self, inner):
        self.inner = inner

    def __call__(self, features):
        batch = self.inner(features)
        labels = batch.get("labels")
        if labels is not None and int((labels != -100).sum()) == 0:
            raise NoTrainableTokens(
                "a training batch has no trainable (assistant target) tokens: the chat template's "
                "{% generation %} markers do not cover the targets, or every target was cut off"
            )
        return batch


def checkpoint_problem(ckpt: Path) -> str | None:
    """Why a checkpoint cannot be resumed from (its trainer state unreadable, its adapter
    weights truncated), or None."""
    from plumbing.adapters import AdapterError, safetensors_header

    try:
        state = json.loads((ckpt / "trainer_state.json").read_text(encoding="utf-8"))
    except OSError:
        return "trainer_state.json is unreadable"
    except ValueError:
        return "trainer_state.json is not valid JSON (truncated?)"
    if not isinstance(state, dict) or not isinstance(state.get("global_step"), int):
        return "trainer_state.json has no global_step"
    weights = ckpt / "adapter_model.safetensors"
    if weights.is_file():
        try:
            safetensors_header(weights)
        except AdapterError:
            return "adapter_model.safetensors is truncated"
    return None


def latest_checkpoint(ckpt_dir: Path, log=None) -> Path | None:
    """The newest intact checkpoint under ``ckpt_dir`` (None: none). A newer damaged one (a
    crash while it was written) is passed over, and ``log`` says so in one line."""
    cands = sorted((p for p in Path(ckpt_dir).glob("checkpoint-*") if p.name.split("-")[-1].isdigit()
                    and (p / "trainer_state.json").is_file()), key=lambda p: int(p.name.split("-")[-1]), reverse=True)
    damaged = []
    for ckpt in cands:
        problem = checkpoint_problem(ckpt)
        if problem is None:
            if damaged and log is not None:
                log(f"[train] --resume: {'; '.join(damaged)}; resuming from {ckpt.name}")
            return ckpt
        damaged.append(f"{ckpt.name} is damaged ({problem})")
    if damaged and log is not None:
        log(f"[train] --resume: {'; '.join(damaged)}; no intact checkpoint, starting from step 0")
    return None


def train_fingerprint(recipe: TrainRecipe) -> dict[str, Any]:
    """What a training's adapter is computed from: the resolved recipe (secrets redacted) and
    the content of the data stage's manifest (it lists every shard's sha256). The manifest
    records it and the stage folder's marker; a rerun decides with it (:func:`plumbing.stage.decide`)."""
    out = {"recipe": redact_secrets(recipe.model_dump(mode="json")),
           "data": manifest_content_sha256(recipe.data.dir)}
    if recipe.lora.init_adapter:  # the adapter training goes on from: its files, not its path
        init = Path(recipe.lora.init_adapter)
        out["init_adapter"] = paths_sha256(sorted(p for p in init.iterdir() if p.is_file())) if init.is_dir() else None
    return out


@dataclass
class Curriculum:
    """The tokenised splits a run trains on, with their counts for the manifest."""

    train: Any
    eval: Any
    train_rejects: dict[str, int]
    eval_rejects: dict[str, int]
    train_samples: int
    target_tokens: int
    total_tokens: int
    merging: dict[str, Any] | None = None  # data.shared_prefix: what merging did
    copy_tokens: int | None = None  # trainer.copy_weight: target tokens the copy term weighs


def open_training_stage(run: RunDir, fingerprint: dict[str, Any], state: Any, *, name: str, force: bool,
                        resume: bool, hint: str) -> Decision:
    """Decide ``run``'s train stage for a training (SFT here, GRPO in rl/) with
    :func:`plumbing.stage.decide`: an interrupted run is one with checkpoints and no manifest.
    When it runs, the main process deletes a fresh start's checkpoints and adapter (they are of
    other inputs) and records ``fingerprint`` (the stage is incomplete until its manifest, last);
    every process waits for that. Skip and refuse are the caller's to act on."""
    stage = run.stage("train")
    ckpt_dir = stage / "checkpoints"
    decision = decide(stage, fingerprint, name=name, force=force, resume=resume, resumable=True,
                      partial=not run.complete("train") and any(ckpt_dir.glob("checkpoint-*")), hint=hint)
    if decision.action in ("skip", "refuse"):
        return decision
    if state.is_main_process:
        if decision.fresh:
            import shutil

            for own in (ckpt_dir, stage / "final"):
                if own.is_dir() and not own.is_symlink():
                    shutil.rmtree(own)
        record_fingerprint(stage, "train", fingerprint, writes=("checkpoints", "final"),
                           legacy=("checkpoints", "final"))
    state.wait_for_everyone()
    return decision


def run_training(recipe: TrainRecipe, out: str | Path, *, resume: bool = False, force: bool = False,
                 log=print, callbacks: list | None = None) -> Path:
    """Train ``recipe`` into ``<out>/train/`` (checkpoints, final adapter, metrics, manifest
    last). A complete stage trained from the same recipe and data is skipped, an interrupted
    one resumes from its checkpoints; one trained or started from others is refused
    (:class:`TrainingChanged`) unless ``resume`` (continue it anyway) or ``force`` (start
    afresh: its checkpoints and adapter are deleted). Returns the stage folder."""
    import torch
    from accelerate import PartialState

    from plumbing.chat_templates import choose_template
    from plumbing.models import load_tokenizer, resolve_model

    from .data import check_data_dir

    # On a machine without CUDA every process is a CPU worker (MULTI_CPU over gloo when launched
    # with several processes); TrainingArguments(use_cpu=True) agrees with this.
    state = PartialState(cpu=not torch.cuda.is_available())
    run = RunDir.create(out)
    stage = run.stage("train")
    fingerprint = train_fingerprint(recipe)
    ckpt_dir = stage / "checkpoints"
    decision = open_training_stage(run, fingerprint, state, name="train", force=force, resume=resume,
                                   hint="use --force to retrain it, or a new --out")
    if decision.action == "skip":
        log(f"[skip] {decision.reason}")
        return stage
    if decision.action == "refuse":
        raise TrainingChanged(decision.reason)
    started = time.time()
    resume = decision.action == "resume"

    data_manifest = check_data_dir(recipe.data.dir)
    resolved = resolve_model(recipe.model.spec)
    tokenizer = load_tokenizer(resolved, trust_remote_code=recipe.model.trust_remote_code)
    choice = choose_template(tokenizer, recipe.model.chat_template)
    tokenizer.chat_template = choice.template
    data = load_curriculum(recipe, tokenizer, choice.template, state, log)
    model, peft_config = build_model(recipe, resolved)
    trainer, bf16 = build_trainer(recipe, model, peft_config, tokenizer, data, ckpt_dir, callbacks, log)

    resume_from = latest_checkpoint(ckpt_dir, log) if resume else None
    if resume and resume_from is None:
        log(f"[train] --resume: no checkpoint in {ckpt_dir}, starting from step 0")
    result = trainer.train(resume_from_checkpoint=str(resume_from) if resume_from else None)
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    check_finite(trainer, losses, result.training_loss, recipe.trainer.learning_rate)

    final = stage / "final"
    trainer.save_model(str(final))  # under FSDP: the gathered adapter (train/fsdp.py)
    if state.is_main_process:
        tokenizer.save_pretrained(str(final))
        metrics = {
            "global_step": trainer.state.global_step,
            # The whole run's mean: log_history is restored on --resume, while the trainer's own
            # training_loss averages only the steps of this process.
            "train_loss": sum(losses) / len(losses) if losses else result.training_loss,
            "losses": losses,
            "train_runtime_s": result.metrics.get("train_runtime"),
            "world_size": state.num_processes,
            "distributed_type": str(state.distributed_type).split(".")[-1],
            "resumed_from": resume_from.name if resume_from else None,
            "log_history": trainer.state.log_history,
        }
        atomic_write_json(stage / "metrics.json", metrics)
        write_train_manifest(stage, recipe, data, data_manifest, metrics, resolved=resolved.to_manifest(),
                             template_source=choice.source, bf16=bf16, final=final, started=started,
                             fingerprint=fingerprint)
        log(f"[train] done: {trainer.state.global_step} steps, loss {result.training_loss:.4f} -> {final}")
    state.wait_for_everyone()
    return stage


def load_curriculum(recipe: TrainRecipe, tokenizer: Any, template: str, state: Any, log=print) -> Curriculum:
    """The recipe's train (and eval) split tokenised through ``template``, samples over
    ``data.max_length`` dropped and counted; merged per session with ``data.shared_prefix``."""
    from .data import DataError, load_split, tokenize_split

    shared = recipe.data.shared_prefix
    copy = recipe.trainer.copy_weight != 1.0  # the copy term's token masks (train/copy_tokens.py)
    with state.main_process_first():
        train_raw = load_split(recipe.data.dir, recipe.data.train_split)
        train_ds, train_rejects = tokenize_split(
            train_raw, tokenizer, template, max_length=recipe.data.max_length,
            prompt_mode=recipe.data.prompt_mode, max_samples=recipe.data.max_train_samples, with_keys=shared,
            copy_tokens=copy)
        eval_ds, eval_rejects = None, {}
        if recipe.data.eval_split and recipe.trainer.eval_steps:
            eval_raw = load_split(recipe.data.dir, recipe.data.eval_split)
            eval_ds, eval_rejects = tokenize_split(
                eval_raw, tokenizer, template, max_length=recipe.data.max_length,
                prompt_mode=recipe.data.prompt_mode, max_samples=recipe.data.max_eval_samples, with_keys=shared,
                copy_tokens=copy)
    if len(train_ds) == 0:
        raise DataError(f"no trainable samples in {recipe.data.dir} (rejected: {train_rejects})")
    data = Curriculum(train_ds, eval_ds, train_rejects, eval_rejects, len(train_ds),
                      sum(sum(m) for m in train_ds["assistant_masks"]), sum(len(x) for x in train_ds["input_ids"]),
                      copy_tokens=sum(sum(m) for m in train_ds["copy_mask"]) if copy else None)
    if copy:
        log(f"[train] copy term: {data.copy_tokens:,} of {data.target_tokens:,} target tokens copy an exact item "
            f"from the context ({data.copy_tokens / max(1, data.target_tokens):.1%}), weight "
            f"{recipe.trainer.copy_weight}")
    if shared:
        from .shared_prefix import merge_split

        data.train, data.merging = merge_split(train_ds, train_ds["session_key"], train_ds["step"],
                                               recipe.data.max_length)
        if eval_ds is not None:
            data.eval, _ = merge_split(eval_ds, eval_ds["session_key"], eval_ds["step"], recipe.data.max_length)
        m = data.merging
        log(f"[train] shared prefix: {m['samples']} samples in {m['sequences']} sequences, "
            f"{m['sample_tokens']:,} -> {m['merged_tokens']:,} tokens "
            f"({m['sample_tokens'] / max(1, m['merged_tokens']):.2f}x fewer)")
    return data


def _init_adapter(model: Any, recipe: TrainRecipe) -> Any:
    """``model`` with ``lora.init_adapter`` loaded trainable (checked first: weights agree
    with their config, safetensors only)."""
    from peft import PeftModel

    from plumbing.adapters import AdapterError, check_adapter
    from plumbing.subcommands import CommandError

    init = Path(recipe.lora.init_adapter)
    try:
        check_adapter(init)
    except AdapterError as exc:
        raise CommandError(f"lora.init_adapter: {exc}") from None
    try:
        return PeftModel.from_pretrained(model, str(init), is_trainable=True)
    except (ValueError, RuntimeError, KeyError) as exc:
        raise CommandError(f"lora.init_adapter {init}: does not load on {recipe.model.spec}: "
                        f"{str(exc).splitlines()[0]}") from None


def build_model(recipe: TrainRecipe, resolved: Any) -> tuple[Any, Any]:
    """The base model (attention, quantisation as the recipe asks) and its LoRA config."""
    import torch
    from peft import LoraConfig

    from plumbing.models import load_model

    model_kwargs: dict[str, Any] = {}
    if recipe.model.attn_implementation:
        model_kwargs["attn_implementation"] = recipe.model.attn_implementation
    if recipe.data.shared_prefix:
        from .shared_prefix import register_attention

        # Block-wise attention over the merged sequence (sdpa inside, no N x N mask).
        model_kwargs["attn_implementation"] = register_attention()
    if recipe.lora.qlora:
        from transformers import BitsAndBytesConfig

        model_kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16)
    model = load_model(resolved, dtype=recipe.model.dtype,
                       trust_remote_code=recipe.model.trust_remote_code, **model_kwargs)
    n_layers = getattr(model.config, "num_hidden_layers", None)
    if recipe.lora.layers and n_layers is not None and max(recipe.lora.layers) >= n_layers:
        raise ValueError(f"lora.layers {recipe.lora.layers}: {recipe.model.spec} has {n_layers} decoder layers "
                         f"(0..{n_layers - 1})")
    if recipe.lora.init_adapter:
        return _init_adapter(model, recipe), None
    peft_config = LoraConfig(
        r=recipe.lora.r, lora_alpha=recipe.lora.alpha, lora_dropout=recipe.lora.dropout,
        target_modules=recipe.lora.target_modules, use_dora=recipe.lora.use_dora,
        layers_to_transform=recipe.lora.layers,
        modules_to_save=recipe.lora.modules_to_save or None, bias="none", task_type="CAUSAL_LM")
    return model, peft_config


def trainer_arguments(recipe: TrainRecipe, bf16: bool) -> dict[str, Any]:
    """The trainer settings every training stage of a recipe shares (SFT here, GRPO in
    rl/grpo.py): optimiser, schedule, steps, checkpoints, seeds, precision, logging."""
    import torch

    t = recipe.trainer
    return {
        "learning_rate": t.learning_rate,
        "lr_scheduler_type": t.lr_scheduler_type,
        "warmup_steps": t.warmup_ratio,  # transformers 5: a float < 1 is a ratio of the total steps
        "weight_decay": t.weight_decay,
        "max_grad_norm": t.max_grad_norm,
        "logging_nan_inf_filter": False,  # a NaN or inf loss is logged as it is (check_finite fails the run)
        "per_device_train_batch_size": t.per_device_train_batch_size,
        "gradient_accumulation_steps": t.gradient_accumulation_steps,
        "max_steps": t.max_steps,
        "num_train_epochs": t.num_train_epochs,
        "logging_steps": t.logging_steps,
        "save_strategy": "steps",
        "save_steps": t.save_steps,
        "save_total_limit": t.save_total_limit,
        "save_only_model": False,  # resume needs optimizer, scheduler and RNG state
        "seed": t.seed,
        "data_seed": t.seed,
        "report_to": t.report_to,
        "bf16": bf16,
        "use_cpu": not torch.cuda.is_available(),
        "disable_tqdm": False,
    }


def build_trainer(recipe: TrainRecipe, model: Any, peft_config: Any, tokenizer: Any, data: Curriculum,
                  ckpt_dir: Path, callbacks: list | None, log=print) -> tuple[Any, bool]:
    """The project's SFT trainer over ``data`` (its collator guarded against batches with no
    target token) and whether it runs in bf16."""
    from trl import SFTConfig

    from .fsdp import fsdp_activation_checkpointing
    from .trainer import KindsCollator, ProjectSFTTrainer

    t = recipe.trainer
    shared = recipe.data.shared_prefix
    bf16 = resolve_bf16(t.bf16)
    if t.bf16 == "auto":
        log(f"[train] bf16 auto -> {'on' if bf16 else 'off'} ({bf16_support()})")
    args = SFTConfig(
        output_dir=str(ckpt_dir),
        # Padding-free without packing: TRL refuses a max_length it would not enforce. Ours is
        # enforced already: tokenize_split drops (and counts) every sample longer than it.
        # Shared prefix: the groups are built within max_length already (train/shared_prefix.py).
        max_length=None if shared or (recipe.data.padding_free and not recipe.data.packing) else recipe.data.max_length,
        remove_unused_columns=not shared,   # the merged rows carry their sample_lengths
        dataset_kwargs={"skip_prepare_dataset": True} if shared else None,
        packing=recipe.data.packing,
        padding_free=recipe.data.padding_free,
        per_device_eval_batch_size=t.per_device_eval_batch_size,
        eval_strategy="steps" if data.eval is not None else "no",
        eval_steps=t.eval_steps,
        # Under FSDP with fsdp_activation_checkpointing, FSDP checkpoints the decoder layers (the
        # Trainer refuses both at once).
        gradient_checkpointing=recipe.model.gradient_checkpointing and not fsdp_activation_checkpointing(),
        dataloader_num_workers=t.dataloader_num_workers,
        ddp_find_unused_parameters=False,
        **trainer_arguments(recipe, bf16),
    )
    collator = None
    if shared:
        from .shared_prefix import SharedPrefixCollator

        collator = SharedPrefixCollator()
    trainer = ProjectSFTTrainer(model=model, args=args, train_dataset=data.train, eval_dataset=data.eval,
                                processing_class=tokenizer, peft_config=peft_config, data_collator=collator,
                                callbacks=callbacks, target_only_logits=t.target_only_logits,
                                shared_prefix=shared, decision_tokens=t.decision_tokens,
                                decision_weight=t.decision_weight, summary_weight=t.summary_weight,
                                copy_weight=t.copy_weight)
    trainer.data_collator = GuardedCollator(KindsCollator(trainer.data_collator))
    return trainer, bf16


def write_train_manifest(stage: Path, recipe: TrainRecipe, data: Curriculum, data_manifest: dict[str, Any],
                         metrics: dict[str, Any], *, resolved: dict[str, Any], template_source: str, bf16: bool,
                         final: Path, started: float, fingerprint: dict[str, Any] | None = None) -> None:
    """The train stage's manifest, written last: its presence marks the stage complete."""
    write_manifest(
        stage, stage="train", config=recipe,
        inputs={"data": Path(recipe.data.dir),
                **({"init_adapter": Path(recipe.lora.init_adapter) / "adapter_config.json"}
                   if recipe.lora.init_adapter else {})},
        doctrine=data_manifest.get("doctrine"),
        counts={"train_samples": data.train_samples, "train_sequences": len(data.train),
                "train_rejects": data.train_rejects,
                "eval_samples": len(data.eval) if data.eval is not None else 0,
                "eval_rejects": data.eval_rejects, "train_tokens": data.total_tokens,
                "target_tokens": data.target_tokens,
                **({"copy_tokens": data.copy_tokens} if data.copy_tokens is not None else {})},
        extra={"model": resolved, "chat_template_source": template_source,
               "bf16": bf16, "shared_prefix": data.merging,
               "prompt_mode": recipe.data.prompt_mode,
               # relative to this folder: a copied run's manifest names its own copy
               "final_adapter": final.relative_to(stage).as_posix(),
               # the serving profiles of the curriculum, carried to the adapter and the eval
               "serving_profiles": data_manifest.get("serving_profiles", []),
               "metrics": {k: v for k, v in metrics.items() if k != "log_history"},
               "fingerprint": fingerprint, "fingerprint_sha256": fingerprint_sha256(fingerprint)},
        started_at=started,
    )


def bf16_support() -> str:
    """Where bf16 matmuls run natively here: ``cuda``, ``cpu-native`` or ``none``."""
    import torch

    if torch.cuda.is_available():
        return "cuda" if torch.cuda.is_bf16_supported() else "none"
    try:
        native = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        native = False
    return "cpu-native" if native else "none"


def resolve_bf16(value: bool | str) -> bool:
    """A recipe's ``trainer.bf16``: true/false as given; ``auto`` on where bf16 is native.

    On a CPU without AVX512-BF16 or AMX, autocast emulates bf16 and a demo step took ~6
    minutes instead of ~24 s in float32 (2026-12-02, an AVX2-only EPYC).
    """
    if value == "auto":
        return bf16_support() != "none"
    return bool(value)

