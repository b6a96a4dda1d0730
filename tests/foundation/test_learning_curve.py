"""benchmarks/learning_curve.py (`make learn`): the curve's statistics on made-up cases, and
one end-to-end run on the tiny model (data -> training with checkpoints -> an eval per step)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest


@pytest.fixture(scope="module")
def lc(project_root):
    spec = importlib.util.spec_from_file_location("learning_curve", project_root / "benchmarks" / "learning_curve.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _case(kind, correct, success=None, form="act"):
    m = {"label_kind": kind, "kind_correct": correct, "reply_form": form, "tool_call_valid": 1.0}
    if success is not None:
        m["compress_success"] = success
    return m


def test_steps_and_interval(lc):
    assert lc.parse_steps("20, 0,10,10") == [0, 10, 20]
    assert lc.save_interval([0, 10, 20, 40]) == 10
    assert lc.save_interval([0, 6, 9]) == 3
    for bad in ("0", "a,b", "-1,4", ""):
        with pytest.raises(lc.CurveError):
            lc.parse_steps(bad)


def test_balanced_acc_weights_kinds_equally(lc):
    # 9 ordinary cases all right, 1 compress case wrong: plain accuracy 0.9, balanced 0.5.
    rows = [_case("ordinary", 1.0) for _ in range(9)] + [_case("compress", 0.0, 0.0)]
    res = lc.balanced_acc(rows)
    assert res["mean"] == pytest.approx(0.5) and res["kinds"] == 2 and res["n"] == 10
    low, high = res["ci95"]  # no spread within kinds, but one compress case: wide (MOVER over Wilson)
    assert low < 0.4 and 0.9 < high
    mixed = [_case("compress", float(i % 2), float(i % 2)) for i in range(10)]
    low, high = lc.balanced_acc(mixed)["ci95"]
    assert low < 0.5 < high


def test_paired_difference_sees_a_change_and_not_noise(lc):
    base = {(f"c{i}", 0): _case("compress", 0.0, 0.0, "malformed") for i in range(10)}
    learned = {(f"c{i}", 0): _case("compress", 1.0, 1.0 if i < 6 else 0.0, "compress") for i in range(10)}
    d = lc.paired(learned, base, "compress_success")
    assert d["diff"] == pytest.approx(0.6) and d["n"] == 10 and d["ci95"][0] > 0
    same = lc.paired(base, base, "compress_success")
    assert same["diff"] == 0 and same["ci95"][0] < 0 < same["ci95"][1]  # ten alike: not certainty
    point = lc.curve_point(10, learned, base)
    assert point["vs_step0"]["kind_correct"]["diff"] == pytest.approx(1.0)
    bal = point["vs_step0"]["balanced_acc"]  # one kind, every case turned right: +1, interval above 0
    assert bal["diff"] == pytest.approx(1.0) and bal["n"] == 10 and bal["ci95"][0] > 0
    assert lc.curve_point(10, base, base)["vs_step0"]["balanced_acc"]["ci95"][0] < 0
    assert point["reply_forms"] == {"compress": 10}
    assert lc.curve_point(0, base, base)["metrics"]["malformed_share"]["mean"] is None  # filled by case_rows
    assert lc.curve_point(0, base, base)["vs_step0"] == {}


def test_case_rows_reads_finished_held_out_cases_of_one_arm(lc, tmp_path):
    cases = tmp_path / "cases" / "base_slim"
    cases.mkdir(parents=True)
    done = {"status": "done", "workload": "held_out", "arm": "base_slim", "case_id": "a", "seed": 0,
            "metrics": {"reply_form": "malformed", "kind_correct": 0.0, "label_kind": "compress"}}
    (cases / "a.json").write_text(json.dumps(done))
    (cases / "b.json").write_text(json.dumps({**done, "case_id": "b", "status": "failed"}))
    (cases / "c.json").write_text("{not json")
    (cases / "d.json").write_text(json.dumps({**done, "case_id": "d", "arm": "distilled"}))
    rows = lc.case_rows(tmp_path, "base_slim")
    assert list(rows) == [("a", 0)] and rows[("a", 0)]["malformed_share"] == 1.0


@pytest.mark.slow
def test_tiny_model_curve_end_to_end(project_root, tmp_path):
    """Build the smoke curriculum, train the tiny model 2 steps with a checkpoint per step,
    evaluate steps 0, 1 and 2 on two held-out rows; curve.json has a point per step."""
    recipe = (project_root / "configs" / "eval" / "pipeline_smoke.yaml").read_text()
    eval_recipe = tmp_path / "eval.yaml"
    eval_recipe.write_text(recipe.replace("adapter_dir: runs/smoke/adapter", "adapter_dir: null")
                           + "allow_profile_mismatch: true\n")
    out = tmp_path / "learn"
    cmd = [sys.executable, "benchmarks/learning_curve.py", "--data", str(tmp_path / "data"),
           "--data-recipe", "configs/data/smoke.yaml", "--train-recipe", "configs/train/smoke.yaml",
           "--eval-recipe", str(eval_recipe), "--steps", "0,1,2", "--out", str(out)]
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    p = subprocess.run(cmd, cwd=project_root, capture_output=True, text=True, timeout=900, env=env)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    curve = json.loads((out / "curve" / "curve.json").read_text())
    assert [pt["step"] for pt in curve["points"]] == [0, 1, 2]
    assert curve["model"] == "tiny:smollm2-135m-instruct"
    for pt in curve["points"]:
        assert pt["n_cases"] == 2 and pt["metrics"]["kind_correct"]["n"] == 2
        assert len(pt["metrics"]["kind_correct"]["ci95"]) == 2
    assert set(curve["points"][1]["vs_step0"]) >= {"compress_success", "kind_correct"}
    assert {"train", "eval step 0", "eval step 2", "total"} <= set(curve["wall_time_s"])
    assert (out / "curve" / "curve.md").read_text().startswith("# Learning curve")
    assert (out / "curve" / "curve.png").stat().st_size > 1000
    # A step without a checkpoint is a one-line error, not a traceback.
    bad = subprocess.run(cmd[:-4] + ["--steps", "0,3", "--out", str(out)], cwd=project_root,
                         capture_output=True, text=True, timeout=300, env=env)
    assert bad.returncode == 2 and "no adapter checkpoint for step 3" in bad.stderr


def test_each_eval_recipe_is_a_question_the_first_primary(lc, project_root, tmp_path):
    out = tmp_path / "learn"
    a, b = "configs/eval/pocket_learn_sessions.yaml", "configs/eval/pocket_learn.yaml"
    assert lc.eval_dir(out, a, 400, 0) == out / "curve" / "step-400"
    assert lc.eval_dir(out, b, 400, 1) == out / "curve" / "pocket_learn" / "step-400"
    assert lc.eval_recipes(type("A", (), {"eval_recipe": None})()) == list(lc.DEFAULT_EVAL_RECIPES)
    base = {("c1", 0): _case("compress", False, False), ("c2", 0): _case("ordinary", False)}
    seen = {("c1", 0): _case("compress", True, True), ("c2", 0): _case("ordinary", True)}
    unseen = {("c1", 0): _case("compress", False, False), ("c2", 0): _case("ordinary", True)}
    import os as _os

    cwd = _os.getcwd()
    _os.chdir(project_root)
    try:
        qs = [lc.question(a, [0, 400], {0: base, 400: seen}), lc.question(b, [0, 400], {0: base, 400: unseen})]
    finally:
        _os.chdir(cwd)
    assert [q["split"] for q in qs] == ["test", "heldout"]
    curve = {"model": "m", "data_dir": "d", "steps": [0, 400], **lc._primary(qs), "questions": qs, "wall_time_s": {}}
    assert curve["points"][-1]["vs_step0"]["compress_success"]["diff"] == 1.0
    lc.write_markdown(curve, tmp_path / "curve.md")
    text = (tmp_path / "curve.md").read_text()
    assert "## pocket_learn_sessions: 2 cases of the `test` split" in text and "## pocket_learn: 2 cases" in text


def test_curve_point_counts_sessions_and_shows_reading_or_recall(lc):
    # 12 cases from 3 sessions of 4; each session all right or all wrong: clustered.
    rows = {}
    for i in range(12):
        m = _case("compress", float(i // 4 == 0), form="compress")
        m.update({"_session": f"s{i // 4}", "nearest_train_sim": 0.9, "values_copied": 2,
                  "values_not_in_context": 1, "values_not_in_context_share": 1 / 3})
        rows[(f"c{i}", 0)] = m
    point = lc.curve_point(0, rows, {})
    assert point["n_cases"] == 12 and point["n_sessions"] == 3
    kc = point["metrics"]["kind_correct"]
    assert kc["sessions"] == 3 and kc["method"] == "cluster bootstrap"
    iid = lc.mean_ci([m["kind_correct"] for m in rows.values()], metric="kind_correct")
    assert iid["method"] == "wilson" and kc["ci95"][1] - kc["ci95"][0] > iid["ci95"][1] - iid["ci95"][0]
    assert point["metrics"]["nearest_train_sim"]["mean"] == pytest.approx(0.9)
    assert point["recall_counts"] == {"values_copied": 24, "values_not_in_context": 12}
    table = lc.curve_table({"points": [point]})
    row = dict(zip(table[0], table[1], strict=True))
    assert row["sessions"] == "3" and row["values_not_in_context"] == "12 of 36"
    assert row["nearest_train_sim"].startswith("0.90")


@pytest.mark.slow
def test_an_on_policy_round_is_a_point_of_the_curve(project_root, tmp_path):
    """--rounds 1: the last checkpoint plays new smoke sessions (the tiny model through the hf
    backend), training goes on from it on the states it visited, and the round's adapter is
    evaluated as the point after the SFT steps."""
    import yaml

    recipe = (project_root / "configs" / "eval" / "pipeline_smoke.yaml").read_text()
    eval_recipe = tmp_path / "eval.yaml"
    eval_recipe.write_text(recipe.replace("adapter_dir: runs/smoke/adapter", "adapter_dir: null")
                           + "allow_profile_mismatch: true\n")
    round_recipe = tmp_path / "round.yaml"
    round_recipe.write_text(yaml.safe_dump({
        "data_recipe": "configs/data/smoke.yaml", "base_data": "set-by-the-curve",
        "student": {"name": "hf", "model": "tiny:smollm2-135m-instruct", "settings": {"batch_size": 1}},
        "sessions_per_family": 2, "max_tokens": 16, "workers": 1}))
    out = tmp_path / "learn"
    cmd = [sys.executable, "benchmarks/learning_curve.py", "--data", str(tmp_path / "data"),
           "--data-recipe", "configs/data/smoke.yaml", "--train-recipe", "configs/train/smoke.yaml",
           "--eval-recipe", str(eval_recipe), "--steps", "0,1", "--rounds", "1", "--round-steps", "1",
           "--round-recipe", str(round_recipe), "--out", str(out)]
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    p = subprocess.run(cmd, cwd=project_root, capture_output=True, text=True, timeout=900, env=env)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    curve = json.loads((out / "curve" / "curve.json").read_text())
    assert [pt["step"] for pt in curve["points"]] == [0, 1, 2]
    assert curve["rounds"] == {"2": str(out / "round1" / "train" / "checkpoints" / "checkpoint-1")}
    round_data = json.loads((out / "round1" / "data" / "manifest.json").read_text())
    assert round_data["counts"]["policy"]["asked"] > 0
    trained = json.loads((out / "round1" / "train" / "manifest.json").read_text())
    assert "init_adapter" in trained["inputs"] and trained["config"]["lora"]["init_adapter"].endswith("checkpoint-1")
    assert {"round 1 play", "round 1 train", "eval step 2"} <= set(curve["wall_time_s"])
