"""Hostile recipe numbers: NaN, infinities and integers past 64 bits are refused when the
recipe loads, with one line naming the key (low severity; it failed so: NaN in lora.dropout,
near_threshold, teacher timeout_s accepted; high: trainer.learning_rate=.inf trained;
windows=[1e30] an OverflowError deep in the build)."""

from __future__ import annotations

import pytest

from pipeline.recipe import load_recipe
from plumbing.recipe_loader import ConfigError

HUGE = "1" + "0" * 30  # 1e30 as a YAML int: pydantic takes it, pyarrow overflowed on it

CASES = [
    ("configs/train/smoke.yaml", "trainer.learning_rate=.inf", "trainer.learning_rate"),
    ("configs/train/smoke.yaml", "lora.dropout=.nan", "lora.dropout"),
    ("configs/train/smoke.yaml", f"trainer.max_steps={HUGE}", "trainer.max_steps"),
    ("configs/data/smoke.yaml", "dedupe.near_threshold=.nan", "dedupe.near_threshold"),
    ("configs/data/smoke.yaml", f"replay.windows=[{HUGE}]", "replay.windows"),
    ("configs/data/smoke.yaml", "mixture.kind={refusal: .inf}", "mixture.kind.refusal"),
    ("configs/data/teacher.yaml", "sources.teacher.timeout_s=.nan", "sources.teacher.timeout_s"),
    ("configs/eval/smoke.yaml", "kernel.nudge.growth_floor=.nan", "kernel"),
    ("configs/eval/smoke.yaml", "arm_settings.compact_threshold=-.inf", "arm_settings"),
    ("configs/eval/smoke.yaml", f"windows=[{HUGE}]", "windows"),
]


def test_non_finite_and_overflowing_numbers_are_refused_naming_the_key(project_root):
    accepted = []
    for recipe, override, key in CASES:
        try:
            load_recipe(project_root / recipe, overrides=[override])
        except ConfigError as exc:
            lines = [ln.strip() for ln in str(exc).splitlines()[1:]]
            assert any(ln.startswith(key) for ln in lines), (override, str(exc))
            assert all(len(ln) < 400 for ln in lines)
        else:
            accepted.append(override)
    assert not accepted, f"accepted: {accepted}"
    # Finite values at the edges still load.
    cfg = load_recipe(project_root / "configs/train/smoke.yaml", overrides=["trainer.learning_rate=1e-3"])
    assert cfg.trainer.learning_rate == pytest.approx(1e-3)
