"""Synthetic sessions: every family and seed gives a valid, consistent, annotated session."""

from __future__ import annotations

import json

import pytest

from data_gen.synthetic import FAMILIES, SessionSize, generate
from data_gen.synthetic._tools import SessionBuilder, link
from doctrine.session import Fact, Session, Step, message_text

SMALL = SessionSize(steps=6, tool_output_lines=(4, 12), probes=2)
SIZES = [SMALL, SessionSize(steps=3, tool_output_lines=(2, 5), probes=1), SessionSize(steps=15, probes=3)]
CASES = [(f, seed, size) for f in FAMILIES for seed in (0, 1, 7) for size in SIZES]


@pytest.fixture(scope="module")
def sessions() -> dict:
    return {(f, seed, size): generate(f, seed, size) for f, seed, size in CASES}


def test_registry_names_the_five_families():
    assert list(FAMILIES) == ["ts_repo", "py_bughunt", "dep_migration", "log_triage", "data_analysis"]
    assert "marathon" not in " ".join(FAMILIES)


@pytest.mark.parametrize("family,seed,size", CASES, ids=lambda v: str(v) if not isinstance(v, SessionSize) else f"k{v.steps}")
def test_session_validates_and_round_trips(sessions, family, seed, size):
    s = sessions[(family, seed, size)]
    assert s.family == family and s.seed == seed and s.source == "synthetic"
    s.validate()
    again = Session.from_dict(json.loads(s.to_json())).validate()
    assert again.to_json() == s.to_json()


@pytest.mark.parametrize("family", FAMILIES)
def test_step_counts_and_opening(sessions, family):
    for (f, _seed, size), s in sessions.items():
        if f != family:
            continue
        assert sum(st.kind == "task" for st in s.steps) == size.steps
        assert sum(st.kind == "probe" for st in s.steps) == size.probes == len(s.meta["probes"])
        assert s.steps[0].start == 0 and s.steps[-1].end == len(s.messages)
        assert s.steps[0].kind == "task" and s.steps[-1].kind == "task"
        assert [m["role"] for m in s.messages[:2]] == ["system", "user"]
        assert all(m["role"] != "system" for m in s.messages[1:])
        intents = [x for x in s.facts if x.kind == "user_intent" and x.message == 1]
        assert len(intents) >= 2, "the goal message states explicit constraints"
        assert s.tools and {t["function"]["name"] for t in s.tools} == {"execute_bash", "str_replace_editor", "think", "finish"}


def _check_pairing(messages: list[dict]) -> None:
    i, seen = 0, set()
    while i < len(messages):
        m = messages[i]
        assert isinstance(m.get("content"), str), f"message {i} content is not a string"
        if m["role"] == "tool":
            raise AssertionError(f"tool result {i} answers no pending call")
        if m["role"] == "assistant" and m.get("tool_calls"):
            ids = [c["id"] for c in m["tool_calls"]]
            for k, c in enumerate(m["tool_calls"]):
                assert c["type"] == "function"
                json.loads(c["function"]["arguments"])  # arguments are a JSON string
                r = messages[i + 1 + k]
                assert r["role"] == "tool" and r["tool_call_id"] == ids[k] and r["name"] == c["function"]["name"]
            assert not seen.intersection(ids) and len(set(ids)) == len(ids)
            seen.update(ids)
            i += 1 + len(ids)
            continue
        i += 1


@pytest.mark.parametrize("family", FAMILIES)
def test_every_call_has_exactly_one_result_in_order(sessions, family):
    for (f, _, _), s in sessions.items():
        if f == family:
            _check_pairing(s.messages)
            assert s.messages[-2]["tool_calls"][0]["function"]["name"] == "finish"


def test_pairing_check_catches_a_broken_session():
    s = generate("py_bughunt", 0, SMALL)
    broken = [dict(m) for m in s.messages]
    k = next(i for i, m in enumerate(broken) if m["role"] == "tool")
    broken[k]["tool_call_id"] = "call_9999"
    with pytest.raises(AssertionError):
        _check_pairing(broken)


@pytest.mark.parametrize("family", FAMILIES)
def test_facts_are_verbatim_and_used_after_they_appear(sessions, family):
    for (f, _, _), s in sessions.items():
        if f != family:
            continue
        by_id = {x.id: x for x in s.facts}
        assert len(by_id) == len(s.facts)
        for x in s.facts:
            assert x.text and x.text in message_text(s.messages[x.message])
            assert x.used_at == sorted(set(x.used_at))
            intro = s.step_of(x.message)
            assert all(u >= intro for u in x.used_at), f"{x.id} used before it is introduced"
            assert x.used_at == [st.index for st in s.steps if x.id in st.uses], "used_at and uses disagree"
        for st in s.steps:
            assert len(st.uses) == len(set(st.uses))
            assert all(by_id[fid].message < st.end for fid in st.uses)


@pytest.mark.parametrize("family", FAMILIES)
def test_probes_answer_with_an_earlier_fact(sessions, family):
    for (f, _, _), s in sessions.items():
        if f != family:
            continue
        probes = [st for st in s.steps if st.kind == "probe"]
        for st, meta in zip(probes, s.meta["probes"], strict=True):
            assert meta["step"] == st.index and st.uses == [meta["fact"]]
            fact = next(x for x in s.facts if x.id == meta["fact"])
            assert meta["answer"] == fact.text
            q, a = s.messages[st.start:st.end]
            assert q["role"] == "user" and q["content"] == meta["question"] and "?" in q["content"]
            assert a["role"] == "assistant" and fact.text in a["content"] and not a.get("tool_calls")
            assert fact.message < st.start
        assert len({m["fact"] for m in s.meta["probes"]}) == len(probes), "each fact is probed once"


def test_link_fills_used_at_from_uses():
    steps = [Step(0, 0, 2, ["a"]), Step(1, 2, 4, ["b", "a", "a"]), Step(2, 4, 5, [])]
    facts = [Fact("a", "x", "exact_values", 0, [9]), Fact("b", "y", "exact_values", 1), Fact("c", "z", "decisions", 1)]
    link(steps, facts)
    assert [f.used_at for f in facts] == [[0, 1], [1], []]
    assert steps[1].uses == ["b", "a"]


def test_builder_rejects_a_fact_not_in_its_message_and_an_empty_step():
    b = SessionBuilder("t", 0)
    b.system()
    b.step()
    b.user("keep the port at 8080")
    with pytest.raises(ValueError):
        b.fact("port 9090", "exact_values")
    with pytest.raises(ValueError):
        b.fact("8080", "no_such_kind")
    fid = b.fact("8080", "exact_values")
    b.step()
    with pytest.raises(ValueError):
        b.step()  # the step just opened has no messages
    with pytest.raises(KeyError):
        b.use("f999")
    b.say("ok")
    b.use(fid)
    s = b.build("t-0", {})
    assert s.facts[0].used_at == [1]


@pytest.mark.parametrize("bad", [dict(steps=2), dict(steps=0), dict(tool_output_lines=(0, 5)),
                                 dict(tool_output_lines=(10, 5)), dict(tool_output_lines=(5,)), dict(probes=-1),
                                 dict(steps="12")])
def test_bad_sizes_are_refused_clearly(bad):
    with pytest.raises(ValueError):
        SessionSize(**bad)


def test_bad_family_or_seed_is_refused_clearly():
    with pytest.raises(ValueError, match="unknown synthetic family"):
        generate("marathon", 0)
    with pytest.raises(ValueError, match="seed"):
        generate("ts_repo", -1)
