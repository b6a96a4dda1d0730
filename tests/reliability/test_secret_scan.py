"""Every curriculum row is scanned before it is written: a row holding a configured secret
(the value of the teacher's api_key_env or of a ``secret_envs`` variable) or a common key
shape is dropped and counted by kind, and the value reaches no file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plumbing.secret_scan import KEY_SHAPES, SecretScanner, find_secret

ROOT = Path(__file__).resolve().parents[2]
AWS = "AKIA" + "Q7RELIABILITY2XZ"  # 4 + 16 characters: the shape of an AWS access key id
PLAIN = "plain-looking-row-secret-42xyz"  # no key shape: found only because a recipe names its variable


@pytest.mark.parametrize("text,kind", [
    ("token=sk-proj-" + "a1B2" * 6, "shape:openai"),
    ("export GH=ghp_" + "x" * 36, "shape:github"),
    (f"aws {AWS} here", "shape:aws_access_key"),
    ("xoxb-" + "1234567890-abcdef", "shape:slack"),
    ("HF token hf_" + "AbCd" * 8, "shape:huggingface"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl", "shape:private_key"),
    ("Authorization: Bearer " + "e" * 30, "shape:bearer"),
])
def test_common_key_shapes_are_found_by_kind(text, kind):
    assert set(KEY_SHAPES) >= {kind.split(":")[1]}
    assert find_secret(text) == kind


def test_project_text_is_not_mistaken_for_a_key():
    # refs, hashes, paths and the doctrine's own words: nothing to drop
    clean = ["m00012-m00020 folded", "sha256 9f2c" + "0" * 60, "src/task-skeleton/disk-usage.py",
             "the ask: fold consumed output", "Bearer $TOKEN", "hf_hub_download(repo_id)"]
    assert [find_secret(t) for t in clean] == [None] * len(clean)
    assert SecretScanner(["DTW_REL_UNSET"], environ={}).values == {}


def _planting(monkeypatch, plants: dict[str, str]):
    """Synthetic sessions of the named families carry the planted text in their first tool output."""
    import data_gen.synthetic as synthetic

    real = synthetic.generate

    def generate(family, seed, size):
        session = real(family, seed, size)
        if family in plants:
            tool = next(m for m in session.messages if m.get("role") == "tool")
            tool["content"] = f"{tool['content']}\nconfig: {plants[family]}"
        return session

    monkeypatch.setattr(synthetic, "generate", generate)


def _build(tmp_path, *extra: str):
    from data_gen.build import build_curriculum
    from data_gen.recipe import DataRecipe
    from plumbing.recipe_loader import load_config

    recipe = load_config(ROOT / "configs/data/learn.yaml", DataRecipe, [
        "sources.synthetic.families=[py_bughunt, dep_migration]", "sources.synthetic.sessions_per_family=1",
        "sources.synthetic.steps=8", "sources.swe_rebench=null", "replay.windows=[4096]",
        "replay.gates=[aggressive]", "mixture.shares={}", *extra])
    return build_curriculum(recipe, tmp_path / "data", log=lambda *a: None, progress=False)


def _files_hold(root: Path, value: str) -> list[Path]:
    """Files under ``root`` whose content holds ``value`` (parquet shards read row by row:
    their bytes are compressed)."""
    import pyarrow.parquet as pq

    def text(f: Path) -> bytes:
        if f.suffix == ".parquet":
            return json.dumps(pq.read_table(f).to_pylist()).encode()
        return f.read_bytes()

    return [f for f in root.rglob("*") if f.is_file() and value.encode() in text(f)]


def test_a_row_with_a_key_shape_is_dropped_and_counted(monkeypatch, tmp_path):
    _planting(monkeypatch, {"py_bughunt": AWS})
    out = _build(tmp_path)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["rejects"]["secret:shape:aws_access_key"] > 0
    assert sum(manifest["counts"][s] for s in ("train", "validation", "test", "heldout")) > 0  # the rest is kept
    assert "secret:shape:aws_access_key" in (out / "README.md").read_text()
    assert _files_hold(tmp_path, AWS) == []


def test_a_row_with_a_configured_secret_is_dropped_and_counted(monkeypatch, tmp_path):
    monkeypatch.setenv("DTW_REL_ROW_SECRET", PLAIN)
    _planting(monkeypatch, {"dep_migration": PLAIN})
    out = _build(tmp_path, "secret_envs=[DTW_REL_ROW_SECRET]")
    rejects = json.loads((out / "manifest.json").read_text())["counts"]["rejects"]
    assert rejects["secret:configured:DTW_REL_ROW_SECRET"] > 0
    assert _files_hold(tmp_path, PLAIN) == []


def test_a_key_pasted_as_a_variable_name_is_refused_without_echo():
    from data_gen.recipe import DataRecipe
    from plumbing.recipe_loader import ConfigError, load_config

    pasted = "sk-proj-" + "Z9y8" * 8
    for override in (f"secret_envs=[{pasted}]", f"sources.teacher.api_key_env={pasted}"):
        with pytest.raises(ConfigError, match="NAME of an environment variable") as err:
            load_config(ROOT / "configs/data/learn.yaml", DataRecipe, [override])
        assert pasted not in str(err.value) and "\n  " in str(err.value) and str(err.value).count("\n") == 1


def test_log_and_manifest_redaction_masks_the_same_key_shapes():
    from plumbing.runs import redact_secrets

    line = f"HTTP 401: key ghp_{'k' * 36} and {AWS} refused; Bearer sk-short"
    assert redact_secrets(line) == "HTTP 401: key *** and *** refused; Bearer ***"
