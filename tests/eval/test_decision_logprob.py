"""Teacher-forced decision scores on the tiny model: exact against a full forward pass, and
moved by training toward the label."""

from __future__ import annotations

import json

import pytest

from eval.backends import make_backend
from eval.backends.hf_score import continuation_ids
from eval.workloads.held_out.decision_scoring import DECLINE, alternatives, score_decision
from plumbing.chat_backend import Request

TOOLS = [{"type": "function", "function": {"name": "read_file", "description": "Read a file.",
                                           "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}},
         {"type": "function", "function": {"name": "compress", "description": "Fold a range.",
                                           "parameters": {"type": "object", "properties": {}}}}]
CONTEXT = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "<acp>m00001</acp> Fix the failing test in parser.py."},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {
        "name": "read_file", "arguments": json.dumps({"path": "parser.py"})}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "<acp>m00003</acp> def parse(x):\n    return x"},
    {"role": "user", "content": "[ACP] Context maintenance.\nCompressible ranges (1, oldest first):\n"
                                "  m00002–m00003  2 msgs  1.2K [tool 90% | text 10%]"},
]
LABEL = {"role": "assistant", "content": "", "tool_calls": [{"id": "k1", "type": "function", "function": {
    "name": "compress", "arguments": json.dumps({"topic": "parser", "content": [
        {"startId": "m00002", "endId": "m00003", "summary": "Read parser.py: parse returns x unchanged."}]})}}]}


@pytest.fixture(scope="module")
def backend(tiny_model_dir):
    return make_backend("hf", {"model": str(tiny_model_dir)})


def _request() -> Request:
    return Request(CONTEXT, TOOLS, False, 16, {})


def test_alternatives_come_from_the_case():
    alts = dict(alternatives(LABEL, _request(), TOOLS))
    assert set(alts) == {"act", "decline"}  # the label is the compress call
    assert json.loads(alts["act"]["tool_calls"][0]["function"]["arguments"]) == {"path": "parser.py"}
    assert alts["decline"]["content"] == DECLINE
    act = alts["act"]
    again = dict(alternatives(act, _request(), TOOLS))
    assert set(again) == {"compress", "decline"}
    assert "m00002" in again["compress"]["tool_calls"][0]["function"]["arguments"]


def test_scores_match_a_full_forward_pass(backend):
    import torch

    req = _request()
    replies = [LABEL] + [r for _, r in alternatives(LABEL, req, TOOLS)]
    k = 12
    got = backend.score_replies(req, replies, k)
    prompt = backend.tokenizer(backend.render(req), add_special_tokens=False)["input_ids"]
    for reply, lps in zip(replies, got, strict=True):
        cont = continuation_ids(backend, req, reply)[:k]
        assert len(lps) == len(cont)
        with torch.no_grad():
            logits = backend.model(input_ids=torch.tensor([prompt + cont])).logits[0].float()
        ref = torch.log_softmax(logits, dim=-1)
        want = [float(ref[len(prompt) + j - 1, t]) for j, t in enumerate(cont)]
        assert lps == pytest.approx(want, abs=1e-4)
    # Scoring right after generating on the same prompt reuses its cache, and gives the same.
    backend.complete(req)
    hits = backend.stats()["prefix_cache_hits"]
    again = backend.score_replies(req, replies, k)
    assert backend._kv is not None and backend.stats()["prefix_cache_hits"] == hits  # kept, not counted
    assert [x for s in again for x in s] == pytest.approx([x for s in got for x in s], abs=1e-4)
    assert backend.complete(req).raw_text == backend.complete(req).raw_text  # the kept cache still serves


def test_training_toward_the_label_raises_its_margin(tiny_model_dir, tmp_path):
    import torch

    be = make_backend("hf", {"model": str(tiny_model_dir), "reuse_prefix_cache": False})
    req = _request()
    before = score_decision(be, req, LABEL, TOOLS)
    assert before["decision_scoring"] == "teacher-forced" and before["decision_candidates"] == 2
    prompt = be.tokenizer(be.render(req), add_special_tokens=False)["input_ids"]
    cont = continuation_ids(be, req, LABEL)[:12]
    ids = torch.tensor([prompt + cont])
    labels = torch.full_like(ids, -100)
    labels[0, len(prompt):] = ids[0, len(prompt):]
    opt = torch.optim.Adam(be.model.parameters(), lr=3e-3)
    be.model.train()
    for _ in range(8):
        opt.zero_grad()
        be.model(input_ids=ids, labels=labels).loss.backward()
        opt.step()
    be.model.eval()
    after = score_decision(be, req, LABEL, TOOLS)
    assert after["decision_logprob"] > before["decision_logprob"] + 1.0
    assert after["decision_margin"] > before["decision_margin"] and after["decision_win"] is True


def test_a_backend_without_scoring_says_so():
    oracle = make_backend("oracle")
    out = score_decision(oracle, _request(), LABEL, TOOLS)
    assert out == {"decision_scoring": "not supported by the oracle backend"}
