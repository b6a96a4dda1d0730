"""Config errors as a user meets them: unknown keys, wrong types, bad overrides."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import Field

from pipeline.recipe import SCHEMAS, import_schema, load_recipe, schema_for_path
from plumbing.recipe_loader import (
    BaseConfig,
    ConfigError,
    config_to_yaml,
    load_config,
    parse_overrides,
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
    from pipeline.recipe import PipelineConfig

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
        load_recipe(path)  # raises ConfigError with the file and key on any problem


def test_every_schema_folder_is_importable():
    for folder in SCHEMAS:
        assert issubclass(import_schema(folder), BaseConfig), folder


def test_pipeline_print_config_cli(project_root):
    out = subprocess.run(
        [sys.executable, "-m", "pipeline", str(project_root / "configs/pipeline/demo.yaml"),
         "run_name=other", "--print-config"],
        capture_output=True, text=True, cwd=project_root, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "run_name: other" in out.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "pipeline", str(project_root / "configs/pipeline/demo.yaml"),
         "stagez=[doctrine]", "--print-config"],
        capture_output=True, text=True, cwd=project_root, timeout=60,
    )
    assert bad.returncode == 2
    assert "unknown key 'stagez'" in bad.stderr and "did you mean 'stages'" in bad.stderr


# ---------------------------------------- hostile recipes and the override errors the README shows


def test_duplicate_key_names_the_key_and_line(tmp_path):
    p = write(tmp_path, "model: m\ntrainer:\n  lr: 0.1\n  max_steps: 3\n  lr: 0.2\n")
    with pytest.raises(ConfigError) as err:
        load_config(p, Recipe)
    msg = str(err.value)
    assert str(p) in msg and "duplicate key 'lr' at line 5 (first given at line 3)" in msg
    with pytest.raises(ConfigError, match="duplicate key 'model' at line 1"):
        load_config(write(tmp_path, "{model: a, model: b}\n"), Recipe)
    with pytest.raises(ConfigError, match="duplicate key 'rank'"):
        load_config(write(tmp_path, "model: m\n"), Recipe, ["lora={rank: 1, rank: 2}"])
    # A key merged in with << may still be overridden: that is what merging is for.
    p = write(tmp_path, "base: &b {rank: 4, alpha: 8}\n")
    p.write_text("model: m\nlora:\n  <<: {rank: 4, alpha: 8}\n  rank: 2\n")
    assert load_config(p, Recipe).lora.rank == 2


def _bomb(levels: int, width: int) -> str:
    """A flow mapping of anchors, each a list of ``width`` aliases of the one before."""
    items = [f"a0: &a0 [{', '.join(['x'] * width)}]"]
    items += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels)]
    return "{" + ", ".join(items) + "}"


def test_yaml_alias_bomb_is_refused_with_one_short_line(tmp_path):
    bomb = _bomb(7, 6)  # 6**7 (280k) strings from a 300-byte value
    p = write(tmp_path, f"model: m\ntrainer:\n  extra: {bomb}\nlora:\n  target_modules: [*a6]\n")
    with pytest.raises(ConfigError) as err:
        load_config(p, Recipe)
    msg = str(err.value)
    assert "aliases expand to more than" in msg and "\n" not in msg and len(msg) < 400
    with pytest.raises(ConfigError, match="aliases expand"):  # the same through an override
        load_config(write(tmp_path, "model: m\n"), Recipe, [f"trainer.extra={bomb}"])
    # Aliases within budget still work.
    ok = write(tmp_path, f"model: m\ntrainer:\n  extra: {_bomb(2, 3)}\nlora:\n  target_modules: *a0\n")
    assert load_config(ok, Recipe).lora.target_modules == ["x", "x", "x"]


def test_long_wrong_value_is_echoed_cut_short(tmp_path):
    big = write(tmp_path, "model: m\nlora:\n  rank: [" + ", ".join(["word"] * 5000) + "]\n")
    with pytest.raises(ConfigError) as err:
        load_config(big, Recipe)
    line = next(ln for ln in str(err.value).splitlines() if "lora.rank" in ln)
    assert len(line) < 400 and "(40000 chars)" in line


def test_recursive_alias_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="recursive anchor"):
        load_config(write(tmp_path, "model: m\ntrainer:\n  extra: &e {self: *e}\n"), Recipe)


@pytest.mark.parametrize("cli", [["data_gen", "build"], ["eval", "run"], ["train"], ["pipeline"], ["pipeline.dtw", "run"]])
def test_binary_recipe_is_one_line_error_from_every_cli(tmp_path, project_root, cli):
    p = tmp_path / "recipe.yaml"
    p.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe")
    out_arg = [] if cli[0].startswith("pipeline") else ["--out", str(tmp_path / "out")]
    out = subprocess.run([sys.executable, "-m", *cli, str(p), *out_arg],
                         capture_output=True, text=True, cwd=project_root, timeout=120)
    assert out.returncode == 2, out.stderr
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.startswith(f"error: {p}: not a text recipe (byte 0x89 at offset 0 is not UTF-8)")


@pytest.mark.parametrize("module, argv, shown", [
    ("train.__main__", ["configs/train/demo.yaml", "--print-config", "--trainer.max_steps=3"], "max_steps: 3"),
    ("data_gen.__main__", ["build", "configs/data/demo.yaml", "--print-config", "--shard_rows=7"], "shard_rows: 7"),
    ("eval.__main__", ["run", "configs/eval/smoke.yaml", "--print-config", "--max_tokens=123"], "max_tokens: 123"),
    ("pipeline.__main__", ["configs/pipeline/demo.yaml", "--print-config", "--run_name=try2"], "run_name: try2"),
])
def test_a_leading_double_dash_on_an_override_is_accepted_by_every_cli(project_root, monkeypatch, capsys,
                                                                       module, argv, shown):
    import importlib

    monkeypatch.chdir(project_root)
    rc = importlib.import_module(module).main(argv)
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert shown in out.out
    with pytest.raises(SystemExit) as stray:  # a real unknown flag is still refused
        importlib.import_module(module).main([*argv, "--no-such-flag"])
    assert stray.value.code == 2 and "unrecognized arguments: --no-such-flag" in capsys.readouterr().err


def test_readme_override_errors_are_real(project_root, tmp_path):
    from train.recipe import TrainRecipe

    readme = (project_root / "README.md").read_text(encoding="utf-8")
    with pytest.raises(ConfigError) as over:
        load_config(project_root / "configs/train/demo.yaml", TrainRecipe, ["trainer.learnig_rate=1e-4"])
    assert f"`error: {over.value}`" in readme
    (tmp_path / "train").mkdir()
    text = (project_root / "configs/train/demo.yaml").read_text().replace("learning_rate:", "learnig_rate:")
    (tmp_path / "train" / "demo.yaml").write_text(text)
    with pytest.raises(ConfigError) as yaml_err:
        load_config(tmp_path / "train" / "demo.yaml", TrainRecipe)
    line = "unknown key 'trainer.learnig_rate' (did you mean 'learning_rate'?)"
    assert line in str(yaml_err.value) and f"`{line}`" in readme
    assert "did you mean 'lr'" not in readme and "runs/<name>/doctrine/" not in readme
