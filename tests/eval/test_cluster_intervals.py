"""Intervals that resample sessions (eval.metrics cluster bootstrap), on seeded data."""

from __future__ import annotations

import random

from eval.metrics import (
    CLUSTER_METHOD,
    arm_methods,
    arm_sessions,
    balanced_ci,
    cluster_mean_ci,
    interval_method,
    mean_ci,
    paired_balanced,
    paired_comparison,
)


def _width(ci: list[float]) -> float:
    return ci[1] - ci[0]


def _clustered(seed: int, sessions: int = 12, per: int = 4) -> tuple[list[float], list[int]]:
    """Each session mostly right or mostly wrong: its cases are strongly alike."""
    rng = random.Random(seed)
    vals, clusters = [], []
    for s in range(sessions):
        p = rng.choice([0.05, 0.95])
        for _ in range(per):
            vals.append(float(rng.random() < p))
            clusters.append(s)
    return vals, clusters


def test_cluster_bootstrap_is_wider_than_the_case_level_interval_on_clustered_data():
    for seed in range(5):
        vals, clusters = _clustered(seed)
        iid = mean_ci(vals, "binary")
        clustered = mean_ci(vals, "binary", clusters=clusters)
        assert clustered[0] <= iid[0] and clustered[1] >= iid[1]
        assert _width(clustered) > 1.3 * _width(iid), (seed, iid, clustered)
        assert clustered[0] <= sum(vals) / len(vals) <= clustered[1]


def test_cluster_bootstrap_is_about_the_case_level_interval_on_unclustered_data():
    rng = random.Random(7)
    # 48 cases in 12 sessions of 4, but no session effect: the cases are independent.
    vals = [float(rng.random() < 0.5) for _ in range(48)]
    clusters = [i // 4 for i in range(48)]
    iid = mean_ci(vals, "binary")
    raw = cluster_mean_ci(vals, clusters)
    assert 0.75 < _width(raw) / _width(iid) < 1.25
    widened = mean_ci(vals, "binary", clusters=clusters)
    assert _width(iid) <= _width(widened) < 1.25 * _width(iid)
    # Every case its own session: the exact case-level interval, unchanged.
    assert mean_ci(vals, "binary", clusters=list(range(48))) == iid
    assert interval_method("binary", 48, clustered=False) == "wilson"
    assert interval_method("binary", 48, clustered=True) == CLUSTER_METHOD


def test_cluster_bootstrap_is_seeded():
    vals, clusters = _clustered(0)
    assert cluster_mean_ci(vals, clusters, seed=3) == cluster_mean_ci(vals, clusters, seed=3)
    assert cluster_mean_ci(vals, clusters, seed=3) != cluster_mean_ci(vals, clusters, seed=4)


def test_paired_and_balanced_intervals_resample_sessions():
    vals, clusters = _clustered(1)
    rows = [{"label_kind": ("compress", "refuse")[i % 2], "kind_correct": bool(v)} for i, v in enumerate(vals)]
    mover = balanced_ci(rows)
    clustered = balanced_ci(rows, clusters=clusters)
    assert _width(clustered) > 1.3 * _width(mover)
    assert balanced_ci(rows, clusters=list(range(len(rows)))) == mover
    a = dict(enumerate(rows))
    b = {i: {"label_kind": r["label_kind"], "kind_correct": False} for i, r in enumerate(rows)}
    by_key = dict(enumerate(clusters))
    plain, cl = paired_balanced(a, b), paired_balanced(a, b, clusters=by_key)
    assert plain["method"] == "tango+mover" and "sessions" not in plain
    assert cl["method"] == CLUSTER_METHOD and cl["sessions"] == 12 and cl["n"] == 48
    assert _width(cl["ci95"]) > 1.3 * _width(plain["ci95"])
    d_plain = paired_comparison(a, b)["kind_correct"]
    d = paired_comparison(a, b, clusters=by_key)["kind_correct"]
    assert d_plain["method"] == "tango" and d["method"] == CLUSTER_METHOD and d["sessions"] == 12
    assert _width(d["ci95"]) > 1.3 * _width(d_plain["ci95"])
    alone = paired_comparison(a, b, clusters={k: k for k in a})["kind_correct"]
    assert alone["method"] == "tango" and alone["ci95"] == d_plain["ci95"] and alone["sessions"] == 48


def test_arm_sessions_and_methods():
    rows = [{"kind_correct": True, "x": 1.0}, {"kind_correct": False}, {"kind_correct": True, "x": 2.0}]
    assert arm_sessions(rows, ["s1", "s1", "s2"]) == {"kind_correct": 2, "x": 2}
    m = arm_methods(rows, ["s1", "s1", "s2"])
    assert m["kind_correct"] == CLUSTER_METHOD and m["x"] == "t"  # x's two cases are two sessions
    assert arm_methods(rows) == {"kind_correct": "wilson", "x": "t"}
