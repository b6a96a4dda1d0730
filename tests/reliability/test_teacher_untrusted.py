"""A teacher's reply is untrusted text: it is kept only in the form the eval reads as the
labelled decision (doctrine.replies), never with a secret in it, and a teacher that keeps
(almost) nothing fails the build instead of shipping a curriculum without its labels."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from data_gen.replay import replay_session
from data_gen.sources.teacher import TEACHER_KINDS, TeacherLabeler
from data_gen.synthetic import SessionSize, generate
from doctrine.label import LabelSkipped
from doctrine.spec import load_doctrine
from plumbing.openai_backend import OpenAIBackend
from plumbing.secret_scan import SecretScanner

KEY = "sk-reliability-teacher-0123456789abcdef"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv("DTW_REL_TEACHER_KEY", KEY)
    return KEY


@pytest.fixture(scope="module")
def points():
    """Teacher decision points of one small session: under a gentle and an emergency nudge."""
    doc = load_doctrine("v1")
    session = generate("dep_migration", 0, SessionSize(steps=8, tool_output_lines=(8, 40)))
    found = {}
    for s in replay_session(session, window=4096, gate="aggressive", doctrine=doc):
        if s.label.kind in TEACHER_KINDS and s.point.nudge_shown:
            found.setdefault(s.point.nudge.voice, s.point)
    assert set(found) == {"gentle", "emergency"}
    return doc, found


def ask(srv, point, doc, counts):
    backend = OpenAIBackend(base_url=srv.url, model="t", api_key_env="DTW_REL_TEACHER_KEY", timeout_s=10)
    teacher = TeacherLabeler(backend, model_name="t", counts=counts, scanner=SecretScanner(["DTW_REL_TEACHER_KEY"]))
    return teacher(point, doctrine=doc, horizon=2, seed=0)


@pytest.mark.parametrize("voice,text,reason", [
    ("gentle", "Your header was: Bearer {key}", "secret_in_reply"),          # a server that echoes the key
    ("gentle", "Not yet.\nI am still reading the traceback.", "not_one_line"),
    ("gentle", "Holding <acp id=\"m00004\"> for now.", "markup_in_text"),
    ("gentle", "x" * 400, "too_long"),
    ("emergency", "Not yet: I still need the traceback.", "decline_under_emergency"),
])
def test_a_teacher_text_is_kept_only_as_a_decline_the_eval_reads_as_one(hostile, key, points, voice, text, reason):
    doc, by_voice = points
    srv = hostile("echo_key" if "{key}" in text else "ok", reply={"role": "assistant", "content": text})
    counts = Counter()
    with pytest.raises(LabelSkipped) as err:
        ask(srv, by_voice[voice], doc, counts)
    assert err.value.reason == f"teacher_{reason}" and counts[f"teacher:{reason}"] == 1
    assert KEY not in str(err.value) and KEY not in json.dumps(counts)


def test_a_one_line_decline_under_a_gentle_nudge_is_kept(hostile, key, points):
    doc, by_voice = points
    srv = hostile("ok", reply={"role": "assistant", "content": "Not yet: the migration output is still in use."})
    label = ask(srv, by_voice["gentle"], doc, Counter())
    assert label.kind == "refusal" and label.message["content"].startswith("Not yet: the migration")


def _teacher_recipe(url: str, *extra: str):
    from data_gen.recipe import DataRecipe
    from plumbing.recipe_loader import load_config

    return load_config(ROOT / "configs/data/learn.yaml", DataRecipe, [
        "sources.synthetic.families=[dep_migration]", "sources.synthetic.sessions_per_family=1",
        "sources.synthetic.steps=8", "sources.swe_rebench=null", "replay.windows=[4096]",
        "replay.gates=[aggressive]", "mixture.shares={}", "sources.teacher.enabled=true",
        f"sources.teacher.base_url={url}", "sources.teacher.api_key_env=DTW_REL_TEACHER_KEY",
        "sources.teacher.timeout_s=10", *extra])


def test_a_teacher_that_echoes_the_key_never_puts_it_in_a_file(hostile, key, tmp_path):
    from data_gen.build import TeacherFailed, build_curriculum

    srv = hostile("echo_key", reply={"role": "assistant", "content": "Noted, key {key} stays."})
    out = tmp_path / "data"
    with pytest.raises(TeacherFailed, match=r"kept 0 of \d+ replies; rejected: secret_in_reply \d+") as err:
        build_curriculum(_teacher_recipe(srv.url), out, log=lambda *a: None, progress=False)
    assert srv.requests and KEY not in str(err.value)
    assert not (out / "manifest.json").exists()
    assert not list(out.glob("*/*.parquet"))  # refused before any shard is written
    for f in tmp_path.rglob("*"):
        assert not f.is_file() or KEY.encode() not in f.read_bytes(), f


def test_a_teacher_under_its_minimum_share_fails_the_build(hostile, key, tmp_path):
    from data_gen.build import TeacherFailed, build_curriculum

    # A decline is kept under gentle nudges only: this teacher keeps some points, not most.
    srv = hostile("ok", reply={"role": "assistant", "content": "Not yet: still reading this output."})
    with pytest.raises(TeacherFailed, match=r"kept [1-9]\d* of \d+ replies \(min_accepted_share 0\.9\); "
                                            r"rejected: decline_under_emergency \d+"):
        build_curriculum(_teacher_recipe(srv.url, "sources.teacher.min_accepted_share=0.9"), tmp_path / "data",
                         log=lambda *a: None, progress=False)
    out = build_curriculum(_teacher_recipe(srv.url), tmp_path / "data2", log=lambda *a: None, progress=False)
    rejects = json.loads((out / "manifest.json").read_text())["counts"]["rejects"]
    assert rejects["teacher:accepted_refusal"] >= 1 and rejects["teacher:decline_under_emergency"] >= 1
