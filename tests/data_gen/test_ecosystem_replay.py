"""Trajectories in toolchains no project generator writes, replayed under the
pocket profile, give checked labels at (almost) every point the labeler attempts.

The fixtures are tests/data_gen/fixtures/ecosystems/trajectories.jsonl (make_fixtures.py);
measure.py prints the same counts by window.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from data_gen.replay import ReplayStats, replay_session
from data_gen.sources.swe_rebench import ConvertedTrajectory, convert_row, to_session

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "ecosystems" / "trajectories.jsonl"


@pytest.fixture(scope="module")
def sessions():
    out = []
    for line in FIXTURES.read_text(encoding="utf-8").splitlines():
        conv = convert_row(json.loads(line))
        assert isinstance(conv, ConvertedTrajectory), conv
        out.append(to_session(conv))
    return out


@pytest.fixture(scope="module")
def replayed(sessions):
    stats, kinds = ReplayStats(), Counter()
    for window in (1280, 1408):
        for s in sessions:
            for smp in replay_session(s, window=window, gate="pocket", nudge_style="list_only", stats=stats):
                kinds[smp.meta["kind"]] += 1
    return stats, kinds


def test_the_fixtures_cover_twelve_toolchains(sessions):
    assert len(sessions) == 12 and len({s.session_id for s in sessions}) == 12


def test_labels_are_rarely_skipped_and_never_refused_by_the_kernel(replayed):
    stats, kinds = replayed
    assert stats.skipped["kernel_rejected"] == 0, stats.details
    # Before the toolchain-shape work: 38 summary_failed and 1 kernel_rejected of 157 points.
    assert stats.skipped["summary_failed"] <= 0.05 * stats.points, stats.to_dict()
    assert kinds["tier2"] >= 2 and kinds["emergency"] + kinds["nudged_compress"] >= 20, kinds
