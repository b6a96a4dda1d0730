"""A teacher reply the checks did not foresee is one rejected point, counted by its reason
(medium severity; failed so before this round): a tool call holding a
5,000-digit number raised AttributeError in ``parse_assistant_text``, the rest of that
session was dropped as ``replay_error`` and the build said "rejected: none"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plumbing.tool_format import parse_assistant_text

HUGE = "9" * 5000
ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-reliability-teacher-0123456789abcdef"


@pytest.mark.parametrize("body", [
    '{"name": "compress", "arguments": {"topic": ' + HUGE + '}}',        # past Python's int-digit limit
    '{"name": "compress", "arguments": "{\\"topic\\": ' + HUGE + '}"}',  # the same inside a JSON string
    '{"name": "compress", "arguments": ' + "[" * 100_000 + "]" * 100_000 + "}",  # past the recursion limit
])
def test_an_odd_tool_call_is_a_parse_error_not_a_crash(body):
    reply = parse_assistant_text(f"Folding.\n<tool_call>\n{body}\n</tool_call>")
    assert not reply.ok and not reply.tool_calls and reply.content == "Folding."
    assert len(reply.errors) == 1 and reply.errors[0].startswith("tool call 1"), reply.errors
    assert len(reply.errors[0]) < 200


def test_a_build_counts_the_odd_replies_by_reason(hostile, tmp_path, monkeypatch):
    from data_gen.build import TeacherFailed, build_curriculum
    from data_gen.recipe import DataRecipe
    from plumbing.recipe_loader import load_config

    monkeypatch.setenv("DTW_REL_TEACHER_KEY", KEY)
    text = '<tool_call>\n{"name": "compress", "arguments": {"topic": ' + HUGE + "}}\n</tool_call>"
    srv = hostile("ok", reply={"role": "assistant", "content": text})
    recipe = load_config(ROOT / "configs/data/learn.yaml", DataRecipe, [
        "sources.synthetic.families=[dep_migration]", "sources.synthetic.sessions_per_family=1",
        "sources.synthetic.steps=8", "sources.swe_rebench=null", "replay.windows=[4096]",
        "replay.gates=[aggressive]", "mixture.shares={}", "sources.teacher.enabled=true",
        f"sources.teacher.base_url={srv.url}", "sources.teacher.api_key_env=DTW_REL_TEACHER_KEY",
        "sources.teacher.timeout_s=10"])
    with pytest.raises(TeacherFailed) as err:
        build_curriculum(recipe, tmp_path / "data", log=lambda *a: None, progress=False)
    msg = str(err.value)
    # Every point was asked (no session cut short) and each rejection is named.
    asked = int(msg.split("kept 0 of ")[1].split()[0])
    assert asked >= 2 and f"rejected: unparseable {asked}" in msg, msg
    assert "rejected: none" not in msg and "replay_error" not in msg and len(srv.requests) == asked


def test_an_unforeseen_error_in_a_reply_is_counted_not_a_lost_session(monkeypatch):
    """Whatever a check raises, the point is rejected with the error's type as its reason and
    the session's replay goes on (the labeler, not the build, is where a reply is judged)."""
    from collections import Counter

    from data_gen.replay import replay_session
    from data_gen.sources.teacher import TEACHER_KINDS, TeacherLabeler
    from data_gen.synthetic import SessionSize, generate
    from doctrine.spec import load_doctrine

    class Broken:
        def complete(self, request):
            raise KeyError("a field the checks did not expect")

    doc = load_doctrine("v1")
    session = generate("dep_migration", 0, SessionSize(steps=8, tool_output_lines=(8, 40)))
    counts = Counter()
    teacher = TeacherLabeler(Broken(), model_name="t", counts=counts)
    rows = list(replay_session(session, window=4096, gate="aggressive", doctrine=doc, labeler=teacher))
    assert teacher.asked >= 2 and teacher.kept == 0
    assert counts["teacher:error_KeyError"] == teacher.asked
    assert rows and all(r.label.kind not in TEACHER_KINDS for r in rows)  # the session went on
    assert "error_KeyError" in (teacher.shortfall() or "")
    json.dumps(counts)
