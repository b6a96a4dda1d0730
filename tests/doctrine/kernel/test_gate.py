"""Nudge gate arithmetic and decisions (§4.1-4.4), at the reference defaults and small windows."""

import pytest

from doctrine.kernel.config import KernelConfig
from doctrine.kernel.nudge import decide_nudge, gate_numbers, reset_after_compress, stamp
from doctrine.kernel.recommend import Range
from doctrine.kernel.state import Block, CompressionState


def gn(limit, token_count=0, state=None, **over):
    cfg = KernelConfig.for_limit(limit, **over)
    return gate_numbers(token_count, state or CompressionState.initial(), cfg, {1: 0, 2: 0, 3: 0})


def test_reference_defaults_at_200k():
    g = gn(200000, 100000)
    assert g.growth_tokens == 50000 and g.floor == 22500 and g.tier2_threshold == 75000
    assert not gn(200000, 149999).over_limit and gn(200000, 150000).over_limit
    assert not gn(200000, 189999).emergency and gn(200000, 190000).emergency


@pytest.mark.parametrize("limit", [8000, 16000, 1000000])
def test_growth_threshold_is_clamped_to_50000_by_default(limit):
    g = gn(limit, 1)
    # round(limit * 0.05) is 400 / 800 / 50000, clamped into [growthFloor, growthCap] = [50000, 50000]
    assert g.growth_tokens == 50000 and g.floor == 22500 and g.tier2_threshold == 75000


def test_small_window_bands():
    assert gn(8000, 6000).over_limit and not gn(8000, 5999).over_limit
    assert gn(8000, 7600).emergency and not gn(8000, 7599).emergency
    assert gn(16000, 12000).over_limit and gn(16000, 15200).emergency


def test_overrides_scale_the_gate_down():
    # growthFloor alone lowers the clamp's lower bound; the 20000 minGrowthFloor still dominates
    g = gn(16000, 1, growthFloor=200)
    assert g.growth_tokens == 800 and g.floor == 20000
    g = gn(16000, 1, nudge={"growthFloor": 200, "minGrowthFloor": 100})
    assert g.growth_tokens == 800 and g.floor == 360 and g.tier2_threshold == 1200
    g = gn(8000, 1, growthFloor=100, growthCap=300, minGrowthFloor=50)
    assert g.growth_tokens == 300 and g.floor == 135  # round(400) capped at 300; 0.45 * 300
    g = gn(8000, 1, growthFloor=1000, growthCap=1000, minGrowthFloor=0, minGrowthRatio=0.3)
    assert g.growth_tokens == 1000 and g.floor == 300


def test_growth_reference_order():
    st = CompressionState.initial()
    assert gn(200000, 5000, st).growth == 0  # no baseline yet: growth is 0
    st.nudge.last_per_message_nudge_tokens = 3000
    assert gn(200000, 5000, st).growth == 2000
    st.nudge.last_nudge_shown_tokens = 4000
    assert gn(200000, 5000, st).growth == 1000 and gn(200000, 5000, st).reference == 4000


def R(tokens, chars=None):
    return Range("m00001", "m00002", 2, tokens, tokens * 4 if chars is None else chars, 100, 0)


def decide(limit, token_count, ranges=(), state=None, blocks=(), **over):
    st = state or CompressionState.initial()
    st.blocks.extend(blocks)
    cfg = KernelConfig.for_limit(limit, **over)
    return decide_nudge([], list(ranges), [], st, cfg, token_count)


def baseline(n, shown=0, by_tier=None):
    st = CompressionState.initial()
    st.nudge.last_per_message_nudge_tokens = n
    st.nudge.last_nudge_shown_tokens = shown
    st.nudge.last_shown_by_tier = dict(by_tier or {})
    return st


def test_mid_band_t1_needs_growth_floor_and_threshold():
    # 200K: baseline 60000; at 82500 growth is exactly the floor
    d = decide(200000, 82500, [R(50000)], baseline(60000))
    assert d.should_inject and d.tier == 1 and d.voice == "gentle"
    assert d.breakdown["pendingT1"] == 50000 and d.breakdown["growthFloor"] == 22500
    d = decide(200000, 82499, [R(50000)], baseline(60000))
    assert not d.should_inject and "growth 22499 < floor 22500" in d.reason
    d = decide(200000, 90000, [R(49999)], baseline(60000))
    assert not d.should_inject and "max compressible 49999 < threshold 50000" in d.reason


def test_t1_counts_only_ranges_at_min_compress_range_chars():
    d = decide(200000, 90000, [R(40000), R(20000, chars=4999)], baseline(60000))
    assert d.breakdown["pendingT1"] == 40000 and not d.should_inject


def test_first_turn_never_nudges_outside_pressure():
    d = decide(200000, 140000, [R(100000)])
    assert not d.should_inject and d.growth == 0


def summary_block(bid, tier, tokens):
    return Block(bid, "r1", tier, "s" * (tokens * 4), ["x" + bid], ["x" + bid], compressed_tokens=tokens * 8)


def test_tier2_trigger_and_per_tier_cadence():
    blocks = [summary_block("b1", 1, 40000), summary_block("b2", 1, 40000)]  # T2 = 80000
    d = decide(200000, 100000, [R(10000)], baseline(70000), blocks)
    assert d.should_inject and d.tier == 2
    assert [(t.block_id, t.summary_tokens, t.original_tokens) for t in d.tier_target_blocks] == [
        ("b1", 40000, 320000), ("b2", 40000, 320000)]
    # shown for tier 2 at 90000: growth since that nudge 22500 would pass, cadence 10000 fails
    st = baseline(70000, shown=77500, by_tier={2: 90000})
    d = decide(200000, 100000, [R(10000)], st, blocks)
    assert not d.should_inject and "cadence" in d.reason
    st = baseline(70000, shown=77500, by_tier={2: 77500})
    assert decide(200000, 100000, [R(10000)], st, blocks).tier == 2


def test_cadence_failure_of_tier2_does_not_try_tier3():
    blocks = [summary_block("b1", 1, 80000), summary_block("b2", 2, 90000)]
    st = baseline(70000, by_tier={2: 95000})
    assert not decide(200000, 100000, [], st, blocks).should_inject


def test_tier3_trigger():
    blocks = [summary_block("b1", 1, 10000), summary_block("b2", 2, 80000)]
    d = decide(200000, 100000, [R(5000)], baseline(70000), blocks)
    assert d.should_inject and d.tier == 3 and [t.block_id for t in d.tier_target_blocks] == ["b2"]
    d = decide(200000, 100000, [R(5000)], baseline(70000), blocks, tiers={"enabled": False})
    assert not d.should_inject


def test_pressure_band_picks_largest_tier_and_skips_gates():
    blocks = [summary_block("b1", 1, 3000)]
    d = decide(200000, 150000, [R(2000)], None, blocks)  # first turn, tiny amounts: still nudges
    assert d.should_inject and d.tier == 2 and d.voice == "emergency" and d.reason.startswith("OVER-LIMIT")
    d = decide(200000, 190000, [R(3000)], None, blocks)  # tie goes to the lower tier
    assert d.tier == 1 and d.reason.startswith("EMERGENCY") and d.breakdown["emergencyOverride"] == 1
    d = decide(200000, 190000, [], None, [])
    assert not d.should_inject and d.voice == "emergency"
    d = decide(8000, 6000, [R(300, chars=5000)])  # small window: pressure starts at 6000
    assert d.should_inject and d.tier == 1
    assert not decide(8000, 5999, [R(300, chars=5000)], baseline(1)).should_inject  # growth 5998 < 22500


def test_small_windows_need_overrides_for_growth_nudges():
    assert not decide(16000, 11000, [R(3000)], baseline(1000)).should_inject
    d = decide(16000, 11000, [R(3000)], baseline(1000), growthFloor=500, growthCap=2000,
               minGrowthFloor=500)
    # G = clamp(round(800), 500, 2000) = 800, floor = max(500, 360) = 500
    assert d.should_inject and d.breakdown["nudgeGrowthTokens"] == 800 and d.breakdown["growthFloor"] == 500


def test_stamping_baseline_nudge_and_shrink_rebaseline():
    st = CompressionState.initial()
    stamp(st, 40000, 50000, False, None)
    assert st.nudge.last_per_message_nudge_tokens == 40000
    stamp(st, 90000, 50000, True, 1)
    assert st.nudge.last_nudge_shown_tokens == 90000 and st.nudge.last_shown_by_tier == {1: 90000}
    assert st.nudge.last_per_message_nudge_tokens == 40000  # baseline is kept
    stamp(st, 35000, 50000, False, None)  # not below 40000 - 50000: no re-baseline
    assert st.nudge.last_nudge_shown_tokens == 90000
    st.nudge.last_per_message_nudge_tokens = 120000
    stamp(st, 69999, 50000, False, None)  # below 120000 - 50000
    assert (st.nudge.last_per_message_nudge_tokens, st.nudge.last_nudge_shown_tokens,
            st.nudge.last_shown_by_tier) == (69999, 0, {})
    reset_after_compress(st)
    assert st.nudge.last_per_message_nudge_tokens == 0 and st.nudge.last_nudge_shown_tokens == 0


def test_breakdown_and_logging_fields():
    d = decide(200000, 100000, [R(1000)], baseline(90000, shown=95000))
    b = d.breakdown
    assert b["hasPendingNudge"] == 1 and b["effectiveThreshold"] == 25000 and b["growthReference"] == 95000
    assert b["usage"] == 0.5 and d.usage_for_logs == 0.5
    assert "usage" not in d.reason and "0.5" not in d.reason  # the ratio is never in model-facing text
