"""Recall questions and the recovery window: a procedural session asks back an exact detail
an earlier command showed; replayed at the recipe's recovery window (a silent pocket replay
kept only for recovery rows and counter-lessons), a folded detail is labelled with a recovery
call that restores the block holding it, and a detail still in view with an ordinary answer."""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from data_gen.student import RECOVERY_TOOLS
from data_gen.synthetic.procedural import generator

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "configs" / "data" / "pocket_proc.yaml"


def _recipe(overrides=()):
    from data_gen.recipe import DataRecipe
    from plumbing.recipe_loader import load_config

    return load_config(RECIPE, DataRecipe, list(overrides))


def _is_call(row) -> bool:
    """A recovery call (search_context or decompress); the answer after a restore is a recovery row too,
    and it may be a task call (bash) that needs no block."""
    return row["meta"]["kind"] == "recovery" and any(
        c["function"]["name"] in RECOVERY_TOOLS for c in row["messages"][-1].get("tool_calls") or [])


def _context_text(row) -> str:
    parts = []
    for m in row["messages"][:-1]:
        parts.append(m.get("content") or "")
        parts += [c["function"]["arguments"] for c in m.get("tool_calls") or []]
    return "\n".join(parts)


def test_recall_question_asks_an_earlier_command_for_a_detail_it_showed():
    asked = 0
    for seed in range(6):
        s = generator("proc_sql")(seed)
        rc = s.meta["recall"]
        if rc is None:
            continue
        asked += 1
        fact = next(f for f in s.facts if f.id == rc["fact"])
        step = s.steps[rc["step"]]
        question, answer = s.messages[step.start], s.messages[step.start + 1]
        assert question["role"] == "user" and f"`{rc['command']}`" in question["content"]
        assert fact.text in answer["content"] and rc["fact"] in step.uses
        # the detail came from that command's output, at least a few steps earlier
        call = s.messages[fact.message - 1]["tool_calls"][0]
        assert json.loads(call["function"]["arguments"])["command"] == rc["command"]
        assert fact.text in s.messages[fact.message]["content"]
        assert s.step_of(fact.message) < rc["step"]
        assert generator("proc_sql")(seed).to_json() == s.to_json()
    assert asked >= 5


def test_recovery_window_settings_are_typed_and_documented():
    from data_gen.recipe import RecoveryWindow, ReplaySettings

    rw = _recipe().replay.recovery_windows[0]
    assert (rw.window, rw.silent, rw.horizon, rw.recent_messages) == (1600, True, 1, 1)
    assert all(f.description for f in RecoveryWindow.model_fields.values())
    assert rw.kernel_overrides() == {"preserve_recent_messages": 1}
    assert rw.keeps({"kind": "recovery"}) and rw.keeps({"kind": "ordinary", "counter_recovery": True})
    assert not rw.keeps({"kind": "ordinary"}) and not rw.keeps({"kind": "spontaneous_compress"})
    cfg = _recipe().replay.recovery_label_config(rw)
    assert cfg.keep_session_facts is False and cfg.min_piece_tokens == 48
    with pytest.raises(ValueError, match="recovery_windows\\[0\\].label"):
        ReplaySettings(windows=[1344], recovery_windows=[{"window": 1600, "label": {"keep_facts": False}}])
    with pytest.raises(ValueError):
        RecoveryWindow(keep=["emergency"])


def _replayed(family: str, seed: int) -> list[dict]:
    from data_gen.build import replay_rows
    from doctrine.spec import resolve_doctrine

    recipe = _recipe()
    rw = recipe.replay.recovery_windows[0]
    with tempfile.TemporaryDirectory() as tmp:
        return list(replay_rows(generator(family)(seed), recipe, resolve_doctrine("v1"), rw.window, "pocket",
                                Counter(), Path(tmp), rw=rw))


def test_recovery_window_replay_is_deterministic_and_keeps_only_its_kinds():
    a, b = _replayed("proc_sql", 9), _replayed("proc_sql", 9)
    assert [json.dumps(r, sort_keys=True) for r in a] == [json.dumps(r, sort_keys=True) for r in b]
    assert any(_is_call(r) for r in a)
    for r in a:
        assert r["meta"]["recovery_window"] and r["meta"]["window"] == 1600
        assert r["meta"]["kind"] == "recovery" or r["meta"].get("counter_recovery")
        assert not r["meta"]["nudge"]["shown"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    from data_gen.audit import read_rows
    from data_gen.build import build_curriculum

    recipe = _recipe(["sources.synthetic.families=[proc_sql,proc_rust]", "sources.synthetic.sessions_per_family=12",
                      "sources.synthetic.seed=0", "replay.windows=[1344]", "replay.silent_windows=[]",
                      "split.held_out_families=[proc_rust]"])
    out = build_curriculum(recipe, tmp_path_factory.mktemp("recall") / "data", log=lambda *a: None, progress=False)
    return recipe, out, read_rows(out)


def test_small_build_has_recovery_calls_that_restore_the_asked_block(built):
    from eval.workloads.held_out.applied import apply_recovery
    from eval.workloads.held_out.rows import normalise_row
    from eval.workloads.held_out.workload import rebuild_row

    _recipe_, _out, rows = built
    calls = [r for r in rows if _is_call(r)]
    assert len(calls) >= 2 and len({r["meta"]["session_id"] for r in calls}) >= 2, Counter(
        r["meta"]["kind"] for r in rows)
    for r in calls:
        needed = r["meta"]["kernel_input"]["needed"]
        assert needed["blocks"] and needed["facts"]
        # the detail is not in the context the model sees: only a folded block holds it
        assert not any(f in _context_text(r) for f in needed["facts"])
        row = normalise_row(dict(r, tools=json.dumps(r["tools"]) if not isinstance(r["tools"], str) else r["tools"]))
        rebuilt, how = rebuild_row(row)
        assert how == "kernel", how
        assert apply_recovery(rebuilt, r["messages"][-1])["recover_success"]


def test_small_build_has_counter_lessons_with_the_detail_in_view(built):
    _recipe_, _out, rows = built
    counter = [r for r in rows if r["meta"].get("counter_recovery")]
    assert len(counter) >= 5
    for r in counter:
        assert r["meta"]["kind"] == "ordinary" and r["meta"]["counter_recovery_why"] in ("in_view", "in_summary")
        assert not any((c["function"]["name"] in RECOVERY_TOOLS)
                       for c in r["messages"][-1].get("tool_calls") or [])
    recall = [r for r in counter if r["meta"]["step_kind"] == "probe"]
    assert recall  # recall questions answered from what is in view


def test_small_build_keeps_every_row_under_the_bound_and_records_the_profile(built):
    import json as _json

    from data_gen.lengths import length_table
    from plumbing.chat_templates import choose_template
    from plumbing.models import load_tokenizer

    recipe, out, rows = built
    tok = load_tokenizer(recipe.length_model)
    assert max(t["max"] for t in length_table(rows, tok, choose_template(tok).template)) <= recipe.max_model_tokens
    manifest = _json.loads((out / "manifest.json").read_text())
    silent = [p for p in manifest["serving_profiles"] if p["window"] == 1600]
    assert silent and silent[0]["nudge_style"] == "none"
    assert {r["meta"]["window"] for r in rows if r["meta"].get("recovery_window")} == {1600}
