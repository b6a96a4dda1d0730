"""Schema of ``configs/pipeline/*.yaml``: which stages a pipeline runs, on what.

A pipeline recipe names the run, the model spec, the doctrine version and, per stage, the
recipe that stage reads. Stage recipes keep their own schemas (``configs/data``,
``configs/train``...); the pipeline only strings them together.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from plumbing.recipe_loader import BaseConfig, ConfigError, load_config

# Which schema validates the files of each folder under configs/. Values are import paths
# so that this table can name schemas of packages that import torch without importing it.
SCHEMAS: dict[str, str] = {
    "pipeline": "pipeline.recipe:PipelineConfig",
    "train": "train.recipe:TrainRecipe",
    "data": "data_gen.recipe:DataRecipe",
    "accelerate": "train.accelerate_schema:AccelerateConfig",
    "eval": "eval.recipe:EvalRecipe",
    "on_policy": "rl.on_policy:OnPolicyRecipe",
}


def import_schema(kind: str) -> type[BaseConfig]:
    """The schema of ``configs/<kind>/`` (its module imported now)."""
    module, _, name = SCHEMAS[kind].partition(":")
    return getattr(importlib.import_module(module), name)


def schema_for_path(path: str | Path) -> type[BaseConfig]:
    """Return the schema for a file under ``configs/<folder>/`` (by its folder name)."""
    parts = Path(path).resolve().parts
    if "configs" in parts:
        idx = len(parts) - 1 - parts[::-1].index("configs")
        if idx + 1 < len(parts) - 1 and parts[idx + 1] in SCHEMAS:
            return import_schema(parts[idx + 1])
    raise ConfigError(
        f"{path}: no schema for this location; recipes live under configs/<kind>/ "
        f"with kind one of {sorted(SCHEMAS)}"
    )


def load_recipe(path: str | Path, overrides: list[str] | dict[str, Any] | None = None) -> BaseConfig:
    """Load any recipe under ``configs/<kind>/`` into the schema of its folder."""
    return load_config(path, schema_for_path(path), overrides)

Stage = Literal["doctrine", "data", "train", "adapter", "eval", "report"]


class PipelineConfig(BaseConfig):
    # Run
    run_name: str = Field("demo", description="folder name under runs_dir")
    runs_dir: str = Field("runs", description="root of all run folders")
    # Model and doctrine
    model: str = Field("embedded:smollm2-135m-instruct", description="model spec of every stage (plumbing/models.py)")
    doctrine_version: str = Field("v1", description="doctrine version folder")
    # Stages, in order; each is skipped when its manifest exists.
    stages: list[Stage] = Field(default_factory=lambda: ["doctrine"], min_length=1,
                                description="stages run, in pipeline order (doctrine, data, train, adapter, "
                                            "eval, report)")
    # Stage recipes (paths relative to the project root)
    data_recipe: str | None = Field(None, description="configs/data recipe of the data stage")
    train_recipe: str | None = Field(None, description="configs/train recipe of the train stage")
    accelerate_config: str | None = Field(None, description="configs/accelerate topology the train stage "
                                          "launches under (None: one process, no accelerate launch)")
    eval_recipe: str | None = Field(None, description="configs/eval recipe of the eval stage")

    @field_validator("run_name")
    @classmethod
    def _one_folder(cls, name: str) -> str:
        from plumbing.runs import run_name_error

        if problem := run_name_error(name):
            raise ValueError(problem)
        return name
