"""to_session: the step rule, hindsight facts (verbatim, credited to the latest mention)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from data_gen.sources.swe_rebench import (
    LICENSE,
    ConvertedTrajectory,
    convert_row,
    iter_rows,
    to_session,
)
from doctrine.session import Session

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "swe_rebench"


def sessions() -> dict[str, Session]:
    out = {}
    for r in iter_rows(FIXTURES / "trajectories.parquet"):
        conv = convert_row(r)
        if isinstance(conv, ConvertedTrajectory):
            out[conv.session_id] = to_session(conv)
    return out


@pytest.fixture(scope="module")
def fixture_sessions() -> dict[str, Session]:
    return sessions()


def bash(cid: str, command: str, text: str = "") -> dict:
    return {"role": "assistant", "content": text, "tool_calls": [
        {"id": cid, "type": "function", "function": {"name": "execute_bash",
                                                     "arguments": json.dumps({"command": command})}}]}


def out(cid: str, content: str) -> dict:
    return {"role": "tool", "tool_call_id": cid, "name": "execute_bash", "content": content}


def session_of(*msgs: dict) -> Session:
    conv = convert_row({"trajectory_id": "s-1", "trajectory": [{"role": "system", "content": "sys"},
                                                                {"role": "user", "content": "go"}, *msgs]})
    assert isinstance(conv, ConvertedTrajectory), conv
    return to_session(conv)


def by_kind(s: Session, kind: str) -> list:
    return [f for f in s.facts if f.kind == kind]


# ------------------------------------------------------------------ shape


def test_every_fixture_session_validates_and_names_its_source(fixture_sessions):
    assert len(fixture_sessions) == 8
    for s in fixture_sessions.values():
        assert Session.from_dict(json.loads(s.to_json())).validate().to_dict() == s.to_dict()
        assert (s.source, s.family, s.license) == ("swe_rebench", "swe_rebench", LICENSE)
        assert s.meta["dataset"] == "nebius/SWE-rebench-openhands-trajectories"
        assert s.meta["instance_id"] and s.meta["repo"] and "model_patch" in s.meta


def test_steps_are_one_assistant_turn_with_its_results(fixture_sessions):
    for s in fixture_sessions.values():
        assert s.steps[0].start == 0 and s.steps[-1].end == len(s.messages)
        for st in s.steps:
            roles = [m["role"] for m in s.messages[st.start:st.end]]
            assistants = roles.count("assistant")
            assert assistants == 1, (s.session_id, st.index, roles)
            # a step is [system..] [user] assistant tool*: results never open a step
            assert roles[0] != "tool"
            k = roles.index("assistant")
            assert set(roles[k + 1:]) <= {"tool"}
            assert set(roles[:k]) <= {"system", "user"}


def test_a_user_message_opens_a_step_and_keeps_the_answer_with_it():
    s = session_of(bash("c1", "ls"), out("c1", "a.py"), {"role": "user", "content": "now test"},
                   bash("c2", "pytest"), out("c2", "ok"), {"role": "assistant", "content": "done"})
    assert [(st.start, st.end) for st in s.steps] == [(0, 4), (4, 7), (7, 8)]


def test_seed_is_stable_per_session_id():
    a = session_of({"role": "assistant", "content": "x"})
    b = session_of({"role": "assistant", "content": "y"})
    assert a.seed == b.seed  # same id, same seed: the split is by session, not content


# ------------------------------------------------------------------ facts


def test_fact_texts_occur_verbatim_and_are_used_only_later(fixture_sessions):
    n = 0
    for s in fixture_sessions.values():
        for f in s.facts:
            n += 1
            m = s.messages[f.message]
            decoded = [v for c in m.get("tool_calls", ())
                       for v in json.loads(c["function"]["arguments"]).values() if isinstance(v, str)]
            assert f.text in m["content"] or any(f.text in v for v in decoded), f
            assert f.used_at and all(s.step_of(f.message) < u for u in f.used_at), f
            assert all(f.id in s.steps[u].uses for u in f.used_at)
    assert n >= 16


def test_path_with_line_from_grep_is_used_by_the_view_that_follows(fixture_sessions):
    s = fixture_sessions["fixture-0004"]
    facts = {f.text: f for f in by_kind(s, "paths_with_lines")}
    grep_hit = facts["/workspace/pipeline/pipeline/core.py:57"]
    assert s.messages[grep_hit.message]["role"] == "tool"
    view_step = s.steps[grep_hit.used_at[0]]
    args = s.messages[view_step.start]["tool_calls"][0]["function"]["arguments"]
    assert '"view"' in args and "core.py" in args
    assert grep_hit.id in view_step.uses


def test_traceback_last_line_is_an_error_fact_used_by_the_grep(fixture_sessions):
    s = fixture_sessions["fixture-0004"]
    (err,) = by_kind(s, "error_strings")
    assert err.text == "KeyError: 'retry_timeout'"
    assert "Traceback (most recent call last):" in s.messages[err.message]["content"]
    grep_step = s.steps[err.used_at[0]]
    assert "grep" in s.messages[grep_step.start]["tool_calls"][0]["function"]["arguments"]


def test_traceback_frame_is_a_path_with_line(fixture_sessions):
    s = fixture_sessions["fixture-0004"]
    assert 'File "/tmp/reproduce.py", line 2' in {f.text for f in by_kind(s, "paths_with_lines")}


def test_pytest_node_id_is_a_value_used_by_the_rerun(fixture_sessions):
    s = fixture_sessions["fixture-0001"]
    (val,) = by_kind(s, "exact_values")
    assert val.text == "tests/test_slug.py::test_slugify_spaces"
    rerun = s.messages[s.steps[val.used_at[0]].start]
    assert val.text in rerun["tool_calls"][0]["function"]["arguments"]


def test_error_line_quoted_in_a_later_assistant_text_is_used(fixture_sessions):
    s = fixture_sessions["fixture-0008"]
    (err,) = by_kind(s, "error_strings")
    assert err.text == "Error: max() arg is an empty sequence"
    quoting = s.messages[s.steps[err.used_at[0]].start]
    assert "max() arg is an empty sequence" in quoting["content"]


def test_use_is_credited_to_the_latest_earlier_mention():
    s = session_of(bash("c1", "grep -rn foo src"), out("c1", "src/pkg/mod.py:3: foo()"),
                   bash("c2", "grep -rn bar src"), out("c2", "src/pkg/mod.py:9: bar()"),
                   bash("c3", "sed -n 1,20p src/pkg/mod.py"), out("c3", "..."))
    (f,) = by_kind(s, "paths_with_lines")
    assert f.text == "src/pkg/mod.py:9" and f.message == 5 and f.used_at == [2]


def test_absolute_reference_matches_a_relative_mention_and_not_a_sibling():
    s = session_of(bash("c1", "find . -name '*.py'"), out("c1", "./src/pkg/mod.py\n./lib/pkg/mod.py"),
                   bash("c2", "cat /workspace/repo/src/pkg/mod.py"), out("c2", "x = 1"))
    assert [f.text for f in by_kind(s, "paths_with_lines")] == ["./src/pkg/mod.py"]


def test_nothing_is_a_fact_unless_a_later_step_uses_it():
    s = session_of(bash("c1", "pytest"), out("c1", "Traceback (most recent call last):\n"
                                                   '  File "/w/r/a.py", line 1, in <module>\n'
                                                   "ValueError: bad literal here"),
                   {"role": "assistant", "content": "I will look elsewhere."})
    assert s.facts == [] and all(st.uses == [] for st in s.steps)


def test_an_error_is_used_by_a_grep_for_part_of_it():
    s = session_of(bash("c1", "pytest"), out("c1", "E   ValueError: invalid literal for int() with base 10"),
                   bash("c2", 'grep -rn "invalid literal" src'), out("c2", ""))
    (err,) = by_kind(s, "error_strings")
    assert err.text == "ValueError: invalid literal for int() with base 10" and err.used_at == [1]


def test_a_short_grep_pattern_does_not_count_as_a_quote():
    s = session_of(bash("c1", "pytest"), out("c1", "E   ValueError: invalid literal for int() with base 10"),
                   bash("c2", "grep -rn 'int' src"), out("c2", ""))
    assert by_kind(s, "error_strings") == []


def test_a_mention_in_the_same_step_is_not_a_use():
    # the call and its own output share a step: the output cannot be needed by that call
    s = session_of(bash("c1", "cat src/pkg/mod.py"), out("c1", "see src/pkg/mod.py"))
    assert s.facts == []
