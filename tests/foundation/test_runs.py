"""Run folders: atomic writes, manifests written last, secrets kept out."""

from __future__ import annotations

import json
import os
import sys

import pytest

from plumbing.runs import (
    MANIFEST,
    RunDir,
    atomic_write_json,
    atomic_write_text,
    read_manifest,
    redact_secrets,
    stage_complete,
    write_manifest,
)


def test_atomic_write_leaves_no_temp_files_and_replaces(tmp_path):
    p = tmp_path / "a" / "x.txt"
    atomic_write_text(p, "one")
    atomic_write_text(p, "two")
    assert p.read_text() == "two"
    assert [f.name for f in p.parent.iterdir()] == ["x.txt"]


def test_atomic_write_failure_keeps_old_file(tmp_path):
    p = tmp_path / "x.json"
    atomic_write_json(p, {"ok": 1})
    with pytest.raises(TypeError):
        atomic_write_json(p, {"bad": object()})  # not serialisable: fails before the rename
    assert json.loads(p.read_text()) == {"ok": 1}
    assert [f.name for f in tmp_path.iterdir()] == ["x.json"]


def test_manifest_marks_stage_complete_and_records_provenance(tmp_path):
    run = RunDir.create(tmp_path / "runs" / "demo")
    up = run.stage("data")
    with run.open_stage("data") as d:
        atomic_write_text(d / "rows.jsonl", "{}\n")
        assert not run.complete("data")  # nothing marks it complete before the manifest
        write_manifest(d, stage="data", config={"n": 1}, counts={"rows": 1},
                       doctrine={"version": "v1", "sha256": "ab"})
    assert run.complete("data")
    with run.open_stage("train") as d:
        write_manifest(d, stage="train", inputs={"data": up})
    m = run.manifest("train")
    assert m["inputs"]["data"]["sha256"] and len(m["inputs"]["data"]["sha256"]) == 64
    assert m["git_revision"]
    assert m["packages"]["pydantic"]
    data = run.manifest("data")
    assert data["counts"] == {"rows": 1}
    assert data["doctrine"]["version"] == "v1"


def test_open_stage_drops_stale_manifest(tmp_path):
    run = RunDir.create(tmp_path / "r")
    with run.open_stage("eval") as d:
        write_manifest(d, stage="eval")
    assert run.complete("eval")
    with pytest.raises(RuntimeError):
        with run.open_stage("eval"):
            raise RuntimeError("crash mid-stage")
    assert not run.complete("eval")


def test_corrupt_or_foreign_manifest_is_incomplete(tmp_path):
    (tmp_path / MANIFEST).write_text("{not json")
    assert not stage_complete(tmp_path)
    (tmp_path / MANIFEST).write_text('{"format": "something-else"}')
    assert read_manifest(tmp_path) is None


def test_unknown_stage_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="unknown stage"):
        RunDir.create(tmp_path).stage("training")


def test_secrets_never_reach_manifests(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-1234567890")
    cfg = {"teacher": {"base_url": "http://127.0.0.1:8000", "api_key": "inline-secret",
                       "api_key_env": "OPENAI_API_KEY", "note": "uses sk-test-1234567890"}}
    assert redact_secrets(cfg)["teacher"] == {"base_url": "http://127.0.0.1:8000", "api_key": "***",
                                              "api_key_env": "OPENAI_API_KEY", "note": "uses ***"}
    write_manifest(tmp_path, stage="data", config=cfg)
    text = (tmp_path / MANIFEST).read_text()
    assert "sk-test-1234567890" not in text and "inline-secret" not in text
    assert os.environ["OPENAI_API_KEY"] == "sk-test-1234567890"  # environment untouched


def test_a_literal_key_in_a_config_never_reaches_the_manifest(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["eval", "run", "r.yaml", "backend.settings.auth=sk-literal-1",
                                      "backend.settings.headers={Authorization: Bearer sk-header-2}"])
    cfg = {"backend": {"settings": {"auth": "sk-literal-1", "author": "Ada Lovelace",
                                    "headers": {"Authorization": "Bearer sk-header-2"}}}}
    write_manifest(tmp_path, stage="eval", config=cfg, extra={"backend": {"note": "sent sk-literal-1"}})
    text = (tmp_path / MANIFEST).read_text()
    assert "sk-literal-1" not in text and "sk-header-2" not in text
    m = json.loads(text)
    assert m["config"]["backend"]["settings"] == {"auth": "***", "author": "Ada Lovelace",
                                                  "headers": {"Authorization": "***"}}
    assert m["command"][3] == "backend.settings.auth=***" and m["backend"]["note"] == "sent ***"
    assert redact_secrets("HTTP 401: bad token Bearer sk-other-3") == "HTTP 401: bad token Bearer ***"


def test_stage_dir_is_the_hand_over_folder(tmp_path):
    from plumbing.runs import STAGES, RunDir, stage_dir

    assert [stage_dir(tmp_path, s) for s in STAGES] == [RunDir(tmp_path).stage(s) for s in STAGES]
    assert str(stage_dir("runs/demo", "adapter")) == os.path.join("runs", "demo", "adapter")
    with pytest.raises(ValueError, match="unknown stage 'export'"):
        stage_dir(tmp_path, "export")
