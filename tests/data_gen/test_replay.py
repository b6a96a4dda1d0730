"""Replay of sessions through the kernel to labelled decision points."""

from __future__ import annotations

import json

import pytest

from data_gen.replay import GATES, ReplayStats, kernel_config_for, replay_session
from data_gen.synthetic import generate
from doctrine.kernel.protection import protected_ids_with_pairing
from doctrine.kernel.recommend import soft_zone
from doctrine.kernel.refs import ref_index
from doctrine.label import KINDS, LABELER_ID
from doctrine.label.needed import ACTION_PREFIX, hindsight, session_index_of
from doctrine.render.prompts import fill_disclosures
from doctrine.render.tools import tool_schemas
from doctrine.spec import load_doctrine

META_KEYS = {"kind", "source", "family", "session_id", "step", "window", "doctrine_version", "doctrine_sha256",
             "labeler", "labeler_version", "prompt_mode", "conformance", "host"}


@pytest.fixture(scope="module")
def doctrine():
    return load_doctrine("v1")


@pytest.fixture(scope="module")
def session():
    return generate("py_bughunt", 1)


@pytest.fixture(scope="module")
def samples(session, doctrine):
    return list(replay_session(session, window=8192, gate="aggressive", doctrine=doctrine, horizon=2, seed=0))


def _texts(msg: dict) -> list[str]:
    out = [msg.get("content") or ""]
    for c in msg.get("tool_calls") or []:
        out.append(c["function"]["arguments"])
        args = json.loads(c["function"]["arguments"])
        if isinstance(args, dict):
            out.extend(str(v) for v in args.values())
            for r in args.get("content") or []:
                if isinstance(r, dict):
                    out.append(r.get("summary", ""))
    return out


def range_ids(point, start: str, end: str) -> list[str]:
    lo, hi = ref_index(start), ref_index(end)
    return [m.id for m in point.kernel_view if (point.state.by_raw.get(m.id) or "").startswith("m")
            and lo <= ref_index(point.state.by_raw[m.id]) <= hi]


def compress_ranges(sample) -> list[dict]:
    calls = sample.messages[-1].get("tool_calls") or []
    if not calls or calls[0]["function"]["name"] != "compress":
        return []
    return json.loads(calls[0]["function"]["arguments"])["content"]


def assert_unprotected(sample) -> None:
    p = sample.point
    hard = protected_ids_with_pairing(p.flat, p.kconfig)
    zone = soft_zone(p.kernel_view, p.state, p.kconfig, p.count_tokens) | soft_zone(p.flat, p.state, p.kconfig,
                                                                                   p.count_tokens)
    for r in compress_ranges(sample):
        if r["startId"].startswith("m"):
            ids = set(range_ids(p, r["startId"], r["endId"]))
            assert ids and not ids & hard and not ids & zone, (sample.meta["kind"], r["startId"], r["endId"])


def test_samples_have_several_kinds_and_target_last(samples, session, doctrine):
    kinds = {s.meta["kind"] for s in samples}
    assert len(kinds) >= 3 and kinds <= set(KINDS) and "ordinary" in kinds
    assert kinds & {"nudged_compress", "emergency", "spontaneous_compress", "tier2"}
    tools = tool_schemas(doctrine, "distilled") + session.tools
    for s in samples:
        assert s.messages[0]["role"] == "system"
        assert s.messages[-1] == s.label.message and s.messages[-1]["role"] == "assistant"
        assert s.tools == tools
        assert META_KEYS <= set(s.meta)
        assert s.meta["labeler"] == LABELER_ID and s.meta["doctrine_sha256"] == doctrine.sha256
        if s.meta["kind"] in ("nudged_compress", "emergency", "spontaneous_compress", "tier2", "tier3"):
            assert s.meta["conformance"]["passed"]
        if s.meta["nudge"]["shown"]:
            assert s.messages[-2]["role"] == "user"  # the nudge is the trailing user message


def test_no_fill_ratio_in_any_sample(samples, session):
    raw = "\n".join(t for m in session.messages for t in _texts(m))
    for s in samples:
        for m in s.messages:
            for t in _texts(m):
                # Percentages the task itself printed (test progress...) are content, not a fill ratio.
                assert all(h in raw for h in fill_disclosures(t)), (s.meta["kind"], fill_disclosures(t))


def test_no_label_compresses_a_protected_message(samples):
    assert any(compress_ranges(s) for s in samples)
    for s in samples:
        assert_unprotected(s)


def test_flat_ids_map_back_to_session_messages(samples):
    for s in samples:
        for m in s.point.flat:
            i = session_index_of(m.id)
            assert (i is not None and i < s.point.visible) or m.id.startswith(ACTION_PREFIX), m.id


def test_compressed_messages_are_not_needed_unless_emergency(samples, session):
    for s in samples:
        if s.meta["kind"] not in ("nudged_compress", "spontaneous_compress"):
            continue
        hs = hindsight(session, s.meta["step"], s.meta["horizon"])
        for r in compress_ranges(s):
            for i in range_ids(s.point, r["startId"], r["endId"]):
                assert not hs.is_needed(session_index_of(i)), (s.meta["step"], r["startId"], i)


def test_refusals_only_where_a_range_is_needed(session, doctrine):
    out = list(replay_session(session, window=32768, gate="aggressive", doctrine=doctrine, horizon=2, seed=0))
    refusals = [s for s in out if s.meta["kind"] == "refusal"]
    assert refusals
    for s in refusals:
        # Every refusal declines in one line, then the task goes on in the same turn.
        assert s.meta["declined"] and s.meta["nudge"]["shown"]
        line = s.messages[-1]["content"].split("\n")[0]
        assert 0 < len(line) < 200
        nxt = session.messages[s.point.visible]
        assert s.messages[-1].get("tool_calls") == nxt.get("tool_calls")
        if "still needed" not in s.meta["reason"]:
            continue  # a nudge with nothing worth folding: declined, not refused for a need
        hs = hindsight(session, s.meta["step"], 2)
        ids = [i for r in s.point.nudge.compressible_ranges for i in range_ids(s.point, r.start_ref, r.end_ref)]
        assert any(hs.is_needed(session_index_of(i)) for i in ids)
    # With no look-ahead the same session is never refused on account of later steps.
    for s in replay_session(session, window=32768, gate="aggressive", doctrine=doctrine, horizon=0, seed=0):
        if s.meta["kind"] == "refusal" and "still needed" in s.meta["reason"]:
            hs = hindsight(session, s.meta["step"], 0)
            ids = [i for r in s.point.nudge.compressible_ranges for i in range_ids(s.point, r.start_ref, r.end_ref)]
            assert any(hs.is_needed(session_index_of(i)) for i in ids)


def test_deterministic_and_seeded(session, doctrine):
    a = [s.to_json() for s in replay_session(session, window=8192, gate="aggressive", doctrine=doctrine, seed=3)]
    b = [s.to_json() for s in replay_session(session, window=8192, gate="aggressive", doctrine=doctrine, seed=3)]
    c = [s.to_json() for s in replay_session(session, window=8192, gate="aggressive", doctrine=doctrine, seed=4)]
    assert a == b
    assert a != c


def test_distilled_samples_carry_no_load_bearing_doctrine_text(samples, session, doctrine):
    lines = [ln.strip() for name in doctrine.load_bearing for ln in doctrine.text(name, "doctrine").split("\n")
             if len(ln.strip()) >= 40]
    assert lines
    for s in samples:
        for m in s.messages:
            for t in _texts(m):
                assert not [ln for ln in lines if ln in t], s.meta["kind"]
    full = next(replay_session(session, window=8192, gate="aggressive", doctrine=doctrine, prompt_mode="doctrine"))
    assert any(ln in full.messages[0]["content"] for ln in lines)  # the check above can fail


def test_small_window_and_stats(session, doctrine):
    stats = ReplayStats()
    out = list(replay_session(session, window=4096, gate="aggressive", doctrine=doctrine, stats=stats))
    assert out and stats.samples == len(out) and stats.points >= len(out)
    assert sum(stats.kinds.values()) == len(out)
    assert max(s.meta["token_count"] for s in out) < 2 * 4096
    for s in out:
        assert_unprotected(s)


def test_replay_runs_the_profile_kernel():
    """Replay's kernel is the serving profile's: one definition of each preset."""
    from doctrine.kernel.profile import resolve_profile

    for window, gate in ((200_000, "default"), (8192, "aggressive"), (4096, "reference"), (1280, "pocket")):
        assert kernel_config_for(window, gate) == resolve_profile(window, gate).kernel
    over = kernel_config_for(8192, "aggressive", {"nudge": {"growth_cap": 999}})
    agg = kernel_config_for(8192, "aggressive")
    assert over.nudge.growth_cap == 999 and over.nudge.growth_floor == agg.nudge.growth_floor
    assert set(GATES) == {"reference", "default", "aggressive", "pocket", "proxy", "proxy_pocket"}
    with pytest.raises(ValueError):
        kernel_config_for(8192, "extreme")


def test_nudge_style_none_shows_no_nudge(session, doctrine, samples):
    assert any(s.meta["nudge"]["shown"] for s in samples)  # the same replay with nudges shows some
    quiet = list(replay_session(session, window=8192, gate="aggressive", doctrine=doctrine, horizon=2, seed=0,
                                nudge_style="none"))
    assert quiet
    for s in quiet:
        assert not s.meta["nudge"]["shown"]
        assert s.meta["kind"] in {"spontaneous_compress", "recovery", "ordinary"}, s.meta["kind"]
        assert_unprotected(s)
