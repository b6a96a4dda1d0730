"""Config errors as a user meets them: unknown keys, wrong types, bad overrides."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import Field

from doctrine.config import (
    SCHEMAS,
    BaseConfig,
    ConfigError,
    config_to_yaml,
    load_config,
    parse_overrides,
    schema_for_path,
)


class Lora(BaseConfig):
    rank: int = 16
    alpha: int = 32
    target_modules: list[str] = Field(default_factory=lambda: ["q_proj"])


class Trainer(BaseConfig):
    lr: float = 2e-4
    max_steps: int = 10
    extra: dict = Field(default_factory=dict)


class Recipe(BaseConfig):
    model: str
    lora: Lora = Field(default_factory=Lora)
    trainer: Trainer = Field(default_factory=Trainer)


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "recipe.yaml"
    p.write_text(text)
    return p


def test_loads_and_applies_overrides_after_yaml(tmp_path):
    p = write(tmp_path, "model: m\ntrainer:\n  lr: 1.0e-3\n")
    cfg = load_config(p, Recipe, ["trainer.lr=5e-5", "lora.rank=8", "lora.target_modules=[q_proj, v_proj]"])
    assert cfg.trainer.lr == 5e-5
    assert cfg.lora.rank == 8
    assert cfg.lora.target_modules == ["q_proj", "v_proj"]
    assert cfg.trainer.max_steps == 10  # default kept


def test_double_dash_override_form_is_accepted(tmp_path):
    p = write(tmp_path, "model: m\n")
    assert load_config(p, Recipe, ["--trainer.max_steps=3"]).trainer.max_steps == 3


def test_unknown_key_names_key_and_file_with_suggestion(tmp_path):
    p = write(tmp_path, "model: m\ntrainer:\n  lrr: 0.1\n")
    with pytest.raises(ConfigError) as err:
        load_config(p, Recipe)
    msg = str(err.value)
    assert str(p) in msg
    assert "unknown key 'trainer.lrr'" in msg
    assert "did you mean 'lr'" in msg


def test_wrong_type_names_key_and_value(tmp_path):
    p = write(tmp_path, "model: m\nlora:\n  rank: sixteen\n")
    with pytest.raises(ConfigError) as err:
        load_config(p, Recipe)
    msg = str(err.value)
    assert "lora.rank" in msg and "'sixteen'" in msg


def test_missing_required_key(tmp_path):
    p = write(tmp_path, "trainer: {}\n")
    with pytest.raises(ConfigError, match="missing required key 'model'"):
        load_config(p, Recipe)


def test_bad_override_key_fails_before_validation(tmp_path):
    p = write(tmp_path, "model: m\n")
    with pytest.raises(ConfigError) as err:
        load_config(p, Recipe, ["trainer.max_step=3"])
    assert "unknown key 'max_step' at trainer" in str(err.value)
    assert "did you mean 'max_steps'" in str(err.value)


def test_override_into_free_form_dict_is_allowed(tmp_path):
    p = write(tmp_path, "model: m\n")
    cfg = load_config(p, Recipe, ["trainer.extra.anything=1"])
    assert cfg.trainer.extra == {"anything": 1}


def test_malformed_override_and_yaml(tmp_path):
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        parse_overrides(["trainer.lr"])
    p = write(tmp_path, "model: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(p, Recipe)
    p = write(tmp_path, "- a\n- b\n")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_config(p, Recipe)
    with pytest.raises(ConfigError, match="no such recipe file"):
        load_config(tmp_path / "nope.yaml", Recipe)


def test_override_wrong_type_is_reported(tmp_path):
    p = write(tmp_path, "model: m\n")
    with pytest.raises(ConfigError, match="trainer.max_steps"):
        load_config(p, Recipe, ["trainer.max_steps=many"])


def test_print_config_round_trips(tmp_path):
    p = write(tmp_path, "model: m\n")
    cfg = load_config(p, Recipe, ["lora.rank=4"])
    again = write(tmp_path, config_to_yaml(cfg))
    assert load_config(again, Recipe) == cfg


def test_schema_is_chosen_by_folder(project_root):
    from doctrine.pipeline_config import PipelineConfig

    assert schema_for_path(project_root / "configs/pipeline/demo.yaml") is PipelineConfig
    with pytest.raises(ConfigError, match="no schema for this location"):
        schema_for_path(project_root / "README.md")


def all_recipes(root: Path) -> list[Path]:
    return sorted(p for p in (root / "configs").rglob("*") if p.suffix in {".yaml", ".yml"})


def test_every_recipe_under_configs_validates(project_root):
    recipes = all_recipes(project_root)
    assert recipes, "configs/ holds no recipes"
    for path in recipes:
        # Each recipe starts with the command that runs it.
        first = path.read_text().splitlines()[0]
        assert first.startswith("# "), f"{path}: first line must be '# <command that runs it>'"
        load_config(path)  # raises ConfigError with the file and key on any problem


def test_every_schema_folder_is_importable():
    from doctrine.config import _import

    for folder, target in SCHEMAS.items():
        assert issubclass(_import(target), BaseConfig), folder


def test_pipeline_print_config_cli(project_root):
    out = subprocess.run(
        [sys.executable, "-m", "doctrine.pipeline", str(project_root / "configs/pipeline/demo.yaml"),
         "run_name=other", "--print-config"],
        capture_output=True, text=True, cwd=project_root, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "run_name: other" in out.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "doctrine.pipeline", str(project_root / "configs/pipeline/demo.yaml"),
         "stagez=[doctrine]", "--print-config"],
        capture_output=True, text=True, cwd=project_root, timeout=60,
    )
    assert bad.returncode == 2
    assert "unknown key 'stagez'" in bad.stderr and "did you mean 'stages'" in bad.stderr
