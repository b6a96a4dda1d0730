"""The marathon workload end to end with the oracle backend (seconds on CPU)."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval.backends.oracle import OracleBackend
from eval.workloads import WORKLOADS
from eval.workloads.base import RunContext

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wl():
    return WORKLOADS["marathon"]({"passes": 1, "size": "demo", "variants": ["repetitive", "phase"]}, None)


def _run(wl, doctrine, arm, variant, window=4096):
    case = next(c for c in wl.cases() if c.payload.meta["variant"] == variant)
    return wl.run_case(case, arm, 0, RunContext(OracleBackend(), doctrine, window=window, horizon=2))


def test_full_arm_scores_every_item(wl, doctrine):
    r = _run(wl, doctrine, "full", "repetitive")
    m = r["metrics"]
    assert m["probe_items"] == 14 and m["probe_items_correct"] == 14 and m["deep_items"] == 4
    assert m["refetches"] == 0 and m["compressions_attempted"] == 0
    assert m["calls"] > 18 and m["billed_tokens"] > m["peak_context"] > m["mean_context"] > 0
    assert set(r["marathon"]["by_probe"]) == {"failure", "rename", "ttl", "signatures", "deep_first_failure",
                                             "deep_origins"}


def test_arms_differ_in_context_and_compression(wl, doctrine):
    full = _run(wl, doctrine, "full", "repetitive")["metrics"]
    sliding = _run(wl, doctrine, "sliding", "repetitive", window=2048)["metrics"]
    assert sliding["peak_context"] < full["peak_context"]
    assert sliding["probe_items_correct"] < full["probe_items_correct"]  # truncated evidence is lost
    kernel = _run(wl, doctrine, "doctrine", "repetitive")["metrics"]
    assert kernel["compressions_attempted"] >= kernel["compressions_succeeded"] > 0
    assert kernel["summaries_scored"] > 0 and 0.0 <= kernel["summary_conformance"] <= 1.0


def test_phase_variant_fidelity(wl, doctrine):
    r = _run(wl, doctrine, "full", "phase")
    m = r["metrics"]
    assert m["phase_steps"] == 1 and m["exec_errors"] == 0 and m["execution_fidelity"] == 1.0
    assert r["marathon"]["phase"][0]["migration_step"] == 1


def test_recipe_runs_through_the_harness(tmp_path):
    from eval.harness import load_results, run_eval
    from eval.recipe import EvalRecipe
    from plumbing.recipe_loader import load_config

    path = ROOT / "configs/eval/marathon_demo.yaml"
    recipe = load_config(path, EvalRecipe, ["arms=[\"full\",\"deterministic\"]"])
    summary = run_eval(recipe, tmp_path / "eval", base_dir=path.parent, log=lambda s: None)
    assert summary.complete
    rows = load_results(tmp_path / "eval")
    assert len(rows) == 4 and all(r["workload"] == "marathon" for r in rows)


def test_a_null_setting_is_read_as_left_out():
    # `extra_tests: null` (the description's "left out: the preset's") used to crash on int(None).
    left_out = WORKLOADS["marathon"]({"passes": 1, "size": "demo", "max_tasks": 6}, None)
    nulls = WORKLOADS["marathon"]({"passes": 1, "size": "demo", "max_tasks": 6, "extra_tests": None,
                                   "tool_output_lines": None, "variants": None}, None)
    assert [s.to_json() for s in nulls.sessions] == [s.to_json() for s in left_out.sessions]
    longer = WORKLOADS["marathon"]({"passes": 1, "size": "demo", "tool_output_lines": 400}, None)
    shorter = WORKLOADS["marathon"]({"passes": 1, "size": "demo"}, None)
    assert len(longer.sessions[0].to_json()) > len(shorter.sessions[0].to_json())
