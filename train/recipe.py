"""Schema of ``configs/train/*.yaml``: one LoRA SFT run, the same on 1 CPU or 8 GPUs.

The topology (processes, DDP / FSDP2 / ZeRO-3) is not here: it is the accelerate config
chosen at launch (``configs/accelerate/*.yaml``), so a recipe never changes between them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from plumbing.recipe_loader import BaseConfig

from .grpo_recipe import GrpoSection

# LoRA ranks that vLLM's punica kernels accept.
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


class ModelSection(BaseConfig):
    spec: str = Field("embedded:smollm2-135m-instruct", description="model spec (see plumbing/models.py)")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "float32", description="dtype the base weights are loaded in")
    chat_template: str = Field("auto", description="auto | native | project | path to .jinja")
    trust_remote_code: bool = Field(
        False, description="run a model repository's own Python code; off unless a recipe asks for it "
                           "(the project's own models never need it)")
    attn_implementation: str | None = Field(None, description="transformers attention kernel (sdpa, eager, "
                                            "flash_attention_2); None: transformers' default")
    gradient_checkpointing: bool = Field(False, description="recompute activations in backward (less memory, "
                                         "about a third more compute)")

    @field_validator("spec")
    @classmethod
    def _known_spec(cls, v: str) -> str:
        from plumbing.models import ModelSpecError, parse_spec  # light: no torch, no network

        try:
            parse_spec(v)
        except ModelSpecError as exc:
            raise ValueError(str(exc)) from None
        return v.strip()


class LoraSection(BaseConfig):
    r: int = Field(16, ge=1, description="LoRA rank (vLLM serves ranks 1, 8, 16, 32, 64, 128, 256, 320, 512)")
    alpha: int = Field(32, ge=1, description="LoRA scaling numerator: the update is scaled by alpha / r")
    dropout: float = Field(0.05, ge=0, lt=1, description="dropout on the LoRA input during training")
    target_modules: list[str] | Literal["all-linear"] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        description="names of the linear modules that get adapters, or all-linear")
    layers: list[int] | None = Field(
        None, description="decoder layers (0-based) that get adapters; None = every layer. Upper layers "
        "only is a speed switch: backward stops at the lowest adapted layer")
    use_dora: bool = Field(False, description="vLLM cannot serve DoRA adapters; export refuses them")
    modules_to_save: list[str] = Field(default_factory=list, description="must stay empty for vLLM")
    qlora: bool = Field(False, description="4-bit NF4 base (bitsandbytes, CUDA only)")
    init_adapter: str | None = Field(
        None, description="go on training this adapter (a folder with adapter_config.json, e.g. the SFT run's "
        "train/final before an on-policy round's rows): its weights load trainable and its own shape (r, "
        "alpha, modules, layers) is kept; None: a new adapter of this section's shape")

    @field_validator("target_modules")
    @classmethod
    def _some_modules(cls, v: list[str] | str) -> list[str] | str:
        if isinstance(v, list) and (not v or not all(name.strip() for name in v)):
            raise ValueError("name at least one module (e.g. [q_proj, v_proj]) or all-linear; an adapter "
                             "on no module trains nothing")
        return v

    @field_validator("layers")
    @classmethod
    def _layers(cls, v: list[int] | None) -> list[int] | None:
        if v is None:
            return v
        if not v or any(i < 0 for i in v):
            raise ValueError("lora.layers: a non-empty list of layer indices >= 0 (or null for all)")
        return sorted(set(v))


class DataSection(BaseConfig):
    dir: str = Field("runs/demo/data", description="a data_gen output folder (with manifest.json)")
    train_split: str = Field("train", min_length=1, description="split folder of data.dir trained on")
    eval_split: str | None = Field("validation", description="split folder evaluated every trainer.eval_steps "
                                   "(None: none)")
    prompt_mode: Literal["distilled", "doctrine"] = Field(
        "distilled", description="the mode the model will be served in; rows of another mode are an error")
    max_length: int = Field(4096, ge=1, description="longer samples are dropped and counted, never truncated")
    packing: bool = Field(False, description="TRL packing: samples concatenated into max_length sequences")
    padding_free: bool = Field(False, description="a batch is one row of its samples back to back "
                               "(position_ids restart per sample), no padding")
    shared_prefix: bool = Field(
        False, description="decision points of one session train in one sequence along their shared "
        "token prefix (each target sees only its own context; same summed loss), up to max_length "
        "merged tokens a sequence; see train/shared_prefix.py")
    max_train_samples: int | None = Field(None, ge=1, description="train on the first N rows (None: all)")
    max_eval_samples: int | None = Field(None, ge=1, description="evaluate on the first N rows (None: all)")


class TrainerSection(BaseConfig):
    learning_rate: float = Field(2e-4, gt=0, description="peak learning rate of AdamW")
    lr_scheduler_type: str = Field("cosine", description="transformers scheduler name (cosine, linear, constant...)")
    warmup_ratio: float = Field(0.0, ge=0, le=1, description="share of the steps the learning rate warms up over")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay")
    max_grad_norm: float = Field(1.0, gt=0, description="gradients are clipped to this global norm")
    per_device_train_batch_size: int = Field(1, ge=1, description="train samples per device per micro-step")
    per_device_eval_batch_size: int = Field(1, ge=1, description="eval samples per device per batch")
    gradient_accumulation_steps: int = Field(1, ge=1, description="micro-steps summed into one optimizer step")
    max_steps: int = Field(-1, ge=-1, description="optimizer steps; -1: run num_train_epochs")
    num_train_epochs: float = Field(1.0, gt=0, description="passes over the train split when max_steps is -1")
    logging_steps: int = Field(10, ge=1, description="steps between two log lines of the metrics file")
    eval_steps: int | None = Field(None, ge=1, description="steps between evaluations; None: none during training")
    save_steps: int = Field(100, ge=1, description="steps between two checkpoints (what --resume restarts from)")
    save_total_limit: int | None = Field(3, ge=1, description="checkpoints kept, newest first (None: all)")
    seed: int = Field(0, ge=0, le=2**32 - 1, description="seed of the data order, dropout and adapter "
                      "initialisation (numpy takes 0 to 2**32 - 1)")
    report_to: list[str] = Field(default_factory=lambda: ["none"],
                                 description="transformers loggers (none, tensorboard, wandb...)")
    bf16: bool | Literal["auto"] = Field(
        False, description="bf16 autocast; auto: on where the hardware runs bf16 matmuls natively "
        "(CUDA with bf16, CPUs with AVX512-BF16/AMX), off elsewhere, where emulated bf16 is slower "
        "than float32 (train/sft.py resolve_bf16)")
    dataloader_num_workers: int = Field(0, ge=0, description="data loader worker processes (0: in the main one)")
    target_only_logits: bool = Field(
        False, description="project hidden states to logits only at target positions (same loss, "
        "no LM-head work on the context); see train/trainer.py")
    # Two loss terms (train/trainer.py token_weights): the first decision_tokens target tokens
    # of each sample (what decides compress vs task action vs decline) and the rest (the
    # summary / reply body), weighted apart. The defaults are today's loss exactly.
    decision_tokens: int = Field(0, ge=0, description="target tokens per sample in the decision term; 0: one term")
    decision_weight: float = Field(1.0, ge=0, description="weight of each decision-term token in the loss")
    summary_weight: float = Field(1.0, ge=0, description="weight of each other target token in the loss")
    # A third term (train/copy_tokens.py): target tokens that copy an exact item (a quoted
    # value, key=value, path, error string, a range's message id) from the context.
    copy_weight: float = Field(1.0, ge=0, description="weight of each target token that copies an exact item "
                               "from the context (train/copy_tokens.py); 1: no copy term")

    @model_validator(mode="after")
    def _terms(self) -> TrainerSection:
        weighted = self.decision_weight != 1.0 or self.summary_weight != 1.0
        if weighted and not self.decision_tokens:
            raise ValueError("trainer.decision_weight / summary_weight need trainer.decision_tokens > 0")
        if self.decision_tokens and not self.target_only_logits:
            raise ValueError("trainer.decision_tokens needs trainer.target_only_logits: true (the weighted loss "
                             "is computed on the kept target logits)")
        if self.copy_weight != 1.0 and not self.target_only_logits:
            raise ValueError("trainer.copy_weight needs trainer.target_only_logits: true (the weighted loss "
                             "is computed on the kept target logits)")
        return self

    @field_validator("max_steps")
    @classmethod
    def _steps(cls, v: int) -> int:
        if v == 0:
            raise ValueError("max_steps must be -1 (run num_train_epochs) or a positive step count")
        return v


class ExportSection(BaseConfig):
    max_lora_rank: int = Field(16, ge=1, description="the --max-lora-rank the serving vLLM runs with")
    adapter_name: str = Field("doctrine-distilled", min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
                              description="LoRA module name in the serve command (letters, digits, . _ -)")


class TrainRecipe(BaseConfig):
    # Model
    model: ModelSection = Field(default_factory=ModelSection, description="the base model and how it loads")
    # LoRA
    lora: LoraSection = Field(default_factory=LoraSection, description="the adapter's shape")
    # Data
    data: DataSection = Field(default_factory=DataSection, description="the curriculum read and how rows batch")
    # Trainer
    trainer: TrainerSection = Field(default_factory=TrainerSection, description="optimizer, schedule, steps, "
                                    "checkpoints and loss terms")
    # Export
    export: ExportSection = Field(default_factory=ExportSection, description="what dtw export writes for serving")
    # GRPO: present, the recipe is a GRPO stage after SFT (rl/grpo.py, `dtw grpo`), not an SFT run
    grpo: GrpoSection | None = Field(None, description="a GRPO stage after SFT (train/grpo_recipe.py); "
                                     "absent: an SFT run")

    @model_validator(mode="after")
    def _copy_term(self) -> TrainRecipe:
        if self.trainer.copy_weight != 1.0 and self.data.packing:
            raise ValueError("trainer.copy_weight marks tokens of single samples: it does not combine with "
                             "data.packing (data.padding_free keeps samples apart and does)")
        return self

    @model_validator(mode="after")
    def _shared_prefix(self) -> TrainRecipe:
        if self.data.shared_prefix:
            if self.data.packing or self.data.padding_free:
                raise ValueError("data.shared_prefix merges samples itself: it does not combine with "
                                 "data.packing or data.padding_free")
            if self.model.attn_implementation not in (None, "sdpa"):
                raise ValueError("data.shared_prefix runs its own block-wise attention (sdpa inside): "
                                 f"model.attn_implementation {self.model.attn_implementation!r} does not combine")
            if self.trainer.copy_weight != 1.0:
                raise ValueError("trainer.copy_weight weighs tokens of single samples: it does not combine with "
                                 "data.shared_prefix")
            if self.trainer.per_device_train_batch_size != 1 or self.trainer.per_device_eval_batch_size != 1:
                raise ValueError("data.shared_prefix trains one merged sequence per batch: "
                                 "trainer.per_device_train_batch_size and per_device_eval_batch_size must be 1 "
                                 "(use gradient_accumulation_steps for larger steps)")
        return self
