"""Micro-batching of threaded eval calls into an engine's complete_batch."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from eval.backends.batching import MicroBatcher
from plumbing.chat_backend import Backend, Completion, Request, reply_from_text


class Engine(Backend):
    """Answers with the request's last message; records the batch sizes it was given."""

    name = "hf"

    def __init__(self, fail_on: str | None = None):
        self.calls: list[int] = []
        self.active = 0
        self.overlap = False
        self.fail_on = fail_on
        self._guard = threading.Lock()

    def complete_batch(self, requests: list[Request]) -> list[Completion]:
        with self._guard:
            self.active += 1
            self.overlap |= self.active > 1
        try:
            self.calls.append(len(requests))
            if any(r.messages[-1]["content"] == self.fail_on for r in requests):
                raise RuntimeError("engine broke")
            return [reply_from_text(f"echo {r.messages[-1]['content']}", prompt_tokens=1, completion_tokens=1,
                                    latency_s=0.01) for r in requests]
        finally:
            self.active -= 1

    def _complete(self, request: Request) -> Completion:
        return self.complete_batch([request])[0]


def ask(batcher: MicroBatcher, texts: list[str], workers: int) -> list[str]:
    def one(t: str) -> str:
        return batcher.complete(Request([{"role": "user", "content": t}])).message["content"]

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, texts))


def test_threads_are_answered_in_batches_each_with_its_own_reply():
    engine = Engine()
    batcher = MicroBatcher(engine, max_batch=4, linger_s=0.3)
    texts = [f"q{i}" for i in range(10)]
    try:
        answers = ask(batcher, texts, workers=10)
    finally:
        batcher.close()
    assert answers == [f"echo {t}" for t in texts]
    assert sum(engine.calls) == 10 and max(engine.calls) == 4
    assert len(engine.calls) <= 4          # 10 waiting threads: 4 + 4 + 2 at best, never ten singles
    assert not engine.overlap              # the engine is never entered by two threads
    assert batcher.batches == engine.calls


def test_harness_batches_vllm_calls_and_serialises_hf(tmp_path):
    """concurrency 4: a vllm engine gets the waiting calls together, an hf one gets them one by one."""
    from eval.harness import run_eval
    from tests.eval.test_harness import SMOKE, recipe

    class Model(Engine):
        def count_tokens(self, text: str) -> int:
            return len(text) // 4

    seen = {}
    for name in ("vllm", "hf"):
        engine = Model()
        engine.name = name
        r = recipe(arms=["base_slim"], concurrency=4, workloads=[{"name": "held_out", "settings": {
            "data_dir": "fixtures/held_out", "split": "test"}}])
        summary = run_eval(r, tmp_path / name, backend=engine, base_dir=SMOKE.parent, log=lambda s: None)
        assert summary.complete and sum(engine.calls) == summary.total
        seen[name] = engine.calls
    assert max(seen["vllm"]) > 1 and max(seen["vllm"]) <= 4
    assert set(seen["hf"]) == {1}


def test_max_batch_one_serialises():
    engine = Engine()
    batcher = MicroBatcher(engine, max_batch=1, linger_s=0.3)
    try:
        assert ask(batcher, ["a", "b", "c"], workers=3) == ["echo a", "echo b", "echo c"]
    finally:
        batcher.close()
    assert engine.calls == [1, 1, 1]


def test_a_failed_batch_fails_its_callers_and_the_worker_goes_on():
    engine = Engine(fail_on="bad")
    batcher = MicroBatcher(engine, max_batch=2, linger_s=0.0)
    try:
        with pytest.raises(RuntimeError, match="engine broke"):
            batcher.complete(Request([{"role": "user", "content": "bad"}]))
        assert ask(batcher, ["ok"], workers=1) == ["echo ok"]
    finally:
        batcher.close()
    assert not batcher._worker.is_alive()
