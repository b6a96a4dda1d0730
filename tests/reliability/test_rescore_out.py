"""``dtw rescore A --out B`` writes only a re-score of A, only inside B (high severity; it
failed so: B another run's complete eval had its cases, manifest and recipe overwritten; a
symlinked ``cases/`` folder in B was written through, outside the run; ``--out`` inside the
source run wrote there). The writes go through the one confined-path rule export uses too
(``plumbing.runs.confined_path``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.backends.oracle import OracleBackend
from eval.harness import run_eval
from eval.recipe import EvalRecipe
from eval.rescore import rescore
from plumbing.recipe_loader import load_config
from plumbing.runs import read_manifest

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "configs/eval/smoke.yaml"


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def finished_eval(out: Path, arms: str) -> Path:
    held = [{"name": "held_out", "settings": {"data_dir": "fixtures/held_out", "split": "test", "limit": 3}},
            {"name": "scripted", "settings": {"sessions": "fixtures/sessions.jsonl"}}]  # copied, not re-scored
    r = load_config(SMOKE, EvalRecipe, [f"workloads={json.dumps(held)}", f"arms={arms}", "concurrency=1"])
    assert run_eval(r, out, base_dir=SMOKE.parent, backend=OracleBackend(), log=lambda s: None).complete
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("runs")
    return finished_eval(root / "a" / "eval", "[base_slim, full]"), finished_eval(root / "b" / "eval", "[doctrine]")


def test_another_runs_complete_eval_is_never_overwritten(runs):
    a, b = runs
    before = snapshot(b)
    with pytest.raises(ValueError, match="holds the eval stage's results"):  # today: b's files replaced
        rescore(a, b, base_dir=SMOKE.parent)
    assert snapshot(b) == before


@pytest.mark.parametrize("where", ["rescored", "eval/rescored"])
def test_out_inside_the_source_run_is_refused(runs, where):
    a, _ = runs
    before = snapshot(a.parent)
    with pytest.raises(ValueError, match="inside the source run"):  # today: written there
        rescore(a, a.parent / where, base_dir=SMOKE.parent)
    assert snapshot(a.parent) == before and not (a.parent / where).exists()


def test_a_rescore_never_writes_through_a_link(runs, tmp_path):
    a, _ = runs
    out = tmp_path / "re"
    rescore(a, out, base_dir=SMOKE.parent)  # a fresh folder, then the same source again: allowed
    rescore(a, out, base_dir=SMOKE.parent)
    assert read_manifest(out)["rescored_from"] == str(a)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "mine.json").write_text("{}")
    # A linked arm folder: the full arm's scripted cases are copied unchanged (today: into elsewhere/).
    arm = out / "cases" / "full"
    kept = tmp_path / "full-kept"
    arm.rename(kept)
    arm.symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(ValueError, match="symbolic link"):
        rescore(a, out, base_dir=SMOKE.parent)
    assert [p.name for p in elsewhere.iterdir()] == ["mine.json"]
    arm.unlink()
    kept.rename(arm)
    # A linked cases/ folder.
    cases = out / "cases"
    cases.rename(tmp_path / "cases-kept")
    cases.symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(ValueError, match="symbolic link"):
        rescore(a, out, base_dir=SMOKE.parent)
    assert [p.name for p in elsewhere.iterdir()] == ["mine.json"]
