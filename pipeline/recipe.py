"""Schema of ``configs/pipeline/*.yaml``: which stages a pipeline runs, on what.

A pipeline recipe names the run, the model spec, the doctrine version and, per stage, the
recipe that stage reads. Stage recipes keep their own schemas (``configs/data``,
``configs/train``...); the pipeline only strings them together.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from plumbing.recipe_loader import BaseConfig

Stage = Literal["doctrine", "data", "train", "adapter", "eval", "report"]


class PipelineConfig(BaseConfig):
    # Run
    run_name: str = Field("demo", description="folder name under runs_dir")
    runs_dir: str = Field("runs", description="root of all run folders")
    # Model and doctrine
    model: str = Field("embedded:smollm2-135m-instruct", description="model spec")
    doctrine_version: str = Field("v1", description="doctrine version folder")
    # Stages, in order; each is skipped when its manifest exists.
    stages: list[Stage] = Field(default_factory=lambda: ["doctrine"])
    # Stage recipes (paths relative to the project root)
    data_recipe: str | None = None
    train_recipe: str | None = None
    accelerate_config: str | None = None
    eval_recipe: str | None = None

    @field_validator("run_name")
    @classmethod
    def _one_folder(cls, name: str) -> str:
        from plumbing.runs import run_name_error

        if problem := run_name_error(name):
            raise ValueError(problem)
        return name
