"""Training and evaluation send the model the same request for the same kernel state.

data_gen's replay renders a training row's context; an eval kernel arm renders its request
from the same history. Both go through doctrine.render.request under one serving profile, so the
bytes must agree: any drift here is skew between what the adapter learns and what it is
evaluated on."""

from __future__ import annotations

import pytest

from data_gen.replay import replay_session
from doctrine.label.needed import session_msg_id
from eval.arms import ARMS, ArmEnv, ArmState
from eval.workloads.fixtures import demo_session
from plumbing.tokens import default_count_tokens


@pytest.mark.parametrize("window, gate, host", [(6000, "aggressive", "proxy"), (4096, "default", "pi")])
def test_a_training_row_is_the_eval_request(doctrine, window, gate, host):
    sess = demo_session(0, steps=8, output_chars=2400)
    samples = [s for s in replay_session(sess, window=window, gate=gate, host=host, doctrine=doctrine, horizon=1)
               if s.point.action_index == 0]
    e = ArmEnv.build(window, default_count_tokens, lambda *a: "", doctrine=doctrine,
               task_tools=list(sess.tools), system_prompt=sess.messages[0]["content"], gate=gate, host=host)
    st = ArmState()
    # The arm is driven through the same step boundaries in order (the kernel state carries
    # its nudge stamps over), up to the first label that changes the history.
    checked = 0
    for s in samples:
        st.history = [{**sess.messages[i], "id": session_msg_id(i)} for i in range(1, s.point.visible)]
        view = ARMS["base_slim"](st, e)
        assert view.messages == s.messages[:-1], f"step {s.meta['step']}"
        assert view.tools == s.tools
        assert view.profile.sha256 == s.meta["serving_profile"]
        checked += 1
        if s.meta["kind"] != "ordinary":  # a refusal or an action rewrites the history
            break
    assert checked >= 2
