"""On-policy replay: the session goes on with a policy's moves, the rows carry the doctrine's labels."""

from __future__ import annotations

import copy
import json
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from data_gen.student import move_from_reply, student_policy
from data_gen.synthetic.procedural import generator
from doctrine.label.labeler import Label
from plumbing.chat_backend import Backend, Completion

ROOT = Path(__file__).resolve().parents[2]


def _rows(policy=None, family="proc_python", seed=3, window=1344):
    from data_gen.build import replay_rows
    from data_gen.recipe import DataRecipe
    from doctrine.spec import resolve_doctrine
    from plumbing.recipe_loader import load_config

    recipe = load_config(ROOT / "configs" / "data" / "pocket_proc.yaml", DataRecipe, [])
    tally: Counter = Counter()
    with tempfile.TemporaryDirectory() as tmp:
        rows = list(replay_rows(generator(family)(seed), recipe, resolve_doctrine("v1"), window, "pocket",
                                Counter(), Path(tmp), tally=tally, policy=policy))
    return rows, tally


def _dump(rows):
    return [json.dumps(r, sort_keys=True) for r in rows]


def _is_compress(label) -> bool:
    return label.action.get("type") == "compress"


def test_a_policy_that_makes_the_labels_own_moves_replays_the_same_rows():
    plain, _ = _rows()
    asked = []

    def same(sample, label):  # the student path (not the label's), with the label's move
        asked.append(label.kind)
        return Label(kind="student", message=copy.deepcopy(label.message), reason="copy",
                     action=copy.deepcopy(label.action))

    mirrored, tally = _rows(same)
    assert _dump(mirrored) == _dump(plain)
    assert tally["policy:asked"] == len(asked) == len(plain)
    assert tally["policy:applied"] == sum(1 for r in plain if r["meta"]["kind"] in
                                          ("emergency", "nudged_compress", "spontaneous_compress", "tier2"))
    assert tally["policy:refused"] == 0
    # None means: go on with the label's own move.
    assert _dump(_rows(lambda s, label: None)[0]) == _dump(plain)


def test_a_refused_fold_stays_in_the_context_and_the_next_row_corrects_it():
    def wrong_range(sample, label):
        if not _is_compress(label):
            return None
        bad = {"topic": "x", "content": [{"startId": "m99990", "endId": "m99999", "summary": "Folded."}]}
        msg = {"role": "assistant", "content": None, "tool_calls": [
            {"id": "s1", "type": "function", "function": {"name": "compress", "arguments": json.dumps(bad)}}]}
        return Label(kind="student", message=msg, reason="compress",
                     action={"type": "compress", "args": bad, "call_id": "s1"})

    rows, tally = _rows(wrong_range)
    assert tally["policy:refused"] >= 1 and tally["policy:applied"] == 0
    assert any(k.startswith("policy:refusal:") for k in tally)
    # After a refusal the same step is asked again, with the student's call and the kernel's
    # answer in view, and the doctrine's label there is a fold (the correction).
    corrections = [r for r in rows if r["meta"]["action_index"] > 0
                   and any("m99990" in (c["function"]["arguments"]) for m in r["messages"][:-1]
                           for c in m.get("tool_calls") or [])]
    assert corrections
    r = corrections[0]
    at = next(i for i, m in enumerate(r["messages"]) if any(c["id"] == "s1" for c in m.get("tool_calls") or []))
    answer = r["messages"][at + 1]
    assert answer["role"] == "tool" and "Compression FAILED" in answer["content"] and "m99990" in answer["content"]
    assert r["messages"][-1].get("tool_calls") and r["messages"][-1]["tool_calls"][0]["function"]["name"] == "compress"


def test_a_student_that_never_folds_is_asked_to_fold_where_the_labels_were_not():
    plain, _ = _rows()
    rows, tally = _rows(lambda s, label: Label(kind="student", message={"role": "assistant", "content": "ok"},
                                               reason="text"))
    assert tally["policy:session"] == tally["policy:asked"] > 0 and tally["policy:session:text"] > 0
    assert _dump(rows) != _dump(plain)
    # Its contexts stay over the limit, so the doctrine asks for a fold at steps where the
    # label's own folds had left nothing urgent: states only this student visits, labelled.
    def urgent_steps(rs):
        return {r["meta"]["step"] for r in rs if r["meta"]["kind"] == "emergency"}

    assert len(urgent_steps(rows) - urgent_steps(plain)) >= 3


def test_replies_become_moves():
    call = {"id": "c1", "type": "function", "function": {"name": "compress", "arguments": json.dumps(
        {"topic": "t", "content": [{"startId": "m00002", "endId": "m00004", "summary": "s"}]})}}
    move = move_from_reply({"role": "assistant", "content": "Folding.", "tool_calls": [call]})
    assert move.action["type"] == "compress" and move.action["args"]["content"][0]["startId"] == "m00002"
    rec = move_from_reply({"role": "assistant", "content": None, "tool_calls": [
        {"id": "c2", "type": "function", "function": {"name": "decompress", "arguments": '{"blockId": "b1"}'}}]})
    assert rec.action == {"type": "tool", "name": "decompress", "args": {"blockId": "b1"}, "call_id": "c2"}
    task = move_from_reply({"role": "assistant", "content": None, "tool_calls": [
        {"id": "c3", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]})
    assert task.action["type"] == "session" and task.reason == "task_call"
    assert move_from_reply({"role": "assistant", "content": "<tool_call>{"}, ["bad json"]).reason == "malformed"


class _Scripted(Backend):
    """A backend that answers every request with one reply text (the project's parser reads it)."""

    def __init__(self, text):
        self.text, self.seen = text, []

    def complete(self, request):
        from plumbing.chat_backend import reply_from_text

        self.seen.append(request)
        return reply_from_text(self.text, prompt_tokens=1, completion_tokens=1, latency_s=0.0)

    def count_tokens(self, text):
        return len(text) // 4


def test_student_policy_asks_the_rows_prompt_and_records_replies():
    backend = _Scripted("I will keep going.")
    replies = []
    rows, tally = _rows(student_policy(backend, max_tokens=64, replies=replies))
    assert len(backend.seen) == len(rows) == len(replies) == tally["policy:asked"]
    first = backend.seen[0]
    assert first.messages == rows[0]["messages"][:-1] and first.use_adapter and first.max_tokens == 64
    assert replies[0]["reply"] == "I will keep going." and replies[0]["move"] == "session"


@pytest.mark.parametrize("text", ['<tool_call>\n{"name": "compress", "arguments": {"content": []}}\n</tool_call>',
                                  '<tool_call>\n{"name": "decompress", "arguments": {"blockId": "b77"}}\n</tool_call>'])
def test_calls_the_host_cannot_use_are_answered_not_raised(text):
    rows, tally = _rows(student_policy(_Scripted(text)))
    assert rows and tally["policy:asked"] > 0
    assert not any(k.startswith("replay_error") for k in tally)
    assert tally["policy:refused"] + tally["policy:recovery"] > 0


def test_completion_type_is_what_backends_return():
    assert Completion.__dataclass_fields__.keys() >= {"message", "raw_text", "parse_errors"}


class _Overflows(_Scripted):
    """Answers until the ``n``-th request, then says the prompt is over the model's context."""

    def __init__(self, text, n):
        super().__init__(text)
        self.n = n

    def complete(self, request):
        from plumbing.chat_backend import BackendError

        if len(self.seen) >= self.n:
            self.seen.append(request)
            raise BackendError("vLLM engine failed: VLLMValidationError: This model's maximum context length is "
                               "4096 tokens. However, your prompt contains 4164 input tokens")
        return super().complete(request)


def test_a_prompt_over_the_students_context_ends_the_session():
    replies = []
    full, _ = _rows(student_policy(_Scripted("I will keep going."), max_tokens=64))
    rows, tally = _rows(student_policy(_Overflows("I will keep going.", 3), max_tokens=64, replies=replies))
    assert len(full) > 4
    assert tally["policy:asked"] == len(rows) == 4  # three answers, then the overflow; no more asks
    assert tally["policy:session:context_overflow"] == 1 and tally["policy:session:backend_error"] == 0
    assert replies[-1]["reason"] == "context_overflow"
    assert [json.dumps(r, sort_keys=True) for r in rows] == _dump(full[:4])


def test_another_backend_error_lets_the_session_go_on():
    class _Down(_Scripted):
        def complete(self, request):
            from plumbing.chat_backend import BackendError

            self.seen.append(request)
            raise BackendError("connection refused")

    full, _ = _rows(student_policy(_Scripted("I will keep going."), max_tokens=64))
    rows, tally = _rows(student_policy(_Down("x")))
    assert len(rows) == len(full) == tally["policy:session:backend_error"]
