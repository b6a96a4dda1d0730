"""Hostile files give one-line errors, empty runs are never complete, and no NaN reaches a
JSON file (low severity; each failed so: deep YAML and deep or invalid replay scripts were
tracebacks, a forged manifest or a truncated shard crashed ``data_gen inspect``, a wrong-typed
case file crashed ``eval report``, a zero-row curriculum and ``arms: []`` were complete, and
a NaN metric was written into report.json)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from pipeline.recipe import load_recipe
from plumbing.recipe_loader import ConfigError
from plumbing.runs import MANIFEST_FORMAT


def _one_line(err: str) -> str:
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err[-2000:]
    return lines[0]


def _strict(text: str):
    def refuse(name):
        raise AssertionError(f"{name} in JSON")

    return json.loads(text, parse_constant=refuse)


def test_hostile_files_and_empty_runs_fail_in_one_line(project_root, tmp_path, capsys):
    from data_gen.__main__ import main as data_gen
    from doctrine.kernel.__main__ import main as kernel
    from eval.__main__ import main as eval_cli

    # 1. A recipe nested 5,000 levels deep.
    deep = tmp_path / "configs" / "eval" / "deep.yaml"
    deep.parent.mkdir(parents=True)
    deep.write_text("name: x\nkernel: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(ConfigError, match="nest"):
        load_recipe(deep)

    # 2. Replay scripts: deep JSON, NaN, a wrong-typed config value, bytes that are not UTF-8.
    scripts = {"deep": '{"model_context_limit": 8000}\n' + "[" * 100000 + "]" * 100000 + "\n",
               "nan": '{"model_context_limit": 8000, "growthFloor": NaN}\n',
               "typed": '{"model_context_limit": 8000, "growthFloor": "x"}\n'
                        '{"op": "turn", "messages": [], "token_count": 3}\n'}
    for name, text in scripts.items():
        (tmp_path / f"{name}.jsonl").write_text(text)
    (tmp_path / "binary.jsonl").write_bytes(b"\xff\xfe\x00\n")
    for name in [*scripts, "binary"]:
        assert kernel(["replay", str(tmp_path / f"{name}.jsonl")]) == 2, name
        line = _one_line(capsys.readouterr().err)
        assert name == "binary" or "line " in line, line

    # 3. data_gen inspect: a forged manifest, then a truncated shard.
    data = tmp_path / "data"
    (data / "train").mkdir(parents=True)
    (data / "manifest.json").write_text(json.dumps({"format": MANIFEST_FORMAT, "stage": "data"}))
    assert data_gen(["inspect", str(data)]) == 2
    assert "not a data manifest" in _one_line(capsys.readouterr().err)
    (data / "train" / "shard-00000.parquet").write_bytes(b"PAR1" + b"\x00" * 40)
    (data / "manifest.json").write_text(json.dumps({  # it lists the shard: the shard itself is bad
        "format": MANIFEST_FORMAT, "stage": "data", "counts": {"train": 1, "kinds": {}},
        "doctrine": {"version": "v1", "sha256": "0" * 64}, "splits": ["train"],
        "files": {"train/shard-00000.parquet": hashlib.sha256(b"PAR1" + b"\x00" * 40).hexdigest()}}))
    assert data_gen(["inspect", str(data), "--plain"]) == 2
    assert "unreadable parquet shard" in _one_line(capsys.readouterr().err)

    # 4. A data build that yields no row is refused, not complete.
    out = tmp_path / "empty"
    assert data_gen(["build", str(project_root / "configs/data/smoke.yaml"), "--out", str(out), "max_tokens=10"]) == 2
    assert "no rows" in _one_line(capsys.readouterr().err)
    assert not (out / "manifest.json").exists()

    # 5. An eval of no arm is refused.
    with pytest.raises(ConfigError, match="at least one arm"):
        load_recipe(project_root / "configs/eval/smoke.yaml", overrides=["arms=[]"])

    # 6. eval report: a NaN metric never reaches report.json; a wrong-typed case file is one line.
    run = tmp_path / "eval"
    assert eval_cli(["run", str(project_root / "configs/eval/smoke.yaml"), "--out", str(run)]) == 0
    capsys.readouterr()
    case = sorted((run / "cases" / "doctrine").glob("held_out*.json"))[0]
    good = case.read_text()
    row = json.loads(good)
    row["metrics"]["kind_correct"] = float("nan")
    case.write_text(json.dumps(row))  # json.dumps writes NaN, as a hand edit could
    assert eval_cli(["report", str(run), "--quiet"]) == 0
    folder = Path(capsys.readouterr().out.strip().splitlines()[0])
    report = _strict((folder / "report.json").read_text())
    assert report["cases_done"] == 40
    shutil.rmtree(folder)
    row["metrics"] = ["kind_correct"]
    case.write_text(json.dumps(row))
    assert eval_cli(["report", str(run)]) == 2
    assert "not a case file" in _one_line(capsys.readouterr().err)
    assert Path(case).read_text() != good  # nothing was rewritten or deleted
