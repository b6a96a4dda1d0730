"""Procedural pocket sessions: structure, start ids and values drawn per seed; every ecosystem
replays and labels under the pocket profile within the model-token bound."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from data_gen.synthetic import PROCEDURAL_FAMILIES, SessionSize, generate
from data_gen.synthetic.procedural import ECOSYSTEMS, STEP_KINDS

ROOT = Path(__file__).resolve().parents[2]
SIZE = SessionSize(steps=8)
COMPRESS = {"nudged_compress", "spontaneous_compress", "tier2", "tier3", "emergency"}


def _commands(s) -> list[str]:
    """Each tool call as its command's first word (or the editor command)."""
    out = []
    for m in s.messages:
        for c in m.get("tool_calls") or []:
            args = json.loads(c["function"]["arguments"])
            out.append(str(args.get("command", "")).split(" ")[0] or c["function"]["name"])
    return out


def _task_index(s) -> int:
    """Index of the task message (the user turn after the earlier request's history)."""
    return [i for i, m in enumerate(s.messages) if m["role"] == "user"][1 if s.meta["history_steps"] else 0]


def test_library_spans_eight_ecosystems_and_thirty_kinds():
    assert len(ECOSYSTEMS) >= 6 and set(ECOSYSTEMS) == set(PROCEDURAL_FAMILIES)
    assert len(STEP_KINDS) >= 30 and len(set(STEP_KINDS)) == len(STEP_KINDS)


@pytest.mark.parametrize("family", sorted(PROCEDURAL_FAMILIES))
def test_same_seed_same_session_other_seed_other_structure(family):
    a, b = generate(family, 3, SIZE), generate(family, 3, SIZE)
    assert a.to_json() == b.to_json()
    sessions = [generate(family, k, SIZE) for k in range(12)]
    sequences = {tuple(s.meta["step_kinds"]) for s in sessions}
    assert len(sequences) >= 10, sequences  # the order and number of steps differ, not only values
    assert len({tuple(_commands(s)) for s in sessions}) >= 10
    main = [s.meta["tool_calls"] - sum(1 for m in s.messages[:_task_index(s)] for _ in m.get("tool_calls") or [])
            for s in sessions]
    assert all(4 <= n <= 14 for n in main), main
    assert len(set(main)) >= 4
    assert len({_task_index(s) for s in sessions}) >= 3  # the task starts after varying history
    for s in sessions:  # facts introduced early are used a few steps later
        assert any(f.used_at and min(f.used_at) > s.step_of(f.message) for f in s.facts) or len(s.steps) < 4


def test_pools_are_open_values_do_not_repeat_across_sessions():
    values = Counter()
    for family in PROCEDURAL_FAMILIES:
        for k in range(15):
            for f in generate(family, k, SIZE).facts:
                if f.kind in ("exact_values", "error_strings", "paths_with_lines"):
                    values[f.text] += 1
    assert len(values) > 400
    assert sum(1 for n in values.values() if n > 1) / len(values) < 0.05, values.most_common(5)
    keys = {f.text.split("=")[0] for fam in ("proc_python",) for k in range(40)
            for f in generate(fam, k, SIZE).facts if f.kind == "exact_values" and "=" in f.text}
    assert len(keys) >= 20  # setting keys are composed, not drawn from a short list


@pytest.fixture(scope="module")
def model_length():
    from data_gen.build import _model_length

    return _model_length("embedded:smollm2-135m-instruct")


@pytest.mark.parametrize("family", sorted(PROCEDURAL_FAMILIES))
def test_every_ecosystem_replays_and_labels_under_the_pocket_bound(family, model_length):
    from data_gen.recipe import DataRecipe
    from data_gen.replay import ReplayStats, replay_session
    from doctrine.spec import resolve_doctrine
    from plumbing.recipe_loader import load_config

    recipe = load_config(ROOT / "configs" / "data" / "pocket_proc.yaml", DataRecipe)
    doctrine = resolve_doctrine("v1")
    kinds: Counter = Counter()
    kept: Counter = Counter()
    stats = ReplayStats()
    for seed in range(3):
        s = generate(family, 100 + seed, SIZE)
        for w in recipe.replay.windows:
            for smp in replay_session(s, window=w, gate="pocket", host=recipe.replay.host, doctrine=doctrine,
                                      nudge_style=recipe.replay.nudge_style(w, recipe.nudge_style),
                                      label_config=recipe.replay.label_config(w),
                                      stats=stats):
                d = smp.to_dict()
                kinds[d["meta"]["kind"]] += 1
                if model_length(d) <= recipe.max_model_tokens:
                    kept[d["meta"]["kind"]] += 1
                assert d["meta"]["family"] == family and d["meta"]["gate"] == "pocket"
    assert kept["ordinary"] > 0 and sum(kept.values()) >= 6, (kinds, kept, stats.to_dict())
    assert set(kept) - {"ordinary"}, kept  # some decision beyond an ordinary turn fits the bound


def test_recipe_holds_out_whole_ecosystems_and_pocket_cli():
    from data_gen.curriculum import assign_split
    from data_gen.recipe import DataRecipe
    from plumbing.recipe_loader import load_config

    path = ROOT / "configs" / "data" / "pocket_proc.yaml"
    assert path.read_text().splitlines()[0] == "# dtw data configs/data/pocket_proc.yaml --out runs/pocket_proc/data"
    recipe = load_config(path, DataRecipe)
    fams = recipe.sources.synthetic.families
    held = set(recipe.split.held_out)
    assert "pocket_cli" in held and len(held & set(PROCEDURAL_FAMILIES)) >= 2
    assert len(set(fams) - held) >= 6
    assert recipe.replay.label_config().min_piece_tokens == 96
    for fam in held:
        assert assign_split(f"syn-{fam}-1", fam, recipe.split) == "heldout"


def test_bad_label_override_is_one_clear_error():
    from data_gen.recipe import ReplaySettings

    with pytest.raises(ValueError, match="unknown field"):
        ReplaySettings(label={"min_piece_tokenz": 3})
    with pytest.raises(ValueError, match="replay.label"):
        ReplaySettings(label={"summary_ratio": 0.5})
    with pytest.raises(ValueError, match="silent_windows"):
        ReplaySettings(windows=[1344], silent_windows=[1536])
    r = ReplaySettings(windows=[1344, 1536], silent_windows=[1536])
    assert (r.nudge_style(1344, "list_only"), r.nudge_style(1536, "list_only")) == ("list_only", "none")
    with pytest.raises(ValueError, match="replay.label_windows.1600: unknown field"):
        ReplaySettings(windows=[1344, 1600], label_windows={1600: {"keep_facts": False}})


def test_label_windows_apply_on_top_of_label_for_their_window_only():
    from data_gen.recipe import ReplaySettings

    r = ReplaySettings(windows=[1344, 1600], silent_windows=[1600], label={"min_piece_tokens": 96},
                       label_windows={1600: {"keep_session_facts": False}})
    rec, other = r.label_config(1600), r.label_config(1344)
    assert rec.keep_session_facts is False and other.keep_session_facts and r.label_config().keep_session_facts
    assert rec.min_piece_tokens == other.min_piece_tokens == 96
    # a command line that drops the window leaves its entry unused
    assert ReplaySettings(windows=[1344], label_windows={1600: {"keep_session_facts": False}}).label_config(1344) is None


def test_a_small_build_keeps_the_bound_and_silences_its_silent_window(tmp_path):
    from data_gen.audit import read_rows
    from data_gen.build import build_curriculum
    from data_gen.lengths import length_table
    from data_gen.recipe import DataRecipe
    from plumbing.chat_templates import choose_template
    from plumbing.models import load_tokenizer
    from plumbing.recipe_loader import load_config

    recipe = load_config(ROOT / "configs" / "data" / "pocket_proc.yaml", DataRecipe,
                         ["sources.synthetic.families=[proc_python,proc_sql]", "sources.synthetic.sessions_per_family=3",
                          "replay.windows=[1344,1536]", "replay.silent_windows=[1536]", "split.held_out_families=[proc_sql]"])
    out = build_curriculum(recipe, tmp_path / "data", log=lambda *a: None, progress=False)
    manifest = json.loads((out / "manifest.json").read_text())
    styles = {p["window"]: p["nudge_style"] for p in manifest["serving_profiles"]}
    assert styles == {1344: "list_only", 1536: "none", 1600: "none"}  # 1600: the recovery window
    rows = read_rows(out)
    assert {r["meta"]["split"] for r in rows if r["meta"]["family"] == "proc_sql"} == {"heldout"}
    silent = [r for r in rows if r["meta"]["window"] == 1536]
    assert silent and not any(r["meta"]["nudge"]["shown"] for r in silent)
    assert not any(m["content"].startswith("[ACP]") for r in silent for m in r["messages"] if m["role"] == "user")
    tok = load_tokenizer(recipe.length_model)
    assert max(t["max"] for t in length_table(rows, tok, choose_template(tok).template)) <= recipe.max_model_tokens
