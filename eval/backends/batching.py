"""Micro-batching of an in-process engine's calls while eval cases run in threads.

The harness runs ``concurrency`` cases at once, but an in-process engine is used by one
thread at a time. Here every thread's ``complete`` joins a queue; one worker takes what is
waiting, up to ``max_batch`` requests, and answers them with one ``complete_batch`` call of
the engine (``max_batch=1``: one call at a time, in arrival order). The worker starts a
batch as soon as one request waits and lingers up to ``linger_s`` for more, stopping early
when the batch is full.

Worth it where the engine batches well: vLLM schedules the requests of one call together
(continuous batching), so the harness gives it up to ``concurrency`` requests a call. The
hf backend's ``complete_batch`` left-pads a batch into one ``generate``: on 2 CPU cores four
held-out prompts of 3.3-4.9K tokens (96 new tokens each) took 235 s in one batch against
103 s one by one (float32; bfloat16 157 s against 98 s), most likely because the padded, masked
attention over the longest prompt costs more than the decoding steps a batch shares (not
profiled); so the harness answers hf calls one at a time.
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future
from typing import Any

from plumbing.chat_backend import Backend, Completion, Request


class MicroBatcher(Backend):
    """Thread-safe ``complete`` over ``inner.complete_batch``; ``max_batch=1`` serialises."""

    def __init__(self, inner: Backend, max_batch: int, linger_s: float = 0.5):
        self.inner, self.name = inner, inner.name
        self.max_batch = max(1, int(max_batch))
        self.linger_s = max(0.0, float(linger_s))
        self._lock = threading.Lock()  # the engine (model and tokenizer) is used by one thread at a time
        self._queue: queue.Queue[tuple[Request, Future] | None] = queue.Queue()
        self.batches: list[int] = []  # sizes of the batches answered, for stats and tests
        self._worker = threading.Thread(target=self._run, name="eval-microbatch", daemon=True)
        self._worker.start()

    def complete(self, request: Request) -> Completion:
        fut: Future = Future()
        self._queue.put((request, fut))
        return fut.result()

    def _gather(self) -> list[tuple[Request, Future]] | None:
        first = self._queue.get()
        if first is None:
            return None
        batch = [first]
        deadline = time.monotonic() + self.linger_s
        while len(batch) < self.max_batch:
            left = deadline - time.monotonic()
            try:
                item = self._queue.get(timeout=left) if left > 0 else self._queue.get_nowait()
            except queue.Empty:
                break
            if item is None:
                self._queue.put(None)  # close after this batch
                break
            batch.append(item)
        return batch

    def _run(self) -> None:
        while True:
            batch = self._gather()
            if batch is None:
                return
            requests = [r for r, _ in batch]
            try:
                with self._lock:
                    out = (self.inner.complete_batch(requests) if len(requests) > 1
                           else [self.inner.complete(requests[0])])
                if len(out) != len(requests):
                    raise RuntimeError(f"{self.inner.name}: {len(out)} completions for {len(requests)} requests")
            except BaseException as exc:  # noqa: BLE001 - every waiting case gets the error, the worker goes on
                for _, fut in batch:
                    fut.set_exception(exc)
                continue
            self.batches.append(len(requests))
            for (_, fut), comp in zip(batch, out, strict=True):
                fut.set_result(comp)

    def count_tokens(self, text: str) -> int:
        with self._lock:
            return self.inner.count_tokens(text)

    def stats(self) -> dict[str, Any]:
        return self.inner.stats()

    def score_replies(self, request: Request, replies: list[dict[str, Any]], first_tokens: int) -> list[list[float]]:
        """The engine's teacher-forced scoring, under the engine lock; NotImplementedError
        when the engine has none (only the hf backend scores)."""
        fn = getattr(self.inner, "score_replies", None)
        if fn is None:
            raise NotImplementedError(f"the {self.inner.name} backend does not score replies")
        with self._lock:
            return fn(request, replies, first_tokens)

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()

    def close(self) -> None:
        """Stop the worker; the inner engine stays open (its owner closes it)."""
        self._queue.put(None)
        self._worker.join(timeout=5)
