"""Resumes that know what they resume: an eval or a data build rerun on other inputs (rebuilt
data, another doctrine hash, another adapter, a changed recipe) is refused with the
differences, a deleted case file makes the run incomplete, and the report counts only the
cases of the run's plan."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from eval.harness import RunConflict, load_results, run_eval
from eval.recipe import EvalRecipe
from plumbing.recipe_loader import load_config
from plumbing.runs import read_manifest

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "configs/eval/smoke.yaml"
ROWS = ROOT / "configs/eval/fixtures/held_out/test/rows.jsonl"
HELD_OUT = [{"name": "held_out", "settings": {"split": "test"}}]


def quiet(_line: str) -> None:
    pass


def recipe(data_dir: Path, *extra: str) -> EvalRecipe:
    return load_config(SMOKE, EvalRecipe, [f"data_dir={data_dir}", f"workloads={json.dumps(HELD_OUT)}",
                                           "arms=[doctrine, base_slim]", "concurrency=1", *extra])


def copy_rows(dest: Path, rows: list[str] | None = None) -> Path:
    (dest / "test").mkdir(parents=True, exist_ok=True)
    text = "\n".join(rows) + "\n" if rows is not None else ROWS.read_text()
    (dest / "test" / "rows.jsonl").write_text(text)
    return dest


def fake_adapter(folder: Path, weights: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "adapter_config.json").write_text('{"r": 4}')
    (folder / "adapter_model.safetensors").write_bytes(weights)
    return folder


def _rebuild_data(data: Path, adapter: Path, monkeypatch) -> str:
    rows = ROWS.read_text().splitlines()
    row = json.loads(rows[0])
    row["messages"][-2]["content"] = (row["messages"][-2].get("content") or "") + " (rebuilt)"
    copy_rows(data, [json.dumps(row), *rows[1:]])
    return "data of held_out"


def _new_doctrine(data: Path, adapter: Path, monkeypatch) -> str:
    import doctrine.spec as spec

    real = spec.resolve_doctrine
    monkeypatch.setattr(spec, "resolve_doctrine", lambda v: dataclasses.replace(real(v), sha256="f" * 64))
    return "doctrine_sha256"


def _new_adapter(data: Path, adapter: Path, monkeypatch) -> str:
    fake_adapter(adapter, b"other weights")
    return "adapter_sha256"


@pytest.mark.parametrize("change", [_rebuild_data, _new_doctrine, _new_adapter], ids=["data", "doctrine", "adapter"])
def test_an_eval_rerun_on_other_inputs_is_refused_with_the_difference(tmp_path, monkeypatch, change):
    data = copy_rows(tmp_path / "data")
    adapter = fake_adapter(tmp_path / "adapter", b"weights")
    r = recipe(data, f"backend.adapter_dir={adapter}")
    out = tmp_path / "eval"
    first = run_eval(r, out, log=quiet)
    assert first.complete and first.ran == first.total == 12
    key = change(data, adapter, monkeypatch)
    # today: "all 12 cases already done", scored on the old inputs
    with pytest.raises(RunConflict, match=f"{key}.* -> .*--force"):
        run_eval(r, out, log=quiet)
    forced = run_eval(r, out, log=quiet, force=True)
    assert forced.complete and forced.skipped == 0 and forced.ran == 12


def test_a_deleted_case_file_makes_the_run_incomplete_and_a_rerun_recomputes_it(tmp_path):
    from eval.report import summarise_run

    data = copy_rows(tmp_path / "data")
    out = tmp_path / "eval"
    assert run_eval(recipe(data), out, log=quiet).complete
    victim = sorted(out.glob("cases/doctrine/*.json"))[0]
    victim.unlink()
    s = summarise_run(out)
    assert s["complete"] is False and (s["cases_done"], s["cases_total"]) == (11, 12)  # today: complete
    again = run_eval(recipe(data), out, log=quiet)
    assert again.ran == 1 and again.complete and victim.is_file()
    assert summarise_run(out)["complete"] is True


def test_the_report_never_counts_cases_outside_the_plan(tmp_path):
    """A stray case file (another dataset's ids, another recipe's) is not reported: never
    '24 of 12'; and a data rebuild with new ids is refused, not mixed in."""
    from eval.report import summarise_run

    data = copy_rows(tmp_path / "data")
    out = tmp_path / "eval"
    assert run_eval(recipe(data), out, log=quiet).complete
    for p in sorted(out.glob("cases/*/*.json")):  # the same results under ids of no current row
        shutil.copyfile(p, p.with_name("held_out.99" + p.name.split(".", 1)[1]))
    s = summarise_run(out)
    assert (s["cases_done"], s["cases_total"]) == (12, 12) and s["complete"]
    assert len(load_results(out)) == 12
    # New ids: the rows reordered and one dropped (ids are position + session + step).
    rows = ROWS.read_text().splitlines()
    copy_rows(data, rows[1:])
    with pytest.raises(RunConflict, match="data of held_out"):
        run_eval(recipe(data), out, log=quiet)
    forced = run_eval(recipe(data), out, log=quiet, force=True)
    assert forced.complete and forced.total == 10
    s = summarise_run(out)
    assert (s["cases_done"], s["cases_total"]) == (10, 10)


def build(out: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "data_gen", "build", "configs/data/smoke.yaml", "--out", str(out), *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, HF_HUB_OFFLINE="1"))


def test_a_data_rebuild_after_a_recipe_change_is_refused_or_forced(tmp_path):
    out = tmp_path / "data"
    assert build(out).returncode == 0
    assert "[skip]" in build(out).stdout  # same recipe: skipped
    changed = build(out, "replay.horizon=3")
    # today: "[skip] data", exit 0, the old rows kept under the new recipe
    assert changed.returncode == 2 and "replay.horizon: 2 -> 3" in changed.stderr and "--force" in changed.stderr
    assert read_manifest(out)["config"]["replay"]["horizon"] == 2
    forced = build(out, "replay.horizon=3", "--force")
    assert forced.returncode == 0, forced.stderr[-2000:]
    m = read_manifest(out)
    assert m["config"]["replay"]["horizon"] == 3
    assert set(m["files"]) == {p.relative_to(out).as_posix() for p in out.glob("*/shard-*.parquet")}
