"""Kernel decisions rendered through the doctrine: both modes, and the serving prompt set."""

from __future__ import annotations

from doctrine.acp_prompt_set import export_prompt_set
from doctrine.kernel import CompressionState, KernelConfig, Message
from doctrine.kernel.host import render_for_model
from doctrine.render.nudges import nudge_text_for
from doctrine.render.prompts import fill_disclosures
from doctrine.spec import load_doctrine, resolve_doctrine


def session(n: int = 40) -> list[Message]:
    msgs = [Message(id="u0", role="user", content_type="text", text="Fix the parser bug in src/parse.py.")]
    for i in range(n):
        msgs.append(Message(id=f"c{i}", role="assistant", content_type="tool-call", tool_name="bash",
                            tool_call_id=f"t{i}", text='{"cmd": "pytest -q"}'))
        msgs.append(Message(id=f"r{i}", role="tool", content_type="tool-result", tool_name="bash",
                            tool_call_id=f"t{i}", text=f"run {i}: " + "x" * 2400 + "\n1 failed"))
    return msgs


def nudged_view(nudge_text):
    """Two turns at a small window with a lowered growth gate: the second one nudges."""
    cfg = KernelConfig.for_limit(32000, nudge={"growthFloor": 2000, "growthCap": 2000, "minGrowthFloor": 1000})
    msgs = session()
    first = render_for_model(msgs[:20], CompressionState.initial(), cfg, 10000, nudge_text=nudge_text)
    second = render_for_model(msgs, first.state, cfg, 21000, nudge_text=nudge_text)
    assert second.decision.should_inject and second.nudge_shown
    return second


def test_both_modes_render_a_real_decision_without_fill_ratio():
    doc = load_doctrine("v1")
    for mode in ("doctrine", "distilled"):
        view = nudged_view(nudge_text_for(doc, mode))
        nudge = view.messages[-1]
        assert nudge.role == "user" and "Compressible ranges" in nudge.text
        assert fill_disclosures(nudge.text) == []
    full = nudged_view(nudge_text_for(doc, "doctrine")).messages[-1].text
    slim = nudged_view(nudge_text_for(doc, "distilled")).messages[-1].text
    assert len(slim) < len(full) / 3


def test_serving_prompt_set_renders_the_training_nudge_through_the_kernel(tmp_path):
    """The lockstep the exported adapter relies on: a host rendering with the exported
    prompt set (doctrine mode, rules replaced) shows exactly the distilled training prompt."""
    doc = load_doctrine("v1")
    export_prompt_set(doc, "distilled", tmp_path / "serving")
    served = resolve_doctrine("v1", prompt_set=tmp_path / "serving", acknowledge_risk=True)
    training = nudged_view(nudge_text_for(doc, "distilled"))
    serving = nudged_view(nudge_text_for(served, "doctrine"))
    assert [m.to_dict() for m in serving.messages] == [m.to_dict() for m in training.messages]
    # ...and not the doctrine-mode nudge, which would put the rules back into the call.
    reference = nudged_view(nudge_text_for(doc, "doctrine"))
    assert reference.messages[-1].text != training.messages[-1].text
