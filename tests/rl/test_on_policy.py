"""On-policy rounds: a student plays new train sessions, the doctrine labels where it went."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SMALL = ["sources.synthetic.families=[proc_python,proc_go]", "replay.windows=[1344]", "replay.silent_windows=[]",
         "replay.recovery_windows=[]", "split.held_out_families=[]", "split.test_fraction=0.2"]


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    from data_gen.build import build_curriculum
    from data_gen.recipe import DataRecipe
    from plumbing.recipe_loader import load_config

    recipe = load_config(ROOT / "configs/data/pocket_proc.yaml", DataRecipe,
                         [*SMALL, "sources.synthetic.sessions_per_family=4"])
    return build_curriculum(recipe, tmp_path_factory.mktemp("base") / "data", log=lambda *a: None, progress=False)


def _recipe(base, student="first_range", **kw):
    from rl.on_policy import OnPolicyRecipe

    return OnPolicyRecipe(data_recipe=str(ROOT / "configs/data/pocket_proc.yaml"), data_overrides=SMALL,
                          base_data=str(base), student={"name": student}, sessions_per_family=4, workers=2, **kw)


def _rows(folder):
    from plumbing.runs import stage_files
    from plumbing.shards import read_shard

    return [r for p in stage_files(folder, "train", ("*.parquet",)) for r in read_shard(p)]


def test_a_lazy_students_round_labels_the_states_its_folds_made(base, tmp_path):
    from rl.on_policy import run_round
    from train.data import check_data_dir, load_split

    out = run_round(_recipe(base), tmp_path / "round1", log=lambda *a: None)
    manifest = check_data_dir(out)  # what dtw train reads: a complete data stage, shards as listed
    counts, policy = manifest["counts"], manifest["counts"]["policy"]
    assert counts["base_rows"] == len(_rows(base)) and counts["on_policy_rows"] > 0
    assert counts["train"] == counts["base_rows"] + counts["on_policy_rows"] == len(load_split(out, "train"))
    # first_range folds the first listed range at every nudge: the kernel applies them.
    assert policy["asked"] > 0 and policy["compress"] > 0 and policy["applied"] > 0
    replies = [json.loads(x) for x in (out / "rollouts.jsonl").read_text().splitlines()]
    assert len(replies) == policy["asked"]
    assert Counter(r["move"] for r in replies)["compress"] == policy["compress"]
    rows = _rows(out)[counts["base_rows"]:]
    assert all(json.loads(r["meta"]["extra"])["on_policy"]["round"] == 1 for r in rows)
    assert all(r["meta"]["split"] is None or r["meta"]["split"] == "train" for r in rows if "split" in r["meta"])
    # States only the student reached: a context holding a fold the student wrote.
    lazy = [r for r in rows if "folded without reading it" in json.dumps(r["messages"][:-1])]
    assert lazy, "no row is labelled at a state made by the student's own fold"
    # No session of another split is played: the round's sessions are all train sessions.
    from data_gen.curriculum import assign_split
    from rl.on_policy import _data_recipe

    dr = _data_recipe(_recipe(base))
    assert all(assign_split(r["meta"]["session_id"], r["meta"]["family"], dr.split) == "train" for r in rows)
    card = (out / "README.md").read_text()
    assert "| applied by the kernel |" in card and f"| {policy['applied']} |" in card


def test_an_oracle_student_plays_the_ordinary_replay(base, tmp_path):
    """The oracle answers with the label: its round is the ordinary build of the same
    sessions, row for row (with every session in train, no sampling, exact dedupe only)."""
    from data_gen.build import build_curriculum
    from rl.on_policy import _data_recipe, run_round

    whole = ["split.test_fraction=0", "split.validation_fraction=0", "mixture.shares={}", "dedupe.near=false"]
    recipe = _recipe(base, student="oracle", keep_base=False)
    recipe = recipe.model_copy(update={"data_overrides": [*SMALL, *whole]})
    out = run_round(recipe, tmp_path / "oracle", log=lambda *a: None)
    plain = build_curriculum(_data_recipe(recipe), tmp_path / "plain", log=lambda *a: None, progress=False)
    policy = json.loads((out / "manifest.json").read_text())["counts"]["policy"]
    assert policy.get("refused", 0) == 0 and policy["applied"] > 0

    def key(r):
        return json.dumps({**r, "meta": {**r["meta"], "extra": None}}, sort_keys=True)

    mine, want = sorted(map(key, _rows(out))), sorted(map(key, _rows(plain)))
    assert mine and mine == want


def test_the_command_skips_a_finished_round_and_refuses_a_changed_one(base, tmp_path, capsys):
    import yaml

    from rl.__main__ import main

    recipe = tmp_path / "round.yaml"
    recipe.write_text(yaml.safe_dump(_recipe(base).model_dump(mode="json")))
    out = str(tmp_path / "r")
    assert main(["on-policy", str(recipe), "--out", out]) == 0
    assert main(["on-policy", str(recipe), "--out", out]) == 0 and "[skip]" in capsys.readouterr().out
    assert main(["on-policy", str(recipe), "--out", out, "seed=7001"]) == 2
    assert "on-policy" in capsys.readouterr().err
    assert main(["on-policy", str(recipe), "--out", out, "base_data=/nonexistent", "--force"]) == 2
    assert "not a complete data folder" in capsys.readouterr().err


def test_a_base_built_under_another_doctrine_is_refused(base, tmp_path):
    from rl.on_policy import OnPolicyError, _base_rows

    with pytest.raises(OnPolicyError, match="another doctrine"):
        _base_rows(base, "0" * 64)
    with pytest.raises(OnPolicyError, match="not a complete data folder"):
        _base_rows(tmp_path, "0" * 64)
