"""Every synthetic family x 2 seeds x 2 windows: every label passes the checker."""

from __future__ import annotations

import json

import pytest

from data_gen.replay import ReplayStats, replay_session
from data_gen.synthetic import FAMILIES, generate
from doctrine.conform import check_summary
from doctrine.kernel.compress import apply_compression
from doctrine.kernel.protection import protected_ids_with_pairing
from doctrine.kernel.recommend import soft_zone
from doctrine.kernel.refs import ref_index
from doctrine.label.needed import hindsight, session_index_of
from doctrine.label.summaries import source_dicts
from doctrine.spec import load_doctrine

WINDOWS = ((8192, "aggressive"), (32768, "aggressive"))


@pytest.fixture(scope="module")
def doctrine():
    return load_doctrine("v1")


def _range_msgs(p, start, end):
    lo, hi = ref_index(start), ref_index(end)
    return [m for m in p.kernel_view if (p.state.by_raw.get(m.id) or "").startswith("m")
            and lo <= ref_index(p.state.by_raw[m.id]) <= hi]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_family_labels_pass_the_checker(family, doctrine):
    kinds = set()
    for seed in (0, 1):
        session = generate(family, seed)
        for window, gate in WINDOWS:
            stats = ReplayStats()
            for s in replay_session(session, window=window, gate=gate, doctrine=doctrine, horizon=2, seed=seed,
                                    stats=stats):
                kinds.add(s.meta["kind"])
                p = s.point
                calls = s.messages[-1].get("tool_calls") or []
                if not calls or calls[0]["function"]["name"] != "compress":
                    continue
                hard = protected_ids_with_pairing(p.flat, p.kconfig)
                zone = soft_zone(p.flat, p.state, p.kconfig, p.count_tokens)
                hs = hindsight(session, s.meta["step"], 2)
                content = json.loads(calls[0]["function"]["arguments"])["content"]
                # What the kernel folds for each message range (tool-pair widening included)
                # is the source its summary is checked against.
                applied = apply_compression(content, p.compress_messages, p.state, p.kconfig, clock_ms=lambda: 0)
                assert not applied.errors, applied.errors
                folded = {b.start_ref: b for b in (applied.state.block(x) for x in applied.new_block_ids)}
                for r in content:
                    if r["startId"].startswith("b"):
                        # Tier 2/3: the source is the folded blocks plus any raw messages between them.
                        res = apply_compression([r], p.flat, p.state, p.kconfig, clock_ms=lambda: 0)
                        assert res.blocks_created == 1, res.errors
                        new = res.state.block(res.new_block_ids[0])
                        src = [{"id": b, "role": "assistant", "content_type": "text", "text": p.state.block(b).summary}
                               for b in new.direct_block_ids]
                        raw = [m for m in p.flat if m.id in set(new.direct_message_ids)]
                        assert not {m.id for m in raw} & hard
                        rep = check_summary(src + source_dicts(raw, p.state), r["summary"], tier=new.tier,
                                            doctrine=doctrine)
                        assert rep.passed, (family, seed, window, rep.reasons)
                        continue
                    msgs = _range_msgs(p, r["startId"], r["endId"])
                    assert msgs and not {m.id for m in msgs} & (hard | zone)
                    direct = set(folded[r["startId"]].direct_message_ids)
                    msgs = [m for m in p.flat if m.id in direct]
                    assert not direct & (hard | zone)
                    rep = check_summary(source_dicts(msgs, p.state), r["summary"], tier=1, doctrine=doctrine)
                    assert rep.passed, (family, seed, window, s.meta["kind"], rep.reasons)
                    if s.meta["kind"] != "emergency":
                        assert not any(hs.is_needed(session_index_of(m.id)) for m in msgs)
            assert stats.samples > 0
            # Skips are rare and always counted with a reason.
            assert sum(stats.skipped.values()) <= max(3, stats.points // 5), stats.to_dict()
    assert "ordinary" in kinds and len(kinds) >= 3
