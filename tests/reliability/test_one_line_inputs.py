"""Expected failures of a stage are one line with a reason, and leave nothing half-written
(medium severity; each was a traceback before this round): a full disk in data,
eval and report; shards that are not the curriculum's in ``dtw train`` and ``dtw audit``
(another table, a file cut short, shards of two builds, tool-call arguments nested past the
recursion limit); ``dtw rescore`` of a recipe whose paths are relative to its folder."""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _one_line(err: str) -> str:
    lines = [ln for ln in err.strip().splitlines() if ln.strip() and not ln.startswith(("eval", "\r", "report"))]
    lines = [ln for ln in lines if ln.startswith("error:") or "Traceback" in ln or ln.startswith(" ")]
    assert len(lines) == 1 and "Traceback" not in err, err[-3000:]
    return lines[0]


def dtw(*argv: str) -> int:
    from pipeline.dtw import main

    return main(list(argv))


@pytest.fixture
def full_disk(monkeypatch):
    """``full_disk(folder, part)``: every file written under ``folder`` whose name holds
    ``part`` fails with ENOSPC when it is flushed to the disk, as on a full disk."""
    real = os.fsync

    def start(folder: Path, part: str) -> None:
        def fsync(fd: int) -> None:
            name = os.readlink(f"/proc/self/fd/{fd}")
            if name.startswith(str(folder)) and part in os.path.basename(name):
                raise OSError(errno.ENOSPC, "No space left on device")
            real(fd)

        monkeypatch.setattr(os, "fsync", fsync)

    yield start
    monkeypatch.setattr(os, "fsync", real)


def _half_written(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.name.startswith(".tmp-") or p.name == "manifest.json"]


def test_a_full_disk_stops_data_eval_and_report_in_one_line(tmp_path, capsys, full_disk, monkeypatch):
    data, ev, rep = tmp_path / "data", tmp_path / "eval", tmp_path / "report"
    full_disk(data, "shard-")
    assert dtw("data", str(ROOT / "configs/data/smoke.yaml"), "--out", str(data)) == 2
    line = _one_line(capsys.readouterr().err)
    assert "shard-" in line and "no space left on the device" in line and "rerun" in line, line
    assert not _half_written(data) and not list(data.rglob("*.parquet"))

    full_disk(ev / "cases", "held_out")  # some cases are written, then the disk fills
    assert dtw("eval", str(ROOT / "configs/eval/smoke.yaml"), "--out", str(ev)) == 2
    line = _one_line(capsys.readouterr().err)
    assert "held_out" in line and "no space left on the device" in line, line
    assert not _half_written(ev)

    monkeypatch.undo()
    assert dtw("eval", str(ROOT / "configs/eval/smoke.yaml"), "--out", str(ev)) == 0  # resumes, completes
    capsys.readouterr()
    full_disk(rep, "report.html")
    assert dtw("report", str(ev), "--out", str(rep), "--quiet") == 2
    line = _one_line(capsys.readouterr().err)
    assert "report.html" in line and "no space left on the device" in line, line
    assert not _half_written(rep) and not (rep / "report.html").exists()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    from data_gen.build import build_curriculum
    from data_gen.recipe import DataRecipe
    from plumbing.recipe_loader import load_config

    out = tmp_path_factory.mktemp("shards") / "data"
    build_curriculum(load_config(ROOT / "configs/data/smoke.yaml", DataRecipe), out, log=lambda *a: None,
                     progress=False)
    return out


def _other_table(train: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"x": [1, 2]}), train / "shard-00000.parquet")


def _cut_short(train: Path) -> None:
    f = train / "shard-00000.parquet"
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])


def _two_builds(train: Path) -> None:
    """A second shard whose meta lacks a field (an older build's): the split has two schemas."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(train / "shard-00000.parquet")
    meta = table.column("meta").combine_chunks()
    keep = [i for i in range(meta.type.num_fields) if meta.type.field(i).name != "stage"]
    older = pa.StructArray.from_arrays([meta.field(i) for i in keep],
                                       fields=[meta.type.field(i) for i in keep])
    pq.write_table(table.set_column(2, "meta", older), train / "shard-00001.parquet")


def _manifest_agrees(data: Path) -> None:
    """List the damaged shards in the data manifest with their sha256, as a build of another
    version would have: the manifest check (tests/reliability/test_stage_inputs.py) passes them,
    so what is tested here is the shards' own check."""
    import json

    from plumbing.runs import file_sha256

    path = data / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["files"].update({f.relative_to(data).as_posix(): file_sha256(f)
                              for f in sorted((data / "train").glob("*.parquet"))})
    path.write_text(json.dumps(manifest))


@pytest.mark.parametrize("damage,reason", [(_other_table, "not a curriculum shard (columns x"),
                                           (_cut_short, "unreadable parquet shard"),
                                           (_two_builds, "schema differs from")])
def test_a_bad_shard_is_one_line_in_train_and_audit(data, tmp_path, capsys, damage, reason):
    bad = tmp_path / "data"
    shutil.copytree(data, bad)
    damage(bad / "train")
    _manifest_agrees(bad)
    assert dtw("audit", str(bad)) == 2
    assert reason in _one_line(capsys.readouterr().err)
    assert dtw("train", str(ROOT / "configs/train/smoke.yaml"), f"data.dir={bad}", "--out", str(tmp_path / "run")) == 2
    line = _one_line(capsys.readouterr().err)
    assert reason in line and "shard-0000" in line, line
    assert not (tmp_path / "run" / "train" / "manifest.json").exists()


def test_arguments_nested_past_the_recursion_limit_are_a_rejected_row(data, tmp_path, capsys):
    import pyarrow.parquet as pq

    from plumbing.models import load_tokenizer
    from train.data import load_split, tokenize_split

    bad = tmp_path / "data"
    shutil.copytree(data, bad)
    shard = bad / "train" / "shard-00000.parquet"
    table = pq.read_table(shard)
    rows = table.to_pylist()
    calls = [m for r in rows for m in r["messages"] if m.get("tool_calls")]
    assert calls, "the smoke curriculum has a tool call"
    calls[0]["tool_calls"][0]["function"]["arguments"] = '{"a": ' + "[" * 50_000 + "]" * 50_000 + "}"
    shard.unlink()
    pq.write_table(type(table).from_pylist(rows, schema=table.schema), shard)
    _manifest_agrees(bad)
    tok = load_tokenizer("tiny:smollm2-135m-instruct")
    from plumbing.chat_templates import choose_template

    kept, rejects = tokenize_split(load_split(bad, "train"), tok, choose_template(tok).template,
                                   max_length=100_000, prompt_mode=rows[0]["meta"]["prompt_mode"])
    assert rejects.get("nested_too_deep") == 1 and len(kept) == len(rows) - 1 - sum(
        n for k, n in rejects.items() if k != "nested_too_deep")
    assert dtw("audit", str(bad)) == 0
    json.loads(capsys.readouterr().out)


def test_rescore_finds_the_recipe_relative_inputs_or_says_why(tmp_path, capsys, monkeypatch):
    # The source eval in a run of its own: a re-score never lands inside the source's run.
    ev, again = tmp_path / "src" / "eval", tmp_path / "rescored"
    # configs/eval/smoke.yaml names fixtures/... relative to its own folder.
    assert dtw("eval", str(ROOT / "configs/eval/smoke.yaml"), "--out", str(ev)) == 0
    monkeypatch.chdir(tmp_path)  # another working directory than the eval's
    capsys.readouterr()
    assert dtw("rescore", str(ev), "--out", str(again)) == 0, capsys.readouterr().err[-2000:]
    assert (again / "manifest.json").is_file()
    # A run that did not record its recipe's folder: one line that says what to do.
    manifest = json.loads((ev / "manifest.json").read_text())
    manifest.pop("recipe_dir", None)
    (ev / "manifest.json").write_text(json.dumps(manifest))
    assert dtw("rescore", str(ev), "--out", str(tmp_path / "third")) == 2
    line = _one_line(capsys.readouterr().err)
    assert "not where the eval found them" in line and "sessions.jsonl" in line, line
