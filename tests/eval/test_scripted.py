"""The scripted-session driver: calls, billed tokens, re-fetches, probes, oracle wiring."""

from __future__ import annotations

import pytest

from eval.arms import ARMS
from eval.backends.oracle import OracleBackend
from eval.workloads.base import RunContext
from eval.workloads.fixtures import demo_session
from eval.workloads.scripted import run_session


@pytest.fixture(scope="module")
def session():
    return demo_session(0, steps=8, output_chars=2400)


def ctx(doctrine, **kw):
    return RunContext(OracleBackend(), doctrine, window=kw.pop("window", 5000), horizon=1, **kw)


def test_every_arm_bills_every_call(doctrine, session):
    n_assistant = sum(1 for m in session.messages if m["role"] == "assistant")
    probes = sum(1 for s in session.steps if s.kind == "probe")
    for arm in ARMS:
        r = run_session(session, arm, 0, ctx(doctrine))
        m = r["metrics"]
        task_calls = sum(1 for c in r["calls"] if c["purpose"] == "task")
        assert m["calls"] == len(r["calls"])
        assert m["billed_tokens"] == sum(c["prompt_tokens"] + c["completion_tokens"] for c in r["calls"])
        assert m["peak_context"] >= m["mean_context"] > 0
        assert m["probes"] == probes
        # Every recorded assistant turn is one call (a real decision call may stand in for it).
        stand_ins = sum(1 for c in r["calls"] if c["purpose"] in ("decision", "nudge")
                        and not c.get("compress_attempted") and not c.get("recovery"))
        assert task_calls + stand_ins >= n_assistant - probes


def test_unbounded_history_is_the_reference(doctrine, session):
    full = run_session(session, "full", 0, ctx(doctrine))["metrics"]
    short = run_session(session, "n_latest_10", 0, ctx(doctrine))["metrics"]
    assert full["probe_accuracy"] == 1.0 and full["refetches"] == 0
    assert short["peak_context"] < full["peak_context"] and short["billed_tokens"] < full["billed_tokens"]
    assert short["probe_accuracy"] < 1.0 and short["evidence_survival"] < 1.0


def test_refetch_counted_when_a_needed_fact_is_gone(doctrine):
    # Steps use the fact of the step before: with only 2 messages kept it is always cut.
    s = demo_session(1, steps=5, output_chars=600, probe_every=0)
    r = run_session(s, "n_latest_10", 0, ctx(doctrine))
    assert r["metrics"]["refetches"] == 0
    from functools import partial

    from eval.arms import n_latest

    ARMS["_n2"] = partial(n_latest, n=2)
    from eval.arms import ARM_INFO, ArmInfo

    ARM_INFO["_n2"] = ArmInfo("baseline")
    try:
        r2 = run_session(s, "_n2", 0, ctx(doctrine))
    finally:
        del ARMS["_n2"], ARM_INFO["_n2"]
    assert r2["metrics"]["refetches"] == sum(len(st.uses) for st in s.steps if st.kind == "task")


def test_kernel_arms_compress_and_keep_facts(doctrine, session):
    r = run_session(session, "base_slim", 0, ctx(doctrine))
    m = r["metrics"]
    assert m["compressions_succeeded"] >= 1 and m["kernel_errors"] == 0
    assert m["probe_accuracy"] == 1.0
    full = run_session(session, "full", 0, ctx(doctrine))["metrics"]
    assert m["peak_context"] < full["peak_context"]
    d = run_session(session, "doctrine", 0, ctx(doctrine))["metrics"]
    assert d["doctrine_tokens"] > m["doctrine_tokens"] > 0
    assert d["prompt_tokens"] > m["prompt_tokens"]


def test_oracle_uses_the_labeling_function(doctrine, session):
    r = run_session(session, "base_slim", 0, ctx(doctrine))
    assert r["metrics"]["oracle_labeler_points"] > 0


def test_oracle_rule_without_labeler(doctrine, session, monkeypatch):
    import eval.workloads.hindsight as h

    monkeypatch.setattr(h, "labeler_decision", lambda *args, **kwargs: None)  # the labeler skips every point
    r = run_session(session, "base_slim", 0, ctx(doctrine))
    m = r["metrics"]
    assert m["oracle_labeler_points"] == 0 and m["oracle_rule_points"] > 0
    assert m["compressions_succeeded"] >= 1 and m["probe_accuracy"] == 1.0


def _asked(result) -> dict[int, int]:
    out: dict[int, int] = {}
    for c in result["calls"]:
        if c["purpose"] in ("decision", "nudge"):
            out[c["step"]] = out.get(c["step"], 0) + 1
    return out


def test_decision_call_settings_bound_the_model_calls(doctrine, session):
    from eval.workloads.scripted import decision_settings

    # A small window keeps the kernel nudging, so the unbounded run asks several times a step.
    c = ctx(doctrine, window=3000)
    every = run_session(session, "distilled", 0, c)
    assert max(_asked(every).values()) > 1
    at_nudges = run_session(session, "distilled", 0, c, decide_at="nudge")
    for call in at_nudges["calls"]:
        if call["purpose"] in ("decision", "nudge"):
            assert call["nudge_shown"]
    capped = run_session(session, "distilled", 0, c, decide_at="nudge", max_decisions_per_step=1)
    assert _asked(capped) and max(_asked(capped).values()) == 1
    assert capped["metrics"]["model_calls"] < every["metrics"]["model_calls"]
    # Probes are still asked, and every assistant turn is still billed.
    assert capped["metrics"]["probes"] == every["metrics"]["probes"]
    assert capped["metrics"]["calls"] >= sum(1 for m in session.messages if m["role"] == "assistant") - 1
    assert decision_settings({}) == {"decide_at": "step", "max_decisions_per_step": None}
    for bad in ({"decide_at": "always"}, {"max_decisions_per_step": 0}, {"max_decisions_per_step": "2"}):
        with pytest.raises(ValueError):
            decision_settings(bad)


def test_families_generate_sessions_of_the_recipes_size():
    # Before, `size` was a string handed to the generators, which read SessionSize fields off it:
    # any recipe with `families:` failed with AttributeError.
    from eval.workloads.scripted import ScriptedSettings, load_sessions

    short, long_ = (load_sessions({"families": ["py_bughunt"], "size": {"steps": n}}) for n in (4, 16))
    assert len(short) == len(long_) == 1
    assert len(short[0].messages) < len(long_[0].messages)
    with pytest.raises(ValueError):
        ScriptedSettings.model_validate({"families": ["py_bughunt"], "size": "small"})
