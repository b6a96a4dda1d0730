"""Writes and deletes only inside the run folder, and only of files the project wrote: a
symlinked split or stage folder is refused (never followed and cleaned), ``--out`` on a
folder of the user's is refused without touching it, and ``eval --force`` deletes only the
case files the harness wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from data_gen.build import build_curriculum
from data_gen.recipe import DataRecipe
from eval.harness import RunConflict, run_eval
from eval.recipe import EvalRecipe
from plumbing.recipe_loader import ConfigError, load_config
from plumbing.runs import read_manifest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "configs/data/smoke.yaml"
SMOKE = ROOT / "configs/eval/smoke.yaml"


def quiet(*_a) -> None:
    pass


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def eval_recipe(*extra: str) -> EvalRecipe:
    return load_config(SMOKE, EvalRecipe, ["arms=[full, doctrine]", "concurrency=1", *extra])


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("run") / "data"
    build_curriculum(load_config(DATA, DataRecipe), out, log=quiet, progress=False)
    return out


def test_a_symlinked_split_folder_is_refused_and_never_cleaned(built, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "shard-00007.parquet").write_bytes(b"the user's file")  # a 'stale shard' name
    (elsewhere / "notes.txt").write_text("mine")
    before = snapshot(elsewhere)
    train = built / "train"
    kept = snapshot(train)
    moved = tmp_path / "train-kept"
    train.rename(moved)
    train.symlink_to(elsewhere, target_is_directory=True)
    try:
        with pytest.raises(ValueError, match="symbolic link"):  # today: shards written there, 00007 deleted
            build_curriculum(load_config(DATA, DataRecipe), built, log=quiet, progress=False)
    finally:
        train.unlink()
        moved.rename(train)
    assert snapshot(elsewhere) == before and snapshot(train) == kept
    assert read_manifest(built) is not None  # refused before anything, the old build intact


def test_a_symlinked_stage_folder_of_a_pipeline_run_is_refused(tmp_path):
    from pipeline.recipe import PipelineConfig
    from pipeline.runner import run_pipeline

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "runs" / "x").mkdir(parents=True)
    (tmp_path / "runs" / "x" / "data").symlink_to(elsewhere, target_is_directory=True)
    cfg = load_config(ROOT / "configs/pipeline/smoke.yaml", PipelineConfig,
                      [f"runs_dir={tmp_path / 'runs'}", "run_name=x", "stages=[doctrine, data]",
                       f"data_recipe={DATA}"])
    with pytest.raises(ConfigError, match="symbolic link"):  # today: the curriculum is written there
        run_pipeline(cfg, log=quiet)
    assert list(elsewhere.iterdir()) == []
    assert not (tmp_path / "runs" / "x" / "doctrine").exists()  # refused before any stage


def test_out_on_a_folder_of_the_users_is_refused_untouched(tmp_path):
    user = tmp_path / "my-project"
    (user / "train").mkdir(parents=True)
    (user / "train" / "shard-00003.parquet").write_bytes(b"my own parquet")
    (user / "README.md").write_text("my notes")
    (user / "cases").mkdir()
    (user / "cases" / "old.json").write_text("{}")
    before = snapshot(user)
    with pytest.raises(ValueError, match="the project did not create it"):  # today: overwritten, 00003 deleted
        build_curriculum(load_config(DATA, DataRecipe), user, log=quiet, progress=False)
    with pytest.raises(RunConflict, match="the project did not create it"):  # today: cases written into it
        run_eval(eval_recipe(), user, base_dir=SMOKE.parent, log=quiet)
    assert snapshot(user) == before


def test_eval_force_deletes_only_the_case_files_it_wrote(tmp_path):
    out = tmp_path / "eval"
    first = run_eval(eval_recipe(), out, base_dir=SMOKE.parent, log=quiet)
    assert first.complete
    ours = sorted(out.glob("cases/*/*__s0.json"))
    assert len(ours) == first.total
    (out / "cases" / "full" / "my-notes.txt").write_text("keep me")
    (out / "cases" / "summary.json").write_text('{"mine": true}')
    (out / "cases" / "mine").mkdir()
    (out / "cases" / "mine" / "draft.md").write_text("keep me too")
    (out / "analysis.ipynb").write_text("{}")
    forced = run_eval(eval_recipe("arms=[full]", "gate=default"), out, base_dir=SMOKE.parent, log=quiet, force=True)
    assert forced.complete and forced.skipped == 0
    # today: all of cases/ is deleted, the user's files with it
    assert (out / "cases" / "full" / "my-notes.txt").read_text() == "keep me"
    assert json.loads((out / "cases" / "summary.json").read_text()) == {"mine": True}
    assert (out / "cases" / "mine" / "draft.md").is_file() and (out / "analysis.ipynb").is_file()
    assert not (out / "cases" / "doctrine").exists()  # the old run's own files are gone
    assert {p.parent.name for p in out.glob("cases/*/*__s0.json")} == {"full"}
