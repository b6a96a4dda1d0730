"""``EvalRecipe``: the typed YAML schema of ``configs/eval/*.yaml``.

    python -m eval run configs/eval/smoke.yaml --out runs/smoke/eval [key=value ...]

A run is every (arm x workload case x window x seed) the recipe names. Backend settings
name the environment variable that holds an API key (``api_key_env``); a key written
into a recipe is refused.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from doctrine.config import BaseConfig, describe_errors

ARM_NAMES = ("full", "n_latest_10", "n_latest_20", "n_latest_40", "sliding", "auto_compact", "micro_auto",
             "deterministic", "doctrine", "base_slim", "distilled")


def check_settings(model: type[BaseConfig], value: dict[str, Any], where: str, label: str = "") -> dict[str, Any]:
    """``value`` unchanged if ``model`` accepts it, else a ValueError naming every bad key
    (``where`` prefixes them: ``settings.sesions``) on one line, after ``label``."""
    try:
        model.model_validate(value)
    except ValidationError as exc:
        raise ValueError(label + "; ".join(describe_errors(exc, model, f"{where}."))) from None
    return value


class ArmSettings(BaseConfig):
    """What ``arm_settings`` may set: the tunable fields of ``eval.arms.ArmEnv`` (the rest of
    ArmEnv comes from the run: window, doctrine, serving profile). Defaults are ArmEnv's."""

    compact_threshold: float = Field(0.8, gt=0, le=1)  # auto_compact: summarise past this share of the window
    sliding_fraction: float = Field(0.75, gt=0, le=1)  # sliding: share of the window kept
    micro_min_chars: int = Field(500, ge=0)  # micro_auto: tool results longer than this are cleared
    micro_keep: int = Field(5, ge=0)  # micro_auto: newest tool results kept
    deterministic_every: int = Field(3, ge=1)  # deterministic: decision points between compressions


class BackendSpec(BaseConfig):
    # oracle, never_compress, first_range: the reference policies (no model) the scorer is checked with
    name: Literal["hf", "vllm", "openai", "oracle", "never_compress", "first_range"] = "oracle"
    model: str | None = None  # a model spec (train.models): embedded:..., tiny:..., hub id, local dir
    adapter_dir: str | None = None  # PEFT adapter (the exported adapter/ folder) for the distilled arm
    settings: dict[str, Any] = Field(default_factory=dict)  # backend extras: base_url, adapter_model, ...

    @field_validator("model")
    @classmethod
    def _model_given(cls, v: str | None) -> str | None:
        if v is not None and not v.strip():
            raise ValueError("empty model spec; give one (e.g. embedded:smollm2-135m-instruct) or leave it out")
        return v

    @field_validator("settings")
    @classmethod
    def _no_keys(cls, v: dict[str, Any]) -> dict[str, Any]:
        for k in v:
            if k.lower() in ("api_key", "key", "token", "password", "secret"):
                raise ValueError(f"backend.settings.{k}: never put a key in a recipe; name its "
                                 "environment variable with api_key_env")
        return v

    def factory_settings(self) -> dict[str, Any]:
        out = dict(self.settings)
        if self.model is not None:
            out.setdefault("model", self.model)
        if self.adapter_dir is not None:
            out.setdefault("adapter_dir", self.adapter_dir)
        return out


class WorkloadSpec(BaseConfig):
    name: str  # a key of eval.workloads.WORKLOADS (scripted, held_out, ...)
    # Checked against the workload's Settings model (eval.workloads.<module>.<Name>Settings);
    # kept as given, so the run's fingerprint is what the recipe says.
    settings: dict[str, Any] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _known(cls, v: str) -> str:
        from eval.workloads import WORKLOADS

        if v not in WORKLOADS:
            raise ValueError(f"unknown workload {v!r}; expected one of {sorted(WORKLOADS)}")
        return v

    @model_validator(mode="after")
    def _settings(self) -> WorkloadSpec:
        """Each workload's ``Settings`` model checks its settings here, before any case runs
        (a misspelt key would otherwise be ignored and its cases silently dropped)."""
        from eval.workloads import WORKLOADS

        check_settings(WORKLOADS[self.name].Settings, self.settings, "settings", f"{self.name} workload: ")
        return self


class EvalRecipe(BaseConfig):
    name: str = "eval"
    doctrine_version: str = "v1"
    backend: BackendSpec = Field(default_factory=BackendSpec)
    arms: list[str] = Field(default_factory=lambda: list(ARM_NAMES))
    workloads: list[WorkloadSpec] = Field(default_factory=list)
    windows: list[int] = Field(default_factory=lambda: [8192])
    seeds: list[int] = Field(default_factory=lambda: [0])
    concurrency: int = Field(1, ge=1)
    max_tokens: int = Field(256, ge=1)
    horizon: int = Field(2, ge=0)  # hindsight horizon (steps) of the oracle policy
    # Serving profile of the kernel arms (doctrine.kernel.profile): gate preset, host variant,
    # nudge style; each arm's prompt mode completes it.
    gate: Literal["reference", "default", "aggressive"] = "aggressive"
    host: Literal["proxy", "pi"] = "proxy"
    nudge_style: Literal["list", "none"] = "list"
    # The distilled arm must run under a profile the adapter was trained with (its manifest's
    # serving_profiles); set true to evaluate it under another one on purpose (the report says so).
    allow_profile_mismatch: bool = False
    kernel: dict[str, Any] = Field(default_factory=dict)  # KernelConfig overrides on top of the preset
    arm_settings: dict[str, Any] = Field(default_factory=dict)  # ArmSettings keys (ArmEnv thresholds, cadence)
    output: str | None = None  # default --out

    @field_validator("arm_settings")
    @classmethod
    def _arm_settings(cls, v: dict[str, Any]) -> dict[str, Any]:
        return check_settings(ArmSettings, v, "arm_settings")

    @field_validator("arms")
    @classmethod
    def _arms(cls, v: list[str]) -> list[str]:
        bad = [a for a in v if a not in ARM_NAMES]
        if bad:
            raise ValueError(f"unknown arms {bad}; expected some of {list(ARM_NAMES)}")
        if len(set(v)) != len(v):
            raise ValueError("arms are listed twice")
        return v

    @field_validator("windows")
    @classmethod
    def _windows(cls, v: list[int]) -> list[int]:
        if not v or any(w < 256 for w in v):
            raise ValueError("windows must be a non-empty list of token counts >= 256")
        return v

    @model_validator(mode="after")
    def _adapter(self) -> EvalRecipe:
        if "distilled" in self.arms and self.backend.name in ("hf", "vllm") and not self.backend.adapter_dir:
            raise ValueError("the distilled arm needs backend.adapter_dir with the hf and vllm backends")
        if not self.workloads:
            raise ValueError("workloads: name at least one workload (scripted or held_out)")
        return self
