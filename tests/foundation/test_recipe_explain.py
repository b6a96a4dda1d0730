"""Recipes explain themselves: every field has a description, and ``dtw STAGE --explain``
prints the resolved recipe with each key's meaning and default."""

from __future__ import annotations

import typing

import pytest
import yaml
from pydantic import BaseModel

from pipeline.dtw import main as dtw
from pipeline.recipe import SCHEMAS, import_schema


def _models_in(annotation: typing.Any) -> typing.Iterator[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for arg in typing.get_args(annotation):
        yield from _models_in(arg)


def recipe_models() -> dict[type[BaseModel], str]:
    """Every model a recipe file's keys reach, by the dotted path that first reaches it: the
    schemas of SCHEMAS, their nested sections, and the models that check the eval recipe's
    free-form blocks (arm_settings, backend.settings, each workload's settings: every entry
    of the workload registry, so a new workload is covered without touching this test)."""
    from eval.recipe import BACKEND_SETTINGS, ArmSettings
    from eval.workloads import WORKLOADS

    seen: dict[type[BaseModel], str] = {}

    def walk(model: type[BaseModel], where: str) -> None:
        if model in seen:
            return
        seen[model] = where
        for name, field in model.model_fields.items():
            for sub in _models_in(field.annotation):
                walk(sub, f"{where}.{name}")

    for kind in SCHEMAS:
        walk(import_schema(kind), kind)
    walk(ArmSettings, "eval.arm_settings")
    for name, model in BACKEND_SETTINGS.items():
        walk(model, f"eval.backend.settings[{name}]")
    for name, workload in WORKLOADS.items():
        walk(workload.Settings, f"eval.workloads[{name}].settings")
    return seen


def test_every_recipe_field_has_a_description():
    models = recipe_models()
    assert len(models) > 20, sorted(m.__name__ for m in models)  # the walk reached the sections
    missing = [f"{where}.{name} ({model.__name__})" for model, where in models.items()
               for name, field in model.model_fields.items() if not (field.description or "").strip()]
    assert not missing, "recipe fields without a description:\n" + "\n".join(missing)


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = dtw(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_eval_explain_prints_meanings_and_defaults(capsys, project_root):
    recipe = str(project_root / "configs/eval/demo.yaml")
    code, out, err = _run(capsys, "eval", "--explain", recipe)
    assert code == 0, err
    lines = out.splitlines()
    # Each key sits under its own meaning; a changed value says its default, an unchanged one [default].
    at = lines.index("concurrency: 8")
    assert lines[at - 1] == "# jobs run at once (hf: batched by the micro-batcher) [default: 1]"
    at = lines.index("horizon: 2")
    assert lines[at - 1].startswith("# hindsight horizon") and lines[at - 1].endswith("[default]")
    # Nested sections are explained key by key, and a typed block lists what else it takes.
    assert "    # vLLM's --max-lora-rank: at least the adapter's rank [default: 8]" in lines
    assert any(ln.strip().startswith("# lcm_fanout: 4 (lcm:") for ln in lines)
    # Still the resolved recipe: it loads as the same YAML --print-config prints.
    code, printed, err = _run(capsys, "eval", "--print-config", recipe)
    assert code == 0, err
    assert yaml.safe_load(out) == yaml.safe_load(printed)


@pytest.mark.parametrize("stage, recipe", [
    ("run", "configs/pipeline/demo.yaml"),
    ("data", "configs/data/demo.yaml"),
    ("train", "configs/train/demo.yaml"),
    ("eval", "configs/eval/smoke.yaml"),
])
def test_every_recipe_stage_explains_with_overrides(capsys, project_root, stage, recipe):
    schema = import_schema(recipe.split("/")[1])
    key = {"run": "run_name=other", "data": "shard_rows=7", "train": "trainer.seed=7",
           "eval": "max_tokens=7"}[stage]
    code, out, err = _run(capsys, stage, str(project_root / recipe), key, "--explain")
    assert code == 0, err
    assert out.startswith(f"# {schema.__name__}: ")
    loaded = yaml.safe_load(out)
    dotted, value = key.split("=")
    node = loaded
    for part in dotted.split("."):
        node = node[part]
    assert str(node) == value
    # Every top-level key of the schema is explained by a comment line just above it.
    lines = out.splitlines()
    for name in schema.model_fields:
        at = next(i for i, ln in enumerate(lines) if ln.startswith(f"{name}:"))
        assert lines[at - 1].startswith("# ") and len(lines[at - 1]) > 12, name


def test_explain_refuses_a_bad_recipe_like_print_config(capsys, project_root):
    code, out, err = _run(capsys, "train", str(project_root / "configs/train/demo.yaml"),
                          "trainer.max_stepz=3", "--explain")
    assert code == 2 and not out
    assert "unknown key 'max_stepz'" in err
