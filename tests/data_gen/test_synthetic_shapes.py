"""Synthetic families: token band at the default size, size scaling, and per-family shape."""

from __future__ import annotations

import json
import re
from statistics import mean

import pytest

from data_gen.synthetic import FAMILIES, SessionSize, approx_tokens, generate, shape_stats

SEEDS = (0, 1, 2, 3)


@pytest.fixture(scope="module")
def default() -> dict:
    return {f: [generate(f, s) for s in SEEDS] for f in FAMILIES}


def _avg(sessions, key):
    return mean(shape_stats(s)[key] for s in sessions)


def _calls(s, step):
    for m in s.messages[step.start:step.end]:
        for c in m.get("tool_calls") or []:
            yield c["function"]["name"], json.loads(c["function"]["arguments"])


@pytest.mark.parametrize("family", FAMILIES)
def test_default_size_is_in_the_token_band(default, family):
    for s in default[family]:
        assert 8_000 <= approx_tokens(s) <= 60_000, (s.session_id, approx_tokens(s))


@pytest.mark.parametrize("family", FAMILIES)
def test_tool_output_and_steps_scale_the_session(family):
    def tokens(size):
        return mean(approx_tokens(generate(family, s, size)) for s in (0, 1))
    small = tokens(SessionSize(tool_output_lines=(4, 10)))
    mid = tokens(SessionSize())
    big = tokens(SessionSize(tool_output_lines=(80, 300)))
    assert small < mid < big
    assert tokens(SessionSize(steps=5, tool_output_lines=(4, 10))) < tokens(SessionSize(steps=20, tool_output_lines=(4, 10)))


def test_every_family_has_long_range_uses_and_some_have_noise(default):
    for f, sessions in default.items():
        assert all(shape_stats(s)["far_uses"] > 0 for s in sessions), f
    noisy = [f for f, sessions in default.items() if all(shape_stats(s)["unused_facts"] > 0 for s in sessions)]
    assert len(noisy) >= 3, noisy


def test_log_triage_is_dominated_by_tool_output(default):
    share = {f: _avg(ss, "tool_share") for f, ss in default.items()}
    biggest = {f: _avg(ss, "max_output_share") for f, ss in default.items()}
    assert max(share, key=share.get) == "log_triage" and share["log_triage"] > 0.9
    assert max(biggest, key=biggest.get) == "log_triage"


def test_log_triage_requotes_the_first_error_at_the_end(default):
    for s in default["log_triage"]:
        first = next(x for x in s.facts if x.kind == "error_strings")
        last = s.steps[-1]
        assert last.index in first.used_at and first.used_at[0] < last.index - 3
        assert any(first.text in (m.get("content") or "") + json.dumps([c["function"]["arguments"] for c in m.get("tool_calls") or []])
                   or first.text in str([json.loads(c["function"]["arguments"]) for c in m.get("tool_calls") or []])
                   for m in s.messages[last.start:last.end])


def test_migration_plan_is_stated_once_and_used_by_every_step(default):
    for s in default["dep_migration"]:
        plan = [x for x in s.facts if x.kind == "user_intent" and x.message == 1 and x.text[0].isupper()]
        items = [x for x in plan if re.search(rf"^\d\. {re.escape(x.text)}$", s.messages[1]["content"], re.M)]
        assert len(items) == 6
        ids = {x.id for x in items}
        for st in s.steps[1:]:
            if st.kind == "task":
                assert s.messages[st.start] == {"role": "user", "content": "continue"}
                assert ids.intersection(st.uses), f"step {st.index} uses no plan item"
        assert all(x.used_at for x in items)
    far = {f: _avg(ss, "far_uses") / _avg(ss, "steps") for f, ss in default.items()}
    assert max(far, key=far.get) == "dep_migration"


def test_ts_repo_renames_make_old_signatures_obsolete(default):
    renamed = 0
    for s in default["ts_repo"]:
        assert _avg([s], "user_turns") == 1.0  # every task step is a user request
        renames = [(x, re.match(r"Rename `(\w+)` to `(\w+)`", x.text)) for x in s.facts]
        renames = [(x, m.group(1), m.group(2)) for x, m in renames if m]
        for x, old, new in renames:
            renamed += 1
            at = s.step_of(x.message)
            sigs = [y for y in s.facts if y.kind == "signatures" and f"function {old}(" in y.text]
            earlier = [y for y, _, n in renames if n == old]  # the request that created the old name
            assert sigs or earlier
            assert all(u <= at for y in sigs + earlier for u in y.used_at), "old name used after the rename"
            renamed_again = any(o == new for _, o, _ in renames)
            assert renamed_again or s.steps[-1].index in x.used_at, "the final summary uses the current name"
            tasks_after = [st for st in s.steps[at + 1:] if st.kind == "task"]
            text_after = "".join(json.dumps(m) for st in tasks_after for m in s.messages[st.start:st.end])
            assert not re.search(rf"\b{old}\b", text_after), f"{old} survives the rename"
    assert renamed >= len(default["ts_repo"])


def test_py_bughunt_loops_traceback_read_edit_rerun(default):
    for s in default["py_bughunt"]:
        assert _avg([s], "user_turns") < 0.5
        paths = [x for x in s.facts if x.kind == "paths_with_lines" and not x.text.startswith("tests/")]
        assert paths
        for x in paths:
            path = x.text.rsplit(":", 1)[0]
            assert "E   " in s.messages[x.message]["content"]  # it came from a traceback
            edits = [st for st in s.steps if st.index in x.used_at and any(
                n == "str_replace_editor" and a["command"] == "str_replace" and a["path"].endswith(path)
                for n, a in _calls(s, st))]
            assert edits, f"no edit uses {x.text}"
            after = s.messages[edits[0].end - 1]
            assert after["role"] == "tool" and "passed" in after["content"]
        for x in s.facts:
            if x.kind == "error_strings":
                assert len(x.used_at) >= 2


def test_data_analysis_reuses_the_early_threshold(default):
    for s in default["data_analysis"]:
        thr = next(x for x in s.facts if x.kind == "decisions" and "percentile" in x.text)
        assert "because" in thr.text
        intro = s.step_of(thr.message)
        assert s.steps[-1].index in thr.used_at and max(thr.used_at) - intro > 3
        value = re.search(r"above (0\.\d\d)", thr.text).group(1)
        assert any(f"CHURN_THRESHOLD = {value}" in str(a) for st in s.steps for _, a in _calls(s, st))
        assert any(re.search(r"^\s+\S+\s+\d+\s+0\.\d+$", m.get("content") or "", re.M) for m in s.messages if m["role"] == "tool")


def test_decisions_carry_a_rationale(default):
    for f, sessions in default.items():
        decisions = [x for s in sessions for x in s.facts if x.kind == "decisions"]
        assert decisions, f
        assert all("because" in x.text for x in decisions), f


def test_families_differ_in_shape(default):
    """Every pair of families is told apart by a clear margin on at least one statistic."""
    stats = {f: {k: _avg(ss, k) for k in ("tool_share", "user_turns", "edit_share", "far_uses", "steps")}
             for f, ss in default.items()}
    margins = {"tool_share": 0.15, "user_turns": 0.25, "edit_share": 0.08, "far_per_step": 1.0}
    for v in stats.values():
        v["far_per_step"] = v["far_uses"] / v["steps"]
    names = list(stats)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            apart = [k for k, m in margins.items() if abs(stats[a][k] - stats[b][k]) >= m]
            assert apart, f"{a} and {b} have the same shape: {stats[a]} vs {stats[b]}"
