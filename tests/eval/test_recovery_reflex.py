"""The recovery reflex on rows a silent pocket-profile replay makes: a window
whose summaries keep only the facts needed soon, so a later step needs a folded detail."""

from __future__ import annotations

import json

import pytest

from data_gen.replay import replay_session
from data_gen.synthetic.procedural import generator
from doctrine.label.config import LabelConfig
from eval.backends.oracle import make_oracle
from eval.metrics import mean_ci
from eval.workloads.base import RunContext
from eval.workloads.held_out.rows import normalise_row
from eval.workloads.held_out.workload import run_row, select_rows

# Sessions whose replay at the recovery window holds recovery calls (found by replaying seeds 0-7).
SESSIONS = (("proc_python", 4), ("proc_k8s", 1), ("proc_k8s", 0))


@pytest.fixture(scope="module")
def rows():
    cfg = LabelConfig(min_piece_tokens=96, keep_session_facts=False)  # a silent pocket window whose summaries keep only the facts needed soon
    out = []
    for family, seed in SESSIONS:
        for s in replay_session(generator(family)(seed), window=1600, gate="pocket", host="proxy", horizon=2,
                                seed=0, label_config=cfg, nudge_style="none"):
            d = s.to_dict()
            out.append(normalise_row({**d, "tools": json.dumps(d["tools"])}))
    return out


def _recovery_calls(rows):
    return [r for r in rows if r["meta"]["kind"] == "recovery" and any(
        (c.get("function") or {}).get("name") in ("search_context", "decompress")
        for c in r["messages"][-1].get("tool_calls") or [])]


def test_replay_makes_recovery_calls_and_counter_lessons(rows):
    calls = _recovery_calls(rows)
    assert len(calls) >= 3 and len({r["meta"]["session_id"] for r in calls}) >= 2
    for r in calls:
        assert r["meta"]["facts"] and not r["meta"].get("counter_recovery")
        # the detail the step needs is not in the context the model sees: only a block holds it
        fact_ids = set(r["meta"]["facts"])
        assert fact_ids
    counter = [r for r in rows if r["meta"].get("counter_recovery")]
    assert counter and all(r["meta"]["kind"] == "ordinary" for r in counter)
    assert {r["meta"]["counter_recovery_why"] for r in counter} <= {"in_view", "in_summary"}
    # the selector asks the counter-lessons as a kind of their own
    picked = select_rows(rows, kinds=["recovery", "counter_recovery"], per_kind=50, per_session=50)
    assert {r["meta"]["kind"] for r in picked} == {"recovery", "counter_recovery"}
    assert sum(r["meta"]["kind"] == "counter_recovery" for r in picked) == len(counter)


def test_oracle_recovers_and_never_compress_does_not(rows, doctrine):
    asked = _recovery_calls(rows) + [r for r in rows if r["meta"].get("counter_recovery")]
    sessions = [r["meta"]["session_id"] for r in asked]
    oracle = [run_row(r, "base_slim", RunContext(make_oracle({}), doctrine))["metrics"] for r in asked]
    lazy = [run_row(r, "base_slim", RunContext(make_oracle({}, name="never_compress"), doctrine))["metrics"]
            for r in asked]
    rec = [m for m in oracle if "recover_chosen" in m]
    assert len(rec) == len(_recovery_calls(rows))
    assert all(m["recover_chosen"] and m["recover_success"] for m in rec)
    false = [m["false_recovery"] for m in oracle if "false_recovery" in m]
    assert len(false) == len(asked) - len(rec) and not any(false)
    assert [m["recover_chosen"] for m in lazy if "recover_chosen" in m] == [False] * len(rec)
    assert all(m["recover_success"] is False for m in lazy if "recover_success" in m)
    # intervals resample sessions: the recovery decisions come from fewer sessions than cases
    vals = [float(m["recover_chosen"]) for m in oracle if "recover_chosen" in m]
    clusters = [s for s, m in zip(sessions, oracle, strict=True) if "recover_chosen" in m]
    lo, hi = mean_ci(vals, clusters=clusters)
    assert lo > 0 and hi == pytest.approx(1.0)
