"""Target shares per kind, and no eval family trained on while its eval runs."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml

from data_gen.curriculum import cap_shares, sample_to_shares
from data_gen.recipe import EVAL_MIRRORS, DataRecipe, Mixture, Split, leaks
from plumbing.recipe_loader import load_config

ROOT = Path(__file__).resolve().parents[2]


def _rows(**kinds: int) -> list[dict]:
    return [{"meta": {"kind": k, "session_id": f"s{i % 7}", "step": i}} for k, n in kinds.items() for i in range(n)]


def test_shares_are_reached_within_the_repeat_cap():
    rows = _rows(ordinary=100, emergency=60, refusal=10, nudged_compress=5)
    out, rep = sample_to_shares(rows, {"refusal": 0.2, "nudged_compress": 0.1, "emergency": 0.2}, 3, seed=0)
    got = Counter(r["meta"]["kind"] for r in out)
    n = len(out)
    assert abs(got["refusal"] / n - 0.2) < 0.02 and abs(got["nudged_compress"] / n - 0.1) < 0.02
    assert abs(got["emergency"] / n - 0.2) < 0.02
    assert got["ordinary"] / n == pytest.approx(0.5, abs=0.02)  # the unlisted kind takes the rest
    # The scarce kind sets the size: 5 rows x 3 copies at 10%.
    assert n == 150 and max(Counter(id(r) for r in out).values()) <= 3
    assert rep["reached"]["refusal"] == pytest.approx(0.2, abs=0.02) and rep["missing"] == []
    again, _ = sample_to_shares(rows, {"refusal": 0.2, "nudged_compress": 0.1, "emergency": 0.2}, 3, seed=0)
    assert [id(r) for r in again] == [id(r) for r in out]  # seeded, order kept
    other, _ = sample_to_shares(rows, {"refusal": 0.2, "nudged_compress": 0.1, "emergency": 0.2}, 3, seed=1)
    assert [id(r) for r in other] != [id(r) for r in out]


def test_a_small_share_that_cannot_be_filled_does_not_shrink_the_split():
    rows = _rows(ordinary=100, refusal=40, tier3=1)
    out, rep = sample_to_shares(rows, {"refusal": 0.3, "tier3": 0.04}, 3, seed=0)
    got = Counter(r["meta"]["kind"] for r in out)
    assert got["tier3"] == 3 and rep["short"] == ["tier3"]
    assert len(out) > 130 and got["refusal"] / len(out) == pytest.approx(0.3, abs=0.02)


def test_a_kind_no_source_supplied_is_reported_and_its_share_redistributed():
    rows = _rows(ordinary=40, emergency=40)
    out, rep = sample_to_shares(rows, {"spontaneous_compress": 0.1, "emergency": 0.25}, 2, seed=0)
    assert rep["missing"] == ["spontaneous_compress"]
    got = Counter(r["meta"]["kind"] for r in out)
    assert set(got) == {"ordinary", "emergency"}
    assert got["emergency"] / len(out) == pytest.approx(0.25 / (0.25 + 0.75), abs=0.03)


def test_eval_caps_sample_out_surplus_rows_only():
    rows = _rows(ordinary=100, emergency=60, refusal=30, nudged_compress=10)
    out, rep = cap_shares(rows, {"emergency": 0.2, "ordinary": 0.25}, 10, seed=0)
    got = Counter(r["meta"]["kind"] for r in out)
    assert got["refusal"] == 30 and got["nudged_compress"] == 10  # uncapped kinds kept whole
    assert got["emergency"] / len(out) <= 0.2 + 0.02 and got["ordinary"] / len(out) <= 0.25 + 0.02
    assert len(out) == len({id(r) for r in out})  # no row repeated
    assert [r for r in rows if any(r is o for o in out)] == out  # order kept
    assert rep["rows"] == dict(sorted(got.items())) and rep["available"]["emergency"] == 60
    again, _ = cap_shares(rows, {"emergency": 0.2, "ordinary": 0.25}, 10, seed=0)
    assert [id(r) for r in again] == [id(r) for r in out]
    # The floor: a capped kind keeps at least min_rows rows (all it has, if fewer).
    few = _rows(ordinary=30, emergency=12, refusal=2)
    out, _ = cap_shares(few, {"emergency": 0.2, "ordinary": 0.25}, 10, seed=0)
    got = Counter(r["meta"]["kind"] for r in out)
    assert got == {"ordinary": 10, "emergency": 10, "refusal": 2}


def test_bad_shares_are_config_errors():
    with pytest.raises(ValueError, match="unknown kind"):
        Mixture(shares={"nudge": 0.2})
    with pytest.raises(ValueError, match="at most 1"):
        Mixture(shares={"refusal": 0.7, "ordinary": 0.6})
    with pytest.raises(ValueError, match="eval_caps: unknown kind"):
        Mixture(eval_caps={"nudge": 0.2})
    with pytest.raises(ValueError, match="sum to less than 1"):
        Mixture(eval_caps={"emergency": 0.6, "ordinary": 0.5})


def test_leaks_names_a_mirrored_family_trained_on():
    split = Split(held_out_families=["data_analysis"])
    assert leaks(split, ["ts_repo", "py_bughunt"], ["marathon"])
    assert not leaks(split, ["ts_repo"], ["held_out"])
    assert not leaks(Split(held_out_for={"marathon": ["ts_repo"]}), ["ts_repo"], ["marathon", "held_out"])


@pytest.mark.parametrize("pipeline", sorted((ROOT / "configs/pipeline").glob("*.yaml")), ids=lambda p: p.name)
def test_no_pipeline_trains_on_the_family_its_evals_mirror(pipeline):
    cfg = yaml.safe_load(pipeline.read_text())
    if not cfg.get("data_recipe") or not cfg.get("eval_recipe"):
        pytest.skip("no data and eval stage together")
    data = load_config(ROOT / cfg["data_recipe"], DataRecipe, [])
    workloads = [w["name"] for w in yaml.safe_load((ROOT / cfg["eval_recipe"]).read_text()).get("workloads", [])]
    fams = data.sources.synthetic.families if data.sources.synthetic else []
    assert not leaks(data.split, fams, workloads)
    # A mirrored family the curriculum generates is declared held out for the Marathon
    # (the pocket curricula generate none of them: nothing to declare).
    mirrored = set(EVAL_MIRRORS["marathon"]) & set(fams)
    if "marathon" in workloads:
        assert mirrored <= set(data.split.held_out_for.get("marathon", []))
