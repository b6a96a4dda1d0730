"""Hand-built decision points for every label kind (see conftest.py for the session)."""

from __future__ import annotations

import json

import pytest

from doctrine.conform import check_summary
from doctrine.kernel.compress import apply_compression
from doctrine.kernel.protection import protected_ids_with_pairing
from doctrine.kernel.recommend import soft_zone
from doctrine.kernel.refs import ref_index
from doctrine.label import LABELER_ID, LABELER_VERSION, LabelConfig, label_decision
from doctrine.label.needed import session_index_of
from doctrine.label.summaries import source_dicts


def _args(label) -> dict:
    return json.loads(label.message["tool_calls"][0]["function"]["arguments"])


def _range_ids(point, start: str, end: str) -> list[str]:
    lo, hi = ref_index(start), ref_index(end)
    return [m.id for m in point.kernel_view
            if point.state.by_raw.get(m.id, "").startswith("m") and lo <= ref_index(point.state.by_raw[m.id]) <= hi]


def assert_no_protected(point, label) -> None:
    """No compressed range of ``label`` reaches a hard-protected or recent-zone message."""
    hard = protected_ids_with_pairing(point.flat, point.kconfig)
    zone = soft_zone(point.kernel_view, point.state, point.kconfig, point.count_tokens)
    zone |= soft_zone(point.flat, point.state, point.kconfig, point.count_tokens)
    for r in _args(label)["content"]:
        if not r["startId"].startswith("m"):
            continue
        ids = _range_ids(point, r["startId"], r["endId"])
        assert ids, r
        assert not (set(ids) & hard), (r, set(ids) & hard)
        assert not (set(ids) & zone), (r, set(ids) & zone)


def assert_summaries_pass(point, label, doctrine) -> None:
    by_id = {m.id: m for m in point.kernel_view}
    for r in _args(label)["content"]:
        msgs = [by_id[i] for i in _range_ids(point, r["startId"], r["endId"])]
        rep = check_summary(source_dicts(msgs, point.state), r["summary"], tier=1, doctrine=doctrine)
        assert rep.passed, rep.reasons


@pytest.mark.parametrize("horizon,kind,kept_out", [(0, "nudged_compress", set()), (1, "nudged_compress", {2, 3}),
                                                   (2, "refusal", None)])
def test_horizon_flips_compress_and_refusal(session, doctrine, hand, horizon, kind, kept_out):
    p = hand.point_at(session, 2, doctrine)
    assert p.nudge_shown and p.nudge.voice == "gentle"
    lab = label_decision(p, doctrine=doctrine, horizon=horizon, seed=0)
    assert lab.kind == kind
    assert lab.labeler == LABELER_ID and lab.labeler_version == LABELER_VERSION
    assert lab.doctrine_version == "v1" and lab.doctrine_sha256 == doctrine.sha256
    if kind == "refusal":
        # The decline names what is in use and then carries on with the task's own action.
        assert lab.message["tool_calls"] == session.messages[p.visible]["tool_calls"]
        assert "m0000" in lab.message["content"]
        return
    assert_no_protected(p, lab)
    assert_summaries_pass(p, lab, doctrine)
    covered = {session_index_of(i) for r in _args(lab)["content"] for i in _range_ids(p, r["startId"], r["endId"])}
    assert covered, lab
    assert not covered & kept_out  # needed units stay out of every range
    if horizon == 0:
        assert {3, 6} <= covered  # both bulky outputs are consumed: both fold


def test_compress_call_matches_tool_schema(session, doctrine, hand):
    from doctrine.render.tools import tool_schemas

    p = hand.point_at(session, 2, doctrine)
    lab = label_decision(p, doctrine=doctrine, horizon=0, seed=3)
    schema = next(t for t in tool_schemas(doctrine, "distilled") if t["function"]["name"] == "compress")
    item_keys = set(schema["function"]["parameters"]["properties"]["content"]["items"]["properties"])
    args = _args(lab)
    assert set(args) <= set(schema["function"]["parameters"]["properties"])
    for r in args["content"]:
        assert set(r) <= item_keys and {"startId", "endId", "summary"} <= set(r)
    res = apply_compression(args["content"], p.flat, p.state, p.kconfig, clock_ms=lambda: 0)
    assert res.blocks_created == len(args["content"]) and not res.errors


def test_ordinary_when_no_nudge_and_little_consumed(session, doctrine, hand):
    p = hand.point_at(session, 2, doctrine, overrides=hand.NUDGE_NEVER)
    assert not p.nudge_shown
    lab = label_decision(p, doctrine=doctrine, horizon=0, seed=0, config=LabelConfig(spontaneous_min_tokens=10**6))
    assert lab.kind == "ordinary"
    nxt = session.messages[p.visible]
    assert lab.message["tool_calls"] == nxt["tool_calls"] and lab.message["content"] == nxt["content"]


def test_spontaneous_compress_without_nudge(session, doctrine, hand):
    p = hand.point_at(session, 2, doctrine, overrides=hand.NUDGE_NEVER)
    cfg = LabelConfig(spontaneous_min_tokens=300)
    lab = label_decision(p, doctrine=doctrine, horizon=0, seed=0, config=cfg)
    assert lab.kind == "spontaneous_compress"
    assert_no_protected(p, lab)
    assert_summaries_pass(p, lab, doctrine)
    # The same point with everything still needed: nothing consumed, so no compression.
    assert label_decision(p, doctrine=doctrine, horizon=2, seed=0, config=cfg).kind == "ordinary"


def test_emergency_folds_needed_ranges_with_facts_verbatim(session, doctrine, hand):
    probe = hand.point_at(session, 2, doctrine)
    window = int(probe.token_count / 0.8)  # the pressure band: usage 80 %
    p = hand.point_at(session, 2, doctrine, window=window)
    assert p.nudge_shown and p.nudge.voice == "emergency"
    lab = label_decision(p, doctrine=doctrine, horizon=2, seed=0)
    assert lab.kind == "emergency"
    assert_no_protected(p, lab)
    assert_summaries_pass(p, lab, doctrine)
    text = "\n".join(r["summary"] for r in _args(lab)["content"])
    covered = {session_index_of(i) for r in _args(lab)["content"] for i in _range_ids(p, r["startId"], r["endId"])}
    for fact_text, idx in ((hand.F_TEXT, 3), (hand.G_TEXT, 6)):
        if idx in covered:
            assert fact_text in text  # needed within the horizon: kept verbatim


def test_emergency_takes_tool_output_first(session, doctrine, hand):
    probe = hand.point_at(session, 2, doctrine)
    p = hand.point_at(session, 2, doctrine, window=int(probe.token_count / 0.8))
    lab = label_decision(p, doctrine=doctrine, horizon=0, seed=0)
    assert lab.kind == "emergency"
    covered = {session_index_of(i) for r in _args(lab)["content"] for i in _range_ids(p, r["startId"], r["endId"])}
    assert 3 in covered or 6 in covered


def test_labels_are_deterministic_and_seed_varies_phrasing(session, doctrine, hand):
    p1 = hand.point_at(session, 2, doctrine)
    p2 = hand.point_at(session, 2, doctrine)
    a = label_decision(p1, doctrine=doctrine, horizon=0, seed=5)
    b = label_decision(p2, doctrine=doctrine, horizon=0, seed=5)
    assert json.dumps(a.to_dict(), sort_keys=True) == json.dumps(b.to_dict(), sort_keys=True)
    texts = {json.dumps(label_decision(p1, doctrine=doctrine, horizon=0, seed=s).message, sort_keys=True)
             for s in range(6)}
    assert len(texts) > 1  # phrasing varies with the seed
    refusals = {label_decision(p1, doctrine=doctrine, horizon=2, seed=s).message["content"] for s in range(8)}
    assert len(refusals) > 1


def test_tier1_labels_have_one_surface_form(session, doctrine, hand):
    from doctrine.label.phrasing import HEADINGS

    p = hand.point_at(session, 2, doctrine)
    summaries = {r["summary"] for s in range(6)
                 for r in _args(label_decision(p, doctrine=doctrine, horizon=0, seed=s))["content"]}
    heads = {h + ":" for h in HEADINGS.values()}
    for text in summaries:
        for line in text.splitlines():
            assert line.startswith("- ") or line in heads or line.startswith("Refs: "), line
    # The seed varies the lead sentence, never the summary's form.
    assert len(summaries) == len({r["startId"] for s in range(6)
                                  for r in _args(label_decision(p, doctrine=doctrine, horizon=0, seed=s))["content"]})


def test_first_user_message_is_never_folded(session, doctrine, hand):
    p = hand.point_at(session, 2, doctrine)
    lab = label_decision(p, doctrine=doctrine, horizon=0, seed=0)
    first_user = next(m.id for m in p.kernel_view if m.role == "user")
    for r in _args(lab)["content"]:
        assert first_user not in _range_ids(p, r["startId"], r["endId"])


def test_history_mapping_round_trips(session, doctrine, hand):
    p = hand.point_at(session, 2, doctrine)
    for m in p.flat:
        i = session_index_of(m.id)
        assert i is not None and 1 <= i < p.visible
    assert len(hand.history_for(session, p.visible)) == p.visible - 1


def _strict(doctrine):
    """The same doctrine with a fold ratio no summary can reach (x1000 from one token up)."""
    import copy
    import dataclasses

    conf = copy.deepcopy(doctrine.conformance)
    conf["compression_ratio"] = {"min": 1000.0, "min_source_tokens": 1}
    return dataclasses.replace(doctrine, conformance=conf, sha256="strict-test-" + doctrine.sha256[:8])


def test_label_that_cannot_pass_is_not_emitted(session, doctrine, hand):
    from doctrine.label import LabelSkipped

    p = hand.point_at(session, 2, doctrine)
    with pytest.raises(LabelSkipped) as exc:
        label_decision(p, doctrine=_strict(doctrine), horizon=0, seed=0)
    assert exc.value.reason == "summary_failed"


def test_replay_counts_the_points_it_cannot_label(session, doctrine):
    from data_gen.replay import ReplayStats, replay_session

    stats = ReplayStats()
    out = list(replay_session(session, window=100_000, kernel_overrides=_NUDGE, doctrine=_strict(doctrine),
                              horizon=0, stats=stats))
    assert stats.skipped["summary_failed"] >= 1
    assert stats.points == stats.samples + sum(stats.skipped.values())
    assert all(s.meta["kind"] not in ("nudged_compress", "emergency", "spontaneous_compress") for s in out)


def test_replay_rejects_a_malformed_session(session, doctrine):
    from data_gen.replay import replay_session
    from doctrine.session import SessionError

    session.facts[0].message = 99
    with pytest.raises(SessionError):
        next(replay_session(session, window=8192, doctrine=doctrine))


_NUDGE = {"nudge": {"growth_floor": 1, "growth_cap": 1, "min_growth_floor": 0, "min_growth_ratio": 0.0},
          "compress": {"min_compress_range": 500}, "preserve_recent_messages": 1, "preserve_recent_tokens": 1}


def test_compose_summary_for_outside_sources(session, doctrine):
    from doctrine.kernel.chat import flatten
    from doctrine.label.summaries import compose_summary

    flat = [m.to_dict() for m in flatten([dict(m, id=f"x{i}") for i, m in enumerate(session.messages[1:8], 1)])]
    text = compose_summary(flat, doctrine=doctrine, seed=2)
    assert check_summary(flat, text, tier=1, doctrine=doctrine).passed
    assert text == compose_summary(flat, doctrine=doctrine, seed=2)
    with pytest.raises(ValueError):
        compose_summary(flat, doctrine=_strict(doctrine))
