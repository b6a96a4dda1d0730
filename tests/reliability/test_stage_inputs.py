"""A stage reads what the manifest of the stage before it lists, nothing else and nothing
changed (high severity; it failed so: training read every ``*.parquet`` under
``<data>/train/``, so a shard dropped in by hand, one that survived ``dtw data --force``
(which cleans only ``shard-*``) or an edited one was trained on; the held-out eval read stray
row files the same way). Every consumer now reads a stage's files through one reader
(``plumbing.runs.stage_files``); a mismatch is one line naming the file."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from data_gen.build import build_curriculum
from data_gen.recipe import DataRecipe
from eval.workloads.held_out.workload import load_rows
from plumbing.recipe_loader import load_config
from train.data import DataError, load_split

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "configs/data/smoke.yaml"


def quiet(*_a) -> None:
    pass


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("run") / "data"
    build_curriculum(load_config(DATA, DataRecipe), out, log=quiet, progress=False)
    return out


@pytest.fixture
def data(built, tmp_path) -> Path:
    copy = tmp_path / "data"
    shutil.copytree(built, copy)
    return copy


def dtw(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline.dtw", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, HF_HUB_OFFLINE="1"))


def test_a_planted_shard_is_refused_by_training_even_after_a_forced_rebuild(data):
    shard = sorted((data / "train").glob("shard-*.parquet"))[0]
    planted = data / "train" / "extra.parquet"
    shutil.copyfile(shard, planted)
    # today: the planted shard's rows are trained on
    with pytest.raises(DataError, match="extra.parquet: not a file the data stage wrote"):
        load_split(data, "train")
    forced = dtw("data", str(DATA), "--out", str(data), "--force")
    assert forced.returncode == 0, forced.stderr[-2000:]
    assert planted.is_file()  # not the build's file: never deleted, but never read either
    p = dtw("train", str(ROOT / "configs/train/smoke.yaml"), "--out", str(data.parent / "run"),
            f"data.dir={data}", "trainer.max_steps=1")
    assert p.returncode == 2 and "extra.parquet" in p.stderr, p.stderr[-2000:]
    assert "Traceback" not in p.stderr and p.stderr.strip().splitlines()[-1].startswith("error: ")
    assert not (data.parent / "run" / "train" / "manifest.json").exists()


def test_an_edited_or_missing_shard_is_refused(data):
    import pyarrow.parquet as pq

    shard = sorted((data / "train").glob("shard-*.parquet"))[0]
    assert len(load_split(data, "train")) > 0
    table = pq.read_table(shard)
    pq.write_table(table.slice(0, max(1, table.num_rows - 1)), shard)  # a row removed, still valid parquet
    with pytest.raises(DataError, match=f"{shard.name}: changed since the data stage wrote it"):  # today: used
        load_split(data, "train")
    shard.unlink()
    with pytest.raises(DataError, match=f"{shard.name}: listed in .* but missing"):
        load_split(data, "train")


def test_the_held_out_loader_reads_only_the_manifests_files(data):
    rows = load_rows(data, "test")
    assert rows
    stray = data / "test" / "more.jsonl"
    stray.write_text(open(ROOT / "configs/eval/fixtures/held_out/test/rows.jsonl").read())
    with pytest.raises(ValueError, match="more.jsonl: not a file the data stage wrote"):  # today: read
        load_rows(data, "test")
    stray.unlink()
    assert load_rows(data, "test") == rows
    # An interrupted build (its marker, no manifest) is not read as a data folder either.
    (data / "manifest.json").unlink()
    with pytest.raises(ValueError, match="the data stage did not finish"):
        load_rows(data, "test")


def test_rows_made_by_hand_need_no_manifest():
    rows = load_rows(ROOT / "configs/eval/fixtures/held_out", "test")
    assert len(rows) >= 6


def test_training_reads_only_a_data_stage(tmp_path):
    from plumbing.runs import write_manifest
    from train.data import check_data_dir

    (tmp_path / "eval").mkdir()
    write_manifest(tmp_path / "eval", stage="eval", doctrine={"version": "v1", "sha256": "0" * 64})
    with pytest.raises(DataError, match="holds the eval stage's manifest"):  # today: accepted
        check_data_dir(tmp_path / "eval")
