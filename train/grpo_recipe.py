"""The ``grpo:`` section of a ``configs/train/*.yaml`` recipe: a GRPO stage after SFT.

A recipe with this section is run by ``rl/grpo.py`` (``dtw grpo``), not by SFT; its model, lora, data,
trainer and export sections mean what they mean for SFT (``lora`` is unused: the adapter is
the SFT one, ``init_adapter``). The reward terms are ``rl/rewards.py``'s.
"""

from __future__ import annotations

from pydantic import Field

from plumbing.recipe_loader import BaseConfig


class RewardWeights(BaseConfig):
    kernel_accepts: float = Field(1.0, ge=0, le=10, description="weight of the kernel-accepts-the-fold term (1 / -1)")
    summary_score: float = Field(1.0, ge=0, le=10, description="weight of the checker's summary score (0..1)")
    values_in_context: float = Field(
        1.0, ge=0, le=10, description="weight of the share of the summary's exact items found in the context (0..1)")
    right_kind: float = Field(
        2.0, ge=0, le=10, description="weight of taking the label's kind of move (1 / 0); the fold-quality terms "
        "pay only where the label folds, so this term alone rewards folding at the right time")
    length: float = Field(1.0, ge=0, le=10, description="weight of the length penalty (0 .. -1)")


class GrpoSection(BaseConfig):
    init_adapter: str = Field(
        ..., min_length=1, description="the SFT adapter the policy starts from and is regularised toward "
        "(a folder with adapter_config.json, e.g. runs/pocket/train/final)")
    num_generations: int = Field(4, ge=2, le=64, description="completions per prompt (the GRPO group)")
    max_completion_length: int = Field(192, ge=8, le=8192, description="generated tokens per completion, at most")
    prompt_pool: int | None = Field(
        None, ge=1, le=1_000_000, description="decision points drawn from the train split (seeded); None: all")
    max_prompt_tokens: int | None = Field(
        None, ge=16, le=131072, description="prompts longer than this are dropped and counted; None: "
        "data.max_length less max_completion_length")
    temperature: float = Field(1.0, gt=0, le=2, description="sampling temperature of the rollouts")
    beta: float = Field(
        0.04, ge=0, le=1, description="KL weight toward the reference policy (the SFT adapter, kept as a frozen "
        "copy; 0: no reference)")
    length_slack: float = Field(
        1.5, ge=1, le=10, description="replies up to this many times the label's length (plus the floor) pay "
        "no length penalty")
    length_floor_chars: int = Field(200, ge=0, le=100_000, description="characters allowed on top of the slack")
    weights: RewardWeights = Field(default_factory=RewardWeights, description="weight of each reward term")
    use_vllm: bool = Field(False, description="generate through TRL's vLLM integration (colocate); GPU recipes")
    vllm_gpu_memory_utilization: float = Field(
        0.3, gt=0, le=0.95, description="share of GPU memory the colocated vLLM engine takes")
