"""The ``hf`` backend: in-process transformers, the base model or base + PEFT adapter.

Greedy by default. Prompts are rendered with the chat template training used
(``plumbing.chat_templates.choose_template``, the same tool-call text form) and tokenised as
training tokenises them (``chat_token_ids``: a special-token string in a message or a tool
result is text, not a control token), and replies are parsed
with ``plumbing.tool_format.parse_assistant_text``. With an adapter loaded, a request without
``use_adapter`` runs under ``disable_adapter()``, so one loaded model serves base and
adapter arms. ``complete_batch`` left-pads and generates a batch in one ``generate`` call.

Single calls reuse the KV cache of the previous call when the new prompt starts with the
same tokens (a session's next call usually extends the last one): the cache is cropped to
the common prefix and only the rest is prefilled. ``stats()`` reports the reused tokens as
``prefix_cache_hits`` over ``prefix_cache_queries`` (prompt tokens), as vLLM names them.

``score_replies`` scores candidate replies teacher-forced instead of generating (the held-out
``decision_logprob`` metrics; ``eval.backends.hf_score``).

``kv_cache: growing`` (the default) decodes with ``plumbing.kv_cache.growing_cache``: the same
tokens as transformers' concatenating cache, 69-117 ms a decoded token against 130-134 ms at
a 4K-token prompt on 2 CPU cores (``benchmarks/hf_decode.py``); ``kv_cache: dynamic`` is transformers' own.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from eval.backends.local import LocalBackend
from plumbing.chat_backend import BackendError, Completion, Request, reply_from_text


class HFBackend(LocalBackend):
    name = "hf"

    def __init__(self, model: str, adapter_dir: str | None = None, dtype: str = "float32",
                 chat_template: str = "auto", batch_size: int = 4, reuse_prefix_cache: bool = True,
                 kv_cache: str = "growing", **_: Any):
        import torch

        from plumbing.chat_templates import choose_template
        from plumbing.models import ModelSpecError, load_model, load_tokenizer, resolve_model

        if kv_cache not in ("growing", "dynamic"):
            raise BackendError(f"kv_cache must be 'growing' or 'dynamic', not {kv_cache!r}")
        self.kv_cache = kv_cache
        try:
            resolved = resolve_model(model)
        except ModelSpecError as exc:
            raise BackendError(str(exc)) from None
        self.spec = model
        self.adapter_dir = adapter_dir
        self.tokenizer = load_tokenizer(resolved)
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.template = choose_template(self.tokenizer, chat_template).template
        net = load_model(resolved, dtype=dtype)
        if adapter_dir:
            from peft import PeftModel

            from plumbing.adapters import check_adapter

            check_adapter(adapter_dir)  # truncated or inconsistent weights: one line, not PEFT's traceback
            net = PeftModel.from_pretrained(net, adapter_dir)
        net.eval()
        self.model = net
        self.batch_size = max(1, int(batch_size))
        self.reuse_prefix_cache = reuse_prefix_cache
        self._kv: tuple[bool, list[int], Any] | None = None  # (adapter?, token ids, cache)
        self._hits = 0
        self._queries = 0
        self._torch = torch
        torch.manual_seed(0)

    def _adapter_ctx(self, use_adapter: bool):
        if use_adapter and not self.adapter_dir:
            raise BackendError("a request asked for the adapter but no adapter_dir is loaded")
        if self.adapter_dir and not use_adapter:
            return self.model.disable_adapter()
        return contextlib.nullcontext()

    def _generate(self, requests: list[Request]) -> list[Completion]:
        torch = self._torch
        self.tokenizer.padding_side = "left"
        enc = self.tokenizer.pad({"input_ids": [self.prompt_ids(r) for r in requests]}, padding=True,
                                 return_tensors="pt")
        max_new = max(r.max_tokens for r in requests)
        t0 = time.perf_counter()
        flag = requests[0].use_adapter
        kwargs: dict[str, Any] = {}
        reused = 0
        if self.reuse_prefix_cache and len(requests) == 1:
            reused, cache = self._reusable(flag, enc["input_ids"][0].tolist())
            if reused:
                kwargs["past_key_values"] = cache
        if "past_key_values" not in kwargs and self.kv_cache == "growing":
            from plumbing.kv_cache import growing_cache

            kwargs["past_key_values"] = growing_cache(self.model.config)
        self._queries += int(enc["attention_mask"].sum())
        self._hits += reused
        with torch.no_grad(), self._adapter_ctx(flag):
            try:
                gen = self.model.generate(**enc, max_new_tokens=max_new, do_sample=False,
                                          pad_token_id=self.tokenizer.pad_token_id,
                                          return_dict_in_generate=True, **kwargs)
            except (RuntimeError, MemoryError) as exc:  # out of memory, too long: the engine, not the model
                raise BackendError(f"generation failed: {exc}") from exc
        out = gen.sequences
        if self.reuse_prefix_cache and len(requests) == 1:
            self._kv = (flag, out[0].tolist(), gen.past_key_values)
        latency = (time.perf_counter() - t0) / len(requests)
        width = enc["input_ids"].shape[1]
        results = []
        for i, r in enumerate(requests):
            gen = out[i, width:].tolist()[: r.max_tokens]
            eos = self.tokenizer.eos_token_id
            if eos in gen:
                gen = gen[: gen.index(eos)]
            text = self.tokenizer.decode(gen, skip_special_tokens=True)
            pt = int(enc["attention_mask"][i].sum())
            results.append(reply_from_text(text, prompt_tokens=pt, completion_tokens=len(gen),
                                           latency_s=latency,
                                           extra={"cached_prompt_tokens": reused} if reused else None))
        return results

    def _reusable(self, flag: bool, ids: list[int]) -> tuple[int, Any]:
        """(tokens of the cached sequence shared with ``ids``, the cache cropped to them)."""
        if self._kv is None or self._kv[0] != flag:
            return 0, None
        _, cached, cache = self._kv
        common = 0
        for a, b in zip(cached, ids, strict=False):
            if a != b:
                break
            common += 1
        common = min(common, len(ids) - 1)  # at least one token must be prefilled
        if common <= 0:
            return 0, None
        excess = cache.get_seq_length() - common
        if excess > 0:
            cache.crop(-excess)
        self._kv = None  # the cache object now belongs to this call
        return common, cache

    def stats(self) -> dict[str, Any]:
        return {"prefix_cache_hits": float(self._hits), "prefix_cache_queries": float(self._queries)}

    def score_replies(self, request: Request, replies: list[dict[str, Any]], first_tokens: int) -> list[list[float]]:
        """Teacher-forced log-probabilities of each reply's first tokens after the prompt: one
        prefill (or the cached prompt) and one batched pass (``eval.backends.hf_score``)."""
        from eval.backends.hf_score import score_replies

        return score_replies(self, request, replies, first_tokens)

    def _complete(self, request: Request) -> Completion:
        return self._generate([request])[0]

    def complete_batch(self, requests: list[Request]) -> list[Completion]:
        """Batches of ``batch_size`` requests that share the adapter setting."""
        out: list[Completion | None] = [None] * len(requests)
        for flag in (False, True):
            idx = [i for i, r in enumerate(requests) if r.use_adapter == flag]
            for k in range(0, len(idx), self.batch_size):
                chunk = idx[k:k + self.batch_size]
                for i, c in zip(chunk, self._generate([requests[i] for i in chunk]), strict=True):
                    out[i] = c
        return [c for c in out if c is not None]

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "model": self.spec, "adapter_dir": self.adapter_dir}


def make_hf(settings: dict[str, Any] | None = None, **_: Any) -> HFBackend:
    return HFBackend(**(settings or {}))
