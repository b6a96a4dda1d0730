"""Re-scoring a finished eval's recorded held-out replies with today's scorer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.backends.oracle import OracleBackend
from eval.harness import load_results, run_eval
from eval.recipe import EvalRecipe
from eval.rescore import RescoreError, rescore
from plumbing.recipe_loader import load_config
from plumbing.runs import read_manifest

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "configs/eval/smoke.yaml"


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    held = [{"name": "held_out", "settings": {"data_dir": "fixtures/held_out", "split": "test"}}]
    r = load_config(SMOKE, EvalRecipe, [f"workloads={json.dumps(held)}", "arms=[base_slim,distilled]"])
    out = tmp_path_factory.mktemp("rescore") / "eval"
    assert run_eval(r, out, base_dir=SMOKE.parent, backend=OracleBackend(), log=lambda s: None).complete
    return out


def _metrics(folder):
    return {(x["arm"], x["case_id"]): x["metrics"] for x in load_results(folder)}


def test_rescoring_unchanged_replies_reproduces_every_score(finished, tmp_path):
    before = {p: p.read_bytes() for p in finished.glob("cases/*/*.json")}
    s = rescore(finished, tmp_path / "again", base_dir=SMOKE.parent)
    assert s.rescored == len(before) and s.changed == 0 and s.copied == 0
    assert _metrics(tmp_path / "again") == _metrics(finished)
    assert {p: p.read_bytes() for p in finished.glob("cases/*/*.json")} == before  # the source is not written
    m = read_manifest(tmp_path / "again")
    assert m["stage"] == "eval" and m["counts"]["rescored"] == len(before) and m["rescored_from"] == str(finished)


def test_a_reply_the_scorer_now_rejects_changes_only_its_scores(finished, tmp_path):
    src = tmp_path / "src"
    import shutil

    shutil.copytree(finished, src)
    picked = None
    for path in sorted(src.glob("cases/distilled/*.json")):
        r = json.loads(path.read_text())
        if r["metrics"].get("compress_success"):
            picked = path
            break
    assert picked is not None, "the oracle writes a passing compress call"
    call = r["calls"][0]["tool_calls"][0]
    args = json.loads(call["function"]["arguments"])
    # A quote of a value no source message has: the checker fails it.
    args["content"][0]["summary"] += "\n- Set `FLUSH_BATCH=QUANTUM_VALUE_ZZ` in the config."
    call["function"]["arguments"] = json.dumps(args)
    picked.write_text(json.dumps(r))
    s = rescore(src, tmp_path / "out", base_dir=SMOKE.parent)
    assert s.changed == 1 and s.changes.get("compress_success") == 1
    new = _metrics(tmp_path / "out")
    old = _metrics(src)
    key = (r["arm"], r["case_id"])
    assert new[key]["compress_success"] is False
    assert new[key]["prompt_tokens"] == old[key]["prompt_tokens"]  # what the call measured is kept
    assert all(new[k] == old[k] for k in old if k != key)


def test_rescore_refuses_an_unfinished_run_and_its_own_folder(finished, tmp_path):
    with pytest.raises(RescoreError, match="not a complete eval run"):
        rescore(tmp_path, tmp_path / "out")
    with pytest.raises(RescoreError, match="another folder"):
        rescore(finished, finished)
